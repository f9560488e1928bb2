"""Metric series and points, and what PostgreSQL keeps from them (rollups, hour sums,
throughput sums, step starts)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from telemetry.models.runs import Attempt, Run


class MetricSeries(models.Model):
    """(run, attempt, name): the key every point hangs off, so a point row stays narrow."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="series")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="series")
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["run", "name", "attempt__number"]
        verbose_name_plural = "metric series"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "attempt", "name"], name="series_unique_name_in_attempt"
            ),
        ]
        indexes = [
            # The run page and the series API look up every attempt's series of one metric name.
            models.Index(fields=["run", "name"], name="series_run_name_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.run} #{self.attempt.number} {self.name}"


class MetricPoint(models.Model):
    """One value of one series at one step. The largest table by far (hundreds of millions of
    rows): the composite primary key (series, step) is the only index, it serves every read
    (a range scan of one series in step order) and it is the conflict target that makes a
    redelivered batch insert nothing. No surrogate id, no foreign-key index of its own.

    PostgreSQL stores NaN and ±Infinity natively in float8; readers treat a NULL `value`
    as NaN."""

    pk = models.CompositePrimaryKey("series", "step")
    # The reference to the series is enforced by two statement triggers (migration 0019),
    # not a foreign-key constraint: the constraint checked each point at commit, one query
    # per row, ~4 ms of PostgreSQL's CPU per 1,000-point batch (a sixth of an ingest
    # request's whole cost); the triggers check the statement's few series at once.
    series = models.ForeignKey(
        MetricSeries,
        on_delete=models.CASCADE,
        related_name="points",
        db_index=False,
        db_constraint=False,
    )
    step = models.BigIntegerField()
    value = models.FloatField(null=True)
    wall_time = models.DateTimeField(null=True)

    class Meta:
        ordering = ["series", "step"]
        constraints = [
            models.CheckConstraint(condition=Q(step__gte=0), name="point_step_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.series_id}@{self.step}={self.value}"


class MetricRollup(models.Model):
    """Summary of one series over an aligned run of steps: bucket b at width w covers steps
    b*w to b*w + w - 1. Long series are charted from these, so a read touches a few thousand
    rows whatever the series length (telemetry.selectors.series.series_for_run).

    PostgreSQL keeps them itself: a statement trigger on telemetry_metricpoint (migration
    0005) folds the rows each INSERT or COPY actually added into every width, in the same
    transaction. A redelivered point conflicts, is not added, and so is never counted twice;
    COPY loaders (generate_llama_scale, bench) are covered too. Points are never updated or
    deleted one by one (only with their series, which takes its rollups along); the
    `rollups_rebuild` command recomputes them from the points if that ever changes.

    The extremes are kept with their step and time (the chart draws the actual point), ties
    going to the earliest step; non-finite values are kept apart (first by step), since a NaN
    loss is a signal and not a number to compare."""

    pk = models.CompositePrimaryKey("series", "width", "bucket")
    series = models.ForeignKey(
        MetricSeries, on_delete=models.CASCADE, related_name="rollups", db_index=False
    )
    width = models.IntegerField()  # steps per bucket: telemetry.downsample.ROLLUP_WIDTHS
    bucket = models.BigIntegerField()  # step // width
    point_count = models.BigIntegerField()
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    finite_count = models.BigIntegerField()
    finite_sum = models.FloatField()
    min_value = models.FloatField(null=True)
    min_step = models.BigIntegerField(null=True)
    min_time = models.DateTimeField(null=True)
    max_value = models.FloatField(null=True)
    max_step = models.BigIntegerField(null=True)
    max_time = models.DateTimeField(null=True)
    nonfinite_value = models.FloatField(null=True)
    nonfinite_step = models.BigIntegerField(null=True)
    nonfinite_time = models.DateTimeField(null=True)

    class Meta:
        ordering = ["series", "width", "bucket"]

    def __str__(self) -> str:
        return f"{self.series_id} {self.width}x{self.bucket} n={self.point_count}"


# The series the hour sums keep: the throughput metrics (diagnosis's slowdowns watch the same
# three). The trigger's SQL names them too (migration 0026).
HOUR_SUM_METRICS = ("tokens_per_s", "step_time_s", "mfu")


class MetricHourSum(models.Model):
    """A throughput series' points (HOUR_SUM_METRICS) summed per UTC clock hour of their wall
    time: the run page's throughput by hour of day reads a row per hour the run reported
    (1,296 for 54 days) instead of every point, and the mean of an hour of day is exact
    (Σ sums / Σ counts). The step rollups cannot give it: a step bucket straddles hours.

    PostgreSQL keeps them itself, like the rollups: the points table's statement trigger
    (migration 0026) adds the rows each INSERT or COPY actually added, in the same
    transaction, so a redelivered point is never counted twice. A point without a wall time
    is in no hour. `rollups_rebuild` recomputes them from the points."""

    pk = models.CompositePrimaryKey("series", "hour")
    series = models.ForeignKey(
        MetricSeries, on_delete=models.CASCADE, related_name="hour_sums", db_index=False
    )
    hour = models.BigIntegerField()  # floor(epoch seconds / 3600) of the wall time: UTC
    point_count = models.BigIntegerField()
    # NaN, ±Infinity and NULL are left out of these two
    finite_count = models.BigIntegerField()
    finite_sum = models.FloatField()

    class Meta:
        ordering = ["series", "hour"]

    def __str__(self) -> str:
        return f"{self.series_id} hour {self.hour}: n={self.point_count}"


class ThroughputSum(models.Model):
    """One attempt's throughput points (its tokens_per_s and step_time_s series, matched by
    step) reduced to the sums MFU's means need (telemetry.mfu.ThroughputSums): the MFU page
    reads one row per attempt instead of two million points.

    PostgreSQL keeps them itself, like the rollups: a statement trigger on
    telemetry_metricpoint (migration 0012) adds the rows each INSERT or COPY actually added,
    in the same transaction, after locking the attempt's row, so that two writers of the two
    halves of one step's pair cannot both miss it. A step's pair is counted by the statement
    that completes it. `rollups_rebuild` recomputes them from the points.

    Counts are of points; "finite" leaves NaN, ±Infinity and NULL out; "paired" is a step
    with both points, a finite tokens_per_s and a finite step time > 0 (the weighted mean's
    terms)."""

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="throughput_sum"
    )
    reported_points = models.BigIntegerField(default=0)  # tokens_per_s points
    timed_points = models.BigIntegerField(default=0)  # step_time_s points
    both_points = models.BigIntegerField(default=0)  # steps with both
    first_step = models.BigIntegerField(null=True)
    last_step = models.BigIntegerField(null=True)
    reported_finite_count = models.BigIntegerField(default=0)
    reported_finite_sum = models.FloatField(default=0.0)
    timed_finite_count = models.BigIntegerField(default=0)
    timed_positive_count = models.BigIntegerField(default=0)
    timed_positive_sum_s = models.FloatField(default=0.0)
    paired_weighted_sum = models.FloatField(default=0.0)  # Σ tokens_per_s · step_time_s
    paired_weight_s = models.FloatField(default=0.0)  # Σ step_time_s of those steps

    class Meta:
        ordering = ["attempt"]

    def __str__(self) -> str:
        return f"{self.attempt_id}: {self.reported_points}+{self.timed_points} points"


class StepStart(models.Model):
    """When each step of an attempt started: the input of the goodput segment algorithm
    (Google's ml-goodput-measurement records one such entry per step)."""

    pk = models.CompositePrimaryKey("attempt", "step")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="step_starts", db_index=False
    )
    step = models.BigIntegerField()
    started_at = models.DateTimeField()

    class Meta:
        ordering = ["attempt", "step"]
        constraints = [
            models.CheckConstraint(condition=Q(step__gte=0), name="step_start_step_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id}@{self.step} {self.started_at:%H:%M:%S}"


class StepStartChunk(models.Model):
    """An attempt's step starts packed in runs of 4,096 steps: bucket b holds steps b*4096 to
    b*4096 + 4095 as big-endian binary, in step order, the steps (int8) and their start
    times (timestamptz_send's microseconds since 2000-01-01 UTC) side by side. Goodput needs
    every step start of a run (a million at Llama 3 scale): reading a few hundred packed rows
    costs a tenth of aggregating the million rows on every first view.

    PostgreSQL keeps them itself: a statement trigger on telemetry_stepstart (migration 0013)
    locks the chunks a statement touched, in key order, then repacks them from the table in
    a new statement, so a concurrent writer's committed rows are in it. Step starts are only
    ever inserted (first write wins) and deleted with their attempt, which takes its chunks
    along; `rollups_rebuild` repacks them from the table."""

    pk = models.CompositePrimaryKey("attempt", "bucket")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="step_start_chunks", db_index=False
    )
    bucket = models.BigIntegerField()  # step // 4096
    steps = models.BinaryField()
    started_us = models.BinaryField()

    class Meta:
        ordering = ["attempt", "bucket"]

    def __str__(self) -> str:
        return f"{self.attempt_id}x{self.bucket}: {len(self.steps) // 8} steps"
