"""Interruptions and their root-cause taxonomy, checkpoints, SDC replays, logbook entries."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from logbook.choices import (
    CheckpointStatus,
    CheckpointTier,
    LogbookEntryKind,
    SdcDetection,
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


class Checkpoint(models.Model):
    Tier = CheckpointTier

    Status = CheckpointStatus

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.SET_NULL, null=True, blank=True, related_name="checkpoints"
    )
    step = models.BigIntegerField()
    saved_at = models.DateTimeField(null=True, blank=True)
    blocking_save_s = models.FloatField(null=True, blank=True)
    async_save_s = models.FloatField(null=True, blank=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    tier = models.CharField(max_length=16, choices=Tier.choices, default=Tier.UNKNOWN)
    uri = models.CharField(max_length=1000, blank=True)
    checksum = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SAVED)
    # Derived from attempts that resumed from this checkpoint; recomputed, never incremented,
    # so a reprocessed restore event cannot count twice.
    restored_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["run", "-step"]
        constraints = [
            models.UniqueConstraint(fields=["run", "step"], name="checkpoint_unique_step_in_run"),
            models.CheckConstraint(condition=Q(step__gte=0), name="checkpoint_step_non_negative"),
            models.CheckConstraint(
                condition=Q(size_bytes__isnull=True) | Q(size_bytes__gte=0),
                name="checkpoint_size_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} checkpoint@{self.step}"


class CheckpointRestore(models.Model):
    """An attempt restored from a checkpoint (one row per attempt)."""

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="restores")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="restores")
    restored_at = models.DateTimeField(null=True, blank=True)
    restore_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["checkpoint", "attempt"]
        constraints = [
            models.UniqueConstraint(fields=["attempt"], name="restore_unique_attempt"),
        ]

    def __str__(self) -> str:
        return f"{self.attempt} from {self.checkpoint}"


class SdcReplay(models.Model):
    """A suspected silent data corruption at a step on a device, and what its replay found."""

    Detection = SdcDetection

    class Verdict(models.TextChoices):
        PENDING = "pending", "Pending replay"
        CONFIRMED = "confirmed", "Confirmed"
        NOT_REPRODUCED = "not_reproduced", "Not reproduced"
        INCONCLUSIVE = "inconclusive", "Inconclusive"

    class Action(models.TextChoices):
        NONE = "none", "None"
        QUARANTINED = "quarantined", "Device quarantined"
        RMA = "rma", "RMA"
        RESTARTED = "restarted", "Restarted from checkpoint"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="sdc_replays")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.SET_NULL, null=True, blank=True, related_name="sdc_replays"
    )
    step = models.BigIntegerField()
    # An attempt-vs-attempt divergence over consecutive steps is one record: step is the
    # first, last_step the last (null for a single step).
    last_step = models.BigIntegerField(null=True, blank=True)
    detected_at = models.DateTimeField()
    device = models.ForeignKey(
        Device, on_delete=models.SET_NULL, null=True, blank=True, related_name="sdc_replays"
    )
    host = models.ForeignKey(
        Host, on_delete=models.SET_NULL, null=True, blank=True, related_name="sdc_replays"
    )
    detection = models.CharField(max_length=24, choices=Detection.choices, default=Detection.OTHER)
    observed_value = models.FloatField(null=True, blank=True)
    # Attempt-vs-attempt divergence: the metric compared, the attempt replayed against and
    # the value it had there, and every host of both attempts (where the job ran: context,
    # not blame; fleet health charges a suspicion only to hardware it names).
    metric_name = models.CharField(max_length=200, blank=True)
    compared_attempt = models.ForeignKey(
        Attempt, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    expected_value = models.FloatField(null=True, blank=True)
    hosts = models.ManyToManyField(Host, blank=True, related_name="sdc_suspicions")
    replay_hardware = models.CharField(max_length=200, blank=True)
    replay_result = models.CharField(max_length=500, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, default=Verdict.PENDING)
    action = models.CharField(max_length=16, choices=Action.choices, default=Action.NONE)
    message = models.TextField(blank=True)
    source_key = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-detected_at"]
        verbose_name = "SDC replay record"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "source_key"],
                condition=~Q(source_key=""),
                name="sdc_unique_source_key",
            ),
            models.CheckConstraint(condition=Q(step__gte=0), name="sdc_step_non_negative"),
            models.CheckConstraint(
                condition=Q(last_step__isnull=True) | Q(last_step__gt=F("step")),
                name="sdc_step_range_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} SDC@{self.step} ({self.verdict})"


class LogbookEntry(models.Model):
    Kind = LogbookEntryKind

    class Role(models.TextChoices):
        ONCALL = "oncall", "On-call"
        CLUSTER_MANAGER = "cluster_manager", "Cluster manager"
        AUTOMATION = "automation", "Automation"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="logbook_entries")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.SET_NULL, null=True, blank=True, related_name="logbook_entries"
    )
    interruption = models.ForeignKey(
        Interruption,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="logbook_entries",
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    author_name = models.CharField(max_length=150, blank=True)
    role = models.CharField(max_length=24, choices=Role.choices, default=Role.ONCALL)
    kind = models.CharField(max_length=24, choices=Kind.choices, default=Kind.NOTE)
    occurred_at = models.DateTimeField()
    step = models.BigIntegerField(null=True, blank=True)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True, help_text="Markdown")
    is_automatic = models.BooleanField(default=False)
    source_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Step range the entry is about (step alone for a point).
    step_end = models.BigIntegerField(null=True, blank=True)
    checkpoint = models.ForeignKey(
        Checkpoint, on_delete=models.SET_NULL, null=True, blank=True, related_name="logbook_entries"
    )
    sdc_replay = models.ForeignKey(
        SdcReplay, on_delete=models.SET_NULL, null=True, blank=True, related_name="logbook_entries"
    )
    # A later entry that corrects this one ("see the debrief of 12-02"), shown inline here.
    corrected_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="corrects"
    )
    # Config changes: [{"key": "lr", "before": "3e-4", "after": "1.5e-4"}, ...]
    config_changes = models.JSONField(default=list, blank=True)
    # How well the time is known (the public chronicles often give a day or a window only):
    # for DAY, occurred_at is that day's 00:00 UTC; for WINDOW, occurred_at..occurred_until.
    time_precision = models.CharField(
        max_length=8, choices=TimePrecision.choices, default=TimePrecision.EXACT
    )
    occurred_until = models.DateTimeField(null=True, blank=True)
    # The time as the source wrote it ("7:24pm PST", "cluster local 03:10"), beside UTC.
    local_time = models.CharField(max_length=64, blank=True)
    # A counted entry ("~90 restarts", "8 auto-recovered failures"): the number, whether the
    # source gave it as approximate, and what was counted.
    count = models.PositiveIntegerField(null=True, blank=True)
    count_approximate = models.BooleanField(default=False)
    count_unit = models.CharField(max_length=100, blank=True)
    # A hardware swap: host names taken out and brought in (spares too), as written.
    hosts_out = models.JSONField(default=list, blank=True)
    hosts_in = models.JSONField(default=list, blank=True)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-occurred_at"]
        verbose_name_plural = "logbook entries"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "source_key"],
                condition=~Q(source_key=""),
                name="logbook_unique_source_key",
            ),
            models.CheckConstraint(
                condition=Q(occurred_until__isnull=True) | Q(occurred_until__gte=F("occurred_at")),
                name="logbook_window_ordered",
            ),
            models.CheckConstraint(
                condition=~Q(time_precision="window") | Q(occurred_until__isnull=False),
                name="logbook_window_has_end",
            ),
        ]
        indexes = [
            # The logbook reads a run's entries newest first.
            models.Index(fields=["run", "-occurred_at"], name="logbook_run_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.occurred_at:%Y-%m-%d %H:%M} {self.title}"


class AuditEvent(models.Model):
    """One change to an incident, a logbook entry, an annotation, an SDC verdict or a
    quarantine: who, when, and each field's value before and after. Written by the services
    that make the change, in the same transaction."""

    class Entity(models.TextChoices):
        INTERRUPTION = "interruption", "Incident"
        LOGBOOK_ENTRY = "logbook_entry", "Logbook entry"
        ANNOTATION = "annotation", "Annotation"
        SDC_REPLAY = "sdc_replay", "SDC record"
        HOST = "host", "Host"
        DEVICE = "device", "Device"
        ALERT_RULE = "alert_rule", "Alert rule"
        SLOWDOWN = "slowdown", "Slowdown"
        TRIAGE_RULE = "triage_rule", "Triage rule"
        ROOT_CAUSE = "root_cause", "Category"

    # Null only for quarantine events of hardware no project's data ever named (see
    # telemetry.Host); every other event names its project.
    project = models.ForeignKey(
        "telemetry.Project",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="audit_events",
    )
    entity = models.CharField(max_length=16, choices=Entity.choices)
    object_id = models.BigIntegerField()
    action = models.CharField(max_length=16, default="update")  # create, update, delete
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Kept even if the user is deleted later.
    username = models.CharField(max_length=150, blank=True)
    at = models.DateTimeField(auto_now_add=True)
    # {"field": [before, after], ...}, values as JSON-friendly strings.
    changes = models.JSONField(default=dict)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [
            # The incident and logbook pages show one object's history, newest first.
            models.Index(fields=["entity", "object_id", "-at"], name="audit_object_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.entity} {self.object_id} {self.action} by {self.username}"


class Annotation(models.Model):
    """A mark on a run's charts: a point or a range, in steps and/or wall time (Grafana's
    annotation shape plus run and step)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="annotations")
    time = models.DateTimeField(null=True, blank=True)
    time_end = models.DateTimeField(null=True, blank=True)
    step = models.BigIntegerField(null=True, blank=True)
    step_end = models.BigIntegerField(null=True, blank=True)
    text = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "time", "step"]
        constraints = [
            models.CheckConstraint(
                condition=Q(time__isnull=False) | Q(step__isnull=False),
                name="annotation_has_a_position",
            ),
            models.CheckConstraint(
                condition=Q(time_end__isnull=True) | Q(time_end__gte=F("time")),
                name="annotation_time_range_ordered",
            ),
            models.CheckConstraint(
                condition=Q(step_end__isnull=True) | Q(step_end__gte=F("step")),
                name="annotation_step_range_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} annotation {self.text[:40]}"


class WebhookEndpoint(models.Model):
    """Where a project's notifications go (Slack-compatible JSON)."""

    class Event(models.TextChoices):
        INTERRUPTION = "interruption", "New unexpected interruption"
        SDC_CONFIRMED = "sdc_confirmed", "SDC confirmed"
        RUN_STALLED = "run_stalled", "Run stopped reporting"
        ALERT = "alert", "Metric alert rule fired"
        SLOWDOWN = "slowdown", "Costly slowdown"

    class Format(models.TextChoices):
        # What the body looks like (logbook.webhook_formats): Slack's incoming-webhook JSON
        # (which Mattermost, Teams connectors and plain receivers also read), PagerDuty's
        # Events API v2, Opsgenie's Alert API.
        SLACK = "slack", "Slack-compatible JSON"
        PAGERDUTY = "pagerduty", "PagerDuty Events API v2"
        OPSGENIE = "opsgenie", "Opsgenie Alert API"

    project = models.ForeignKey(
        "telemetry.Project", on_delete=models.CASCADE, related_name="webhooks"
    )
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=1000)
    events = models.JSONField(default=list, help_text="Event kinds to send; empty: all.")
    enabled = models.BooleanField(default=True)
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.SLACK)
    # PagerDuty's integration (routing) key or Opsgenie's API key: added to each request when
    # it is sent, never stored in a delivery's payload (admins read those).
    secret = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]

    def __str__(self) -> str:
        return f"{self.project}:{self.name}"


