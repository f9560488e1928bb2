"""Silent data corruption: the suspicions and replays of one run, and their verdicts."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from logbook.choices import (
    SdcDetection,
)
from telemetry.models import Attempt, Device, Host, Run


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
