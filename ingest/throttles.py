"""Ingest admission control: a per-token request rate and a backlog high-water mark.

Both answer 429 with Retry-After. Both fail open: if the cache (Redis) is down, ingest keeps
accepting, because a lost Redis must cost latency, never refused data.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from ingest.models import IngestToken
from ingest.selectors import batch_backlog_count

logger = logging.getLogger(__name__)

BACKLOG_CACHE_KEY = "ingest:backlog"
# Counting pending rows is cheap (a partial index) but not free; once a second is plenty.
BACKLOG_CACHE_S = 1
BACKLOG_RETRY_AFTER_S = 10


class IngestTokenRateThrottle(SimpleRateThrottle):
    """At most settings.INGEST_RATE_LIMIT requests per token."""

    scope = "ingest"

    def get_rate(self) -> str | None:
        return settings.INGEST_RATE_LIMIT or None

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not isinstance(request.auth, IngestToken):
            return None
        return f"throttle:ingest:{request.auth.pk}"

    def allow_request(self, request: Request, view: Any) -> bool:
        try:
            return super().allow_request(request, view)
        except Exception:
            logger.warning("ingest rate limit skipped: cache unavailable", exc_info=True)
            return True


def backlog_is_full() -> bool:
    """Whether unprocessed batches passed settings.INGEST_BACKLOG_HIGH_WATER."""
    try:
        backlog = cache.get(BACKLOG_CACHE_KEY)
    except Exception:
        backlog = None
    if backlog is None:
        backlog = batch_backlog_count()
        try:
            cache.set(BACKLOG_CACHE_KEY, backlog, BACKLOG_CACHE_S)
        except Exception:
            logger.warning("backlog gauge not cached: cache unavailable", exc_info=True)
    return backlog >= settings.INGEST_BACKLOG_HIGH_WATER
