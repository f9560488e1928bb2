"""POST /api/v1/ingest: the happy path through a real worker, duplicates, and every kind of
bad input answered with a clear 4xx that names the item and the field."""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

import pytest

from ingest.models import IngestBatch
from telemetry.models import MetricPoint, MetricSeries, Run


def batch(batch_id: str = "b-1", **fields: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "batch_id": batch_id,
        "run": "llama-test",
        "attempt": 1,
        "metrics": [
            {"name": "loss", "step": step, "value": 3.0 - step / 100, "time": 1_763_700_000 + step}
            for step in range(50)
        ],
    }
    document.update(fields)
    return document


@pytest.mark.django_db(transaction=True)
def test_batch_reaches_postgresql_through_the_real_worker(celery_worker, post_batch, wait):
    # given a batch with metrics (one NaN loss, sent as Python's json sends it) and events
    document = batch(
        run_info={"accelerator_type": "H100-SXM", "accelerator_count": 16, "n_layers": 4},
        events=[
            {"type": "attempt_started", "time": "2026-11-21T08:00:00Z", "hosts": ["h001", "h002"]},
            {"type": "checkpoint_saved", "time": "2026-11-21T08:10:00Z", "step": 40,
             "blocking_save_s": 12.5, "size_bytes": 10**9, "tier": "object_store"},
        ],
    )  # fmt: skip
    document["metrics"].append({"name": "loss", "step": 50, "value": math.nan})
    document["metrics"].append({"name": "grad_norm", "step": 50, "value": "Infinity"})

    # when it is posted
    response = post_batch(document)

    # then the answer says what was accepted, and the batch row exists before any worker ran
    assert response.status_code == 202, response.content
    assert response.json() == {
        "batch_id": "b-1",
        "run": "llama-test",
        "duplicate": False,
        "status": "pending",
        "accepted": {"metrics": 52, "events": 2},
    }
    stored = IngestBatch.objects.get(batch_id="b-1")
    wait(lambda: IngestBatch.objects.get(pk=stored.pk).status == "done", what="the worker")
    run = Run.objects.get(name="llama-test")
    assert run.accelerator_count == 16 and run.last_step == 50
    loss = MetricSeries.objects.get(run=run, name="loss", attempt__number=1)
    values = dict(MetricPoint.objects.filter(series=loss).values_list("step", "value"))
    assert len(values) == 51
    assert values[10] == pytest.approx(2.9)
    assert math.isnan(values[50])
    assert MetricPoint.objects.get(series__name="grad_norm", step=50).value == math.inf
    attempt = run.attempts.get(number=1)
    assert sorted(attempt.hosts.values_list("name", flat=True)) == ["h001", "h002"]
    assert run.checkpoints.get(step=40).blocking_save_s == 12.5


@pytest.mark.django_db(transaction=True)
def test_same_batch_twice_stores_nothing_twice(celery_worker, post_batch, wait):
    first = post_batch(batch("dup-1"))
    second = post_batch(batch("dup-1"))

    assert first.status_code == 202
    assert second.status_code == 200
    assert second.json()["duplicate"] is True
    assert IngestBatch.objects.filter(batch_id="dup-1").count() == 1
    wait(lambda: IngestBatch.objects.get(batch_id="dup-1").status == "done", what="the worker")
    assert MetricPoint.objects.count() == 50


@pytest.mark.django_db
def test_same_batch_id_with_another_body_is_refused(post_batch):
    assert post_batch(batch("same-id")).status_code == 202

    response = post_batch(batch("same-id", run="another-run"))

    assert response.status_code == 409
    assert "different body" in response.json()["detail"]
    assert IngestBatch.objects.get(batch_id="same-id").run_name == "llama-test"


def _metric(**overrides: Any) -> dict[str, Any]:
    item = {"name": "loss", "step": 1, "value": 1.0}
    item.update(overrides)
    return item


