"""Reads for ingest, one module per area: `tokens` (the lookup every push makes), `batches`
(the sweeper's work queue, dead letters, the backlog) and `mlflow` (the tracking API's
reads). Importable from here as before."""

from ingest.selectors.batches import (
    batch_accepted_get,
    batch_backlog_count,
    batch_project_pending_over,
    batches_dead,
    batches_pending_before,
)
from ingest.selectors.mlflow import mlflow_run_for_user
from ingest.selectors.tokens import (
    TOKEN_CACHE_MAX,
    TOKEN_PREFIX,
    token_cache_forget,
    token_get_by_plaintext,
    token_hash,
)

__all__ = [
    "TOKEN_CACHE_MAX", "TOKEN_PREFIX", "batch_accepted_get", "batch_backlog_count",
    "batch_project_pending_over", "batches_dead", "batches_pending_before", "mlflow_run_for_user",
    "token_cache_forget", "token_get_by_plaintext", "token_hash",
]  # fmt: skip
