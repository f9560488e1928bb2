"""Reads for ingest: token lookup and the sweeper's work queue."""

from __future__ import annotations

import hashlib
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from ingest.models import IngestBatch, IngestToken, MlflowRun
from telemetry.models import Project
from telemetry.selectors import projects_for_user

TOKEN_PREFIX = "chr_"


def token_hash(plaintext: str) -> str:
    # Tokens carry 256 random bits, so a fast unsalted hash is enough to make a leaked
    # database useless (GitHub and Sentry tokens are stored the same way).
    return hashlib.sha256(plaintext.encode()).hexdigest()


# Tokens this process read lately: key hash -> (token, when read, monotonic). The lookup
# query was 14% of a DCGM push's web CPU, and a fleet's 68 pushes/s use one token. A token
# revoked in this process is forgotten at once (token_revoke); in others it stops working
# within settings.INGEST_TOKEN_CACHE_S. Unknown tokens are never kept, so a flood of wrong
# ones cannot fill it; known ones are few, and the whole cache is dropped past the bound.
_tokens: dict[str, tuple[IngestToken, float]] = {}
TOKEN_CACHE_MAX = 1000


def token_get_by_plaintext(*, plaintext: str) -> IngestToken | None:
    """The usable (not revoked, not expired) token with this plaintext, or None. Read from
    the database at most every settings.INGEST_TOKEN_CACHE_S per token and process."""
    if not plaintext.startswith(TOKEN_PREFIX) or len(plaintext) > 200:
        return None
    key = token_hash(plaintext)
    now = time.monotonic()
    cached = _tokens.get(key)
    if cached is not None and now - cached[1] < settings.INGEST_TOKEN_CACHE_S:
        token = cached[0]
    else:
        token = IngestToken.objects.select_related("project").filter(key_hash=key).first()
        if token is None:
            _tokens.pop(key, None)
            return None
        if len(_tokens) >= TOKEN_CACHE_MAX:
            _tokens.clear()
        if settings.INGEST_TOKEN_CACHE_S > 0:
            _tokens[key] = (token, now)
    if not token.is_usable():
        return None
    return token


def token_cache_forget() -> None:
    """Forget the tokens this process read: after a revocation, and between tests."""
    _tokens.clear()


def batches_pending_before(*, cutoff: datetime, limit: int) -> QuerySet[IngestBatch]:
    """Pending batches received before `cutoff`, oldest first (uses batch_pending_idx)."""
    return IngestBatch.objects.filter(status=IngestBatch.Status.PENDING, received_at__lt=cutoff)[
        :limit
    ]


def mlflow_run_for_user(*, user: Any, run_uuid: str) -> MlflowRun | None:
    """The MLflow run of this id in one of the user's projects, with its Chronicle run."""
    return (
        MlflowRun.objects.filter(run_uuid=run_uuid, run__project__in=projects_for_user(user=user))
        .select_related("run")
        .first()
    )


def batches_dead(*, project: Project) -> QuerySet[IngestBatch]:
    """The project's dead batches, newest first (uses batch_dead_idx); the body stays unread."""
    return (
        IngestBatch.objects.filter(project=project, status=IngestBatch.Status.DEAD)
        .select_related("token")
        .defer("body")
        .order_by("-received_at")
    )


def batch_accepted_get(*, project_id: int, batch_id: str) -> IngestBatch | None:
    """The project's batch of that id if one was accepted, without its body (the unique
    constraint batch_unique_id's index)."""
    return (
        IngestBatch.objects.filter(project_id=project_id, batch_id=batch_id).defer("body").first()
    )


def batch_backlog_count() -> int:
    return IngestBatch.objects.filter(status=IngestBatch.Status.PENDING).count()


def batch_project_pending_over(*, batch_pk: int, share: int) -> bool:
    """Whether the batch's project has more than `share` batches pending (this one among
    them); counts no further than share + 1."""
    project_id = IngestBatch.objects.filter(pk=batch_pk).values("project_id")[:1]
    pending = IngestBatch.objects.filter(
        project_id__in=project_id, status=IngestBatch.Status.PENDING
    )
    return pending[: share + 1].count() > share
