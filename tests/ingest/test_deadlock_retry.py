"""A batch whose transaction PostgreSQL aborts as a deadlock victim is processed again at once
by the real worker, not left pending for the sweeper. The deadlock is made for real: a second
connection holds the attempt row the worker's batch must update, and then inserts the metric
series the worker's transaction has just inserted."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection

from ingest import services
from ingest.models import IngestBatch
from telemetry.models import Attempt, Run


def _second_connection() -> psycopg.Connection[Any]:
    """A connection of the test's own, outside Django, to hold locks against the code."""
    settings = connection.settings_dict
    return psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=int(settings["PORT"] or 5432),
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
    )


def _blocked_on_update(table: str) -> Callable[[], bool]:
    """Whether some session waits on a row lock to UPDATE `table`."""

    def blocked() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE %s",
                [f'UPDATE "{table}"%'],
            )
            return cursor.fetchone()[0] > 0

    return blocked


@pytest.mark.django_db(transaction=True)
def test_a_deadlocked_batch_is_retried_by_the_worker(project, celery_worker, wait):
    # given a run whose attempt 1 is running
    token, _ = services.token_create(project=project, name="t")

    def submit(document: dict[str, Any]) -> IngestBatch:
        return services.batch_submit(token=token, body=json.dumps(document).encode()).batch

    first = submit(
        {
            "batch_id": "start",
            "run": "locked",
            "attempt": 1,
            "events": [{"type": "attempt_started", "time": 1_763_600_000}],
            "metrics": [{"name": "loss", "step": 1, "value": 2.0}],
        }
    )
    wait(lambda: IngestBatch.objects.get(pk=first.pk).status == "done", what="the first batch")
    attempt = Attempt.objects.get(run__name="locked", number=1)
    other = _second_connection()
    try:
        # and another transaction holding the attempt's row
        other.execute("UPDATE telemetry_attempt SET end_reason = '' WHERE id = %s", [attempt.pk])

        # when the worker processes a batch that adds a series, then ends the attempt
        batch = submit(
            {
                "batch_id": "end",
                "run": "locked",
                "attempt": 1,
                "metrics": [{"name": "new_metric", "step": 2, "value": 1.0}],
                "events": [{"type": "attempt_ended", "time": 1_763_600_100, "status": "completed"}],
            }
        )
        wait(_blocked_on_update("telemetry_attempt"), what="the worker to wait for the attempt row")
        # and the other transaction inserts the same series: each waits for the other, and
        # PostgreSQL aborts the transaction that has waited longer, the worker's
        other.execute(
            "INSERT INTO telemetry_metricseries (run_id, attempt_id, name) "
            "VALUES (%s, %s, 'new_metric') ON CONFLICT DO NOTHING",
            [attempt.run_id, attempt.pk],
        )
        other.commit()
    finally:
        other.close()

    # then the worker ran the batch again itself: no sweeper runs in the tests (no beat), so
    # a second processing attempt can only be the worker's retry
    wait(lambda: IngestBatch.objects.get(pk=batch.pk).status == "done", what="the retry")
    batch.refresh_from_db()
    assert batch.process_attempts == 2
    assert Attempt.objects.get(pk=attempt.pk).status == Attempt.Status.COMPLETED
    assert Run.objects.get(name="locked").series.filter(name="new_metric").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_deadlocked_batch_written_at_once_is_retried_in_the_request(project, wait):
    import threading

    from django.db import connections

    # given a run with attempt 1, and another transaction holding the run's row
    token, _ = services.token_create(project=project, name="t")

    def body(batch_id: str, name: str) -> bytes:
        document = {"batch_id": batch_id, "run": "locked-now", "attempt": 1,
                    "series": [{"name": name, "steps": [1, 2], "values": [2.0, 1.5]}]}  # fmt: skip
        return json.dumps(document).encode()

    services.batch_submit(token=token, body=body("first", "loss"), write_now=True)
    attempt = Attempt.objects.get(run__name="locked-now", number=1)
    other = _second_connection()
    outcome: dict[str, Any] = {}

    def request() -> None:
        try:
            outcome["acceptance"] = services.batch_submit(
                token=token, body=body("second", "new_metric"), write_now=True
            )
        except Exception as exc:  # recorded for the assertion below
            outcome["error"] = exc
        finally:
            connections.close_all()

    try:
        other.execute("UPDATE telemetry_run SET description = '' WHERE id = %s", [attempt.run_id])
        # when a request writes a batch that adds a series, then moves the run's progress
        thread = threading.Thread(target=request)
        thread.start()
        wait(_blocked_on_update("telemetry_run"), what="the request to wait for the run row")
        # and the other transaction inserts the same series: a deadlock, the request's
        # transaction is aborted
        other.execute(
            "INSERT INTO telemetry_metricseries (run_id, attempt_id, name) "
            "VALUES (%s, %s, 'new_metric') ON CONFLICT DO NOTHING",
            [attempt.run_id, attempt.pk],
        )
        other.commit()
    finally:
        other.close()
    thread.join(timeout=30)

    # then the request wrote the batch on its next try, and answered as if nothing happened
    assert "error" not in outcome, outcome.get("error")
    assert outcome["acceptance"].batch.status == "done"
    series = Run.objects.get(name="locked-now").series.get(name="new_metric")
    assert series.points.count() == 2
    assert IngestBatch.objects.filter(batch_id="second").count() == 1
