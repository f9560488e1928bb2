"""Reads of a run's metric series, downsampled to what a chart or the series API shows. The
run comes from telemetry.selectors.run_get_for_user, so it is one the user may see."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db import connections, router
from django.db.models import Sum

from telemetry.downsample import ROLLUP_WIDTHS, read_plan, split_budget
from telemetry.models import MetricHourSum, MetricPoint, MetricRollup, MetricSeries, Run


def reading() -> Any:
    """The connection page reads go to: the read replica when config.replica routes this
    request's reads there, else the primary (a raw cursor would always take the primary)."""
    return connections[router.db_for_read(MetricPoint)]


def run_metric_names(*, run: Run) -> list[str]:
    names = set(MetricSeries.objects.filter(run=run).values_list("name", flat=True))
    # The loss first: it is what everyone looks at.
    return sorted(names, key=lambda name: (name != "loss", name))


def run_hour_sums(*, run: Run, metric: str) -> list[tuple[int, int, float]]:
    """(hour, finite points, their sum) of the run's `metric` per UTC clock hour (hours since
    the epoch), every attempt's points together, oldest hour first: MetricHourSum's rows, kept
    for the throughput series only (HOUR_SUM_METRICS), one per hour the run reported; no
    point is read. One query."""
    rows = (
        MetricHourSum.objects.filter(series__run=run, series__name=metric)
        .values("hour")
        .annotate(count=Sum("finite_count"), total=Sum("finite_sum"))
        .order_by("hour")
        .values_list("hour", "count", "total")
    )
    return [(hour, int(count), float(total)) for hour, count, total in rows]


@dataclass(frozen=True)
class AttemptSeries:
    attempt: int
    total_points: int
    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    # datetime64[us], NaT where the job sent no time.
    wall_times: npt.NDArray[np.datetime64]


def series_for_run(*, run: Run, name: str, max_points: int) -> list[AttemptSeries]:
    """One metric of a run, per attempt, downsampled together to at most about `max_points`
    points with every bucket's minimum and maximum kept (and the first non-finite value of
    a bucket). A fixed number of queries, whatever the number of attempts or points; each
    reads at most a few rows per point returned, from the rollups
    (telemetry.models.MetricRollup), however long the series."""
    return series_for_run_by_name(run=run, names=[name], max_points=max_points)[name]


def series_for_run_by_name(
    *, run: Run, names: Sequence[str], max_points: int
) -> dict[str, list[AttemptSeries]]:
    """series_for_run of several metrics (each with its own `max_points`) in the queries of
    one: the run page draws eight charts, and their round trips added up."""
    found: dict[str, dict[int, int]] = {name: {} for name in names}
    for pk, name, number in MetricSeries.objects.filter(run=run, name__in=names).values_list(
        "pk", "name", "attempt__number"
    ):
        found[name][pk] = number
    groups = [found[name] for name in names]
    read = _series_from_rollups(groups, max_points) if any(groups) else [[] for _ in names]
    return dict(zip(names, read, strict=True))


def series_for_run_in_steps(
    *, run: Run, name: str, first_step: int, last_step: int, max_points: int
) -> list[AttemptSeries]:
    """One metric of a run, per attempt, in steps [first_step, last_step] only (the charts
    around an incident). A range scan of the points' primary key per series; a window wider
    than `max_points` steps keeps every n-th step, and every non-finite value whatever its
    step. total_points counts the points read."""
    attempt_by_series = dict(
        MetricSeries.objects.filter(run=run, name=name).values_list("pk", "attempt__number")
    )
    if not attempt_by_series or last_step < first_step:
        return []
    stride = max(1, math.ceil((last_step - first_step + 1) * len(attempt_by_series) / max_points))
    with reading().cursor() as cursor:
        cursor.execute(
            _WINDOW, [list(attempt_by_series), first_step, last_step, first_step, stride]
        )
        rows = cursor.fetchall()
    result = []
    for sid in sorted(attempt_by_series, key=attempt_by_series.__getitem__):
        mine = [row for row in rows if row[0] == sid]
        total = next((row[4] for row in mine), 0)
        result.append(
            AttemptSeries(
                attempt_by_series[sid],
                total,
                np.array([row[1] for row in mine], dtype=np.int64),
                np.array([math.nan if row[2] is None else row[2] for row in mine], dtype=float),
                np.array([row[3] for row in mine], dtype="datetime64[us]"),
            )
        )
    return [one for one in result if one.steps.size]


_WINDOW = (
    "SELECT series_id, step, value, (wall_time AT TIME ZONE 'UTC'), count(*) OVER (PARTITION BY "
    "series_id) FROM telemetry_metricpoint WHERE series_id = ANY(%s) AND step BETWEEN %s AND %s "
    # Every n-th step from the window's start, and every non-finite value (NULL reads as NaN).
    "AND ((step - %s) %% %s = 0 OR value IS NULL OR value IN ('NaN', 'Infinity', '-Infinity')) "
    "ORDER BY series_id, step"
)


