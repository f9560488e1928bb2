"""Derived figures of a run (goodput, MFU, the run page's charts) computed once and cached,
keyed on a fingerprint of the run's data.

A Llama-scale run has a million steps per metric: its goodput ledger or MFU means take
seconds, far past what a page may spend. The fingerprint is one query of aggregates over the
run's small tables (attempts, interruptions, checkpoints, intervals, annotations, logbook
entries: thousands of rows, index scans) plus the run's row, whose last_step and last_seen_at
ingest moves forward with every batch, and the last recorded step of each attempt (an index
probe each). Anything that changes what a page shows changes the fingerprint, so a page is
never older than its data; backfilled points that move none of these (an old batch delivered
late) show once the entry expires (CACHE_TTL_S).

The cache fails open: with Redis down, pages compute their figures as before.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

from django.core.cache import cache
from django.db import connection

from telemetry.models import AcceleratorType, Attempt, JobInterval, MetricSeries, Run, StepStart

logger = logging.getLogger(__name__)

T = TypeVar("T")

CACHE_TTL_S = 600
KEY_PREFIX = "run-derived:v1"


def _table(relation: str) -> str:
    # Logbook's tables through the reverse relations it declares (telemetry does not import
    # logbook: see telemetry.selectors' docstring).
    return Run._meta.get_field(relation).related_model._meta.db_table  # type: ignore[union-attr]


def _restores_table() -> str:
    checkpoint = Run._meta.get_field("checkpoints").related_model
    return checkpoint._meta.get_field("restores").related_model._meta.db_table  # type: ignore[union-attr]


def _parts() -> dict[str, str]:
    attempt = Attempt._meta.db_table
    return {
        "run": f"SELECT md5(r::text) FROM {Run._meta.db_table} r WHERE r.id = %(run)s",
        "attempts": (
            "SELECT concat_ws(',', count(*), max(id), sum(number), max(started_at), "
            "max(ended_at), count(ended_at), sum(resumed_from_step), count(resumed_from_step), "
            "sum(hashtext(status)), sum(hashtext(end_reason))) "
            f"FROM {attempt} WHERE run_id = %(run)s"
        ),
        "step_starts": (
            "SELECT concat_ws(',', count(*), sum(("
            f"SELECT max(step) FROM {StepStart._meta.db_table} s WHERE s.attempt_id = a.id))) "
            f"FROM {attempt} a WHERE a.run_id = %(run)s"
        ),
        "series": (
            "SELECT concat_ws(',', count(*), max(id)) "
            f"FROM {MetricSeries._meta.db_table} WHERE run_id = %(run)s"
        ),
        "intervals": (
            "SELECT concat_ws(',', count(*), max(id), max(ended_at), min(started_at)) "
            f"FROM {JobInterval._meta.db_table} WHERE run_id = %(run)s"
        ),
        "interruptions": (
            "SELECT concat_ws(',', count(*), max(id), sum(root_cause_id), sum(step), "
            "count(*) FILTER (WHERE planned), max(recovered_at), count(recovered_at), "
            "max(occurred_at), sum(attempt_id)) "
            f"FROM {_table('interruptions')} WHERE run_id = %(run)s"
        ),
        # Every interruption's times, not only the latest (the checkpoint advisor's MTBF and
        # restart cost read them all).
        "interruption_times": (
            "SELECT concat_ws(',', sum(extract(epoch FROM occurred_at)), "
            "sum(extract(epoch FROM recovered_at)), sum(extract(epoch FROM detected_at))) "
            f"FROM {_table('interruptions')} WHERE run_id = %(run)s"
        ),
        "checkpoints": (
            "SELECT concat_ws(',', count(*), max(id), sum(blocking_save_s), max(saved_at), "
            "count(saved_at), sum(step)) "
            f"FROM {_table('checkpoints')} WHERE run_id = %(run)s"
        ),
        # What "checkpoints" leaves out but the checkpoint advisor and its chart read: each
        # checkpoint's status (only saved ones count), async cost, attempt, and every save
        # time (not only the latest), so an edit to an old row moves the digest too.
        "checkpoint_details": (
            "SELECT concat_ws(',', sum(hashtext(status)), sum(async_save_s), "
            "sum(extract(epoch FROM saved_at)), sum(attempt_id), count(attempt_id)) "
            f"FROM {_table('checkpoints')} WHERE run_id = %(run)s"
        ),
        "restores": (
            "SELECT concat_ws(',', count(*), max(x.id), sum(x.restore_s), max(x.restored_at)) "
            f"FROM {_restores_table()} x "
            f"JOIN {attempt} a ON a.id = x.attempt_id WHERE a.run_id = %(run)s"
        ),
        "annotations": (
            "SELECT concat_ws(',', count(*), max(id), max(updated_at)) "
            f"FROM {_table('annotations')} WHERE run_id = %(run)s"
        ),
        "entries": (
            "SELECT concat_ws(',', count(*), max(id), max(updated_at), sum(version)) "
            f"FROM {_table('logbook_entries')} WHERE run_id = %(run)s"
        ),
        "accelerators": (
            "SELECT md5(string_agg(concat_ws(',', name, aliases, peak_flops_bf16, source), ';' "
            f"ORDER BY id)) FROM {AcceleratorType._meta.db_table}"
        ),
    }


def run_fingerprint(*, run: Run, parts: Iterable[str]) -> str:
    """A digest that changes whenever the named parts of the run's data change. One query."""
    names = sorted(set(parts) | {"run"})
    queries = _parts()
    sql = "SELECT " + ", ".join(f"({queries[name]})" for name in names)
    with connection.cursor() as cursor:
        cursor.execute(sql.replace("%(run)s", "%s"), [run.pk] * sql.count("%(run)s"))
        row = cursor.fetchone()
    return hashlib.sha256(repr((run.pk, names, row)).encode()).hexdigest()[:32]


def cached(key: str, compute: Callable[[], T], *, timeout: int = CACHE_TTL_S) -> T:
    """The cached value under `key`, else compute() (stored for next time). Fails open."""
    full_key = f"{KEY_PREFIX}:{key}"
    try:
        found = cache.get(full_key)
    except Exception:  # cache down: compute, as if nothing were cached
        logger.warning("run figures not read from the cache: cache unavailable", exc_info=True)
        found = None
    if found is not None:
        return found  # type: ignore[no-any-return]
    value = compute()
    try:
        cache.set(full_key, value, timeout)
    except Exception:
        logger.warning("run figures not cached: cache unavailable", exc_info=True)
    return value
