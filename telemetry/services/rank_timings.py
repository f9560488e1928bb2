"""Writes for per-rank section timings (the rank_timings event): raw values into the
hour-partitioned table, where each rank ran, the per-step distributions and per-bucket
means that outlive the raw values, and the partitions' upkeep.

Sizes (16,384 ranks, 4 sections, a step every 6 s): the raw table takes one row per section
per event (the ranks' values as arrays), 2,400 rows an hour when rank 0 gathers; what is kept
for the run is a row per (section, step) and a row per (section, bucket). See
docs/ranks-and-hangs.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby
from operator import itemgetter
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from telemetry import rank_heat
from telemetry.models import Attempt
from telemetry.partitions import PartitionedTable
from telemetry.services import fleet_version_bump, hosts_ensure, run_data_version_bump
from telemetry.services.partitions import partitions_maintain
from telemetry.straggler_scores import percentiles

RAW_TABLE = "telemetry_ranktiming_raw"
PARTITION_S = 3600
PARTITIONS_AHEAD = timedelta(hours=6)
# How many of a step's slowest ranks its distribution row names.
SLOWEST_KEPT = 5
# Coarser heat-map buckets made from the RANK_BUCKET_S ones: an hour draws 12 days in 300
# columns, six hours 75 days (a 54-day run is 216 columns of 6 h).
COARSE_BUCKETS_S = (3600, 6 * 3600)
# Blocks of steps the spread chart reads when it draws many steps per point: 100 for runs up
# to 200,000 steps (at 2,000 points), 10,000 past 20 million. Each from the level below.
STEP_BLOCKS = (100, 10_000)

# Steps merged into one row: the fastest rank at its best, the median averaged, the tails and
# the slowest rank at their worst; from the steps' rows, or from blocks of steps (their
# medians weighted by how many steps each holds). The spread chart merges the same way.
MERGE_STEPS = (
    "min(min_s), avg(median_s), max(p90_s), max(p99_s), max(max_s),"
    " (array_agg(slowest_ranks[1] ORDER BY max_s DESC))[1]"
)
MERGE_BLOCKS = (
    "min(min_s), sum(median_s * step_count) / sum(step_count), max(p90_s), max(p99_s),"
    " max(max_s), (array_agg(slowest_rank ORDER BY max_s DESC))[1]"
)
_BLOCK_FROM = {
    "telemetry_rankstepstats": (f"count(*), {MERGE_STEPS}", "step"),
    "telemetry_rankstepblock": (f"sum(step_count), {MERGE_BLOCKS}", "first_step"),
}


def rank_timings_record(
    *,
    attempt: Attempt,
    first_step: int,
    last_step: int,
    ranks: Sequence[int],
    sections: Mapping[str, Sequence[float]],
    hosts: Sequence[str] | None = None,
    devices: Sequence[str] | None = None,
    recorded_at: datetime,
) -> None:
    """Store one rank_timings event: a raw row per section (dropped with its partition) and,
    when hosts or devices are sent, each rank's placement (changed rows only). The rollup
    (`rank_timings_rollup`) makes the lasting rows from the raw ones."""
    with connection.cursor() as cursor:
        for section, values in sections.items():
            cursor.execute(
                f"INSERT INTO {RAW_TABLE} (received_at, attempt_id, section, first_step,"
                " last_step, recorded_at, ranks, values_s)"
                " VALUES (now(), %s, %s, %s, %s, %s, %s::integer[], %s::real[])",
                [
                    attempt.pk,
                    section,
                    first_step,
                    last_step,
                    recorded_at,
                    list(ranks),
                    list(values),
                ],
            )
        if hosts is not None or devices is not None:
            # Keyed upsert that writes nothing when the placement is unchanged: rank 0 may
            # send all 16,384 hosts with every event.
            cursor.execute(
                "INSERT INTO telemetry_rankplacement (attempt_id, rank, host, device)"
                " SELECT %s, r, h, d FROM unnest(%s::integer[], %s::text[], %s::text[])"
                " AS u(r, h, d)"
                " ON CONFLICT (attempt_id, rank) DO UPDATE"
                " SET host = CASE WHEN EXCLUDED.host = '' THEN telemetry_rankplacement.host"
                " ELSE EXCLUDED.host END,"
                " device = CASE WHEN EXCLUDED.device = '' THEN telemetry_rankplacement.device"
                " ELSE EXCLUDED.device END"
                " WHERE (telemetry_rankplacement.host, telemetry_rankplacement.device)"
                " IS DISTINCT FROM (EXCLUDED.host, EXCLUDED.device)"
                " AND (EXCLUDED.host <> '' OR EXCLUDED.device <> '')",
                [
                    attempt.pk,
                    list(ranks),
                    list(hosts) if hosts is not None else [""] * len(ranks),
                    list(devices) if devices is not None else [""] * len(ranks),
                ],
            )
            changed = cursor.rowcount
        if hosts and changed:
            # New or moved placements: the hosts join the attempt's, as attempt_started's
            # would (the fleet pages find a host through the attempts it served).
            project_id = attempt.run.project_id
            names = sorted({name for name in hosts if name})
            attempt.hosts.add(*hosts_ensure(project=project_id, names=names))
            fleet_version_bump(project_id=project_id)


def bucket_start(moment: datetime, bucket_s: int) -> datetime:
    epoch = int(moment.timestamp()) // bucket_s * bucket_s
    return datetime.fromtimestamp(epoch, tz=UTC)


@dataclass(frozen=True)
class Rollup:
    steps: int
    buckets: list[tuple[str, datetime]]  # (section, bucket_start) recomputed


# Steps, blocks or buckets one statement reads or writes: up to ITEMS_PER_STATEMENT, and for
# steps and buckets no more than VALUES_PER_STATEMENT ranks' worth in all, so what the client
# holds stays bounded (16 steps or buckets at a time of a 16,384-rank job, each bucket four
# 16,384-long arrays; 256 at 1,024 ranks).
ITEMS_PER_STATEMENT = 500
VALUES_PER_STATEMENT = 1 << 18


@transaction.atomic
def rank_timings_rollup(*, attempt_id: int, since: datetime) -> Rollup:
    """Recompute the distribution of every (section, step) and the per-rank means of every
    (section, bucket) that raw rows received since `since` touch, from all raw rows still
    kept for them. Idempotent: rows are replaced, never added to, so running it twice (or
    over a late rank's values) gives the same rows. A few statements per level and per
    ITEMS_PER_STATEMENT items, however many steps and buckets are touched."""
    bucket_s = settings.RANK_BUCKET_S
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT section, first_step, max(cardinality(ranks)) FROM"
            f" {RAW_TABLE} WHERE attempt_id = %s AND received_at >= %s"
            " GROUP BY section, first_step ORDER BY section, first_step",
            [attempt_id, since],
        )
        found = cursor.fetchall()
    touched = [(section, step) for section, step, _ in found]
    # The widest row received sizes the statements (a late rank's lone value may join a
    # step of thousands; the ones received with it are as wide as the job).
    per_statement = max(
        1, min(ITEMS_PER_STATEMENT, VALUES_PER_STATEMENT // max((n for *_, n in found), default=1))
    )
    buckets: set[tuple[str, datetime]] = set()
    for chunk in _chunks(touched, per_statement):
        for section, recorded_at in _step_stats_refresh(attempt_id, chunk):
            buckets.add((section, bucket_start(recorded_at, bucket_s)))
    blocks = set(touched)
    for width in STEP_BLOCKS:
        blocks = {(section, step // width * width) for section, step in blocks}
        for chunk in _chunks(sorted(blocks), ITEMS_PER_STATEMENT):
            _step_block_refresh(attempt_id, width, chunk)
    for chunk in _chunks(sorted(buckets), per_statement):
        _bucket_refresh(attempt_id, chunk, bucket_s)
    # Then each coarser level, from the one below it, for the buckets those touched.
    coarse = buckets
    for width in bucket_levels()[1:]:
        coarse = {(section, bucket_start(start, width)) for section, start in coarse}
        for chunk in _chunks(sorted(coarse), per_statement):
            _coarse_refresh(attempt_id, chunk, width)
    if touched:
        run_id = Attempt.objects.values_list("run_id", flat=True).get(pk=attempt_id)
        run_data_version_bump(run_id=run_id)
    return Rollup(steps=len(touched), buckets=sorted(buckets))


def _chunks(items: Sequence[tuple[str, Any]], size: int) -> Iterator[list[tuple[str, Any]]]:
    for begin in range(0, len(items), size):
        yield list(items[begin : begin + size])


def _step_stats_refresh(
    attempt_id: int, steps: Sequence[tuple[str, int]]
) -> list[tuple[str, datetime]]:
    """Replace the distribution rows of `steps` (section, step) from all their raw rows;
    returns (section, first recorded_at) of each step that has any."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.section, t.first_step, t.recorded_at, t.ranks, t.values_s"
            " FROM unnest(%s::text[], %s::bigint[]) AS s(section, step)"
            f" JOIN {RAW_TABLE} t ON t.attempt_id = %s AND t.section = s.section"
            " AND t.first_step = s.step ORDER BY t.section, t.first_step, t.received_at",
            [[section for section, _ in steps], [step for _, step in steps], attempt_id],
        )
        rows = cursor.fetchall()
    stored: list[tuple] = []
    for (section, step), group in groupby(rows, key=itemgetter(0, 1)):
        step_rows = list(group)
        # One value per rank; a rank that sent the step twice counts once (the later value).
        by_rank: dict[int, float] = {}
        for *_, ranks, values in step_rows:
            by_rank.update(zip(ranks, values, strict=True))
        ranks_arr = np.fromiter(by_rank.keys(), dtype=np.int64, count=len(by_rank))
        values_arr = np.fromiter(by_rank.values(), dtype=np.float64, count=len(by_rank))
        order = np.argsort(-values_arr, kind="stable")[:SLOWEST_KEPT]
        recorded_at = min(row[2] for row in step_rows)
        stored.append(
            (section, step, recorded_at, len(by_rank), *percentiles(values_arr),
             _array_text(ranks_arr[order].tolist()), _array_text(values_arr[order].tolist()))
        )  # fmt: skip
    if stored:
        columns = [list(column) for column in zip(*stored, strict=True)]
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO telemetry_rankstepstats (attempt_id, section, step, recorded_at,"
                " rank_count, min_s, median_s, p90_s, p99_s, max_s, slowest_ranks, slowest_s)"
                " SELECT %s, u.section, u.step, u.recorded_at, u.rank_count, u.min_s,"
                " u.median_s, u.p90_s, u.p99_s, u.max_s, u.slowest_ranks::integer[],"
                " u.slowest_s::double precision[]"
                " FROM unnest(%s::text[], %s::bigint[], %s::timestamptz[], %s::integer[],"
                " %s::double precision[], %s::double precision[], %s::double precision[],"
                " %s::double precision[], %s::double precision[], %s::text[], %s::text[])"
                " AS u(section, step, recorded_at, rank_count, min_s, median_s, p90_s, p99_s,"
                " max_s, slowest_ranks, slowest_s)"
                " ON CONFLICT (attempt_id, section, step) DO UPDATE SET"
                " recorded_at = EXCLUDED.recorded_at, rank_count = EXCLUDED.rank_count,"
                " min_s = EXCLUDED.min_s, median_s = EXCLUDED.median_s, p90_s = EXCLUDED.p90_s,"
                " p99_s = EXCLUDED.p99_s, max_s = EXCLUDED.max_s,"
                " slowest_ranks = EXCLUDED.slowest_ranks, slowest_s = EXCLUDED.slowest_s",
                [attempt_id, *columns],
            )
    return [(row[0], row[2]) for row in stored]


