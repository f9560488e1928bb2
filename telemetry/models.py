"""Projects, runs, attempts, metric series and points, and the hardware topology."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import F, Q

from telemetry.choices import AttemptStatus, JobIntervalKind
from telemetry.dcgm import FIELDS as DCGM_FIELDS


class Project(models.Model):
    """A team's space. Runs, tokens and memberships belong to exactly one project."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Moves whenever what the fleet pages list for this project's runs changes (incidents and
    # the hardware they name, quarantines): their cached rows are keyed on it. Bumped by
    # telemetry.services.fleet_version_bump, in the transaction of the change.
    fleet_version = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        ONCALL = "oncall", "On-call"
        ADMIN = "admin", "Admin"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


# --- Topology ----------------------------------------------------------------------------------


class Site(models.Model):
    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Cluster(models.Model):
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="clusters")
    name = models.CharField(max_length=100)

    class Meta:
        ordering = ["site__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="cluster_unique_name_in_site"),
        ]

    def __str__(self) -> str:
        return f"{self.site}/{self.name}"


class Host(models.Model):
    """A machine, named as the job reports it, in one project. Jobs may name hosts before
    anyone places them in a cluster, so the cluster is optional. A host belongs to the
    project whose data named it: another project naming the same machine gets its own record,
    never a view into this one (its devices, readings, events and quarantine). Project is
    null only for rows no project's data named when hardware stopped being shared (migration
    telemetry 0007): nobody sees those but the Django admin."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, null=True, blank=True, related_name="hosts"
    )
    name = models.CharField(max_length=255)
    cluster = models.ForeignKey(
        Cluster, on_delete=models.SET_NULL, null=True, blank=True, related_name="hosts"
    )
    quarantined_at = models.DateTimeField(null=True, blank=True)
    quarantine_reason = models.TextField(blank=True)
    quarantined_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="host_unique_name_in_project"),
        ]

    def __str__(self) -> str:
        return self.name


class Device(models.Model):
    """One accelerator, identified by its UUID or serial (what dcgm-exporter calls UUID), in
    one project, like its host (see Host)."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, null=True, blank=True, related_name="devices"
    )
    uuid = models.CharField(max_length=128)
    serial = models.CharField(max_length=128, blank=True)
    host = models.ForeignKey(
        Host, on_delete=models.SET_NULL, null=True, blank=True, related_name="devices"
    )
    index_on_host = models.PositiveSmallIntegerField(null=True, blank=True)
    accelerator_type = models.CharField(max_length=64, blank=True)
    quarantined_at = models.DateTimeField(null=True, blank=True)
    quarantine_reason = models.TextField(blank=True)
    quarantined_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["uuid"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "uuid"], name="device_unique_uuid_in_project"
            ),
        ]

    def __str__(self) -> str:
        return self.uuid


class AcceleratorType(models.Model):
    """The catalog of peak throughputs MFU is measured against (admin-editable)."""

    name = models.CharField(max_length=64, unique=True)
    # Other spellings jobs use for the same part ("H100", "H100 SXM5"), comma-separated.
    aliases = models.CharField(max_length=300, blank=True)
    peak_flops_bf16 = models.FloatField(help_text="Dense BF16 peak, FLOP/s per accelerator.")
    source = models.CharField(max_length=500, help_text="Where the peak figure comes from.")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(peak_flops_bf16__gt=0), name="accelerator_peak_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def matches(self, label: str) -> bool:
        wanted = label.strip().lower()
        names = [self.name, *self.aliases.split(",")]
        return any(wanted == name.strip().lower() for name in names if name.strip())


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
    # Hang threshold; empty: 10 x the median step time, at least 5 min (logbook.hangs).
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


# --- GPU health from dcgm-exporter -----------------------------------------------------------


class DeviceSample(models.Model):
    """One device's DCGM readings at one moment, as one push carried them: the value of each
    field at the field's position in telemetry.dcgm.FIELDS (append-only, as in the summaries;
    an older row's shorter array still lines up), NULL for a field the push lacked or left
    blank. A fleet pushes every 30 s, so a push is a row per GPU, not a row per field: the
    16 fields dcgm-exporter sends by default take one row header and one key entry instead of
    16 (README "GPU health at fleet scale": a tenth of the bytes and of the insert's work).

    The composite primary key (device, sampled_at) is the only index: a device's history (a
    range scan) reads it, and a re-sent timestamped push inserts nothing. The table is
    range-partitioned by day of `sampled_at` (migration 0015) and kept for
    DEVICE_SAMPLE_RETENTION_DAYS: whole partitions are dropped (telemetry.device_samples).
    What outlives them is DeviceSampleSummary."""

    pk = models.CompositePrimaryKey("device", "sampled_at")
    device = models.ForeignKey(
        Device, on_delete=models.CASCADE, related_name="samples", db_index=False
    )
    sampled_at = models.DateTimeField()
    readings = ArrayField(models.FloatField(null=True))

    class Meta:
        ordering = ["device", "sampled_at"]

    def __str__(self) -> str:
        return f"{self.device_id} readings @{self.sampled_at:%H:%M:%S}"

    def readings_by_field(self) -> dict[str, float]:
        """{field: value} of the readings this row holds."""
        return {
            name: value
            for name, value in zip(DCGM_FIELDS, self.readings, strict=False)
            if value is not None
        }