@dataclass(frozen=True)
class _SeriesStats:
    count: int
    first_step: int
    last_step: int
    has_non_finite: bool
    finite_mean: float


_ROLLUP = MetricRollup._meta.db_table
_POINTS = MetricPoint._meta.db_table
# Microseconds since the epoch, as a float8 holding an integer: exact (date_part's double is
# within 0.2 µs until 2100), and cheap beside numeric extract.
_US = "round(date_part('epoch', {}) * 1000000)"


def _series_stats(series_ids: list[int]) -> dict[int, _SeriesStats]:
    """Size, span and non-finite presence of each series, from its coarsest rollups: one row
    per ROLLUP_WIDTHS[-1] steps."""
    sql = (
        "SELECT series_id, sum(point_count)::bigint, min(first_step), max(last_step), "
        "bool_or(nonfinite_step IS NOT NULL), sum(finite_sum) / nullif(sum(finite_count), 0) "
        f"FROM {_ROLLUP} WHERE width = %s AND series_id = ANY(%s::bigint[]) GROUP BY 1"
    )
    with reading().cursor() as cursor:
        cursor.execute(sql, [ROLLUP_WIDTHS[-1], series_ids])
        return {
            sid: _SeriesStats(count, lo, hi, bad, math.nan if mean is None else mean)
            for sid, count, lo, hi, bad, mean in cursor.fetchall()
        }


# A step travels in the float8 arrays below as two halves, each exact in a double (a step
# may be any bigint up to 2^63 - 1, past the 2^53 a double holds), compared in step order.
_HALF = 2**31


def _halves(step: str, sign: str = "") -> str:
    return f"{sign}({step} / {_HALF})::float8, {sign}mod({step}, {_HALF})::float8"


_NON_FINITE = "x.value IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"
# One query for every series, whichever way each is read (telemetry.downsample.ReadPlan):
# rollup rows or points grouped into output buckets, each bucket's extremes as arrays
# (arrays compare element by element, so min(ARRAY[value, step, t]) is the smallest value
# with its step, ties going to the earliest step: an argmin without a sort) and its first
# non-finite value; or, for a series within its budget, every point (as "lows"). They come
# back as one 2-D array of each kind, the series id last, which psycopg parses and numpy
# reshapes far faster than one row a point. Grouped spans from points are below ROLLUP_WIDTHS[0]
# times the buckets: no overflow.
_READ = (
    "WITH r(series_id, width, first_bucket, n_rows, buckets) AS ("
    "  SELECT * FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[])), "
    "p(series_id, first_step, n_rows, buckets) AS ("
    "  SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])), "
    "g(series_id, lo, hi, bad) AS ("
    "  SELECT m.series_id, "
    f"   min(ARRAY[m.min_value, {_halves('m.min_step')}, {_US.format('m.min_time')}]) "
    "      FILTER (WHERE m.min_step IS NOT NULL), "
    f"   max(ARRAY[m.max_value, {_halves('m.max_step', '-')}, {_US.format('m.max_time')}]) "
    "      FILTER (WHERE m.max_step IS NOT NULL), "
    f"   min(ARRAY[{_halves('m.nonfinite_step')}, m.nonfinite_value, "
    f"             {_US.format('m.nonfinite_time')}]) "
    "      FILTER (WHERE m.nonfinite_step IS NOT NULL) "
    f" FROM r JOIN {_ROLLUP} m ON m.series_id = r.series_id AND m.width = r.width "
    "  GROUP BY m.series_id, (m.bucket - r.first_bucket) * r.buckets / r.n_rows "
    "  UNION ALL "
    "  SELECT x.series_id, "
    f"   min(ARRAY[x.value, {_halves('x.step')}, {_US.format('x.wall_time')}]) "
    f"      FILTER (WHERE NOT {_NON_FINITE}), "
    f"   max(ARRAY[x.value, {_halves('x.step', '-')}, {_US.format('x.wall_time')}]) "
    f"      FILTER (WHERE NOT {_NON_FINITE}), "
    f"   min(ARRAY[{_halves('x.step')}, x.value, {_US.format('x.wall_time')}]) "
    f"      FILTER (WHERE {_NON_FINITE}) "
    # LATERAL with OFFSET 0 (not a plain join): the points are fetched by their key for each
    # short series in p and never otherwise. A plain join let the planner, on small table
    # statistics, scan the whole points table to hash it even when p was empty.
    f" FROM p CROSS JOIN LATERAL (SELECT * FROM {_POINTS} y WHERE y.series_id = p.series_id "
    "  OFFSET 0) x "
    "  GROUP BY x.series_id, (x.step - p.first_step) * p.buckets / p.n_rows "
    "  UNION ALL "
    f"  SELECT x.series_id, ARRAY[x.value, {_halves('x.step')}, {_US.format('x.wall_time')}], "
    "    NULL::float8[], NULL::float8[] "
    f" FROM {_POINTS} x WHERE x.series_id = ANY(%s::bigint[])) "
    "SELECT array_agg(lo || series_id::float8) FILTER (WHERE lo IS NOT NULL), "
    "  array_agg(hi || series_id::float8) FILTER (WHERE hi IS NOT NULL), "
    "  array_agg(bad || series_id::float8) FILTER (WHERE bad IS NOT NULL) "
    "FROM g"
)