@pytest.mark.parametrize(
    ("metrics", "events", "expected_field", "expected_words"),
    [
        ([_metric(), _metric(step=-1)], [], "step", "must be >= 0"),
        ([_metric(), _metric(), _metric(value="abc")], [], "value", "must be a number"),
        ([_metric(value=True)], [], "value", "boolean"),
        ([_metric(name="x" * 201)], [], "name", "the limit is 200"),
        ([_metric(name="")], [], "name", "must not be empty"),
        ([_metric(step=1.5)], [], "step", "must be an integer"),
        ([_metric(time="yesterday")], [], "time", "cannot parse"),
        ([_metric(time="2026-11-21T10:00:00")], [], "time", "no UTC offset"),
        ([_metric(time=4_102_444_800)], [], "time", "in the future"),
        ([_metric(colour="red")], [], "colour", "unknown field"),
        ([{"name": "loss", "step": 1}], [], "value", "is required"),
        ([], [{"type": "teleport", "time": 1_763_700_000}], "type", "unknown event type"),
        ([], [{"type": "note"}], "time", "is required"),
        ([], [{"type": "checkpoint_saved", "time": 1_763_700_000}], "step", "is required"),
        ([], [{"type": "interruption", "time": 1_763_700_000, "planned": "yes"}], "planned", ""),
        ([], [{"type": "attempt_ended", "time": 1_763_700_000, "status": "meh"}], "status", ""),
    ],
)
@pytest.mark.django_db
def test_bad_item_is_refused_naming_index_and_field(
    post_batch, metrics, events, expected_field, expected_words
):
    response = post_batch({"batch_id": "bad", "run": "r", "metrics": metrics, "events": events})

    assert response.status_code == 400, response.content
    body = response.json()
    error = body["errors"][0]
    section = "metrics" if metrics else "events"
    index = len(metrics) - 1 if metrics else 0
    assert (error["section"], error["index"], error["field"]) == (section, index, expected_field)
    assert f"{section}[{index}].{expected_field}" in body["detail"]
    assert expected_words in body["detail"]
    assert not IngestBatch.objects.exists()


@pytest.mark.django_db
def test_many_errors_are_listed_but_bounded(post_batch):
    metrics = [_metric(step=-i - 1) for i in range(100)]

    response = post_batch({"batch_id": "bad", "run": "r", "metrics": metrics})

    assert response.status_code == 400
    assert len(response.json()["errors"]) == 20
    assert "more" in response.json()["detail"]


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"run": "r"}, "batch_id: is required"),
        ({"batch_id": "x"}, "run: is required"),
        ({"batch_id": "x", "run": "r", "attempt": 0}, "attempt: must be >= 1"),
        ({"batch_id": "x", "run": "r", "metrics": {}}, "metrics: must be a list"),
        ({"batch_id": "x", "run": "r", "run_info": {"n_layers": -2}}, "run_info.n_layers"),
        ({"batch_id": "x", "run": "r", "surprise": 1}, "surprise: unknown field"),
        ([1, 2], "must be a JSON object"),
    ],
)
@pytest.mark.django_db
def test_bad_envelope_is_refused(post_batch, document, words):
    response = post_batch(document)

    assert response.status_code == 400
    assert words in response.json()["detail"]


@pytest.mark.django_db
def test_malformed_json_is_400(post_batch):
    response = post_batch(b'{"batch_id": "x", "run": ')

    assert response.status_code == 400
    assert response.json()["detail"].startswith("Malformed JSON")


@pytest.mark.django_db
def test_wrong_content_type_is_415(post_batch):
    response = post_batch(batch(), content_type="text/plain")

    assert response.status_code == 415
    assert "application/json" in response.json()["detail"]


@pytest.mark.django_db
def test_too_many_points_is_413_naming_the_limit(post_batch, settings):
    settings.INGEST_MAX_METRICS_PER_BATCH = 10

    response = post_batch(batch())

    assert response.status_code == 413
    assert "limit is 10 per batch" in response.json()["detail"]


@pytest.mark.django_db
def test_too_large_body_is_413_naming_the_limit(post_batch, settings):
    settings.INGEST_MAX_BODY_BYTES = 1000

    response = post_batch(batch())

    assert response.status_code == 413
    assert "limit is 1000 bytes" in response.json()["detail"]