class DeviceSampleSummary(models.Model):
    """A device's readings over one DEVICE_SUMMARY_BUCKET_S bucket: per DCGM field, how many
    samples, their sum (the mean is sum / count) and their maximum. Kept after the raw
    samples' partitions are dropped, for as long as the device is, and updated by every push
    (telemetry.device_samples), from the raw rows that push actually inserted, so a re-sent
    push adds nothing.

    One row per device and bucket, with a value per field at the field's position in
    telemetry.dcgm.FIELDS (append-only; a field a bucket never saw is NULL, which costs a bit
    in the array's null bitmap): a fifth of the bytes of a row per field."""

    pk = models.CompositePrimaryKey("device", "bucket_start")
    device = models.ForeignKey(
        Device, on_delete=models.CASCADE, related_name="sample_summaries", db_index=False
    )
    bucket_start = models.DateTimeField()
    sample_counts = ArrayField(models.IntegerField(null=True))
    value_sums = ArrayField(models.FloatField(null=True))
    value_maxes = ArrayField(models.FloatField(null=True))

    class Meta:
        ordering = ["device", "bucket_start"]

    def __str__(self) -> str:
        return f"{self.device_id} summary @{self.bucket_start:%Y-%m-%d %H:%M}"


class DeviceHealthState(models.Model):
    """A device's newest DCGM readings: what the next push is compared with to find health
    events, and which fields its exporter sends (to warn about disabled health counters)."""

    device = models.OneToOneField(
        Device, on_delete=models.CASCADE, primary_key=True, related_name="health_state"
    )
    # {field: value} of the newest reading of each field.
    last_values = models.JSONField(default=dict, blank=True)
    # The mapped fields of the newest push, blank ones included: the exporter's configuration.
    fields_sent = models.JSONField(default=list, blank=True)
    last_xid = models.IntegerField(default=0)
    last_xid_message = models.CharField(max_length=200, blank=True)
    last_xid_at = models.DateTimeField(null=True, blank=True)
    model_name = models.CharField(max_length=64, blank=True)
    last_push_at = models.DateTimeField()

    class Meta:
        ordering = ["device"]

    def __str__(self) -> str:
        return f"{self.device_id} health at {self.last_push_at:%Y-%m-%d %H:%M}"


class DeviceEvent(models.Model):
    """A GPU health signal from dcgm-exporter (a new XID, an uncorrectable memory error, a
    thermal limit). Shown in fleet health whether or not a run was using the device; the
    project is the one whose ingest token pushed it, which decides who may see it."""

    class Kind(models.TextChoices):
        XID = "xid", "XID error"
        ECC_UNCORRECTABLE = "ecc_uncorrectable", "Uncorrectable ECC error"
        ROW_REMAP = "row_remap", "Row remapped (uncorrectable)"
        ROW_REMAP_FAILURE = "row_remap_failure", "Row remapping failure"
        THERMAL = "thermal", "Thermal limit"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="device_events")
    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="events")
    host = models.ForeignKey(
        Host, on_delete=models.SET_NULL, null=True, blank=True, related_name="device_events"
    )
    kind = models.CharField(max_length=24, choices=Kind.choices)
    occurred_at = models.DateTimeField()
    field = models.CharField(max_length=64)
    previous_value = models.FloatField(null=True, blank=True)
    value = models.FloatField()
    xid = models.IntegerField(null=True, blank=True)
    # The reading may predate Chronicle's knowledge of the device (first push): no run is
    # blamed for it.
    first_sight = models.BooleanField(default=False)
    message = models.TextField(blank=True)
    # Runs an interruption was opened on for this event (logbook.services.gpu_health): fleet health
    # counts an event that opened none as an incident of its own, and the others through
    # their interruptions, so that nothing is counted twice.
    runs_interrupted = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occurred_at"]
        constraints = [
            # Two pushes racing with the same readings record one event.
            models.UniqueConstraint(
                fields=["device", "kind", "occurred_at"], name="device_event_unique_kind_time"
            ),
        ]
        indexes = [
            # Fleet health and the host page read a host's events newest first.
            models.Index(fields=["host", "-occurred_at"], name="device_event_host_time_idx"),
            # The fleet page reads a project's events in a time window.
            models.Index(fields=["project", "-occurred_at"], name="device_event_project_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.device_id} {self.kind} {self.occurred_at:%Y-%m-%d %H:%M}"


# --- Per-rank section timings (the rank_timings event) ---------------------------------------
# Raw per-rank values live in telemetry_ranktiming_raw, a table partitioned by the hour it was
# received and dropped partition by partition after RANK_TIMINGS_RAW_WINDOW_S (migration
# 0007, telemetry.services.rank_timings); Django has no model for it. What stays for the whole
# run is below: one row per (attempt, section, step) and one per (attempt, section, time bucket).


class RealField(models.FloatField):
    """float4: a heat map cell needs no more, and a 16,384-rank array is half the size."""

    def db_type(self, connection: object) -> str:
        return "real"


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
