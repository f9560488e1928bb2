"""Fixtures of the diagnosis tests: the slowdown jobs sent through the ingest contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from ingest.models import IngestBatch
from logbook.services import stragglers as straggler_services
from telemetry.models import Run
from tests.diagnosis import slowdown_job

PROM = "/api/v1/ingest/prometheus"


@pytest.fixture(autouse=True)
def _fine_rank_buckets(settings: Any) -> None:
    # The jobs last minutes: score ranks over 15 s buckets, as the demo does (a slowdown is
    # attributed at the resolution of RANK_BUCKET_S).
    settings.RANK_BUCKET_S = 15


@pytest.fixture
def send(client: Client, post_batch: Callable[..., Any], ingest_token: str, process_batch):
    def run_job(job: slowdown_job.Job) -> Run:
        for document in job.batches:
            response = post_batch(document)
            assert response.status_code in (200, 202), response.content
            body = response.json()
            if body["status"] == "pending":
                pk = IngestBatch.objects.get(batch_id=document["batch_id"]).pk
                process_batch(pk)
        for host, text in job.pushes:
            response = client.post(
                f"{PROM}?host={host}", data=text.encode(), content_type="text/plain",
                HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
            )  # fmt: skip
            assert response.status_code in (200, 202), response.content
        return Run.objects.get(name=job.run)

    return run_job


@pytest.fixture
def passes() -> Callable[[], None]:
    """The beat's passes: rank timings rolled up, then slowdowns found."""
    from diagnosis.services import slowdowns as slowdown_services

    def run() -> None:
        straggler_services.rank_timings_refresh()
        slowdown_services.slowdowns_refresh()

    return run