def _step_block_refresh(attempt_id: int, width: int, blocks: Sequence[tuple[str, int]]) -> None:
    """Replace the `width`-step block rows starting at `blocks` (section, first step) from
    the level below."""
    finer = STEP_BLOCKS.index(width) - 1
    source = "telemetry_rankstepstats" if finer < 0 else "telemetry_rankstepblock"
    columns, step = _BLOCK_FROM[source]
    level = "" if finer < 0 else f" AND steps = {STEP_BLOCKS[finer]}"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO telemetry_rankstepblock (attempt_id, section, steps, first_step,"
            " step_count, min_s, median_s, p90_s, p99_s, max_s, slowest_rank)"
            f" SELECT attempt_id, b.section, %s, b.first, {columns}"
            " FROM unnest(%s::text[], %s::bigint[]) AS b(section, first)"
            f" JOIN {source} ON attempt_id = %s AND {source}.section = b.section"
            f" AND {step} >= b.first AND {step} < b.first + %s{level}"
            " GROUP BY attempt_id, b.section, b.first"
            " ON CONFLICT (attempt_id, section, steps, first_step) DO UPDATE SET"
            " step_count = EXCLUDED.step_count, min_s = EXCLUDED.min_s,"
            " median_s = EXCLUDED.median_s, p90_s = EXCLUDED.p90_s, p99_s = EXCLUDED.p99_s,"
            " max_s = EXCLUDED.max_s, slowest_rank = EXCLUDED.slowest_rank",
            [width, [section for section, _ in blocks], [first for _, first in blocks],
             attempt_id, width],
        )  # fmt: skip


