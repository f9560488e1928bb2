"""Rollups (telemetry.models.MetricRollup): PostgreSQL keeps them on every insert, a
redelivered batch changes nothing, and a chart read from them is exactly the min/max (and
first non-finite) bucketing of the raw points, touching a bounded number of rows whatever
the series length."""

from __future__ import annotations

import importlib
import io
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection

from telemetry import services as telemetry_services
from telemetry.downsample import ROLLUP_WIDTHS, ReadPlan, read_plan, split_budget
from telemetry.models import MetricRollup, Run
from telemetry.selectors import series as selectors

START = datetime(2026, 11, 1, tzinfo=UTC)
Point = tuple[str, int, float, datetime | None]


# --- A reference: the raw bucketing, in Python --------------------------------------------


def _bucket_of(plan: ReadPlan, first: int, last: int, step: int) -> int:
    if plan.width is None:
        return (step - first) * plan.buckets // (last - first + 1)
    first_bucket = first // plan.width
    return (step // plan.width - first_bucket) * plan.buckets // plan.rows(first, last)


def reference(stored: dict[int, list[tuple[int, float, datetime | None]]], max_points: int):
    """What series_for_run must return, from the stored points of each attempt (attempt
    number: [(step, value, time)]): the same plans, then each bucket's smallest and largest
    finite values (ties: earliest step) and its first non-finite one."""
    numbers = sorted(n for n, points in stored.items() if points)
    counts = [len(stored[n]) for n in numbers]
    budgets = split_budget(counts, max_points)
    expected = []
    for number, budget in zip(numbers, budgets, strict=True):
        points = sorted(stored[number])
        steps = [p[0] for p in points]
        first, last = steps[0], steps[-1]
        finite = [p for p in points if math.isfinite(p[1])]
        plan = read_plan(
            count=len(points),
            first_step=first,
            last_step=last,
            budget=budget,
            has_non_finite=len(finite) < len(points),
        )
        groups: dict[int, list[tuple[int, float, datetime | None]]] = {}
        for point in points:
            groups.setdefault(_bucket_of(plan, first, last, point[0]), []).append(point)
        kept: dict[int, tuple[float, datetime | None]] = {}
        for group in groups.values():
            good = [p for p in group if math.isfinite(p[1])]
            bad = [p for p in group if not math.isfinite(p[1])]
            if good:
                low = min(good, key=lambda p: (p[1], p[0]))
                high = max(good, key=lambda p: (p[1], -p[0]))
                kept[low[0]] = (low[1], low[2])
                kept[high[0]] = (high[1], high[2])
            if bad:
                kept[bad[0][0]] = (bad[0][1], bad[0][2])
        if plan.trim:
            mean = sum(p[1] for p in finite) / len(finite) if finite else math.nan

            def rank(item: Any, mean: float = mean) -> tuple[int, float, int]:
                step, (value, _) = item
                if not math.isfinite(value):
                    return (0, 0.0, step)
                return (1, -abs(value - mean) if math.isfinite(mean) else 0.0, step)

            kept = dict(sorted(kept.items(), key=rank)[:budget])
        expected.append((number, len(points), plan, dict(sorted(kept.items()))))
    return expected


def as_kept(series: selectors.AttemptSeries) -> dict[int, tuple[float, datetime | None]]:
    kept = {}
    for step, value, moment in zip(
        series.steps.tolist(), series.values.tolist(), series.wall_times, strict=True
    ):
        when = None if np.isnat(moment) else moment.astype(datetime).replace(tzinfo=UTC)
        kept[step] = (value, when)
    return kept


def same_points(got: dict[int, Any], want: dict[int, Any]) -> bool:
    if got.keys() != want.keys():
        return False
    for step, (value, moment) in want.items():
        other, other_moment = got[step]
        if not (value == other or (math.isnan(value) and math.isnan(other))):
            return False
        if moment != other_moment:
            return False
    return True


# --- Random data, written the way jobs write it ---------------------------------------------


def random_attempt(rng: np.random.Generator, length: int, first_step: int) -> list[Point]:
    """`length` steps from `first_step` with gaps, noise, spikes, NaN and ±Inf, times with
    microseconds (some missing)."""
    steps = first_step + np.sort(rng.choice(length * 5 // 4, size=length, replace=False))
    values = np.round(rng.normal(2.0, 0.5, length), 2)  # rounded: ties between values happen
    for kind in (math.nan, math.inf, -math.inf, 50.0, -50.0):
        for index in rng.choice(length, size=max(1, length // 3000), replace=False):
            values[index] = kind
    points: list[Point] = []
    for step, value in zip(steps.tolist(), values.tolist(), strict=True):
        moment = START + timedelta(seconds=step, microseconds=int(rng.integers(0, 1_000_000)))
        points.append(("loss", step, value, None if rng.random() < 0.05 else moment))
    return points


def insert_shuffled(
    run: Run, attempt: Any, points: list[Point], rng: np.random.Generator
) -> dict[int, tuple[float, datetime | None]]:
    """Insert in batches of random size and random order, some redelivered (the same batch
    again), some carrying a later duplicate of a stored step with another value (first write
    wins). Returns what must be stored: step -> (value, time)."""
    order = rng.permutation(len(points))
    stored: dict[int, tuple[float, datetime | None]] = {}
    position = 0
    while position < len(order):
        size = int(rng.integers(1, 3000))
        batch = [points[i] for i in order[position : position + size]]
        position += size
        if stored and rng.random() < 0.5:
            step = int(rng.choice(list(stored)))
            batch.append(("loss", step, 1e9, None))  # a late duplicate: must be ignored
        batch.append(batch[0])  # a duplicate inside the batch
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=batch)
        for _, step, value, moment in batch:
            stored.setdefault(step, (value, moment))
        if rng.random() < 0.3:
            inserted = telemetry_services.metric_points_insert(
                run=run, attempt=attempt, points=batch
            )
            assert inserted == 0
    return stored


def rollup_rows(run: Run) -> list[tuple[Any, ...]]:
    return list(
        MetricRollup.objects.filter(series__run=run)
        .order_by("series", "width", "bucket")
        .values_list(
            "series", "width", "bucket", "point_count", "first_step", "last_step",
            "finite_count", "min_value", "min_step", "min_time", "max_value", "max_step",
            "max_time", "nonfinite_step", "nonfinite_time",
        )
    )  # fmt: skip


@pytest.fixture
def random_run(project: Any) -> Iterator[tuple[Run, dict[int, list[Any]]]]:
    """Three attempts: a long one, a short one that replays some steps, a medium one."""
    rng = np.random.default_rng(20261122)
    run = telemetry_services.run_upsert(project=project, name="random")
    stored: dict[int, list[Any]] = {}
    for number, (length, first) in enumerate(((60_000, 0), (900, 50_000), (7_000, 60_000)), 1):
        attempt = telemetry_services.attempt_ensure(run=run, number=number)
        kept = insert_shuffled(run, attempt, random_attempt(rng, length, first), rng)
        stored[number] = [(step, value, moment) for step, (value, moment) in kept.items()]
    yield run, stored


# --- Tests ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_incremental_rollups_equal_a_rebuild_from_the_points(random_run):
    # given rollups kept by the trigger through shuffled, duplicated and redelivered batches
    run, _ = random_run
    kept = rollup_rows(run)
    assert {row[1] for row in kept} == set(ROLLUP_WIDTHS)

    # when they are recomputed from the points
    call_command("rollups_rebuild", "--run", str(run.pk), stdout=io.StringIO())

    # then nothing changed: nothing counted twice, no extreme lost, every width complete
    assert rollup_rows(run) == kept
    for width in ROLLUP_WIDTHS:
        total = sum(row[3] for row in kept if row[1] == width)
        assert total == 60_000 + 900 + 7_000


@pytest.mark.django_db
def test_rollup_read_equals_the_raw_bucketing(random_run):
    # given three attempts of random points with spikes, NaN and ±Inf
    run, stored = random_run
    kinds = set()
    for max_points in (100_000, 20_000, 4000, 1500, 300, 12, 10, 5):
        # when the series is read
        series = selectors.series_for_run(run=run, name="loss", max_points=max_points)

        # then each attempt holds exactly the raw bucketing's points, with their times
        expected = reference(stored, max_points)
        assert [one.attempt for one in series] == [number for number, *_ in expected]
        for one, (_, count, plan, kept) in zip(series, expected, strict=True):
            assert one.total_points == count
            assert same_points(as_kept(one), kept), (max_points, one.attempt, plan)
            assert np.all(np.diff(one.steps) > 0)
            kinds.add(_kind(plan, count))
        assert sum(one.steps.size for one in series) <= max(max_points, len(series))
    # and every way of reading was exercised
    assert kinds == {"whole", "points", "rollups", "trimmed"}


def _kind(plan: ReadPlan, count: int) -> str:
    if plan.trim:
        return "trimmed"
    if plan.width is not None:
        return "rollups"
    return "points" if plan.buckets < count else "whole"


@pytest.mark.django_db
def test_spikes_nan_and_infinities_survive_a_million_to_a_thousand(project):
    # given 300,000 flat steps with one spike, one dip, one NaN, one +Inf and one -Inf
    run = telemetry_services.run_upsert(project=project, name="flat")
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    special = {123_457: 40.0, 77_777: -5.0, 150_001: math.nan, 200_003: math.inf, 9: -math.inf}
    for first in range(0, 300_000, 50_000):
        telemetry_services.metric_points_insert(
            run=run,
            attempt=attempt,
            points=[
                ("loss", s, special.get(s, 2.0), START + timedelta(seconds=s))
                for s in range(first, first + 50_000)
            ],
        )

    # when it is read at 1,000 points
    (one,) = selectors.series_for_run(run=run, name="loss", max_points=1000)

    # then every special value is there, at its step, with its time
    kept = as_kept(one)
    for step, value in special.items():
        got = kept[step][0]
        assert got == value or (math.isnan(value) and math.isnan(got)), step
        assert kept[step][1] == START + timedelta(seconds=step)
    assert one.total_points == 300_000
    assert one.steps.size <= 1000


@pytest.mark.django_db
def test_a_read_costs_the_same_queries_and_a_bounded_number_of_rows(
    project, rows_read, query_budget
):
    costs = []
    for length in (30_000, 400_000):
        # given one long series (written the way COPY loaders write: in big statements)
        run = telemetry_services.run_upsert(project=project, name=f"long-{length}")
        attempt = telemetry_services.attempt_ensure(run=run, number=1)
        for first in range(0, length, 100_000):
            telemetry_services.metric_points_insert(
                run=run,
                attempt=attempt,
                points=[
                    ("loss", s, math.sin(s / 500), None)
                    for s in range(first, min(first + 100_000, length))
                ],
            )
        points_before = rows_read("telemetry_metricpoint")
        rollups_before = rows_read("telemetry_metricrollup")

        # when it is read at 2,000 points
        cost, read = query_budget.run(
            lambda run=run: selectors.series_for_run(run=run, name="loss", max_points=2000)
        )
        costs.append(cost)

        # then no point read, and at most ~4 rollup rows per bucket
        (one,) = read
        assert rows_read("telemetry_metricpoint") == points_before
        assert 1000 <= rows_read("telemetry_metricrollup") - rollups_before <= 4 * 1000 + 100
        assert one.total_points == length
        assert 1000 <= one.steps.size <= 2000
    # and the same queries at 30,000 and 400,000 points (constant in the points)
    query_budget.constant(small=costs[0], big=costs[1], guards="the series' points")


@pytest.mark.django_db
def test_many_attempts_cost_a_fixed_number_of_queries(project, query_budget):
    costs = []
    for attempts in (4, 40):
        run = telemetry_services.run_upsert(project=project, name=f"many-{attempts}")
        for number in range(1, attempts + 1):
            attempt = telemetry_services.attempt_ensure(run=run, number=number)
            telemetry_services.metric_points_insert(
                run=run,
                attempt=attempt,
                points=[
                    ("loss", s, float(s % 11), None)
                    for s in range(number * 100, number * 100 + 500)
                ],
            )

        cost, series = query_budget.run(
            lambda run=run: selectors.series_for_run(run=run, name="loss", max_points=1500)
        )
        costs.append(cost)

        assert [one.attempt for one in series] == list(range(1, attempts + 1))
        assert sum(one.steps.size for one in series) <= 1500
    # the same queries for 4 attempts and 40 (constant in the attempts)
    query_budget.constant(small=costs[0], big=costs[1], guards="the attempts")


@pytest.mark.django_db
def test_the_migration_and_the_reader_agree_on_the_widths():
    migration = importlib.import_module("telemetry.migrations.0005_metric_rollups")
    assert migration.WIDTHS == ROLLUP_WIDTHS
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE t.tgname = 'telemetry_metricpoint_added' "
            "AND p.prosrc LIKE '%%INSERT INTO telemetry_metricrollup%%'"
        )
        assert cursor.fetchone()[0] == 1


# --- The read plan (pure) -------------------------------------------------------------------


def test_a_series_within_its_budget_is_read_whole():
    plan = read_plan(count=900, first_step=0, last_step=5000, budget=1000, has_non_finite=True)
    assert plan == ReadPlan(None, 5001)


def test_the_coarsest_width_with_enough_buckets_is_chosen():
    plan = read_plan(
        count=1_000_000, first_step=0, last_step=999_999, budget=4000, has_non_finite=False
    )
    assert plan.width == 256 and plan.buckets == 2000
    assert 2000 <= plan.rows(0, 999_999) <= 4 * 2000


def test_a_non_finite_value_takes_a_third_of_each_bucket():
    plan = read_plan(
        count=100_000, first_step=0, last_step=99_999, budget=4000, has_non_finite=True
    )
    assert plan.buckets == 1333 and plan.width == 64


def test_a_series_too_short_for_the_finest_width_is_bucketed_from_its_points():
    plan = read_plan(
        count=20_000, first_step=0, last_step=19_999, budget=4000, has_non_finite=False
    )
    assert plan == ReadPlan(None, 2000)


@pytest.mark.parametrize(
    "budget,has_non_finite,trim", [(1, False, True), (2, True, True), (2, False, False)]
)
def test_a_budget_below_one_bucket_is_trimmed(budget, has_non_finite, trim):
    plan = read_plan(
        count=10_000, first_step=0, last_step=9_999, budget=budget, has_non_finite=has_non_finite
    )
    assert plan.buckets == 1 and plan.trim is trim
    assert plan.width == ROLLUP_WIDTHS[-1]


@pytest.mark.django_db
def test_steps_past_two_to_the_53_keep_their_exact_value(project):
    # given 40,000 steps from 2^62 + 1 (a double cannot hold them), a spike on an odd one
    run = telemetry_services.run_upsert(project=project, name="huge-steps")
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    first = 2**62 + 1
    spike = first + 12_345
    telemetry_services.metric_points_insert(
        run=run,
        attempt=attempt,
        points=[
            ("loss", s, 9.0 if s == spike else 1.0 + (s % 3) / 10, None)
            for s in range(first, first + 40_000)
        ]
        + [("loss", 2**63 - 1, math.nan, None)],
    )

    # when it is read from the rollups
    (one,) = selectors.series_for_run(run=run, name="loss", max_points=300)

    # then the kept steps are the stored ones, exactly
    kept = as_kept(one)
    assert kept[spike][0] == 9.0
    assert math.isnan(kept[2**63 - 1][0])
    assert kept.keys() <= set(range(first, first + 40_000)) | {2**63 - 1}
