"""Writes for raw DCGM samples and the summaries that outlive them: the samples go into
telemetry_devicesample, a row per device and moment with the readings as an array in
SUMMARY_FIELDS order, partitioned by day of `sampled_at` and kept for
DEVICE_SAMPLE_RETENTION_DAYS (whole partitions dropped by the beat); every push also adds what
it inserted to its devices' 5-minute summaries (DeviceSampleSummary), kept for as long as the
device is. Health events (DeviceEvent) are another table and are never dropped.

Sizes (measured by `make bench`, README "GPU health at fleet scale"): a row of the 16 fields
dcgm-exporter sends takes about 240 bytes with its key, every 30 s is 2,880 rows per GPU per
day; a summary row is one per GPU per 5 minutes, 288 a day.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from config.prepared import array_literal
from telemetry.dcgm import FIELDS
from telemetry.partitions import PartitionedTable, partitions_ensure, partitions_maintain

SAMPLE_TABLE = "telemetry_devicesample"
SUMMARY_TABLE = "telemetry_devicesamplesummary"
SUMMARY_BUCKET_S = 300
# Daily partitions, made two days ahead: a push dated up to a day in the future (what the
# parser accepts) still finds its partition made by the beat.
PARTITIONS = PartitionedTable(
    table=SAMPLE_TABLE, span=timedelta(days=1), ahead=timedelta(days=2), name_format="%Y%m%d"
)
# A summary's arrays hold each field at its position here (telemetry.dcgm.FIELDS is
# append-only: an older row's shorter arrays still line up).
SUMMARY_FIELDS = list(FIELDS)

# The common table expression `summed`: merges the relation `per_bucket` (device_id,
# bucket_start, counts, sums, maxes, arrays in SUMMARY_FIELDS order) into the summaries, adding
# to any row the bucket already has (NULL for a field not seen: coalesce(a + b, a, b) and
# greatest() skip it).
SUMMARY_MERGE = f"""summed AS (
    INSERT INTO {SUMMARY_TABLE} AS old
        (device_id, bucket_start, sample_counts, value_sums, value_maxes)
    SELECT device_id, bucket_start, counts, sums, maxes FROM per_bucket
    ON CONFLICT (device_id, bucket_start) DO UPDATE SET
        sample_counts = ARRAY(SELECT coalesce(a + b, a, b) FROM unnest(old.sample_counts,
            EXCLUDED.sample_counts) WITH ORDINALITY AS u(a, b, i) ORDER BY i),
        value_sums = ARRAY(SELECT coalesce(a + b, a, b) FROM unnest(old.value_sums,
            EXCLUDED.value_sums) WITH ORDINALITY AS u(a, b, i) ORDER BY i),
        value_maxes = ARRAY(SELECT greatest(a, b) FROM unnest(old.value_maxes,
            EXCLUDED.value_maxes) WITH ORDINALITY AS u(a, b, i) ORDER BY i)
    RETURNING 1
)"""

# One push's raw rows and what they add to the summaries, as common table expressions for a
# prepared statement: the relation `rows` inserts the raw rows ($1 device ids, $2 moments, $3
# readings as float8[] text in SUMMARY_FIELDS order; a re-sent timestamped push is skipped)
# and returns those inserted; per_field and per_bucket lay out their counts, sums and maxima
# per (device, bucket of $4 seconds) in SUMMARY_FIELDS order, merged by SUMMARY_MERGE. Only
# rows inserted reach the summaries, so a retried push changes nothing. The readings arrive as
# array literals in text (psycopg would adapt a nested list value by value in Python, and
# unnest() of a two-dimensional array would flatten it).
RECORD_CTES = f"""rows AS (
    INSERT INTO {SAMPLE_TABLE} (device_id, sampled_at, readings)
    SELECT device_id, sampled_at, readings::float8[]
    FROM unnest($1::bigint[], $2::timestamptz[], $3::text[]) AS u(device_id, sampled_at, readings)
    ON CONFLICT DO NOTHING
    RETURNING device_id, sampled_at, readings
), per_field AS (
    SELECT r.device_id, f.i, nullif(count(f.v), 0)::integer AS n, sum(f.v) AS s,
        max(f.v) AS m,
        date_bin(make_interval(secs => $4), r.sampled_at, timestamptz 'epoch') AS bucket_start
    FROM rows r CROSS JOIN unnest(r.readings) WITH ORDINALITY AS f(v, i)
    GROUP BY r.device_id, bucket_start, f.i
), per_bucket AS (
    SELECT device_id, bucket_start, array_agg(n ORDER BY i) AS counts,
        array_agg(s ORDER BY i) AS sums, array_agg(m ORDER BY i) AS maxes
    FROM per_field GROUP BY device_id, bucket_start
), {SUMMARY_MERGE}"""
RECORD_TYPES = ("bigint[]", "timestamptz[]", "text[]", "double precision")


def readings_array(values: Mapping[str, float]) -> list[float | None]:
    """A device's readings `{field: value}` laid out in SUMMARY_FIELDS order, None where a
    field is missing. Fields Chronicle does not know are left out (the parser keeps none)."""
    return [values.get(name) for name in SUMMARY_FIELDS]


def readings_literal(readings: Sequence[float | None]) -> str:
    """PostgreSQL's text for a float8[]: repr() of a float reads back to the same double."""
    return "{" + ",".join("NULL" if value is None else repr(value) for value in readings) + "}"


