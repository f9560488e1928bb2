"""The logbook itself: its entries, annotations on a run's charts, and the audit trail of
changes."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from logbook.choices import (
    LogbookEntryKind,
    TimePrecision,
)
from logbook.models.checkpoints import Checkpoint
from logbook.models.incidents import Interruption
from logbook.models.sdc import SdcReplay
from telemetry.models import Attempt, Run


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
