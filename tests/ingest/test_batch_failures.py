"""Batches that fail: a poison batch parked as dead after the maximum attempts, a failed
processing leaving nothing behind, and the sweeper recovering a batch whose message was
lost, with the real worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest import services
from ingest.models import IngestBatch
from ingest.services import batches, processing
from telemetry.models import MetricPoint, Run
from tests.ingest.batch_documents import counts, full_batch, points_batch, submit


@pytest.fixture
def token(project: Any) -> Any:
    row, _ = services.token_create(project=project, name="t")
    return row


@pytest.mark.django_db
def test_poison_batch_is_parked_as_dead_after_max_attempts(token, monkeypatch):
    # given a batch whose processing fails every time
    batch = submit(token, points_batch("poison", 1, (1, 1.0)))

    def explode(batch: IngestBatch, batch_in: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(processing, "_apply", explode)
    limit = settings.INGEST_MAX_PROCESS_ATTEMPTS
    assert limit >= 1

    # when it is processed up to the limit, each attempt fails and is counted
    for attempt in range(1, limit + 1):
        with pytest.raises(RuntimeError, match="disk on fire"):
            services.batch_process(batch_pk=batch.pk)
        batch.refresh_from_db()
        assert (batch.status, batch.process_attempts) == ("pending", attempt)
        assert "disk on fire" in batch.last_error

    # then the next call parks it as dead, and later calls do nothing
    assert services.batch_process(batch_pk=batch.pk) == "dead"
    batch.refresh_from_db()
    assert batch.status == "dead"
    assert f"gave up after {limit} processing attempts" in batch.last_error
    assert "disk on fire" in batch.last_error  # the dead batch still says why
    assert services.batch_process(batch_pk=batch.pk) == "not pending"
    assert not MetricPoint.objects.exists()
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_failed_processing_leaves_nothing_behind(token, monkeypatch):
    # given a batch whose processing fails after its points were written
    batch = submit(token, full_batch())
    real_apply = processing._apply

    def apply_then_fail(batch: IngestBatch, batch_in: Any) -> None:
        real_apply(batch, batch_in)
        raise RuntimeError("killed half-way")

    monkeypatch.setattr(processing, "_apply", apply_then_fail)
    with pytest.raises(RuntimeError):
        services.batch_process(batch_pk=batch.pk)

    # then the transaction rolled everything back, and a later attempt stores it once
    assert counts()["points"] == 0 and not Run.objects.exists()
    monkeypatch.setattr(processing, "_apply", real_apply)
    assert services.batch_process(batch_pk=batch.pk) == "done"
    batch.refresh_from_db()
    assert (batch.status, batch.process_attempts, batch.last_error) == ("done", 2, "")
    assert counts()["points"] == 20


@pytest.mark.django_db(transaction=True)
def test_sweeper_recovers_a_batch_whose_message_was_lost(celery_worker, token, monkeypatch, wait):
    # given a batch accepted while publishing was broken (no message ever reached Redis)
    real_enqueue = batches.batch_enqueue
    lost: list[int] = []
    monkeypatch.setattr(batches, "batch_enqueue", lambda *, batch_pk: lost.append(batch_pk))
    with transaction.atomic():
        batch = submit(token, points_batch("lost", 1, (1, 1.0), (2, 0.9)))
    assert lost == [batch.pk]
    IngestBatch.objects.filter(pk=batch.pk).update(
        received_at=timezone.now() - timedelta(minutes=5)
    )
    monkeypatch.setattr(batches, "batch_enqueue", real_enqueue)

    # when a later batch is published normally and the worker processes it
    marker = submit(token, points_batch("marker", 1, (100, 0.5)))
    wait(
        lambda: IngestBatch.objects.get(pk=marker.pk).status == "done",
        what="the worker to process the marker batch",
    )

    # then the lost batch is still pending, and a sweep with a longer cutoff ignores it
    assert IngestBatch.objects.get(pk=batch.pk).status == "pending"
    assert services.batches_sweep(older_than_s=600) == 0

    # when the sweeper runs
    assert services.batches_sweep() == 1

    # then the worker stores it
    wait(
        lambda: IngestBatch.objects.get(pk=batch.pk).status == "done",
        what="the worker to process the swept batch",
    )
    assert set(MetricPoint.objects.values_list("step", "value")) == {(1, 1.0), (2, 0.9), (100, 0.5)}
    assert IngestBatch.objects.get(pk=batch.pk).process_attempts == 1
