"""Interruptions, their root-cause taxonomy, the sources that reported them and the groups
of incidents one failure makes."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from logbook.choices import (
    TimePrecision,
)
from telemetry.models import Attempt, Device, Host, Project, Run


class RootCause(models.Model):
    """One category of the taxonomy: a Table 5 component or one added by admins. Site-wide
    rows (project null) are the shipped ones and those a superuser adds; a project admin's
    categories belong to that project alone (its forms, its jobs' reports, its triage)."""

    class Family(models.TextChoices):
        # How auto-triage groups evidence (logbook.triage_combine; logbook.taxonomy.FAMILIES).
        GPU = "gpu", "The GPU's own faults"
        HOST = "host", "The host's faults"
        NETWORK = "network", "The network's faults"
        SOFTWARE = "software", "Software"
        JOB = "job", "The job's data, config and operations"
        SYMPTOM = "symptom", "Symptoms (a stall nobody explained)"

    project = models.ForeignKey(
        "telemetry.Project",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: site-wide (superusers only)",
    )
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=100)
    group = models.CharField(max_length=64)
    family = models.CharField(max_length=16, choices=Family.choices, default=Family.SOFTWARE)
    is_hardware = models.BooleanField(default=False)
    is_planned = models.BooleanField(default=False)
    description = models.TextField(blank=True)
    # Shown beside an auto-triage suggestion of this category: what to check, what to
    # quarantine, when to page the vendor. Seeded for Table 5 (migration 0013), admin edited.
    runbook = models.TextField(blank=True, help_text="Markdown, rendered sanitized")

    class Meta:
        ordering = ["group", "name"]
        constraints = [
            # A slug or name is unique site-wide, and within a project; a project's own
            # categories may not reuse a site-wide slug either (services check it).
            models.UniqueConstraint(
                fields=["slug"], condition=Q(project__isnull=True), name="root_cause_site_slug"
            ),
            models.UniqueConstraint(
                fields=["name"], condition=Q(project__isnull=True), name="root_cause_site_name"
            ),
            models.UniqueConstraint(
                fields=["project", "slug"],
                condition=Q(project__isnull=False),
                name="root_cause_project_slug",
            ),
            models.UniqueConstraint(
                fields=["project", "name"],
                condition=Q(project__isnull=False),
                name="root_cause_project_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Interruption(models.Model):
    """An event that stopped the job."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="interruptions")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.SET_NULL, null=True, blank=True, related_name="interruptions"
    )
    root_cause = models.ForeignKey(RootCause, on_delete=models.PROTECT, related_name="+")
    # What the job said, kept verbatim even when it did not match the taxonomy.
    reported_category = models.CharField(max_length=200, blank=True)
    component = models.CharField(max_length=200, blank=True)
    planned = models.BooleanField(default=False)
    occurred_at = models.DateTimeField()
    detected_at = models.DateTimeField(null=True, blank=True)
    recovered_at = models.DateTimeField(null=True, blank=True)
    step = models.BigIntegerField(null=True, blank=True)
    hosts = models.ManyToManyField(Host, blank=True, related_name="interruptions")
    devices = models.ManyToManyField(Device, blank=True, related_name="interruptions")
    manual_intervention = models.BooleanField(default=False)
    lost_steps = models.BigIntegerField(null=True, blank=True)
    # Lost time as the source reported it ("~18 h lost"), shown beside the downtime computed
    # from the recovery time; neither replaces the other.
    reported_lost_s = models.FloatField(null=True, blank=True)
    # The run-local incident number ("#3" in a logbook), the same on every instance the
    # logbook is exported to; pk differs between instances.
    number = models.PositiveIntegerField(null=True, blank=True)
    # How well the time is known (the public chronicles often give a day or a window only):
    # for DAY, occurred_at is that day's 00:00 UTC; for WINDOW, occurred_at..occurred_until.
    time_precision = models.CharField(
        max_length=8, choices=TimePrecision.choices, default=TimePrecision.EXACT
    )
    occurred_until = models.DateTimeField(null=True, blank=True)
    # The time as the source wrote it ("7:24pm PST", "cluster local 03:10"), beside UTC.
    local_time = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    # Idempotency key from ingest: the event's own "id" or "<batch pk>:<event index>".
    source_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # --- Triage: every unexpected interruption is an incident in the on-call queue ---------
    class Status(models.TextChoices):
        OPEN = "open", "Open"
        TRIAGED = "triaged", "Triaged"
        RESOLVED = "resolved", "Resolved"

    class Severity(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"
        CRITICAL = "critical", "Critical"

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.MEDIUM)
    notes = models.TextField(blank=True, help_text="Markdown, rendered sanitized")
    triaged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    triaged_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    # Optimistic locking: an edit names the version it started from; a stale one is refused.
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-occurred_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "source_key"],
                condition=~Q(source_key=""),
                name="interruption_unique_source_key",
            ),
            models.CheckConstraint(
                condition=Q(lost_steps__isnull=True) | Q(lost_steps__gte=0),
                name="interruption_lost_steps_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(reported_lost_s__isnull=True) | Q(reported_lost_s__gte=0),
                name="interruption_reported_lost_non_negative",
            ),
            models.UniqueConstraint(
                fields=["run", "number"], name="interruption_unique_number_in_run"
            ),
            models.CheckConstraint(
                condition=Q(occurred_until__isnull=True) | Q(occurred_until__gte=F("occurred_at")),
                name="interruption_window_ordered",
            ),
            models.CheckConstraint(
                condition=~Q(time_precision="window") | Q(occurred_until__isnull=False),
                name="interruption_window_has_end",
            ),
            models.CheckConstraint(
                condition=Q(detected_at__isnull=True) | Q(detected_at__gte=F("occurred_at")),
                name="interruption_detected_after_occurred",
            ),
            models.CheckConstraint(
                condition=Q(recovered_at__isnull=True) | Q(recovered_at__gte=F("occurred_at")),
                name="interruption_recovered_after_occurred",
            ),
        ]
        indexes = [
            # The run page lists a run's interruptions newest first.
            models.Index(fields=["run", "-occurred_at"], name="interruption_run_time_idx"),
            # The triage queue: open and triaged incidents, newest first.
            models.Index(
                fields=["status", "-occurred_at"],
                condition=~Q(status="resolved"),
                name="interruption_queue_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.occurred_at:%Y-%m-%d %H:%M} {self.root_cause}"

    @property
    def downtime_s(self) -> float | None:
        """Occurrence to recovery, computed from the recorded times (None without both)."""
        if self.recovered_at is None:
            return None
        return (self.recovered_at - self.occurred_at).total_seconds()


class IncidentSource(models.Model):
    """One signal of a failure: the job's own report, a dcgm-exporter health event, a hang,
    an MLflow FAILED. Signals of one failure (logbook.incident_windows) are one Interruption
    with a source each; the interruption's times and steps are derived from its sources
    (logbook.services.interruptions). Keyed like an interruption by (run, source_key), so a
    signal recorded twice changes nothing."""

    class Kind(models.TextChoices):
        JOB = "job", "Job's report"
        DCGM = "dcgm", "dcgm-exporter"
        HANG = "hang", "Hang detection"
        MLFLOW = "mlflow", "MLflow status"

    interruption = models.ForeignKey(Interruption, on_delete=models.CASCADE, related_name="sources")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    source_key = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.JOB)
    occurred_at = models.DateTimeField()
    detected_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField(blank=True)
    # What this signal said (category, step, lost steps, recovery, hosts, devices...): the
    # interruption's fields are re-derived from every source's when one more arrives.
    reported = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["occurred_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "source_key"], name="incident_source_unique_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.source_key}"


class IncidentGroup(models.Model):
    """Incidents that hit several hosts of one rack, pod, cluster or site within a short
    window: one failure of the part those hosts share, not several (logbook.incident_groups
    has the rule). Kept by logbook.services.incident_groups, which remakes the groups around
    each unexpected interruption after it is stored."""

    class Level(models.TextChoices):
        RACK = "rack", "Rack"
        POD = "pod", "Pod"
        CLUSTER = "cluster", "Cluster"
        SITE = "site", "Site"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    level = models.CharField(max_length=8, choices=Level.choices)
    # The component's path from the site down (["site-a", "c1", "p1", "r07"]): racks named
    # alike in two pods are two racks.
    key = models.JSONField()
    name = models.CharField(max_length=120)  # "rack r07"
    suggested_component = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    incidents = models.ManyToManyField(Interruption, related_name="groups")
    hosts = models.JSONField(default=list)  # host names, sorted
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(ended_at__gte=F("started_at")), name="incident_group_ends_after_start"
            ),
        ]
        indexes = [
            # The fleet page and the API list a project's groups newest first; the service
            # reads those near an incident.
            models.Index(fields=["project", "-started_at"], name="incident_group_project_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} at {self.started_at:%Y-%m-%d %H:%M}"
