"""Straggler records: a rank or host that held a run back, and by how much."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from telemetry.models import Attempt, Device, Host, Run


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
