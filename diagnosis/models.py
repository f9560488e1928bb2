"""diagnosis's tables: slowdowns (windows where a run ran below its own baseline), their
ranked causes, and where the periodic pass left each run."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from telemetry.models import Attempt, Run


class SlowdownKind(models.TextChoices):
    STRAGGLER = "straggler", "Straggler"
    SECTION = "section", "Section grew on every rank"
    CONFIG_CHANGE = "config_change", "Config change"
    HARDWARE_CHANGE = "hardware_change", "Hardware change"
    THERMAL = "thermal", "Thermal throttling"
    POWER = "power", "Power throttling"
    UNKNOWN = "unknown", "Unknown"


class Slowdown(models.Model):
    """A window of steps where throughput stayed below the run's recent baseline
    (diagnosis.slowdown_detect), found by the periodic pass and kept up to date by it while
    it is open and undecided. Its causes are SlowdownCause rows, most likely first."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CONFIRMED = "confirmed", "Confirmed"
        DISMISSED = "dismissed", "Dismissed (not a slowdown)"

    Kind = SlowdownKind

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="slowdowns")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="slowdowns")
    # The series it was found in: tokens_per_s, step_time_s or mfu.
    metric = models.CharField(max_length=64)
    start_step = models.BigIntegerField()
    end_step = models.BigIntegerField()
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    # In the metric's own units (seconds for step_time_s): the baseline's median and the
    # window's.
    baseline = models.FloatField()
    value = models.FloatField()
    drop_pct = models.FloatField()
    # Wall seconds the window lost against the baseline; times the GPUs, the GPU-hours
    # (null when the run's GPU count is unknown).
    lost_s = models.FloatField(default=0.0)
    gpu_hours_lost = models.FloatField(null=True, blank=True)
    # The window reaches the run's newest analysed point: it may still grow.
    ongoing = models.BooleanField(default=False)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN)
    # The cause the GPU-hours are charged to: the top cause's kind, or on-call's correction.
    cause_kind = models.CharField(max_length=24, choices=Kind.choices, default=Kind.UNKNOWN)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    # When the project's webhooks were told (once, past SLOWDOWN_WEBHOOK_GPU_HOURS).
    notified_at = models.DateTimeField(null=True, blank=True)
    detected_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "start_time", "start_step"]
        constraints = [
            models.CheckConstraint(
                condition=Q(end_step__gte=models.F("start_step")), name="slowdown_steps_ordered"
            ),
            models.CheckConstraint(condition=Q(lost_s__gte=0), name="slowdown_lost_non_negative"),
        ]
        indexes = [
            # The run page and the API read one run's slowdowns in order.
            models.Index(fields=["run", "start_step"], name="slowdown_run_idx"),
            # The fleet list reads the open ones.
            models.Index(
                fields=["-gpu_hours_lost"], name="slowdown_open_idx", condition=Q(status="open")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} slowdown {self.start_step}-{self.end_step} ({self.drop_pct:.1f}%)"

    @property
    def still_growing(self) -> bool:
        """Ongoing while its attempt runs: the window of an attempt that ended ended with it
        (a completed run's last stretch is not "ongoing")."""
        return self.ongoing and self.attempt.status == Attempt.Status.RUNNING


class SlowdownCause(models.Model):
    """One candidate cause of a slowdown (diagnosis.slowdown_rules.Cause), ranked."""

    Kind = SlowdownKind

    slowdown = models.ForeignKey(Slowdown, on_delete=models.CASCADE, related_name="causes")
    position = models.PositiveSmallIntegerField()  # 0: the most likely
    kind = models.CharField(max_length=24, choices=Kind.choices)
    detail = models.TextField()
    hosts = ArrayField(models.CharField(max_length=255), default=list, blank=True)
    ranks = ArrayField(models.IntegerField(), default=list, blank=True)
    devices = ArrayField(models.CharField(max_length=128), default=list, blank=True)
    config_keys = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    confidence = models.FloatField()
    evidence = ArrayField(models.TextField(), default=list, blank=True)
    gpu_hours = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["slowdown", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["slowdown", "position"], name="slowdown_cause_unique_position"
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0, confidence__lte=1),
                name="slowdown_cause_confidence_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.slowdown_id} #{self.position} {self.kind} ({self.confidence:.2f})"


class SlowdownScan(models.Model):
    """Where the periodic pass left a run: the data version it last read, so a run whose
    data did not change is not read again."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="+")
    data_version = models.BigIntegerField()
    scanned_at = models.DateTimeField()

    class Meta:
        ordering = ["run"]

    def __str__(self) -> str:
        return f"{self.run_id} scanned at version {self.data_version}"
