"""The ingest contract, stated once: every field a batch may carry, what it accepts, and which
column it fills. `ingest.checks` builds its checks from these tables, `ingest.api` its OpenAPI
documentation, and `ingest.services` dispatches on the same event types (a test holds the
three to one set of names). See docs/ingest.md.

Limits come from the columns the values are written to (a CharField's max_length, an
integer column's range), so whatever the contract accepts, the database takes: a value that
passed validation can never fail later in the worker, where the job would only learn of it
as a dead batch. Text columns without a length get a limit of their own, stated here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from ingest.models import IngestBatch
from logbook.choices import (
    CheckpointStatus,
    CheckpointTier,
    LogbookEntryKind,
    SdcDetection,
    TimePrecision,
)
from logbook.models import Checkpoint, Interruption, LogbookEntry, SdcReplay
from telemetry.choices import AttemptStatus, JobIntervalKind
from telemetry.models import (
    Attempt,
    Device,
    Host,
    JobInterval,
    MetricPoint,
    MetricSeries,
    RankPlacement,
    RankStepStats,
    Run,
)

Kind = Literal[
    "integer",  # a JSON integer in [minimum, maximum]
    "number",  # a float; NaN and ±Infinity as literals or strings
    "non_negative",  # a finite float >= 0
    "boolean",
    "text",  # a string of at most max_length characters, may be empty
    "name",  # a non-empty string without control characters, at most max_length
    "url_name",  # a name that is also one URL path segment: no "/" and no whitespace
    "key",  # a non-empty string (an idempotency key), at most max_length
    "names",  # a list of at most max_items names
    "url_names",  # a list of at most max_items url_names (host names, device UUIDs)
    "time",  # RFC 3339 with an offset, or epoch seconds
    "times",  # a non-empty list of at most max_items times
    "choice",
    "object",  # a JSON object, finite numbers only, at most MAX_OBJECT_DEPTH deep
    "integers",  # a non-empty list of at most max_items integers in [minimum, maximum]
    "timings",  # {section name: [seconds, ...]}: at most max_items sections, names of at most
    # max_length characters, each list of finite numbers >= 0 as long as the event's `ranks`
    "placement",  # {host url_name: {level: name}}: at most max_items hosts; levels rack, pod,
    # cluster, site (each optional), names of at most max_length characters
]

# A free-form object (run_info.config) is stored as jsonb and cached with the run: bounded so
# that neither PostgreSQL nor the cache's (recursive) encoders can choke on it.
MAX_OBJECT_DEPTH = 32
MAX_OBJECT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Field:
    kind: Kind
    help: str = ""
    minimum: int = 0
    maximum: int | None = None
    max_length: int | None = None
    max_items: int | None = None
    choices: tuple[str, ...] = ()
    # "app_label.Model.field" this value is written to, for the test that holds each limit
    # to its column; empty when it fills no column of that shape (a time, a float, JSON).
    column: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    fields: dict[str, Field]
    help: str
    required: tuple[str, ...] = ()
    # The field whose time (or first time) is the event's `time` when the event sends none.
    time_from: str = ""
    # Lists that are columns of one table: each must be as long as the first (rank_timings'
    # ranks, hosts, devices and every section's list).
    parallel: tuple[str, ...] = ()


# --- Building fields from their columns -------------------------------------------------------


def _column(model: type[models.Model], name: str) -> tuple[models.Field, str]:
    column = model._meta.get_field(name)
    assert isinstance(column, models.Field)
    return column, f"{model._meta.label}.{name}"


def integer(model: type[models.Model], name: str, *, minimum: int = 0, help: str = "") -> Field:
    """An integer that fits the column: BigIntegerField takes 64 bits, IntegerField and
    PositiveIntegerField 32, whatever the backend."""
    column, label = _column(model, name)
    low, high = BaseDatabaseOperations.integer_field_ranges[column.get_internal_type()]
    return Field("integer", help, minimum=max(minimum, low), maximum=high, column=label)


def _sized(kind: Kind, model: type[models.Model], name: str, help: str) -> Field:
    column, label = _column(model, name)
    assert column.max_length, f"{label} has no max_length"
    return Field(kind, help, max_length=column.max_length, column=label)


def text(model: type[models.Model], name: str, *, help: str = "") -> Field:
    return _sized("text", model, name, help)


def name(model: type[models.Model], name: str, *, help: str = "") -> Field:
    return _sized("name", model, name, help)


def url_name(model: type[models.Model], name: str, *, help: str = "") -> Field:
    """A host name or device UUID: pages link to it by name (/fleet/hosts/<name>/)."""
    return _sized("url_name", model, name, help)


def url_names(model: type[models.Model], name: str, *, help: str = "") -> Field:
    """A list of URL names, each one a row of `model` (hosts, devices) keyed by `name`."""
    item = _sized("url_names", model, name, help)
    return Field(
        "url_names", help, max_length=item.max_length, max_items=10_000, column=item.column
    )


def long_text(limit: int, help: str = "") -> Field:
    """For a TextField: no column limit, so the contract sets one."""
    return Field("text", help, max_length=limit)


def choice(choices: type[models.TextChoices], *, exclude: tuple[str, ...] = ()) -> Field:
    values = tuple(value for value in choices.values if value not in exclude)
    return Field("choice", choices=values)


TIME = Field("time", "RFC 3339 with an offset (e.g. 2026-11-21T10:00:00Z) or epoch seconds.")
NON_NEGATIVE = Field("non_negative")
BOOLEAN = Field("boolean")
MESSAGE = long_text(10_000)
ATTEMPT = integer(Attempt, "number", minimum=1, help="Attempt number; the batch's if omitted.")
STEP = integer(MetricPoint, "step")
METRIC_NAME = name(MetricSeries, "name")
# rank_timings: 16,384 ranks gathered by rank 0 fit one event (about 1 MB of JSON for four
# sections); the limit leaves room for 4x that job.
MAX_RANKS_PER_EVENT = 65_536
MAX_RANK = BaseDatabaseOperations.integer_field_ranges["IntegerField"][1]
MAX_SECTIONS = 32
RANK_HOST = name(RankPlacement, "host")
RANK_DEVICE = name(RankPlacement, "device")
RANK_SECTION = name(RankStepStats, "section")
PLACEMENT_NAME = name(Host, "rack")  # as wide as Host.pod, Cluster.name and Site.name
PLACEMENT_LEVELS = ("rack", "pod", "cluster", "site")

# --- The batch ----------------------------------------------------------------------------------

BATCH_FIELDS: dict[str, Field] = {
    "batch_id": _sized("key", IngestBatch, "batch_id", "Client-chosen idempotency key."),
    "run": name(Run, "name", help="Run name, created on first sight."),
    "attempt": ATTEMPT,
    "rank": integer(IngestBatch, "rank", help="Sending process's rank."),
    "host": url_name(IngestBatch, "host", help="Sending host."),
}
# The sections: run_info (RUN_INFO), metrics (METRIC_FIELDS, one object per point), series
# (the same points as columns) and events (EVENTS).
BATCH_SECTIONS = ("run_info", "metrics", "series", "events")
BATCH_REQUIRED = ("batch_id", "run")

METRIC_FIELDS: dict[str, Field] = {
    "name": METRIC_NAME,
    "step": STEP,
    "value": Field("number", "A number; NaN and ±Infinity as literals or strings."),
    "time": TIME,
}
METRIC_REQUIRED = ("name", "step", "value")

# Written to the Run row as sent (telemetry.services.run_upsert).
RUN_INFO: dict[str, Field] = {
    "description": long_text(10_000),
    "parameter_count": integer(Run, "parameter_count"),
    "n_layers": integer(Run, "n_layers", minimum=1),
    "n_heads": integer(Run, "n_heads", minimum=1),
    "head_dim": integer(Run, "head_dim", minimum=1),
    "seq_len": integer(Run, "seq_len", minimum=1),
    "accelerator_type": text(Run, "accelerator_type"),
    "accelerator_count": integer(Run, "accelerator_count", minimum=1),
    "config": Field("object"),
    "tokens_per_step": integer(Run, "tokens_per_step", minimum=1),
    "flops_per_token": NON_NEGATIVE,
    "counts_recomputation": BOOLEAN,
    "attention": choice(Run.Attention),
    "deterministic_metrics": Field(
        "names",
        max_length=METRIC_NAME.max_length,
        max_items=10_000,
        column=METRIC_NAME.column,
    ),
    "sdc_tolerance": NON_NEGATIVE,
    "hang_after_s": integer(Run, "hang_after_s", minimum=60),
    "tags": Field(
        "names",
        "Labels for the run list's tag filter (replace the run's tags when sent).",
        max_length=Run.TAG_MAX_LENGTH,
        max_items=Run.TAGS_MAX,
    ),
}

# --- Events -------------------------------------------------------------------------------------

EVENTS: dict[str, Event] = {
    "attempt_started": Event(
        {
            "attempt": ATTEMPT,
            "resumed_from_step": integer(Attempt, "resumed_from_step"),
            "hosts": url_names(Host, "name"),
            # When the attempt runs on a different count than the run (a resized cluster).
            "accelerator_count": integer(Attempt, "accelerator_count", minimum=1),
            "placement": Field(
                "placement",
                "Where hosts sit: {host: {rack, pod, cluster, site}}, any level absent when "
                "unknown; a cluster is kept with its site (sent or known).",
                max_length=PLACEMENT_NAME.max_length,
                max_items=10_000,
                column=PLACEMENT_NAME.column,
            ),
        },
        "A launch of the job; its points may follow in the same batch.",
    ),
    "attempt_ended": Event(
        {
            "attempt": ATTEMPT,
            "status": choice(AttemptStatus, exclude=(AttemptStatus.RUNNING,)),
            "reason": MESSAGE,
        },
        "The attempt stopped.",
    ),
    "checkpoint_saved": Event(
        {
            "attempt": ATTEMPT,
            "step": integer(Checkpoint, "step"),
            "blocking_save_s": NON_NEGATIVE,
            "async_save_s": NON_NEGATIVE,
            "size_bytes": integer(Checkpoint, "size_bytes"),
            "tier": choice(CheckpointTier),
            "uri": text(Checkpoint, "uri"),
            "checksum": text(Checkpoint, "checksum"),
            "status": choice(CheckpointStatus),
        },
        "A checkpoint was saved (or failed to be).",
        required=("step",),
    ),
    "checkpoint_restored": Event(
        {"attempt": ATTEMPT, "step": integer(Checkpoint, "step"), "restore_s": NON_NEGATIVE},
        "The attempt resumed from the checkpoint at `step`.",
        required=("step",),
    ),
    "interruption": Event(
        {
            "id": name(Interruption, "source_key", help="Client-chosen id; makes it idempotent."),
            "attempt": ATTEMPT,
            "category": text(Interruption, "reported_category"),
            "component": text(Interruption, "component"),
            "planned": BOOLEAN,
            "hosts": url_names(Host, "name"),
            "devices": url_names(Device, "uuid"),
            "message": MESSAGE,
            "detected_at": TIME,
            "recovered_at": TIME,
            "manual_intervention": BOOLEAN,
            "lost_steps": integer(Interruption, "lost_steps"),
            "lost_s": Field("non_negative", "Lost time as the source reported it, in seconds."),
            "time_precision": choice(TimePrecision),
            "time_until": TIME,
            "local_time": text(Interruption, "local_time"),
            "step": integer(Interruption, "step"),
        },
        "The job stopped: opens an incident for triage.",
    ),
    "sdc_suspected": Event(
        {
            "id": name(SdcReplay, "source_key"),
            "attempt": ATTEMPT,
            "step": integer(SdcReplay, "step"),
            "device": url_name(Device, "uuid"),
            "host": url_name(Host, "name"),
            "detection": choice(SdcDetection),
            "value": Field("number"),
            "message": MESSAGE,
        },
        "Suspected silent data corruption at `step`.",
        required=("step",),
    ),
    "heartbeat": Event(
        {"attempt": ATTEMPT, "rank": integer(IngestBatch, "rank")},
        # Stalled-run detection watches the last-seen time.
        "Liveness only: moves the run's last-seen time.",
    ),
    "step_times": Event(
        {
            "attempt": ATTEMPT,
            "first_step": integer(MetricPoint, "step"),
            "start_times": Field(
                "times", "start_times[i] is when step first_step + i began.", max_items=20_000
            ),
        },
        "One start time per step, compactly.",
        required=("first_step", "start_times"),
        time_from="start_times",
    ),
    "interval": Event(
        {
            "id": name(JobInterval, "source_key"),
            "attempt": ATTEMPT,
            "kind": choice(JobIntervalKind),
            "label": text(JobInterval, "label"),
            "start": TIME,
            "end": TIME,
            "step": integer(JobInterval, "step"),
        },
        "Wall time spent on something other than training steps.",
        required=("kind", "start", "end"),
        time_from="start",
    ),
    "rank_timings": Event(
        {
            "attempt": ATTEMPT,
            "first_step": integer(RankStepStats, "step"),
            "last_step": integer(
                RankStepStats, "step", help="Last step the values cover; first_step if omitted."
            ),
            "ranks": Field(
                "integers",
                "The ranks the values are for: one rank (sent by each rank) or all of them "
                "(gathered by rank 0).",
                maximum=MAX_RANK,
                max_items=MAX_RANKS_PER_EVENT,
                column="telemetry.RankPlacement.rank",
            ),
            "hosts": Field(
                "url_names",
                "Host of each rank (parallel to ranks); send it once per attempt or when it "
                "changes.",
                max_length=RANK_HOST.max_length,
                max_items=MAX_RANKS_PER_EVENT,
                column=RANK_HOST.column,
            ),
            "devices": Field(
                "url_names",
                "Accelerator UUID of each rank (parallel to ranks), optional.",
                max_length=RANK_DEVICE.max_length,
                max_items=MAX_RANKS_PER_EVENT,
                column=RANK_DEVICE.column,
            ),
            "sections": Field(
                "timings",
                "Seconds per step spent in each named section (step, forward, backward, "
                "optimizer, data_loading, collective_wait, ...): one list per section, parallel "
                "to ranks; the mean over first_step..last_step when they differ.",
                max_length=RANK_SECTION.max_length,
                max_items=MAX_SECTIONS,
                column=RANK_SECTION.column,
            ),
        },
        "Per-rank time in named sections for a step range.",
        required=("first_step", "ranks", "sections"),
        parallel=("ranks", "hosts", "devices", "sections"),
    ),
    "note": Event(
        {
            "id": name(LogbookEntry, "source_key"),
            "attempt": ATTEMPT,
            "title": text(LogbookEntry, "title"),
            "body": long_text(100_000, "Markdown."),
            "kind": choice(LogbookEntryKind),
            "step": integer(LogbookEntry, "step"),
        },
        "A logbook entry written by the job.",
        required=("title",),
    ),
}
EVENT_TYPES = sorted(EVENTS)
