"""The sweeper: batches left pending (a lost message, a Redis restart) enqueued again."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from ingest.selectors import (
    batches_pending_before,
)
from ingest.services.batches import batch_enqueue

# --- Sweeper ---------------------------------------------------------------------------------


def batches_sweep(*, older_than_s: int | None = None, limit: int = 1000) -> int:
    """Re-enqueue batches left pending (lost Celery message, Redis restart, crashed publish).
    Returns how many were re-enqueued."""
    age = settings.INGEST_SWEEP_AFTER_S if older_than_s is None else older_than_s
    cutoff = timezone.now() - timedelta(seconds=age)
    pks = list(batches_pending_before(cutoff=cutoff, limit=limit).values_list("pk", flat=True))
    for pk in pks:
        batch_enqueue(batch_pk=pk)
    return len(pks)
