"""Reads of ingest tokens: the lookup by plaintext every push makes, cached per process."""

from __future__ import annotations

import hashlib
import time

from django.conf import settings

from ingest.models import IngestToken

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
