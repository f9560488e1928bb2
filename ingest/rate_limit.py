"""Per-token and per-project ingest rates, in requests/s and points/s: token buckets in Redis.

One tenant must not starve the others, so each token and each project has two buckets (one
request, and one point per metric, per batch), refilled continuously at the configured rate
and holding at most BURST_S seconds of it. A batch is admitted only if all four buckets hold
its cost, and then takes it from all four in the same Lua call (atomic across web
processes). Refused: 429 with the Retry-After the emptiest bucket needs.

Fails open like the other admission checks: without Redis (or with it down) ingest accepts,
because a lost Redis must cost protection, never refused data.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

# A bucket holds this many seconds of its rate: a job's bursts (a flush after a checkpoint)
# pass, a sustained flood does not.
BURST_S = 2.0

# KEYS: the buckets; ARGV: now_s, then (rate, capacity, cost) per key. Admit only if every
# bucket holds its cost; then take it from all. Returns 0, or the seconds to wait.
_SCRIPT = """
local now = tonumber(ARGV[1])
local levels = {}
local wait = 0
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[3 * i - 1])
  local capacity = tonumber(ARGV[3 * i])
  local cost = tonumber(ARGV[3 * i + 1])
  local state = redis.call('HMGET', key, 'level', 'at')
  local level = tonumber(state[1]) or capacity
  local at = tonumber(state[2]) or now
  level = math.min(capacity, level + math.max(0, now - at) * rate)
  levels[i] = level
  -- A batch bigger than the bucket passes when it is full and leaves it in debt.
  local need = math.min(cost, capacity)
  if need > level then
    wait = math.max(wait, (need - level) / rate)
  end
end
if wait > 0 then return tostring(wait) end
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[3 * i - 1])
  local capacity = tonumber(ARGV[3 * i])
  local cost = tonumber(ARGV[3 * i + 1])
  redis.call('HSET', key, 'level', levels[i] - cost, 'at', now)
  redis.call('EXPIRE', key, math.ceil(capacity / rate) + 1)
end
return '0'
"""


@dataclass(frozen=True)
class Refusal:
    retry_after_s: int
    detail: str


def _limits(token_id: int, project_id: int, points: int) -> list[tuple[str, float, int, str]]:
    """(key, rate per s, cost, what) of each configured bucket; a rate of 0 is no limit."""
    wanted = [
        (f"ratelimit:token:{token_id}:req", settings.INGEST_TOKEN_REQUESTS_PER_S, 1,
         "requests/s for this token"),
        (f"ratelimit:token:{token_id}:pts", settings.INGEST_TOKEN_POINTS_PER_S, points,
         "points/s for this token"),
        (f"ratelimit:project:{project_id}:req", settings.INGEST_PROJECT_REQUESTS_PER_S, 1,
         "requests/s for this project"),
        (f"ratelimit:project:{project_id}:pts", settings.INGEST_PROJECT_POINTS_PER_S, points,
         "points/s for this project"),
    ]  # fmt: skip
    return [(key, float(rate), cost, what) for key, rate, cost, what in wanted if rate > 0]


def _redis() -> Any:
    """Django's RedisCache client (None with the per-process memory cache), and the bucket
    script registered with it. Both are made once per cache and process: Django builds a new
    client on every cache call, and redis-py's Script sends the script's SHA (EVALSHA), the
    whole text only when the server has not cached it yet."""
    backend = getattr(cache, "_cache", None)
    made = _clients.get(id(backend))
    if made is None:
        client_of = getattr(backend, "get_client", None)
        client = client_of(None, write=True) if client_of else None
        made = _clients[id(backend)] = (client, client and client.register_script(_SCRIPT))
    return made


_clients: dict[int, tuple[Any, Any]] = {}


def redis_client() -> tuple[Any, Any]:
    """The cache's Redis client (None with the memory cache) and the bucket script."""
    return _redis()


def buckets_take(buckets: list[tuple[str, float, float, int]], *, now_s: float) -> float | None:
    """Take `cost` from each bucket `(key, rate per s, capacity, cost)` if every one holds it
    (a bucket starts full; keys are under the cache's prefix). Returns 0.0 when taken, the
    seconds until all would hold it when not (nothing is taken then), or None when Redis is
    unavailable (the caller admits: fail open)."""
    try:
        client, script = _redis()
        if client is None:
            return None
        args: list[float] = [now_s]
        for _, rate, capacity, cost in buckets:
            args += [rate, capacity, cost]
        # Under the cache's key prefix, like every other key Chronicle keeps in Redis.
        keys = [cache.make_key(key) for key, *_ in buckets]
        return max(0.0, float(script(keys=keys, args=args, client=client)))
    except Exception:
        logger.warning("ingest rate limit skipped: Redis unavailable", exc_info=True)
        return None


def ingest_admit(*, token_id: int, project_id: int, points: int, now_s: float) -> Refusal | None:
    """Take one request and `points` points from the token's and the project's buckets, or
    say how long to wait (nothing is taken then)."""
    limits = _limits(token_id, project_id, points)
    if not limits:
        return None
    wait_s = buckets_take(
        [(key, rate, max(rate * BURST_S, 1.0), cost) for key, rate, cost, _ in limits],
        now_s=now_s,
    )
    if not wait_s:
        return None
    retry_after_s = max(1, math.ceil(wait_s))
    rates = ", ".join(f"{rate:g} {what}" for _, rate, _, what in limits)
    return Refusal(
        retry_after_s=retry_after_s,
        detail=f"Rate limit: at most {rates} (bursts up to {BURST_S:g} s of each). "
        f"Retry after {retry_after_s} s. Nothing was stored.",
    )
