"""Checkpoints a run saved, and the restores from them."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from logbook.choices import (
    CheckpointStatus,
    CheckpointTier,
)
from telemetry.models import Attempt, Run


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
