"""Writes for raw DCGM samples and the summaries that outlive them: the samples go into
telemetry_devicesample, partitioned by day of `sampled_at` and kept for
DEVICE_SAMPLE_RETENTION_DAYS (whole partitions dropped by the beat); every push also adds what
it inserted to its devices' 5-minute summaries (DeviceSampleSummary), kept for as long as the
device is. Health events (DeviceEvent) are another table and are never dropped.

Sizes (measured by `make bench`, README "GPU health at fleet scale"): a raw sample takes about
140 bytes with its index share, 16 kept fields every 30 s is 46,080 samples per GPU per day;
a summary row is one per GPU per 5 minutes, 288 a day.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

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

# What a set of raw rows (the relation `rows`: device_id, field, sampled_at, value) adds to
# the summaries, as common table expressions: counts, sums and maxima per (device, bucket,
# field), laid out in SUMMARY_FIELDS order, merged into any row the bucket already has (NULL
# for a field not seen: coalesce(a + b, a, b) and greatest() skip it). Parameters: the
# bucket width in seconds, then SUMMARY_FIELDS. Migration 0015 runs it over the samples
# from before partitioning.
SUMMARY_CTES = f"""
per_field AS (
    SELECT device_id, field, count(*)::integer AS n, sum(value) AS s, max(value) AS m,
        date_bin(make_interval(secs => %s), sampled_at, timestamptz 'epoch') AS bucket_start
    FROM rows GROUP BY device_id, field, bucket_start
), per_bucket AS (
    SELECT k.device_id, k.bucket_start, array_agg(p.n ORDER BY f.i) AS counts,
        array_agg(p.s ORDER BY f.i) AS sums, array_agg(p.m ORDER BY f.i) AS maxes
    FROM (SELECT DISTINCT device_id, bucket_start FROM per_field) k
    CROSS JOIN unnest(%s::text[]) WITH ORDINALITY AS f(name, i)
    LEFT JOIN per_field p ON p.device_id = k.device_id AND p.bucket_start = k.bucket_start
        AND p.field = f.name
    GROUP BY k.device_id, k.bucket_start
), summed AS (
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

# One statement: insert the raw rows (a re-sent timestamped sample is skipped) and add only
# those inserted to the summaries, so a retried push changes nothing.
_RECORD_SQL = f"""
WITH rows AS (
    INSERT INTO {SAMPLE_TABLE} (device_id, field, sampled_at, value)
    SELECT * FROM unnest(%s::bigint[], %s::text[], %s::timestamptz[], %s::float8[])
    ON CONFLICT DO NOTHING
    RETURNING device_id, field, sampled_at, value
), {SUMMARY_CTES}
SELECT (SELECT count(*) FROM rows), (SELECT count(*) FROM summed)
"""


def retention() -> timedelta:
    return timedelta(days=settings.DEVICE_SAMPLE_RETENTION_DAYS)


def raw_kept_since(*, now: datetime) -> datetime:
    """The oldest moment whose raw samples are still kept: the start of the oldest partition
    the upkeep keeps. Older history is in the summaries only."""
    return PARTITIONS.kept_since(now=now, window=retention())


def device_samples_record(
    *, rows: Sequence[tuple[int, str, datetime, float]], now: datetime
) -> int:
    """Insert raw samples `(device_id, field, sampled_at, value)` and add those inserted to
    their 5-minute summaries. Returns how many raw rows were inserted.

    Samples dated before raw_kept_since are not stored at all: their partition is gone or
    about to go, and without their raw row a re-sent push could not be told from a new one
    (the summary would count it twice). Their day's partition must exist
    (device_sample_partitions_ensure, before the transaction)."""
    cutoff = raw_kept_since(now=now)
    kept = [row for row in rows if row[2] >= cutoff]
    if not kept:
        return 0
    device_ids, fields, moments, values = (list(column) for column in zip(*kept, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            _RECORD_SQL, [device_ids, fields, moments, values, SUMMARY_BUCKET_S, SUMMARY_FIELDS]
        )
        inserted, _ = cursor.fetchone()
    return int(inserted)


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