def retention() -> timedelta:
    return timedelta(days=settings.DEVICE_SAMPLE_RETENTION_DAYS)


def raw_kept_since(*, now: datetime) -> datetime:
    """The oldest moment whose raw samples are still kept: the start of the oldest partition
    the upkeep keeps. Older history is in the summaries only."""
    return PARTITIONS.kept_since(now=now, window=retention())


def device_samples_params(
    *, rows: Sequence[tuple[int, datetime, Mapping[str, float]]], now: datetime
) -> list[Any]:
    """The parameters of RECORD_CTES for raw samples `(device_id, sampled_at, {field:
    value})`, a row per device and moment.

    A row whose (device, moment) is already stored is skipped whole: a retried push adds
    nothing, and a later push carrying the same moment cannot add fields to it.

    Samples dated before raw_kept_since are left out: their partition is gone or about to
    go, and without their raw row a re-sent push could not be told from a new one (the
    summary would count it twice). Their day's partition must exist
    (device_sample_partitions_ensure, before the transaction)."""
    cutoff = raw_kept_since(now=now)
    kept = [(device_id, at, readings_array(values)) for device_id, at, values in rows]
    kept = [row for row in kept if row[1] >= cutoff and any(v is not None for v in row[2])]
    return [
        array_literal(device_id for device_id, _, _ in kept),
        array_literal(at for _, at, _ in kept),
        array_literal(readings_literal(readings) for _, _, readings in kept),
        SUMMARY_BUCKET_S,
    ]


# Days this process knows a partition covers (day start -> when it checked, monotonic), so the
# catalog is read once per day and process, not on every push (it was 9% of a push's web
# CPU). An entry cannot go stale by the upkeep: the beat drops only expired partitions, and
# samples dated in them are never written. A partition dropped by hand is noticed within
# COVERED_TTL_S.
COVERED_TTL_S = 600.0
_covered: dict[datetime, float] = {}


def device_sample_partitions_ensure(*, moments: Iterable[datetime], now: datetime) -> list[str]:
    """Make the daily partitions that samples dated `moments` need (those still in the
    window), so a push for a day the beat has not prepared never fails. No query when this
    process has seen them lately; one catalog query otherwise. Call outside the push's
    transaction."""
    cutoff = raw_kept_since(now=now)
    days = {PARTITIONS.span_start(m) for m in moments if m >= cutoff}
    checked = time.monotonic()
    if all(day in _covered and checked - _covered[day] < COVERED_TTL_S for day in days):
        return []
    created = partitions_ensure(PARTITIONS, moments=days)
    _covered.update(dict.fromkeys(days, checked))
    return created


def device_sample_partitions_forget() -> None:
    """Forget which partitions exist: after partitions were dropped, or a transaction that
    made some rolled back (tests)."""
    _covered.clear()


def device_sample_partitions_maintain(
    *, now: datetime | None = None
) -> tuple[list[str], list[str]]:
    """Make the coming days' partitions and drop those wholly older than
    DEVICE_SAMPLE_RETENTION_DAYS. Returns (created, dropped) partition names."""
    device_sample_partitions_forget()
    return partitions_maintain(PARTITIONS, window=retention(), now=now)
