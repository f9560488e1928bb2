"""Per-project shares of the web tier: at most INGEST_PROJECT_MAX_IN_FLIGHT requests of one
project's ingest tokens (JSON batches, Prometheus pushes, the MLflow API) are served at once,
across all web processes; one past that is answered 429 with Retry-After at once, without
being read. A flood from one project then holds its share of the web workers, not all of
them, and the others' requests are served by the rest (issue 42, finding 4: one project's
flood made another's pushes 6x and its pages 4.7x slower).

The slots are a sorted set per project in Redis (a request's id, scored by when it began);
a slot older than STALE_AFTER_S (past gunicorn's timeout) is a request whose process died
and is dropped. Fails open like the rate limits: without Redis every request is served."""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from ingest import rate_limit

logger = logging.getLogger(__name__)

# Longer than any request lives (gunicorn's timeout is 30 s): a slot this old was left by a
# process that died mid-request.
STALE_AFTER_S = 120
RETRY_AFTER_S = 1

# KEYS[1]: the project's slots; ARGV: now, stale before, limit, this request's id.
_ACQUIRE = f"""
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], {STALE_AFTER_S})
return 1
"""


@dataclass(frozen=True)
class Slot:
    key: str
    member: str


def slot_take(*, project_id: int) -> Slot | bool | None:
    """A slot of the project's share: the Slot to give back, False when the share is full,
    None when no share applies (the setting is 0, or Redis is unavailable: fail open)."""
    limit = settings.INGEST_PROJECT_MAX_IN_FLIGHT
    if limit <= 0:
        return None
    client, _ = rate_limit.redis_client()
    if client is None:
        return None
    key = cache.make_key(f"inflight:project:{project_id}")
    member = secrets.token_hex(8)
    now_s = time.time()
    try:
        script = _script(client)
        taken = script(
            keys=[key], args=[now_s, now_s - STALE_AFTER_S, limit, member], client=client
        )
    except Exception:
        logger.warning("project share skipped: Redis unavailable", exc_info=True)
        return None
    return Slot(key=key, member=member) if int(taken) else False


def slot_give_back(slot: Slot) -> None:
    client, _ = rate_limit.redis_client()
    try:
        client.zrem(slot.key, slot.member)
    except Exception:
        # Dropped as stale after STALE_AFTER_S.
        logger.warning("project share slot not given back: Redis unavailable", exc_info=True)


_scripts: dict[int, object] = {}


def _script(client: object) -> object:
    made = _scripts.get(id(client))
    if made is None:
        made = _scripts[id(client)] = client.register_script(_ACQUIRE)  # type: ignore[attr-defined]
    return made
