"""Reads of per-rank section timings: the heat map (rank x time, downsampled here), the
per-step spread, the score windows the straggler ledger is computed from, and which ranks
stopped reporting first when a run hangs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.conf import settings
from django.db import connection

from telemetry.models import Attempt, RankBucket, RankPlacement, RankStepStats, Run
from telemetry.rank_timings import RAW_TABLE


def rank_sections(*, run: Run) -> list[str]:
    """Sections the run's ranks reported, `step` first (the one the heat map opens on)."""
    names = set(
        RankStepStats.objects.filter(attempt__run=run).values_list("section", flat=True).distinct()
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


def rank_heatmap(
    *, run: Run, section: str, max_rows: int = 256, max_cols: int = 300
) -> Heatmap | None:
    rows = list(
        RankBucket.objects.filter(
            attempt__run=run, section=section, bucket_s=settings.RANK_BUCKET_S
        )
        .order_by("bucket_start", "attempt_id")
        .values_list("attempt_id", "bucket_start", "ranks", "means_s", "counts")
    )
    if not rows:
        return None
    n_ranks = max(max(ranks) for _, _, ranks, _, _ in rows) + 1
    # Columns: buckets, merged in runs of `per_col` when there are too many (count-weighted).
    per_col = math.ceil(len(rows) / max_cols)
    n_cols = math.ceil(len(rows) / per_col)
    sums = np.zeros((n_ranks, n_cols))
    counts = np.zeros((n_ranks, n_cols))
    col_attempt: list[int] = []
    times: list[datetime] = []
    for index, (attempt_id, start, ranks, means, weights) in enumerate(rows):
        col = index // per_col
        if col == len(times):
            times.append(start)
            col_attempt.append(attempt_id)
        r = np.asarray(ranks)
        w = np.asarray(weights, dtype=float)
        sums[r, col] += np.asarray(means) * w
        counts[r, col] += w
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = sums / counts  # NaN where a rank sent nothing
    per_row = math.ceil(n_ranks / max_rows)
    n_rows = math.ceil(n_ranks / per_row)
    padded = np.full((n_rows * per_row, n_cols), np.nan)
    padded[:n_ranks] = matrix
    grouped = padded.reshape(n_rows, per_row, n_cols)
    filled = np.where(np.isnan(grouped), -np.inf, grouped)
    slowest = filled.argmax(axis=1)  # (n_rows, n_cols): offset of the slowest rank in a row
    peak = np.take_along_axis(filled, slowest[:, None, :], axis=1)[:, 0, :]
    placements = {
        attempt_id: rank_placements(attempt_id=attempt_id) for attempt_id in set(col_attempt)
    }
    values: list[list[float | None]] = []
    names: list[list[int | None]] = []
    hosts: list[list[str]] = []
    for row in range(n_rows):
        row_values, row_ranks, row_hosts = [], [], []
        for col in range(n_cols):
            value = peak[row, col]
            if not np.isfinite(value):
                row_values.append(None)
                row_ranks.append(None)
                row_hosts.append("")
                continue
            rank = int(row * per_row + slowest[row, col])
            row_values.append(round(float(value), 6))
            row_ranks.append(rank)
            row_hosts.append(placements[col_attempt[col]].get(rank, ("", ""))[0])
        values.append(row_values)
        names.append(row_ranks)
        hosts.append(row_hosts)
    labels = [
        f"{row * per_row}"
        if per_row == 1
        else f"{row * per_row}-{min(n_ranks, (row + 1) * per_row) - 1}"
        for row in range(n_rows)
    ]
    return Heatmap(times, labels, values, names, hosts, per_row)


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
    span = RankStepStats.objects.filter(attempt_id__in=attempts, section=section).count() or 1
    width = max(1, math.ceil(span / max_points))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attempt_id, min(step), min(min_s), avg(median_s), max(p90_s), max(p99_s),"
            " max(max_s), (array_agg(slowest_ranks[1] ORDER BY max_s DESC))[1]"
            " FROM telemetry_rankstepstats WHERE attempt_id = ANY(%s) AND section = %s"
            " GROUP BY attempt_id, step / %s ORDER BY attempt_id, 2",
            [list(attempts), section, width],
        )
        rows = cursor.fetchall()
    placements = {pk: rank_placements(attempt_id=pk) for pk in attempts}
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
            placements[attempt_id].get(rank, ("", ""))[0] if rank is not None else "",
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
