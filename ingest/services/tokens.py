"""Ingest tokens: created shown once, stored hashed, revoked with their cache forgotten."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.utils import timezone

from ingest.models import IngestToken
from ingest.selectors import (
    TOKEN_PREFIX,
    token_cache_forget,
    token_hash,
)
from telemetry.models import Project

# --- Tokens ----------------------------------------------------------------------------------


def token_create(
    *,
    project: Project,
    name: str,
    created_by: object | None = None,
    expires_at: datetime | None = None,
) -> tuple[IngestToken, str]:
    """Create a token; returns it with its plaintext, which is not stored anywhere."""
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = IngestToken.objects.create(
        project=project,
        name=name,
        prefix=plaintext[: len(TOKEN_PREFIX) + 6],
        key_hash=token_hash(plaintext),
        created_by=created_by,
        expires_at=expires_at,
    )
    return token, plaintext


def token_revoke(*, token: IngestToken) -> IngestToken:
    """Revoke at once in this process; other processes read the token again within
    settings.INGEST_TOKEN_CACHE_S (ingest.selectors.token_get_by_plaintext)."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    token_cache_forget()
    return token


def token_touch(*, token: IngestToken) -> None:
    """Record use at most once a minute: a write per request would double ingest's cost."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        IngestToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now  # the instance may be the cached one