def _series_from_rollups(
    groups: list[dict[int, int]], max_points: int
) -> list[list[AttemptSeries]]:
    """For each group of series (series id -> attempt number; one metric's), plan each
    series (telemetry.downsample.read_plan) within the group's `max_points`, then read what
    every series keeps in one query: three in all, whatever the number of metrics, attempts
    or points."""
    attempt_by_series = {sid: number for group in groups for sid, number in group.items()}
    stats = _series_stats(list(attempt_by_series))
    ordered = [sorted((s for s in group if s in stats), key=group.__getitem__) for group in groups]
    series_ids = [sid for group in ordered for sid in group]
    budgets = [
        budget
        for group in ordered
        for budget in split_budget([stats[sid].count for sid in group], max_points)
    ]
    plans = {}
    rollups: list[list[int]] = [[], [], [], [], []]
    points: list[list[int]] = [[], [], [], []]
    whole: list[int] = []
    for sid, budget in zip(series_ids, budgets, strict=True):
        one = stats[sid]
        plan = plans[sid] = read_plan(
            count=one.count,
            first_step=one.first_step,
            last_step=one.last_step,
            budget=budget,
            has_non_finite=one.has_non_finite,
        )
        if one.count <= budget:
            whole.append(sid)
            continue
        rows = plan.rows(one.first_step, one.last_step)
        if plan.width is not None:
            row = [sid, plan.width, one.first_step // plan.width, rows, plan.buckets]
            for column, value in zip(rollups, row, strict=True):
                column.append(value)
        else:
            for column, value in zip(
                points, [sid, one.first_step, rows, plan.buckets], strict=True
            ):
                column.append(value)
    with reading().cursor() as cursor:
        cursor.execute(_READ, [*rollups, *points, whole])
        owners, steps, values, micros = _kept(*cursor.fetchone())
    # NaN microseconds (no time) become NaT.
    times = np.where(np.isnan(micros), np.iinfo(np.int64).min, micros).astype(np.int64)
    times = times.view("datetime64[us]")
    starts = np.searchsorted(owners, series_ids, side="left")
    ends = np.searchsorted(owners, series_ids, side="right")
    result = {}
    for sid, budget, start, end in zip(series_ids, budgets, starts, ends, strict=True):
        mine = (steps[start:end], values[start:end], times[start:end])
        if plans[sid].trim:
            mine = _trim(*mine, budget, stats[sid].finite_mean)
        result[sid] = AttemptSeries(attempt_by_series[sid], stats[sid].count, *mine)
    return [[result[sid] for sid in group] for group in ordered]


def _kept(
    lows: list[Any] | None, highs: list[Any] | None, bad: list[Any] | None
) -> tuple[npt.NDArray[np.int64], ...]:
    """Series ids, steps, values and times (microseconds, NaN for none) of the kept points,
    sorted by series and step, each point once (a bucket whose min and max are one point
    names it twice), from _READ's arrays: lows and highs [value, step halves, time, series]
    (the highs' step negated), bad [step halves, value, time, series]."""
    parts = []
    for rows, value, high, low, sign in (
        (lows, 0, 1, 2, 1),
        (highs, 0, 1, 2, -1),
        (bad, 2, 0, 1, 1),
    ):
        if rows:
            # A NULL time comes back as None, which a float array holds as NaN.
            table = np.array(rows, dtype=np.float64)
            whole = table[:, high].astype(np.int64) * _HALF + table[:, low].astype(np.int64)
            parts.append((table[:, 4].astype(np.int64), sign * whole, table[:, value], table[:, 3]))
    if not parts:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    owners, steps, values, micros = (np.concatenate(column) for column in zip(*parts, strict=True))
    order = np.lexsort((steps, owners))
    owners, steps = owners[order], steps[order]
    fresh = np.ones(order.size, dtype=bool)
    fresh[1:] = (owners[1:] != owners[:-1]) | (steps[1:] != steps[:-1])
    order = order[fresh]
    return owners[fresh], steps[fresh], values[order], micros[order]


def _trim(
    steps: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
    times: npt.NDArray[np.datetime64],
    budget: int,
    mean: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.datetime64]]:
    """A budget too small for one bucket's min, max and non-finite value: the first
    non-finite value (the signal), then the extreme farthest from the series' mean (the
    spike), as telemetry.downsample does with the median when it has every point."""

    def rank(index: int) -> tuple[int, float, int]:
        value = float(values[index])
        if not math.isfinite(value):
            return (0, 0.0, int(steps[index]))
        return (1, -abs(value - mean) if math.isfinite(mean) else 0.0, int(steps[index]))

    keep = np.array(sorted(sorted(range(steps.size), key=rank)[:budget]), dtype=np.intp)
    return steps[keep], values[keep], times[keep]