def _bucket_refresh(
    attempt_id: int, buckets: Sequence[tuple[str, datetime]], bucket_s: int
) -> None:
    # Aggregated in PostgreSQL: a 10-minute bucket of a 16,384-rank job is 6.5 million values.
    per_rank = (
        "SELECT u.r, avg(u.v) AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY u.v) AS d,"
        f" count(*)::integer AS n FROM {RAW_TABLE}, unnest(ranks, values_s) AS u(r, v)"
        " WHERE attempt_id = %s AND section = b.section AND recorded_at >= b.start"
        " AND recorded_at < b.start + make_interval(secs => %s) GROUP BY u.r"
    )
    _bucket_write(attempt_id, bucket_s, buckets, per_rank, [attempt_id, bucket_s])


def _coarse_refresh(
    attempt_id: int, buckets: Sequence[tuple[str, datetime]], bucket_s: int
) -> None:
    """Coarse buckets from the next finer level's: each rank's count-weighted mean (and
    median, an approximation nothing scores on) over the finer buckets it spans."""
    per_rank = (
        "SELECT u.r, sum(u.m * u.n) / sum(u.n) AS m, sum(u.d * u.n) / sum(u.n) AS d,"
        " sum(u.n)::integer AS n"
        " FROM telemetry_rankbucket, unnest(ranks, means_s, medians_s, counts) AS u(r, m, d, n)"
        " WHERE attempt_id = %s AND section = b.section AND bucket_s = %s"
        " AND bucket_start >= b.start AND bucket_start < b.start + make_interval(secs => %s)"
        " AND u.n > 0 GROUP BY u.r"
    )
    params = [attempt_id, _finer_level(bucket_s), bucket_s]
    _bucket_write(attempt_id, bucket_s, buckets, per_rank, params)


