"""Idempotency as a property: whatever sequence of sends, resends, reused batch ids with
other bodies, overlapping batches and reprocessing, the stored points are exactly the
distinct points sent (first write wins), and a reused id with another body is refused."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.test import Client, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest import services
from ingest.models import IngestBatch
from telemetry.models import MetricPoint

NAMES = ["loss", "grad_norm"]
POINT = st.tuples(st.sampled_from(NAMES), st.integers(min_value=0, max_value=30))
BATCH = st.lists(POINT, min_size=1, max_size=12, unique=True)
OPERATION = st.one_of(
    st.tuples(st.just("send"), BATCH),
    st.tuples(st.just("resend"), st.integers(min_value=0, max_value=20)),
    st.tuples(st.just("reuse_id"), st.integers(min_value=0, max_value=20)),
    st.tuples(st.just("reprocess"), st.integers(min_value=0, max_value=20)),
)


def _value(batch_number: int, name: str, step: int) -> float:
    # Overlapping batches disagree on purpose: the first stored value must win.
    return float(batch_number * 1000 + step) + (0.5 if name == "loss" else 0.25)


def _body(run: str, batch_id: str, number: int, points: list[tuple[str, int]]) -> bytes:
    metrics = [{"name": n, "step": s, "value": _value(number, n, s)} for n, s in points]
    return json.dumps({"batch_id": batch_id, "run": run, "attempt": 1, "metrics": metrics}).encode()


@pytest.fixture
def unthrottled() -> Iterator[None]:
    # Idempotency, not admission, is under test: the 40 examples share one project, and
    # sent as fast as ingest now answers, their requests outrun its per-second buckets.
    limits = dict.fromkeys(
        [
            "INGEST_TOKEN_REQUESTS_PER_S",
            "INGEST_TOKEN_POINTS_PER_S",
            "INGEST_PROJECT_REQUESTS_PER_S",
            "INGEST_PROJECT_POINTS_PER_S",
        ],
        0,
    )
    with override_settings(**limits):
        yield


@pytest.mark.django_db
@pytest.mark.usefixtures("unthrottled")
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(OPERATION, min_size=1, max_size=15))
def test_stored_points_are_exactly_the_distinct_points_sent(project, operations):
    _, plaintext = services.token_create(project=project, name=f"p-{uuid.uuid4().hex[:6]}")
    client = Client()
    run = f"prop-{uuid.uuid4().hex}"
    sent: list[tuple[str, bytes, list[tuple[str, int]]]] = []  # (batch_id, body, points)
    expected: dict[tuple[str, int], float] = {}

    def post(body: bytes) -> Any:
        return client.post(
            "/api/v1/ingest",
            data=body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {plaintext}",
        )

    for kind, argument in operations:
        if kind == "send":
            number = len(sent)
            batch_id = f"{run}-{number}"
            body = _body(run, batch_id, number, argument)
            response = post(body)
            assert response.status_code == 202, response.content
            sent.append((batch_id, body, argument))
            services.batch_process(batch_pk=IngestBatch.objects.get(batch_id=batch_id).pk)
            for name, step in argument:
                expected.setdefault((name, step), _value(number, name, step))
        elif not sent:
            continue
        elif kind == "resend":
            batch_id, body, _ = sent[argument % len(sent)]
            response = post(body)
            assert response.status_code == 200 and response.json()["duplicate"] is True
        elif kind == "reuse_id":
            batch_id, _, points = sent[argument % len(sent)]
            other = _body(run, batch_id, 999, points)
            assert post(other).status_code == 409
        else:  # reprocess: a redelivered message, even forced back to pending
            batch_id = sent[argument % len(sent)][0]
            batch = IngestBatch.objects.get(batch_id=batch_id)
            IngestBatch.objects.filter(pk=batch.pk).update(status="pending")
            services.batch_process(batch_pk=batch.pk)

    stored = {
        (name, step): value
        for name, step, value in MetricPoint.objects.filter(series__run__name=run).values_list(
            "series__name", "step", "value"
        )
    }
    assert stored == expected
    assert IngestBatch.objects.filter(batch_id__startswith=run).count() == len(sent)


@pytest.mark.django_db(transaction=True)
@override_settings(INGEST_PROJECT_MAX_IN_FLIGHT=0)
def test_concurrent_resends_store_one_batch(project, ingest_token):
    # given the same batch sent 8 times at once, each on its own connection, all served at
    # once: the race of its inserts is under test, not the project's share of the web
    # workers (ingest.fair_share, 2 by default), which answers 429 to 6 of them before
    # their bodies are read and so before anyone could tell they are resends
    body = _body("concurrent", "same-batch", 1, [("loss", s) for s in range(50)])

    def send(_: int) -> int:
        from django.db import connection

        try:
            return (
                Client()
                .post(
                    "/api/v1/ingest",
                    data=body,
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
                )
                .status_code
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = sorted(pool.map(send, range(8)))

    # then exactly one was accepted, the others were told it is a duplicate
    assert answers == [200] * 7 + [202]
    batch = IngestBatch.objects.get(batch_id="same-batch")
    services.batch_process(batch_pk=batch.pk)
    services.batch_process(batch_pk=batch.pk)
    assert MetricPoint.objects.filter(series__run__name="concurrent").count() == 50
