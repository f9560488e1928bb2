"""The run page's throughput by hour of day (UTC), the Llama 3 paper's diurnal swing: exact
from the hour sums the points' trigger keeps (telemetry.models.MetricHourSum), drawn once the
run's throughput data spans two days, and the same numbers as the raw points give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.core.cache import cache

from dashboard import diurnal
from diagnosis.selectors import slowdowns as slowdown_selectors
from telemetry import services as telemetry_services
from telemetry.models import MetricHourSum, MetricPoint, Run
from telemetry.models.metrics import HOUR_SUM_METRICS
from telemetry.services.metrics import metric_hour_sums_rebuild
from tests.dashboard.test_run_power_heat import extra_figure

T0 = datetime(2026, 11, 1, 0, 20, tzinfo=UTC)


def test_hour_of_day_means_and_paces_each_utc_hour_from_the_sums() -> None:
    # given clock hours of three days (hours since the epoch): 1,000 tokens/s in each, 1,020
    # from 00:00 to 05:59 UTC, two points an hour and their sums
    day0 = 20_000 * 24
    hours = list(range(day0, day0 + 72))
    means = [1020.0 if hour % 24 < 6 else 1000.0 for hour in hours]
    counts, sums = [2] * 72, [2 * mean for mean in means]

    # when grouped by hour of day
    frame = diurnal.by_hour_of_day(hours, counts, sums)

    # then every hour 0-23, each the mean of its six points
    assert list(frame["hour"]) == list(range(24))
    assert list(frame["points"]) == [6] * 24
    assert list(frame["value"]) == [1020.0] * 6 + [1000.0] * 18
    # a step-time series reads as a pace: Σ points / Σ seconds
    pace = diurnal.by_hour_of_day([day0 + 3, day0 + 27], [4, 6], [8.0, 12.5], inverted=True)
    assert pace["value"][3] == pytest.approx(10 / 20.5)
    # an hour of day without a point is NaN with a count of 0, not a zero mean
    assert pace["points"][4] == 0 and np.isnan(pace["value"][4])


def test_the_view_waits_for_two_days_certainly_covered() -> None:
    day0 = 20_000 * 24
    # 49 hours apart: the 48 whole hours between the first and last are covered
    assert diurnal.spans_long_enough([day0, day0 + 30, day0 + 49])
    # 48 hours apart may be as little as 47 h 0 m 1 s of data (00:59:59 to 48:00:00)
    assert not diurnal.spans_long_enough([day0, day0 + 48])
    assert not diurnal.spans_long_enough([])


def test_the_hour_sums_keep_the_slowdown_passs_throughput_metrics() -> None:
    # the trigger's names are the metrics the run page picks from
    assert set(HOUR_SUM_METRICS) == set(slowdown_selectors.THROUGHPUT_METRICS)


def _long_run(project: Any, name: str, metric: str, *, days: float, every_s: int) -> Run:
    """Two attempts of `metric` (and loss) a point every `every_s` seconds for `days` days,
    the second resuming half way through the first's steps; a diurnal swing with noise, a
    NaN, an Infinity and points without a time."""
    rng = np.random.default_rng(7)
    run = telemetry_services.run_upsert(project=project, name=name, info={})
    steps = int(days * 86_400 / every_s)
    for number, first, began in ((1, 0, T0), (2, steps // 4, T0 + timedelta(days=days / 3))):
        attempt = telemetry_services.attempt_ensure(run=run, number=number, started_at=began)
        points = []
        for offset in range(steps - first):
            step = first + offset
            moment = began + timedelta(seconds=offset * every_s + int(rng.integers(0, every_s)))
            swing = 1.0 + 0.02 * np.sin(2 * np.pi * (moment.hour + moment.minute / 60) / 24)
            value = float(1e6 * swing * rng.normal(1.0, 0.01))
            if metric == "step_time_s":
                value = 8.0 / swing
            points.append((metric, step, value, moment if offset % 97 else None))
            points.append(("loss", step, 3.0 - step / 1e6, moment))
        points[10] = (metric, points[10][1], float("nan"), points[10][3])
        points[20] = (metric, points[20][1], float("inf"), points[20][3])
        for chunk in range(0, len(points), 5000):
            telemetry_services.metric_points_insert(
                run=run, attempt=attempt, points=points[chunk : chunk + 5000]
            )
    return run


def _from_points(run: Run, metric: str, *, inverted: bool) -> tuple[list[float], list[int]]:
    """Each UTC hour of day's mean (or pace) straight from the run's points."""
    rows = MetricPoint.objects.filter(
        series__run=run, series__name=metric, wall_time__isnull=False
    ).values_list("wall_time", "value")
    values: dict[int, list[float]] = {hour: [] for hour in range(24)}
    for moment, value in rows:
        if value is not None and np.isfinite(value):
            values[moment.astimezone(UTC).hour].append(value)
    means = [len(v) / sum(v) if inverted else sum(v) / len(v) for v in values.values()]
    return means, [len(v) for v in values.values()]


@pytest.mark.django_db
@pytest.mark.parametrize("metric", ["tokens_per_s", "step_time_s"])
def test_the_run_page_draws_what_the_points_give(client, alice, project, metric) -> None:
    # given a run of three days of throughput, and one of a day
    long = _long_run(project, f"diurnal-{metric}", metric, days=3, every_s=120)
    short = _long_run(project, f"daylong-{metric}", metric, days=1, every_s=600)
    client.force_login(alice)
    cache.clear()

    # when their pages are read
    html = client.get(f"/runs/{long.pk}/").content.decode()
    short_html = client.get(f"/runs/{short.pk}/").content.decode()

    # then the long one draws the view, every hour of day the points' own mean (or pace)
    figure = extra_figure(html, "chart-hour-of-day")
    assert figure is not None and 'id="chart-hour-of-day"' in html
    (trace,) = figure["data"]
    inverted = metric == "step_time_s"
    means, counts = _from_points(long, metric, inverted=inverted)
    assert trace["x"] == list(range(24))
    assert trace["y"] == pytest.approx(means, rel=1e-12)
    assert [n for (n,) in trace["customdata"]] == counts
    assert ("steps/s" in trace["name"]) is inverted
    # and the day-long one does not: a diurnal swing needs two days to be told from noise
    assert extra_figure(short_html, "chart-hour-of-day") is None
    assert 'id="chart-hour-of-day"' not in short_html


@pytest.mark.django_db
def test_the_hour_sums_count_a_redelivered_point_once_and_rebuild_the_same(project) -> None:
    # given a run's points, sent twice (a retried batch)
    run = telemetry_services.run_upsert(project=project, name="resent", info={})
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    points = [("tokens_per_s", step, 1000.0 + step, T0 + timedelta(minutes=7 * step))
              for step in range(40)] + [("loss", 1, 2.0, T0)]  # fmt: skip
    for _ in range(2):
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    kept = sorted(MetricHourSum.objects.filter(series__run=run)
                  .values_list("hour", "point_count", "finite_count", "finite_sum"))  # fmt: skip

    # then each clock hour holds its points once, and only the throughput series has sums
    assert sum(count for _, count, _, _ in kept) == 40
    first = int(T0.timestamp() // 3600)
    assert kept[0] == (first, 6, 6, sum(1000.0 + step for step in range(6)))
    # and rebuilding them from the points gives the same rows
    ids = list(run.series.values_list("pk", flat=True))
    assert metric_hour_sums_rebuild(series_ids=ids) == len(kept)
    assert sorted(MetricHourSum.objects.filter(series__run=run).values_list(
        "hour", "point_count", "finite_count", "finite_sum")) == kept  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_the_hour_sums_of_points_already_stored(migrate_to) -> None:
    # given points stored before the hour sums existed (telemetry 0025's trigger)
    apps = migrate_to([("telemetry", "0025_sso_identity")])
    old = {name: apps.get_model("telemetry", name)
           for name in ("Project", "Run", "Attempt", "MetricSeries", "MetricPoint")}  # fmt: skip
    run = old["Run"].objects.create(project=old["Project"].objects.create(slug="mig", name="M"),
                                    name="before")  # fmt: skip
    attempt = old["Attempt"].objects.create(run=run, number=1)
    made = {name: old["MetricSeries"].objects.create(run=run, attempt=attempt, name=name)
            for name in ("tokens_per_s", "loss")}  # fmt: skip
    point = old["MetricPoint"]
    stored = [point(series=made[name], step=step, value=10.0 * step,
                    wall_time=T0 + timedelta(minutes=25 * step))
              for name in made for step in range(10)]  # fmt: skip
    stored.append(point(series=made["tokens_per_s"], step=10, value=float("nan"), wall_time=T0))
    stored.append(point(series=made["tokens_per_s"], step=11, value=1.0, wall_time=None))
    point.objects.bulk_create(stored)

    # when the hour sums' migration runs
    apps = migrate_to([("telemetry", "0026_metric_hour_sums")])

    # then the throughput series' stored points are summed per clock hour (00:20 onwards,
    # 25 minutes apart: 00:20 00:45 | 01:10 01:35 | 02:00 02:25 02:50 | 03:15 03:40 | 04:05),
    # the NaN counted but not summed, the point without a time in no hour, the loss not kept
    rows = sorted(apps.get_model("telemetry", "MetricHourSum").objects.values_list(
        "series_id", "hour", "point_count", "finite_count", "finite_sum"))  # fmt: skip
    first = int(T0.timestamp() // 3600)
    series = made["tokens_per_s"].pk
    assert rows == [
        (series, first, 3, 2, 0.0 + 10.0),
        (series, first + 1, 2, 2, 20.0 + 30.0),
        (series, first + 2, 3, 3, 40.0 + 50.0 + 60.0),
        (series, first + 3, 2, 2, 70.0 + 80.0),
        (series, first + 4, 1, 1, 90.0),
    ]
