"""Per-rank section timings (the rank_timings event): placements, step stats, blocks,
buckets."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

from telemetry.models.runs import Attempt

# --- Per-rank section timings (the rank_timings event) ---------------------------------------
# Raw per-rank values live in telemetry_ranktiming_raw, a table partitioned by the hour it was
# received and dropped partition by partition after RANK_TIMINGS_RAW_WINDOW_S (migration
# 0007, telemetry.services.rank_timings); Django has no model for it. What stays for the whole
# run is below: one row per (attempt, section, step) and one per (attempt, section, time bucket).


class RealField(models.FloatField):
    """float4: a heat map cell needs no more, and a 16,384-rank array is half the size."""

    def db_type(self, connection: object) -> str:
        return "real"

    def deconstruct(self) -> tuple[str, str, list, dict]:  # type: ignore[override]
        # Migrations name it telemetry.models.RealField, as before models became a package.
        name, _path, args, kwargs = super().deconstruct()
        return name, "telemetry.models.RealField", args, kwargs


class RankPlacement(models.Model):
    """Where one rank of an attempt ran, as its rank_timings said: the straggler ledger and
    the heat map's hover name the host and device from here."""

    pk = models.CompositePrimaryKey("attempt", "rank")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="rank_placements", db_index=False
    )
    rank = models.IntegerField()
    host = models.CharField(max_length=255, blank=True)
    device = models.CharField(max_length=128, blank=True)

    class Meta:
        ordering = ["attempt", "rank"]
        constraints = [
            models.CheckConstraint(
                condition=Q(rank__gte=0), name="rank_placement_rank_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id} rank {self.rank} on {self.host or '?'}"


class RankStepStats(models.Model):
    """One section's time at one step, across ranks: the spread chart's row. The slowest
    ranks are kept (slowest first) so the chart can name them after the raw values are gone."""

    pk = models.CompositePrimaryKey("attempt", "section", "step")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="rank_step_stats", db_index=False
    )
    section = models.CharField(max_length=64)
    step = models.BigIntegerField()
    recorded_at = models.DateTimeField()
    rank_count = models.IntegerField()
    min_s = models.FloatField()
    median_s = models.FloatField()
    p90_s = models.FloatField()
    p99_s = models.FloatField()
    max_s = models.FloatField()
    slowest_ranks = ArrayField(models.IntegerField())
    slowest_s = ArrayField(models.FloatField())

    class Meta:
        ordering = ["attempt", "section", "step"]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_s__lte=F("median_s"), median_s__lte=F("max_s")),
                name="rank_step_stats_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id} {self.section}@{self.step} median {self.median_s:.3f}s"


class RankStepBlock(models.Model):
    """The distributions of a block of `steps` consecutive steps (from `first_step`), made
    from RankStepStats: what the spread chart reads when it draws hundreds of steps per point
    (a 54-day run has 777,600 steps; its chart has 2,000 points)."""

    pk = models.CompositePrimaryKey("attempt", "section", "steps", "first_step")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="rank_step_blocks", db_index=False
    )
    section = models.CharField(max_length=64)
    steps = models.IntegerField()  # the block's width in steps
    first_step = models.BigIntegerField()
    step_count = models.IntegerField()  # steps reported in the block
    # As the spread chart merges steps: the fastest rank at its best, the median averaged
    # (weighted by steps), the tails and the slowest rank at their worst.
    min_s = models.FloatField()
    median_s = models.FloatField()
    p90_s = models.FloatField()
    p99_s = models.FloatField()
    max_s = models.FloatField()
    slowest_rank = models.IntegerField(null=True)

    class Meta:
        ordering = ["attempt", "section", "steps", "first_step"]
        constraints = [
            models.CheckConstraint(condition=Q(steps__gt=0), name="rank_step_block_width_positive"),
            models.CheckConstraint(
                condition=Q(step_count__gt=0, step_count__lte=F("steps")),
                name="rank_step_block_count_fits",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id} {self.section} steps {self.first_step}+{self.steps}"


class RankBucket(models.Model):
    """Every rank's mean time in one section over one time bucket: a column of the heat map,
    and (at RANK_BUCKET_S) the window the straggler scores are computed on. Arrays, not a row
    per rank: a 16,384-rank job makes one row per bucket instead of 16,384. Buckets are kept
    at RANK_BUCKET_S and at coarser widths (telemetry.services.rank_timings.COARSE_BUCKETS_S) made
    from them, so a 54-day heat map reads a few hundred rows, not 7,776."""

    pk = models.CompositePrimaryKey("attempt", "section", "bucket_s", "bucket_start")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="rank_buckets", db_index=False
    )
    section = models.CharField(max_length=64)
    bucket_s = models.IntegerField()
    bucket_start = models.DateTimeField()
    ranks = ArrayField(models.IntegerField())
    means_s = ArrayField(RealField())
    # Each rank's median over the bucket: what the straggler scores compare, as NVRx does
    # (a median shrugs off the odd slow step that a mean would carry).
    medians_s = ArrayField(RealField())
    counts = ArrayField(models.IntegerField())
    # The heat map's row of this bucket: ranks in groups of `group_ranks` (a power of two, so
    # at most 256 groups), each group's slowest mean and the rank that has it. Small arrays
    # kept in the row, so drawing weeks of buckets never reads (or detoasts) the per-rank ones.
    group_ranks = models.IntegerField(default=1)
    group_slowest_s = ArrayField(RealField(null=True), default=list)
    group_slowest_rank = ArrayField(models.IntegerField(null=True), default=list)

    class Meta:
        ordering = ["attempt", "section", "bucket_s", "bucket_start"]
        constraints = [
            models.CheckConstraint(condition=Q(bucket_s__gt=0), name="rank_bucket_width_positive"),
            models.CheckConstraint(
                condition=Q(group_ranks__gt=0), name="rank_bucket_group_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id} {self.section} {self.bucket_start:%Y-%m-%d %H:%M}"