class WebhookDelivery(models.Model):
    """One notification to one endpoint, retried until delivered or given up; its outcome is
    shown to the project's admins."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed (gave up)"

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=16, choices=WebhookEndpoint.Event.choices)
    # What the notification is about, so an event is delivered once per endpoint.
    event_key = models.CharField(max_length=200)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "event_key"], name="delivery_unique_event_per_endpoint"
            ),
        ]
        indexes = [
            # The retry sweep: pending deliveries that are due.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="delivery_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.event} {self.status}"


class StragglerRecord(models.Model):
    """A rank whose straggler score (relative or individual, nvidia-resiliency-ext's
    definitions) stayed below the threshold for several report windows in one attempt,
    naming the hardware it ran on. Resolved when a later attempt of the run no longer puts
    that rank on the same host (the slow hardware was left behind)."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        RESOLVED = "resolved", "Resolved"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="straggler_records")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="+")
    rank = models.IntegerField()
    host = models.ForeignKey(
        Host, on_delete=models.SET_NULL, null=True, blank=True, related_name="straggler_records"
    )
    device = models.ForeignKey(
        Device, on_delete=models.SET_NULL, null=True, blank=True, related_name="straggler_records"
    )
    sections = models.JSONField(default=list, blank=True)
    relative_score = models.FloatField()  # lowest over the windows that made the record
    individual_score = models.FloatField(null=True, blank=True)
    windows = models.PositiveIntegerField()
    first_window_at = models.DateTimeField()
    last_window_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by_attempt = models.ForeignKey(
        Attempt, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-last_window_at", "rank"]
        constraints = [
            models.UniqueConstraint(
                fields=["attempt", "rank"], name="straggler_unique_rank_in_attempt"
            ),
            models.CheckConstraint(
                condition=Q(status="open", resolved_at__isnull=True)
                | Q(status="resolved", resolved_at__isnull=False),
                name="straggler_resolved_has_time",
            ),
        ]
        indexes = [
            # The fleet's repeat-offender count: open and past records per host.
            models.Index(fields=["host", "status"], name="straggler_host_status"),
        ]

    def __str__(self) -> str:
        return f"{self.run} rank {self.rank} ({self.status})"


class TriageSuggestion(models.Model):
    """What auto-triage suggests for one unexpected interruption (logbook.autotriage), made
    by the worker when the interruption is stored and again when evidence arrives in its
    window, until on-call decides: confirming takes it, triaging to another category
    overrides it. Decided suggestions are kept as they were, for the accuracy page."""

    class Outcome(models.TextChoices):
        PENDING = "pending", "Not yet triaged"
        CONFIRMED = "confirmed", "Confirmed"
        OVERRIDDEN = "overridden", "Overridden"

    interruption = models.OneToOneField(
        Interruption, on_delete=models.CASCADE, related_name="suggestion"
    )
    root_cause = models.ForeignKey(RootCause, on_delete=models.PROTECT, related_name="+")
    component = models.CharField(max_length=200, blank=True)
    hosts = models.JSONField(default=list, blank=True)  # host names, culprit first
    devices = models.JSONField(default=list, blank=True)  # device UUIDs
    confidence = models.FloatField()
    # [{"kind", "at", "text", "url"}, ...], what supports the category first.
    evidence = models.JSONField(default=list, blank=True)
    # Where the message and the evidence disagree, which was believed and why.
    note = models.TextField(blank=True)
    first_made_at = models.DateTimeField()
    made_at = models.DateTimeField()
    outcome = models.CharField(max_length=12, choices=Outcome.choices, default=Outcome.PENDING)
    # The category on-call triaged it as (the suggested one when confirmed).
    decided_root_cause = models.ForeignKey(
        RootCause, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-made_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                name="triage_suggestion_confidence_in_unit_range",
            ),
            models.CheckConstraint(
                condition=Q(outcome="pending", decided_at__isnull=True)
                | (~Q(outcome="pending") & Q(decided_at__isnull=False)),
                name="triage_suggestion_decided_has_time",
            ),
            models.CheckConstraint(
                condition=Q(made_at__gte=F("first_made_at")),
                name="triage_suggestion_made_after_first",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.interruption_id}: {self.root_cause_id} ({self.confidence:.2f})"


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


# Registered with the app's other models (a module of their own for length).
from logbook.models_alerts import AlertFiring, AlertRule  # noqa: E402, F401
from logbook.models_learning import TriageClassifier  # noqa: E402, F401
from logbook.models_triage import TriageRule, TriageRuleSetting  # noqa: E402, F401
