"""The first view of a run page (nothing cached) reads what its charts show, not the run: the
rows it fetches from the points table, and its queries, stay put when a run of many attempts
gets ten times the points. Counted with PostgreSQL's own per-transaction table statistics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry import services as telemetry_services
from telemetry.charts import MANY_ATTEMPTS
from telemetry.models import MetricPoint, Project, Run

T0 = datetime(2026, 11, 1, tzinfo=UTC)
ATTEMPTS = MANY_ATTEMPTS + 4  # past the fold: most attempts share one grey line


def _run(project: Project, name: str, *, steps: int) -> Run:
    """ATTEMPTS attempts of `steps` steps each, resuming half way, with loss and step time."""
    run = telemetry_services.run_upsert(project=project, name=name, info={})
    for number in range(1, ATTEMPTS + 1):
        first = (number - 1) * steps // 2
        attempt = telemetry_services.attempt_ensure(
            run=run,
            number=number,
            started_at=T0 + timedelta(hours=number),
            resumed_from_step=first if number > 1 else None,
        )
        points = []
        for step in range(first, first + steps):
            moment = T0 + timedelta(hours=number, seconds=step - first)
            points += [("loss", step, 3.0 - step / 1e6, moment), ("step_time_s", step, 2.0, moment)]
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    return run


def _first_view(client, rows_read, run: Run, page: str = "") -> tuple[int, int]:
    """(queries, points rows read) of a run page's first view, nothing cached."""
    cache.clear()
    before = rows_read()
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/runs/{run.pk}/{page}")
    assert response.status_code == 200
    return len(queries), rows_read() - before


@pytest.mark.django_db
def test_the_run_page_first_view_reads_no_more_when_the_run_grows(
    client, alice, project, rows_read
):
    small = _run(project, "fv-small", steps=300)
    big = _run(project, "fv-big", steps=3000)
    assert MetricPoint.objects.filter(series__run=big).count() == 10 * ATTEMPTS * 300 * 2
    client.force_login(alice)

    # when each run page is first viewed
    small_queries, small_rows = _first_view(client, rows_read, small)
    big_queries, big_rows = _first_view(client, rows_read, big)

    # then the big run costs the same queries, and reads at most a few rows per point drawn
    # (its charts come from the rollups), far from its 96,000 points
    assert big_queries == small_queries
    assert big_rows <= max(small_rows, 2 * 1500 * 2), (small_rows, big_rows)


@pytest.mark.django_db
def test_the_hour_of_day_view_reads_no_point_on_the_first_view(client, alice, project, rows_read):
    # given a run whose tokens/s spans three days, a point every 10 s: 25,920 points, and
    # so the page draws its throughput by hour of day
    run = telemetry_services.run_upsert(project=project, name="fv-diurnal", info={})
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    points = [("tokens_per_s", step, 1e6 + step % 7, T0 + timedelta(seconds=10 * step))
              for step in range(3 * 8640)]  # fmt: skip
    for first in range(0, len(points), 5000):
        telemetry_services.metric_points_insert(
            run=run, attempt=attempt, points=points[first : first + 5000]
        )
    client.force_login(alice)

    # when its page is first viewed
    _, rows = _first_view(client, rows_read, run)

    # then the view is drawn (the hour sums), and the points read are the chart's, from its
    # rollups, not the series: a few rows per point drawn
    assert 'id="chart-hour-of-day"' in client.get(f"/runs/{run.pk}/").content.decode()
    assert rows <= 2 * 1500 * 2 < len(points), rows
