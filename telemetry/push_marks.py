"""When a project's GPUs last pushed, kept in the cache: what the at-risk list is keyed on.

A quiet push bumps no version (telemetry.services.versions), yet it may carry the reading that
puts a GPU at risk, so the at-risk list is computed again after any push. Asking PostgreSQL
for the newest `DeviceHealthState.last_push_at` of a 100,000-GPU project scans 100,000 rows
(64 ms of a quiet server's time, four times that under a fleet's remote-write, on every fleet
page view); one cache key a project, set after each push commits, costs the push one Redis
round trip and the page one.

A mark only tells a cached list from a newer push, so a missing one (the cache emptied or
evicted it) reads 0.0: the list cached beside it went with it or holds another mark, and is
computed again either way."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from django.core.cache import cache

logger = logging.getLogger(__name__)

TIMEOUT_S = 7 * 24 * 3600


def _key(project_id: int) -> str:
    return f"gpu-pushed:v1:{project_id}"


def push_mark(*, project_id: int) -> None:
    """Say that the project's GPUs pushed just now. Call it after the push's commit: a page
    that reads the new mark then reads the push's rows."""
    try:
        cache.set(_key(project_id), time.time(), TIMEOUT_S)
    except Exception:  # the cache down: nothing is cached for the readers either
        logger.warning("GPU push not marked in the cache", exc_info=True)


def push_marks(*, project_ids: Sequence[int]) -> tuple[float, ...]:
    """Each project's last push mark, in `project_ids`' order (0.0: none kept)."""
    try:
        found = cache.get_many([_key(project_id) for project_id in project_ids])
    except Exception:
        logger.warning("GPU push marks not read from the cache", exc_info=True)
        found = {}
    return tuple(float(found.get(_key(project_id), 0.0)) for project_id in project_ids)
