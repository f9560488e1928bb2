"""Point inserts that replay a stored step stage their rows in a temporary table of the
session (a batch of new steps only is copied straight into the table). PostgreSQL never
vacuums temporary tables, so the stage must be emptied by truncation at commit, not left
holding dead rows that every later batch on the connection scans."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction

from telemetry import services as telemetry_services
from telemetry.models import MetricPoint


def _stage_bytes() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size('pg_temp.chronicle_points_stage')")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_the_stage_holds_nothing_after_each_batch_commits(project: Any) -> None:
    # given a run whose batches are written one transaction each, on one connection
    run = telemetry_services.run_upsert(project=project, name="staged")
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    moment = datetime(2026, 11, 1, tzinfo=UTC)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("loss", 5_000, 1.0, moment)]
    )
    for first in range(0, 3_000, 1_000):
        # each batch also replays the stored step 5,000, so it goes through the stage
        points = [("loss", step, step / 7, moment) for step in range(first, first + 1_000)]
        points.append(("loss", 5_000, 2.0, moment))
        # when each batch commits
        with transaction.atomic():
            inserted = telemetry_services.metric_points_insert(
                run=run, attempt=attempt, points=points
            )
        # then its points are stored, and the stage keeps no page of them (not even dead rows)
        assert inserted == 1_000
        assert _stage_bytes() == 0
    assert MetricPoint.objects.filter(series__run=run).count() == 3_001


@pytest.mark.django_db
def test_two_inserts_in_one_transaction_each_store_only_their_own_points(project: Any) -> None:
    # given two batches of different series written in one transaction
    run = telemetry_services.run_upsert(project=project, name="twice")
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    first = [("loss", step, 1.0, None) for step in range(10)]
    second = [("lr", step, 2.0, None) for step in range(5)]
    # when both are inserted before the commit
    with transaction.atomic():
        counts = [
            telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
            for points in (first, second)
        ]
    # then the second does not see the first's staged rows again
    assert counts == [10, 5]
    stored = MetricPoint.objects.filter(series__run=run)
    assert stored.filter(series__name="loss").count() == 10
    assert stored.filter(series__name="lr").count() == 5
