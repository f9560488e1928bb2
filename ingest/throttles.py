"""Ingest admission control: a per-token request rate and a backlog high-water mark.

Both answer 429 with Retry-After. Both fail open: if the cache (Redis) is down, ingest keeps
accepting, because a lost Redis must cost latency, never refused data.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from ingest import rate_limit
from ingest.models import IngestToken
from ingest.selectors import batch_backlog_count

logger = logging.getLogger(__name__)

BACKLOG_CACHE_KEY = "ingest:backlog"
# Counting pending rows is cheap (a partial index) but not free; once a second is plenty.
BACKLOG_CACHE_S = 1
BACKLOG_RETRY_AFTER_S = 10


class IngestTokenRateThrottle(BaseThrottle):
    """At most settings.INGEST_RATE_LIMIT ("<count>/<s|m|h|d>") requests per token, and
    INGEST_PROJECT_PUSH_RATE per project (all its tokens together: a project cannot pass
    what one server holds by making more tokens): token buckets in Redis (ingest.rate_limit)
    holding `count` requests and refilled at count per period, so the period also says how
    large a burst passes ("100/s": 100 at once, then 100 a second; "6000/m": a whole
    minute's at once). One Redis call a request, both buckets in it: DRF's
    SimpleRateThrottle read and wrote the token's whole history of requests (a pickled list
    of up to `count` times) on every one, ~0.8 ms of a push's web CPU."""

    def __init__(self) -> None:
        self.wait_s: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        if not isinstance(request.auth, IngestToken):
            return True
        buckets = []
        for key, setting in (
            (f"ratelimit:token:{request.auth.pk}:push", settings.INGEST_RATE_LIMIT),
            (
                f"ratelimit:project:{request.auth.project_id}:push",
                settings.INGEST_PROJECT_PUSH_RATE,
            ),
        ):
            rate = rate_parse(setting)
            if rate is not None:
                count, period_s = rate
                buckets.append((key, count / period_s, count, 1))
        if not buckets:
            return True
        self.wait_s = rate_limit.buckets_take(buckets, now_s=time.time())
        return not self.wait_s

    def wait(self) -> float | None:
        return self.wait_s


PERIODS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def rate_parse(rate: str | None) -> tuple[int, int] | None:
    """(count, period in seconds) of "<count>/<s|m|h|d>" (DRF's form; the period may be
    spelt out, "second"); None for no limit ("", "0"). Raises ValueError otherwise."""
    if not rate or rate.strip() == "0":
        return None
    count, _, period = rate.partition("/")
    unit = period.strip()[:1]
    if not count.strip().isdecimal() or unit not in PERIODS_S or int(count) < 1:
        raise ValueError(f"{rate!r} is not <count>/<s|m|h|d>, e.g. 625/s")
    return int(count), PERIODS_S[unit]


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
