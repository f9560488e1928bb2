"""Reads of per-rank section timings: the heat map (rank x time, downsampled here), the
per-step spread, the score windows the straggler ledger is computed from, and which ranks
stopped reporting first when a run hangs."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Max, Min, Q, Sum

from telemetry import rank_heat
from telemetry.models import (
    Attempt,
    RankBucket,
    RankPlacement,
    RankStepBlock,
    Run,
)
from telemetry.services.rank_timings import (
    MERGE_BLOCKS,
    MERGE_STEPS,
    RAW_TABLE,
    STEP_BLOCKS,
    bucket_levels,
    bucket_start,
)


def rank_sections(*, run: Run) -> list[str]:
    """Sections the run's ranks reported, `step` first (the one the heat map opens on)."""
    # From the widest blocks of steps: a row per 10,000 steps, not one per step. (order_by()
    # drops Meta.ordering, whose columns would otherwise make DISTINCT keep every row.)
    names = set(
        RankStepBlock.objects.filter(attempt__run=run, steps=STEP_BLOCKS[-1])
        .order_by()
        .values_list("section", flat=True)
        .distinct()
    )
    return sorted(names, key=lambda name: (name != "step", name))


def rank_placements(*, attempt_id: int) -> dict[int, tuple[str, str]]:
    """rank -> (host, device) for one attempt."""
    rows = RankPlacement.objects.filter(attempt_id=attempt_id).values_list("rank", "host", "device")
    return {rank: (host, device) for rank, host, device in rows}


def rank_windows(
    *, attempt_id: int, section: str, count: int
) -> list[tuple[datetime, dict[int, float]]]:
    """The attempt's last `count` buckets of one section, oldest first: (bucket start,
    rank -> median seconds). These are the straggler scores' report windows."""
    rows = list(
        RankBucket.objects.filter(
            attempt_id=attempt_id, section=section, bucket_s=settings.RANK_BUCKET_S
        )
        .order_by("-bucket_start")
        .values_list("bucket_start", "ranks", "medians_s")[:count]
    )
    return [(start, dict(zip(ranks, meds, strict=True))) for start, ranks, meds in reversed(rows)]


def rank_timing_sections_for_attempt(*, attempt_id: int) -> list[str]:
    return list(
        RankBucket.objects.filter(attempt_id=attempt_id)
        .values_list("section", flat=True)
        .distinct()
        .order_by("section")
    )


