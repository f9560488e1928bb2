"""Reads for ingest: token lookup and the sweeper's work queue."""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.db.models import QuerySet

from ingest.models import IngestBatch, IngestToken

TOKEN_PREFIX = "chr_"


def token_hash(plaintext: str) -> str:
    # Tokens carry 256 random bits, so a fast unsalted hash is enough to make a leaked
    # database useless (GitHub and Sentry tokens are stored the same way).
    return hashlib.sha256(plaintext.encode()).hexdigest()


def token_get_by_plaintext(*, plaintext: str) -> IngestToken | None:
    """The usable (not revoked, not expired) token with this plaintext, or None."""
    if not plaintext.startswith(TOKEN_PREFIX) or len(plaintext) > 200:
        return None
    token = (
        IngestToken.objects.select_related("project").filter(key_hash=token_hash(plaintext)).first()
    )
    if token is None or not token.is_usable():
        return None
    return token


def batches_pending_before(*, cutoff: datetime, limit: int) -> QuerySet[IngestBatch]:
    """Pending batches received before `cutoff`, oldest first (uses batch_pending_idx)."""
    return IngestBatch.objects.filter(status=IngestBatch.Status.PENDING, received_at__lt=cutoff)[
        :limit
    ]


def batch_backlog_count() -> int:
    return IngestBatch.objects.filter(status=IngestBatch.Status.PENDING).count()
