"""Writes of raw DCGM samples and their summaries (telemetry.device_samples holds their
layout): the SQL a push's write runs, and the daily partitions' upkeep."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime

from telemetry.device_samples import (
    PARTITIONS,
    SAMPLE_TABLE,
    SUMMARY_TABLE,
    raw_kept_since,
    retention,
)
from telemetry.services.partitions import partitions_ensure, partitions_maintain

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
# and returns those inserted; per_bucket lays out their counts, sums and maxima per (device,
# bucket of $4 seconds) in SUMMARY_FIELDS order, merged by SUMMARY_MERGE. Only rows inserted
# reach the summaries, so a retried push changes nothing. A row alone in its bucket among the
# push's ($5 holds its counts, NULL for the others: device_samples_params) is its bucket's
# sums and maxima as it stands; only rows that share a bucket are added up field by field
# (unnesting and grouping every field of every row was a third of the push's PostgreSQL CPU).
# The readings arrive as array literals in text (psycopg would adapt a nested list value by
# value in Python, and unnest() of a two-dimensional array would flatten it).
RECORD_CTES = f"""rows AS (
    INSERT INTO {SAMPLE_TABLE} (device_id, sampled_at, readings)
    SELECT device_id, sampled_at, readings::float8[]
    FROM unnest($1::bigint[], $2::timestamptz[], $3::text[]) AS u(device_id, sampled_at, readings)
    ON CONFLICT DO NOTHING
    RETURNING device_id, sampled_at, readings
), alone AS (
    SELECT device_id, sampled_at, counts::integer[] AS counts
    FROM unnest($1::bigint[], $2::timestamptz[], $5::text[]) AS u(device_id, sampled_at, counts)
    WHERE counts IS NOT NULL
), per_field AS (
    SELECT r.device_id, f.i, nullif(count(f.v), 0)::integer AS n, sum(f.v) AS s,
        max(f.v) AS m,
        date_bin(make_interval(secs => $4), r.sampled_at, timestamptz 'epoch') AS bucket_start
    FROM rows r CROSS JOIN unnest(r.readings) WITH ORDINALITY AS f(v, i)
    WHERE NOT EXISTS (
        SELECT FROM alone a WHERE a.device_id = r.device_id AND a.sampled_at = r.sampled_at)
    GROUP BY r.device_id, bucket_start, f.i
), per_bucket AS (
    SELECT r.device_id,
        date_bin(make_interval(secs => $4), r.sampled_at, timestamptz 'epoch') AS bucket_start,
        a.counts, r.readings AS sums, r.readings AS maxes
    FROM rows r JOIN alone a ON a.device_id = r.device_id AND a.sampled_at = r.sampled_at
    UNION ALL
    SELECT device_id, bucket_start, array_agg(n ORDER BY i), array_agg(s ORDER BY i),
        array_agg(m ORDER BY i)
    FROM per_field GROUP BY device_id, bucket_start
), {SUMMARY_MERGE}"""
RECORD_TYPES = ("bigint[]", "timestamptz[]", "text[]", "double precision", "text[]")


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