def ranks_last_reported(*, attempt_id: int) -> dict[int, int]:
    """rank -> the last step it sent timings for, among the raw values still kept: on a hang,
    the ranks with the lowest last step stopped first."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT u.r, max(last_step) FROM {RAW_TABLE}, unnest(ranks) AS u(r)"
            " WHERE attempt_id = %s GROUP BY u.r",
            [attempt_id],
        )
        return dict(cursor.fetchall())


# --- The heat map ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heatmap:
    """Rows are groups of consecutive ranks, columns time buckets. Each cell holds the slowest
    rank of its group (max of the means), so one slow rank among 64 still shows as a hot cell,
    as min/max downsampling keeps a spike; `ranks` and `hosts` name that rank."""

    times: list[datetime]
    row_labels: list[str]
    values_s: list[list[float | None]]
    ranks: list[list[int | None]]
    hosts: list[list[str]]
    ranks_per_row: int
    bucket_s: int  # the stored level drawn: RANK_BUCKET_S, or a coarser one for long windows


def rank_heatmap(
    *,
    run: Run,
    section: str,
    since: datetime | None = None,
    until: datetime | None = None,
    max_columns: int = rank_heat.MAX_COLUMNS,
) -> Heatmap | None:
    """The run's heat map over [since, until) (the whole run by default), drawn from the
    finest stored level of buckets that fits `max_columns`: reads one small row per bucket
    (the groups' slowest ranks), never the per-rank arrays."""
    window = Q(attempt__run=run, section=section)
    if since is not None:
        window &= Q(bucket_start__gte=since)
    if until is not None:
        window &= Q(bucket_start__lt=until)
    fine = settings.RANK_BUCKET_S
    span = RankBucket.objects.filter(window, bucket_s=fine).aggregate(
        first=Min("bucket_start"), last=Max("bucket_start")
    )
    if span["first"] is None:
        return None
    seconds = (span["last"] - span["first"]).total_seconds() + fine
    width = rank_heat.level_for_span(seconds, bucket_levels(), max_columns)
    drawn = Q(attempt__run=run, section=section, bucket_s=width)
    if since is not None:
        # From the bucket holding `since`: at 6 h, it began before it.
        drawn &= Q(bucket_start__gte=bucket_start(since, width))
    if until is not None:
        drawn &= Q(bucket_start__lt=until)
    rows = list(
        RankBucket.objects.filter(drawn)
        .order_by("bucket_start", "attempt_id")
        .values_list(
            "attempt_id", "bucket_start", "group_ranks", "group_slowest_s", "group_slowest_rank"
        )
    )
    if not rows:
        return None
    per_row = max(group for _, _, group, _, _ in rows)
    starts = sorted({start for _, start, _, _, _ in rows})
    # Columns: buckets (attempts that share one merged), then runs of `per_col` buckets when
    # there are more than max_columns (the coarsest level past 75 days).
    per_col = math.ceil(len(starts) / max_columns)
    column_of = {start: index // per_col for index, start in enumerate(starts)}
    times = starts[::per_col]
    n_rows = max(math.ceil(len(values) * group / per_row) for _, _, group, values, _ in rows)
    peak = np.full((n_rows, len(times)), -np.inf)
    slowest = np.full((n_rows, len(times)), -1, dtype=np.int64)
    attempt_of = np.zeros((n_rows, len(times)), dtype=np.int64)
    for attempt_id, start, group, values, ranks in rows:
        maxes, at = rank_heat.regroup(values, ranks, per_row // group)
        maxes = np.where(np.isnan(maxes), -np.inf, maxes)
        col = column_of[start]
        here = np.arange(len(maxes))
        better = maxes > peak[here, col]
        peak[here[better], col] = maxes[better]
        slowest[here[better], col] = at[better]
        attempt_of[here[better], col] = attempt_id
    found = slowest >= 0
    hosts_of = _hosts_of(zip(attempt_of[found].tolist(), slowest[found].tolist(), strict=True))
    values_out = np.where(found, peak.round(6), None).tolist()
    names = np.where(found, slowest, None).tolist()
    attempts = attempt_of.tolist()
    hosts = [
        [hosts_of.get((attempts[row][col], rank), "") for col, rank in enumerate(cells)]
        for row, cells in enumerate(names)
    ]
    n_ranks = int(slowest.max()) + 1
    labels = [
        f"{row * per_row}"
        if per_row == 1
        else f"{row * per_row}-{max(row * per_row, min(n_ranks, (row + 1) * per_row) - 1)}"
        for row in range(n_rows)
    ]
    return Heatmap(times, labels, values_out, names, hosts, per_row, width)


def _hosts_of(named: Iterable[tuple[int, int]]) -> dict[tuple[int, int], str]:
    """Host of each (attempt, rank) a chart names, in one query: only those ranks, not every
    placement of every attempt (16,384 rows each)."""
    pairs = sorted(set(named))
    if not pairs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.attempt_id, p.rank, p.host FROM telemetry_rankplacement p"
            " JOIN unnest(%s::bigint[], %s::integer[]) AS u(a, r)"
            " ON p.attempt_id = u.a AND p.rank = u.r",
            [[a for a, _ in pairs], [r for _, r in pairs]],
        )
        return {(attempt, rank): host for attempt, rank, host in cursor.fetchall()}


# --- The per-step spread ---------------------------------------------------------------------


@dataclass(frozen=True)
class SpreadPoint:
    attempt: int
    step: int
    min_s: float
    median_s: float
    p90_s: float
    p99_s: float
    max_s: float
    slowest_rank: int | None
    slowest_host: str


def rank_spread(*, run: Run, section: str, max_points: int = 2000) -> list[SpreadPoint]:
    """One point per step, or per run of steps when there are more than `max_points`
    (per attempt): the median averaged, the tails and the slowest rank kept at their worst."""
    attempts = dict(Attempt.objects.filter(run=run).values_list("pk", "number"))
    if not attempts:
        return []
    finest = STEP_BLOCKS[0]
    span = (
        RankStepBlock.objects.filter(
            attempt_id__in=attempts, section=section, steps=finest
        ).aggregate(steps=Sum("step_count"))["steps"]
        or 1
    )
    width = max(1, math.ceil(span / max_points))
    # Past a block's width, read the blocks (a 54-day run: 7,776 rows, not 777,600).
    level = max((block for block in STEP_BLOCKS if block <= width), default=None)
    if level is None:
        source, step, columns, level_filter = "telemetry_rankstepstats", "step", MERGE_STEPS, ""
    else:
        width = math.ceil(width / level) * level
        source, step, columns = "telemetry_rankstepblock", "first_step", MERGE_BLOCKS
        level_filter = f" AND steps = {level}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT attempt_id, min({step}), {columns} FROM {source}"
            f" WHERE attempt_id = ANY(%s) AND section = %s{level_filter}"
            f" GROUP BY attempt_id, {step} / %s ORDER BY attempt_id, 2",
            [list(attempts), section, width],
        )
        rows = cursor.fetchall()
    # Only the points' slowest ranks, in one query: not every placement of every attempt
    # (16,384 rows each, one query each; 467 attempts at Llama 3's scale).
    hosts_of = _hosts_of((row[0], row[7]) for row in rows if row[7] is not None)
    return [
        SpreadPoint(
            attempts[attempt_id],
            step,
            low,
            float(median),
            p90,
            p99,
            high,
            rank,
            hosts_of.get((attempt_id, rank), "") if rank is not None else "",
        )
        for attempt_id, step, low, median, p90, p99, high, rank in rows
    ]


# --- A host's ranks --------------------------------------------------------------------------

HOST_SCORE_BUCKETS = 300


def host_rank_scores(*, host_name: str, runs: list[int], section: str = "step") -> list[dict]:
    """The relative score over time of every rank that ran on the host, in the given runs:
    rows of {time, run, attempt, rank, score}, the latest HOST_SCORE_BUCKETS buckets per
    attempt. The score needs the bucket's fastest rank, so each bucket is read whole."""
    placed: dict[int, list[int]] = {}
    for attempt_id, rank in RankPlacement.objects.filter(
        host=host_name, attempt__run_id__in=runs
    ).values_list("attempt_id", "rank"):
        placed.setdefault(attempt_id, []).append(rank)
    if not placed:
        return []
    labels = {
        pk: (run_name, number)
        for pk, run_name, number in Attempt.objects.filter(pk__in=placed).values_list(
            "pk", "run__name", "number"
        )
    }
    rows = []
    for attempt_id, ranks in placed.items():
        buckets = RankBucket.objects.filter(
            attempt_id=attempt_id, section=section, bucket_s=settings.RANK_BUCKET_S
        ).order_by("-bucket_start")[:HOST_SCORE_BUCKETS]
        for start, bucket_ranks, means in buckets.values_list("bucket_start", "ranks", "medians_s"):
            values = np.asarray(means)
            positive = values[values > 0]
            if not positive.size:
                continue
            best = positive.min()
            index = {rank: i for i, rank in enumerate(bucket_ranks)}
            for rank in ranks:
                i = index.get(rank)
                if i is not None and values[i] > 0:
                    run_name, number = labels[attempt_id]
                    rows.append(
                        {
                            "time": start,
                            "run": run_name,
                            "attempt": number,
                            "rank": rank,
                            "score": float(best / values[i]),
                        }
                    )
    rows.sort(key=lambda row: (row["run"], row["attempt"], row["rank"], row["time"]))
    return rows


def rank_buckets_between(
    *, attempt_id: int, since: datetime, until: datetime
) -> list[tuple[float, str, dict[int, float]]]:
    """(bucket start as epoch seconds, section, rank -> median seconds) of the attempt's
    RANK_BUCKET_S buckets that lie mostly inside [since, until] (at least half of each), or,
    when the stretch is shorter than that, the buckets it overlaps: a slowdown window's (and
    its baseline's) per-rank pace. One query (the primary key's range)."""
    width = settings.RANK_BUCKET_S
    rows = list(
        RankBucket.objects.filter(
            attempt_id=attempt_id,
            bucket_s=width,
            bucket_start__gte=bucket_start(since, width),
            bucket_start__lte=until,
        )
        .order_by("section", "bucket_start")
        .values_list("bucket_start", "section", "ranks", "medians_s")
    )
    low, high = since.timestamp() - width / 2, until.timestamp() - width / 2
    inside = [row for row in rows if low <= row[0].timestamp() <= high]
    return [
        (start.timestamp(), section, dict(zip(ranks, medians, strict=True)))
        for start, section, ranks, medians in (inside or rows)
    ]
