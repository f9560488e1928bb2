"""Runs, their attempts, and the non-training intervals of an attempt."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import F, Q

from telemetry.choices import AttemptStatus, JobIntervalKind
from telemetry.models.hardware import Host
from telemetry.models.projects import Project

# --- Runs and attempts -------------------------------------------------------------------------


def _default_deterministic_metrics() -> list[str]:
    return ["loss"]


class Run(models.Model):
    # A run's tags: short labels the job sends (run_info.tags) for the run list's tag filter.
    TAG_MAX_LENGTH = 64
    TAGS_MAX = 32

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = ArrayField(
        models.CharField(max_length=TAG_MAX_LENGTH), size=TAGS_MAX, default=list, blank=True
    )
    # Model shape, for FLOPs per token: 6N + 12·L·H·Q·T.
    parameter_count = models.BigIntegerField(null=True, blank=True)
    n_layers = models.PositiveIntegerField(null=True, blank=True)
    n_heads = models.PositiveIntegerField(null=True, blank=True)
    head_dim = models.PositiveIntegerField(null=True, blank=True)
    seq_len = models.PositiveIntegerField(null=True, blank=True)
    accelerator_type = models.CharField(max_length=64, blank=True)
    accelerator_count = models.PositiveIntegerField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True)
    # Throughput accounting. A job that reports its own FLOPs per token, or says it counts
    # activation recomputation, measures hardware FLOPs: its utilisation is labelled HFU.
    tokens_per_step = models.BigIntegerField(null=True, blank=True)
    flops_per_token = models.FloatField(null=True, blank=True)
    counts_recomputation = models.BooleanField(default=False)

    class Attention(models.TextChoices):
        # PaLM's count (appendix B) takes the whole TxT score matrix; a causal mask computes
        # only its lower half, which FlashAttention-style kernels exploit.
        FULL = "full", "Full (PaLM: 12·L·H·Q·T)"
        CAUSAL = "causal", "Causal (half: 6·L·H·Q·T)"

    attention = models.CharField(max_length=8, choices=Attention.choices, default=Attention.FULL)
    # SDC detection: metrics that must repeat exactly when an attempt replays a step, and the
    # absolute difference tolerated (0: bit-identical, what deterministic training gives).
    deterministic_metrics = models.JSONField(default=_default_deterministic_metrics, blank=True)
    sdc_tolerance = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)
    # Denormalised by the ingest worker (monotonic, so reprocessing is harmless): the run list
    # must not scan hundreds of millions of points to find the latest step.
    last_step = models.BigIntegerField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # When last_step last moved forward: a run seen (heartbeats) but not advancing is hung.
    last_step_at = models.DateTimeField(null=True, blank=True)
    # The latest time the run's data itself carries (event times, point wall times), never
    # later than when it was received: failure rates count the time the data covers, so a
    # run sent after the fact (a backfill, an import) is not "observed" until it arrived.
    # last_seen_at (the receive time) stays the clock of liveness and hang detection.
    data_until = models.DateTimeField(null=True, blank=True)
    # Hang threshold; empty: 10 x the median step time, at least 5 min (logbook.services.hangs).
    hang_after_s = models.PositiveIntegerField(null=True, blank=True)
    # Moves whenever anything a run's pages show changes (its points, attempts, intervals, and
    # the logbook's incidents, checkpoints, annotations and entries): the figures derived from
    # them are cached under (run, data_version). Bumped by
    # telemetry.services.run_data_version_bump, in the transaction of the change.
    data_version = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="run_unique_name_in_project"),
            models.CheckConstraint(
                condition=Q(sdc_tolerance__gte=0), name="run_sdc_tolerance_non_negative"
            ),
        ]
        # The run list's ?tag= filter (tags @> ARRAY[tag]).
        indexes = [GinIndex(fields=["tags"], name="run_tags_gin")]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"


class Attempt(models.Model):
    """One launch of the job. Steps repeat across attempts after a restart."""

    Status = AttemptStatus

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    resumed_from_step = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    end_reason = models.TextField(blank=True)
    hosts = models.ManyToManyField(Host, blank=True, related_name="attempts")
    # Accelerators this attempt ran on, when it differs from the run's (BLOOM-176B resumed on
    # 24 nodes instead of 48); MFU and failure rates prefer it to run.accelerator_count.
    accelerator_count = models.PositiveIntegerField(null=True, blank=True)
    # The run_info.config this attempt sent (null: it sent none). A later attempt's config
    # no longer overwrites an earlier one's: a difference between two attempts is a config
    # change (SDC comparisons, slowdown causes, the logbook's before → after table).
    config = models.JSONField(null=True, blank=True)
    # Where the periodic rank-timings pass left off: raw rows received since then (less an
    # overlap) are rolled up next, however late the pass runs. Null: never rolled up.
    rank_timings_rolled_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="attempt_unique_number_in_run"),
            models.CheckConstraint(condition=Q(number__gte=1), name="attempt_number_positive"),
            models.CheckConstraint(
                condition=Q(resumed_from_step__isnull=True) | Q(resumed_from_step__gte=0),
                name="attempt_resumed_from_step_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} attempt {self.number}"


class JobInterval(models.Model):
    """A stretch of wall time an attempt spent on something other than training steps
    (accelerator init, program prep, synchronous data loading, an eval, an SDC scan...)."""

    Kind = JobIntervalKind

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="intervals")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="intervals")
    kind = models.CharField(max_length=24, choices=Kind.choices)
    # For custom intervals: what it was ("eval", "sdc_scan"); reported as its own bucket.
    label = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    step = models.BigIntegerField(null=True, blank=True)
    source_key = models.CharField(max_length=200)

    class Meta:
        ordering = ["run", "started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "source_key"], name="interval_unique_source_key"
            ),
            models.CheckConstraint(
                condition=Q(ended_at__gte=F("started_at")), name="interval_ends_after_start"
            ),
        ]
        indexes = [
            # Goodput reads one run's intervals in time order.
            models.Index(fields=["run", "started_at"], name="interval_run_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.started_at:%H:%M:%S} to {self.ended_at:%H:%M:%S}"