def _bucket_write(
    attempt_id: int,
    bucket_s: int,
    buckets: Sequence[tuple[str, datetime]],
    per_rank: str,
    params: list,
) -> None:
    """Store the buckets (section, start) whose per-rank (r, mean m, median d, count n) rows
    `per_rank` selects, given `b.section`, `b.start` and `params`; a bucket with none is left
    alone. Each bucket is aggregated on its own (a lateral subquery), as large as one
    16,384-rank bucket whatever the statement's count."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT b.section, b.start, agg.* FROM unnest(%s::text[], %s::timestamptz[])"
            " AS b(section, start) CROSS JOIN LATERAL (SELECT array_agg(r ORDER BY r) AS ranks,"
            " array_agg(m ORDER BY r), array_agg(d ORDER BY r), array_agg(n ORDER BY r)"
            f" FROM ({per_rank}) per_rank) agg WHERE agg.ranks IS NOT NULL",
            [[section for section, _ in buckets], [start for _, start in buckets], *params],
        )
        found = cursor.fetchall()
    stored: list[tuple] = []
    for section, start, ranks, means, medians, counts in found:
        group_ranks = rank_heat.group_ranks_for(max(ranks) + 1)
        slowest_s, slowest_rank = rank_heat.slowest_per_group(ranks, means, group_ranks)
        # The arrays as text: psycopg adapts a list item by item in Python (20 ms for a
        # 1,024-rank bucket's four arrays), str() of the list in C.
        stored.append(
            (section, start, _array_text(ranks), _array_text(means), _array_text(medians),
             _array_text(counts), group_ranks, _array_text(slowest_s), _array_text(slowest_rank))
        )  # fmt: skip
    if not stored:
        return
    columns = [list(column) for column in zip(*stored, strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO telemetry_rankbucket (attempt_id, section, bucket_s, bucket_start,"
            " ranks, means_s, medians_s, counts, group_ranks, group_slowest_s,"
            " group_slowest_rank)"
            " SELECT %s, u.section, %s, u.start, u.ranks::integer[], u.means::real[],"
            " u.medians::real[], u.counts::integer[], u.group_ranks, u.slowest_s::real[],"
            " u.slowest_rank::integer[]"
            " FROM unnest(%s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::text[],"
            " %s::text[], %s::integer[], %s::text[], %s::text[])"
            " AS u(section, start, ranks, means, medians, counts, group_ranks, slowest_s,"
            " slowest_rank)"
            " ON CONFLICT (attempt_id, section, bucket_s, bucket_start) DO UPDATE SET"
            " ranks = EXCLUDED.ranks, means_s = EXCLUDED.means_s,"
            " medians_s = EXCLUDED.medians_s, counts = EXCLUDED.counts,"
            " group_ranks = EXCLUDED.group_ranks, group_slowest_s = EXCLUDED.group_slowest_s,"
            " group_slowest_rank = EXCLUDED.group_slowest_rank",
            [attempt_id, bucket_s, *columns],
        )


def _array_text(values: Sequence[float | int | None]) -> str:
    """A PostgreSQL array literal: numbers as Python prints them (repr round-trips a float),
    None as NULL."""
    if None in values:
        return "{" + ",".join("NULL" if v is None else str(v) for v in values) + "}"
    return "{" + ",".join(map(str, values)) + "}"


def bucket_levels() -> list[int]:
    """The bucket widths kept, finest first: RANK_BUCKET_S and the coarse widths it divides."""
    fine = settings.RANK_BUCKET_S
    return [fine, *(width for width in COARSE_BUCKETS_S if width > fine and width % fine == 0)]


def _finer_level(bucket_s: int) -> int:
    levels = bucket_levels()
    return levels[levels.index(bucket_s) - 1]


# Rows are stamped with their transaction's start; one that began before a pass read the
# table and committed after it has a received_at the pass already moved past. Each pass looks
# back this far behind the previous one to take those too (re-rolling a step gives the same
# rows). Batches commit in well under a second.
ROLLUP_OVERLAP = timedelta(seconds=30)


def attempts_to_roll_up() -> list[tuple[int, datetime]]:
    """(attempt, since): attempts with raw rows received since their last pass, less the
    overlap, and that moment. A pass that runs late, or fails, leaves the mark where it was,
    so nothing received in between is skipped."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.id, coalesce(a.rank_timings_rolled_up_at - %s, 'epoch'::timestamptz)"
            f" FROM telemetry_attempt a WHERE a.id IN (SELECT DISTINCT r.attempt_id"
            f" FROM {RAW_TABLE} r JOIN telemetry_attempt m ON m.id = r.attempt_id"
            " WHERE r.received_at >= coalesce(m.rank_timings_rolled_up_at - %s,"
            " 'epoch'::timestamptz)) ORDER BY a.id",
            [ROLLUP_OVERLAP, ROLLUP_OVERLAP],
        )
        # Raw rows have no foreign key: a deleted attempt's rows linger until their partition
        # goes, and the join leaves them out.
        return [(attempt_id, since) for attempt_id, since in cursor.fetchall()]


def rolled_up_mark(*, attempt_id: int, at: datetime) -> None:
    Attempt.objects.filter(pk=attempt_id).update(rank_timings_rolled_up_at=at)


# --- Partitions ------------------------------------------------------------------------------

# Hourly partitions made this far ahead, so inserts never wait for the beat (the default
# partition catches anything if the beat is down for longer).
PARTITIONS = PartitionedTable(
    table=RAW_TABLE, span=timedelta(seconds=PARTITION_S), ahead=PARTITIONS_AHEAD,
    name_format="%Y%m%d%H",
)  # fmt: skip


def rank_partitions_maintain(*, now: datetime | None = None) -> tuple[list[str], list[str]]:
    """Create the hourly partitions from the current hour to PARTITIONS_AHEAD, drop those
    wholly older than RANK_TIMINGS_RAW_WINDOW_S, and delete expired rows the default
    partition caught. Returns (created, dropped) partition names."""
    window = timedelta(seconds=settings.RANK_TIMINGS_RAW_WINDOW_S)
    return partitions_maintain(PARTITIONS, window=window, now=now)
