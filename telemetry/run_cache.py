"""Derived figures of a run (goodput, MFU, the run page's charts, the checkpoint advisor)
and the fleet's rows, computed once and cached, keyed on a version of the data they read.

A Llama-scale run has a million steps per metric: its goodput ledger or MFU means take
seconds, far past what a page may spend. Every service that changes what a run's pages show
bumps the run's data_version in the same transaction (telemetry.services.run_data_version_bump;
an ingest batch once, with its progress), and what the fleet pages list bumps the project's
fleet_version (fleet_version_bump). A key holds the version read with the run (or project), so
a page is never older than its data: the next request after a change reads a new key. Edits
made outside the services (the Django admin) show once the entry expires (CACHE_TTL_S).

The cache fails open: with Redis down, pages compute their figures as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar, cast

from django.core.cache import cache

from telemetry.models import Run

logger = logging.getLogger(__name__)

T = TypeVar("T")

CACHE_TTL_S = 600
KEY_PREFIX = "run-derived:v2"


def run_version_key(*, run: Run) -> str:
    """The part of a cache key that names the run's data as it is now: (run, data_version).
    The version is the one on the row the caller read, so no query."""
    return f"{run.pk}@{run.data_version}"


def cached(key: str, compute: Callable[[], T], *, timeout: int = CACHE_TTL_S) -> T:
    """The cached value under `key`, else compute() (stored for next time). Fails open."""
    full_key = f"{KEY_PREFIX}:{key}"
    try:
        found = cache.get(full_key)
    except Exception:  # cache down: compute, as if nothing were cached
        logger.warning("run figures not read from the cache: cache unavailable", exc_info=True)
        found = None
    if found is not None:
        # The cache hands back what compute() stored under this key, so it is a T.
        return cast(T, found)
    value = compute()
    try:
        cache.set(full_key, value, timeout)
    except Exception:
        logger.warning("run figures not cached: cache unavailable", exc_info=True)
    return value
