"""A batch whose transaction PostgreSQL aborts as a deadlock victim is processed again at once
by the real worker, not left pending for the sweeper. The deadlock is made for real: a second
connection holds the attempt row the worker's batch must update, and then inserts the metric
series the worker's transaction has just inserted."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import pytest
from django.db import connection

from ingest import services
from ingest.models import IngestBatch
from telemetry.models import Attempt, Run


def _blocked_on_attempt_update() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE \"telemetry_attempt\"%%'"
        )
        return cursor.fetchone()[0] > 0


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
    settings = connection.settings_dict
    other = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=int(settings["PORT"] or 5432),
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
    )
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
        wait(_blocked_on_attempt_update, what="the worker to wait for the attempt row")
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

    # then the worker ran the batch again soon after, well before the sweeper would
    started = time.monotonic()
    wait(lambda: IngestBatch.objects.get(pk=batch.pk).status == "done", timeout_s=10)
    assert time.monotonic() - started < 10
    batch.refresh_from_db()
    assert batch.process_attempts == 2
    assert Attempt.objects.get(pk=attempt.pk).status == Attempt.Status.COMPLETED
    assert Run.objects.get(name="locked").series.filter(name="new_metric").count() == 1
