"""How points are written: copied straight into the table when every step is new, through the
staged ON CONFLICT insert when one is not (first write wins either way), and each point's
series checked once per statement by PostgreSQL (migration 0019) instead of a foreign key
checked per point."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from psycopg.errors import ForeignKeyViolation

from telemetry import services as telemetry_services
from telemetry.models import MetricPoint, MetricRollup, MetricSeries, Run
from telemetry.services import metrics as metric_writes

MOMENT = datetime(2026, 11, 1, tzinfo=UTC)


def _run(project: Any, name: str = "writes") -> tuple[Run, Any]:
    run = telemetry_services.run_upsert(project=project, name=name)
    return run, telemetry_services.attempt_ensure(run=run, number=1)


def _stored(run: Run) -> dict[tuple[str, int], float]:
    rows = MetricPoint.objects.filter(series__run=run).values_list("series__name", "step", "value")
    return {(name, step): value for name, step, value in rows}


def _finest_rollup(run: Run, name: str) -> tuple[int, float]:
    rollup = MetricRollup.objects.get(series__run=run, series__name=name, width=16, bucket=0)
    return rollup.point_count, rollup.finite_sum


@pytest.mark.django_db
def test_a_batch_replaying_stored_steps_keeps_the_first_values(project: Any) -> None:
    # given steps 0-4 of loss stored
    run, attempt = _run(project)
    first = [("loss", step, 1.0, MOMENT) for step in range(5)]
    assert telemetry_services.metric_points_insert(run=run, attempt=attempt, points=first) == 5
    # when a batch sends steps 3-6 with other values (3 and 4 again, 5 and 6 new)
    replay = [("loss", step, 9.0, MOMENT) for step in range(3, 7)]
    inserted = telemetry_services.metric_points_insert(run=run, attempt=attempt, points=replay)
    # then only the new steps are stored, the old ones keep their first value, and the
    # rollups count each point once
    assert inserted == 2
    assert _stored(run) == {("loss", s): (1.0 if s < 5 else 9.0) for s in range(7)}
    assert _finest_rollup(run, "loss") == (7, 5 * 1.0 + 2 * 9.0)


@pytest.mark.django_db
def test_a_step_twice_in_one_batch_is_stored_once(project: Any) -> None:
    # given a batch that names step 2 twice, with two values
    run, attempt = _run(project)
    points = [("loss", 1, 1.0, None), ("loss", 2, 2.0, None), ("loss", 2, 5.0, None)]
    # when it is written
    inserted = telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    # then step 2 is stored once and counted once
    assert inserted == 2
    assert set(_stored(run)) == {("loss", 1), ("loss", 2)}
    assert _finest_rollup(run, "loss")[0] == 2


@pytest.mark.django_db
def test_a_replay_after_a_failed_copy_leaves_the_transaction_usable(project: Any) -> None:
    # given a batch's transaction in which a replayed point made the COPY fail
    run, attempt = _run(project)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("loss", 0, 1.0, None)]
    )
    with transaction.atomic():
        telemetry_services.metric_points_insert(
            run=run, attempt=attempt, points=[("loss", 0, 2.0, None), ("loss", 1, 2.0, None)]
        )
        # when the transaction goes on writing
        telemetry_services.metric_points_insert(
            run=run, attempt=attempt, points=[("lr", 0, 3.0, None)]
        )
    # then everything after the failed COPY is committed with it
    assert _stored(run) == {("loss", 0): 1.0, ("loss", 1): 2.0, ("lr", 0): 3.0}


@pytest.mark.django_db
def test_points_of_a_series_that_does_not_exist_are_refused(project: Any) -> None:
    # given a series id no series has
    missing = (MetricSeries.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
    # when points are written to it, by INSERT or by COPY
    refused = pytest.raises(IntegrityError, match="is not present")
    with refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO telemetry_metricpoint (series_id, step, value) VALUES (%s, 0, 1.0)",
            [missing],
        )
    with pytest.raises(ForeignKeyViolation), transaction.atomic():
        metric_writes._points_insert_postgresql({"loss": missing}, [("loss", 0, 1.0, None)])
    # then nothing is stored
    assert not MetricPoint.objects.exists()


@pytest.mark.django_db
def test_a_series_with_points_cannot_be_deleted_alone(project: Any) -> None:
    # given a series with points
    run, attempt = _run(project)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("loss", 0, 1.0, None)]
    )
    series = MetricSeries.objects.get(run=run)
    # when only the series row is deleted, then PostgreSQL refuses
    refused = pytest.raises(IntegrityError, match="still has points")
    with refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM telemetry_metricseries WHERE id = %s", [series.pk])
    # and deleting the run through Django takes its series and their points along
    run.delete()
    assert not MetricSeries.objects.exists()
    assert not MetricPoint.objects.exists()