@pytest.mark.django_db
def test_gzip_body_is_accepted_and_a_gzip_bomb_is_not(post_batch, settings):
    accepted = post_batch(
        gzip.compress(json.dumps(batch("gz")).encode()), HTTP_CONTENT_ENCODING="gzip"
    )
    assert accepted.status_code == 202

    bomb = gzip.compress(b" " * 50_000_000)  # 50 MB of spaces in ~50 KB
    refused = post_batch(bomb, HTTP_CONTENT_ENCODING="gzip")

    assert refused.status_code == 413
    assert "decompressed body exceeds" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("header", "words"),
    [
        (None, "ingest token is required"),
        ("Bearer chr_not-a-real-token", "invalid, revoked or expired"),
        ("Token abc", "must be 'Bearer"),
    ],
)
@pytest.mark.django_db
def test_missing_or_wrong_token_is_401(client, header, words):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}

    response = client.post(
        "/api/v1/ingest", data=json.dumps(batch()), content_type="application/json", **extra
    )

    assert response.status_code == 401
    assert words.lower() in response.json()["detail"].lower()
    assert not IngestBatch.objects.exists()


@pytest.mark.django_db
def test_revoked_and_expired_tokens_are_refused_at_once(post_batch, project):
    from datetime import timedelta

    from django.utils import timezone

    from ingest import services

    token, plaintext = services.token_create(project=project, name="soon-revoked")
    assert post_batch(batch("before"), token=plaintext).status_code == 202
    services.token_revoke(token=token)
    assert post_batch(batch("after"), token=plaintext).status_code == 401

    _, expired = services.token_create(
        project=project, name="old", expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert post_batch(batch("expired"), token=expired).status_code == 401


@pytest.mark.django_db
def test_a_token_revoked_by_another_process_stops_working_within_the_cache_time(
    post_batch, project, settings, monkeypatch
):
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from ingest import services
    from ingest.models import IngestToken
    from ingest.selectors import tokens as token_reads

    # given a token this process has read
    settings.INGEST_TOKEN_CACHE_S = 5.0
    token, plaintext = services.token_create(project=project, name="fleet")
    assert post_batch(batch("first"), token=plaintext).status_code == 202

    # when it is used again, the token is not read from the database
    with CaptureQueriesContext(connection) as again:
        assert post_batch(batch("second"), token=plaintext).status_code == 202
    assert not any("ingest_ingesttoken" in q["sql"] and q["sql"].startswith("SELECT")
                   for q in again.captured_queries)  # fmt: skip

    # when another process revokes it (a row update this process's cache does not see)
    IngestToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    read_at = time.monotonic()

    # then it still works until the cache time has passed, and is refused after
    monkeypatch.setattr(token_reads.time, "monotonic", lambda: read_at + 1)
    assert post_batch(batch("third"), token=plaintext).status_code == 202
    monkeypatch.setattr(token_reads.time, "monotonic", lambda: read_at + 5.1)
    assert post_batch(batch("fourth"), token=plaintext).status_code == 401


@pytest.mark.django_db
def test_tokens_are_stored_hashed(ingest_token):
    from ingest.models import IngestToken

    row = IngestToken.objects.get()
    assert ingest_token not in (row.key_hash, row.prefix)
    assert ingest_token.startswith(row.prefix)


@pytest.mark.django_db(transaction=True)
def test_a_token_never_reaches_another_projects_run(
    celery_worker, post_batch, wait, project, other_project
):
    from ingest import services

    # given a run of the same name in both projects
    _, other_token = services.token_create(project=other_project, name="theirs")
    post_batch(batch("mine"))
    post_batch(batch("theirs", metrics=[_metric(step=7, value=42.0)]), token=other_token)

    wait(lambda: IngestBatch.objects.filter(status="done").count() == 2, what="both batches")

    # then each batch landed in its own project's run
    mine = Run.objects.get(project=project, name="llama-test")
    theirs = Run.objects.get(project=other_project, name="llama-test")
    assert MetricPoint.objects.filter(series__run=mine).count() == 50
    assert list(MetricPoint.objects.filter(series__run=theirs).values_list("value", flat=True)) == [
        42.0
    ]


@pytest.mark.django_db
def test_ingest_token_cannot_read_the_api(client, ingest_token):
    response = client.get("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {ingest_token}")

    assert response.status_code in (401, 403)
