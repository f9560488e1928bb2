"""Writes for ingest, one module per area: tokens, accepting batches (the durable step before
the 202), processing them into points and records (the worker's step), the events' handlers
and the sweeper. Their public names are importable from here as before."""

from ingest.services.batches import (
    Acceptance,
    batch_accept,
    batch_enqueue,
    batch_queue,
    batch_submit,
    batches_process_again,
    batches_requeue,
    is_missing_reference,
    is_retryable,
    retried,
    writes_at_once,
)
from ingest.services.events import EVENT_HANDLERS
from ingest.services.processing import batch_process
from ingest.services.sweeper import batches_sweep
from ingest.services.tokens import token_create, token_revoke, token_touch

__all__ = [
    "EVENT_HANDLERS",
    "Acceptance",
    "batch_accept",
    "batch_enqueue",
    "batch_process",
    "batch_queue",
    "batch_submit",
    "batches_process_again",
    "batches_requeue",
    "batches_sweep",
    "is_missing_reference",
    "is_retryable",
    "retried",
    "token_create",
    "token_revoke",
    "token_touch",
    "writes_at_once",
]
