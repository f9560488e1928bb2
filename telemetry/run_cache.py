"""Derived figures of a run (goodput, MFU, the run page's charts, the checkpoint advisor)
and the fleet's rows, computed once and cached, keyed on a version of the data they read.

A Llama-scale run has a million steps per metric: its goodput ledger or MFU means take
seconds, far past what a page may spend. Every service that changes what a run's pages show
bumps the run's data_version in the same transaction (telemetry.services.run_data_version_bump;
an ingest batch once, with its progress), and what the fleet pages list bumps the project's
fleet_version (fleet_version_bump). A key holds the version read with the run (or project), so
a page is never older than its data: the next request after a change reads a new key. Only
the write functions of the apps' services bump, each its own (tests/test_architecture_owners.py:
no bump outside them, none of their writes of what the pages show without one); the Django
admin saves through them (telemetry.services.edits, sdc_verdict_set, root_cause_save) and
shows interruptions, checkpoints, logbook entries and triage suggestions read-only.

The cache fails open: with Redis down, pages compute their figures as before.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from telemetry.context_processors import display_context
from telemetry.models import Project, Run

logger = logging.getLogger(__name__)

T = TypeVar("T")

CACHE_TTL_S = 600
KEY_PREFIX = "run-derived:v2"
# What the cached values are computed and drawn by: the apps' code and the templates.
CODE_FOLDERS = ("config", "dashboard", "ingest", "logbook", "telemetry", "templates")


def code_digest(root: Path, folders: Iterable[str]) -> str:
    """A digest of the Python modules and templates under `folders` of `root`: their paths
    and contents, so two checkouts of the same code agree whatever their files' times."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".py", ".html") and path.is_file():
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@functools.cache
def code_version() -> str:
    """Part of every key: a key otherwise names only the data, so after an upgrade the pages
    kept showing what the previous release drew until the data changed or the entry expired
    (CACHE_TTL_S). Read once per process (~400 files, a few ms)."""
    return code_digest(Path(settings.BASE_DIR), CODE_FOLDERS)


def run_version_key(*, run: Run) -> str:
    """The part of a cache key that names the run's data as it is now: (run, data_version).
    The version is the one on the row the caller read, so no query."""
    return f"{run.pk}@{run.data_version}"


def projects_version_key(*, projects: Iterable[Project]) -> str:
    """The part of a cache key that names what the fleet pages list for these projects as
    it is now: a digest of their (id, fleet_version) pairs. The incidents, the hardware they
    name, quarantines, SDC records and stragglers all bump fleet_version (see
    telemetry.services.fleet_version_bump), and so does renaming a run in the admin."""
    pairs = sorted((project.pk, project.fleet_version) for project in projects)
    return hashlib.sha256(repr(pairs).encode()).hexdigest()[:32]


def query_key(request: HttpRequest) -> str:
    """The part of a cache key that names a page's query string (its filters, its page
    number and the links it writes to the pages around it), whatever its order."""
    items = sorted((key, value) for key in request.GET for value in request.GET.getlist(key))
    return hashlib.sha256(repr(items).encode()).hexdigest()[:32]


def render_piece(template_name: str, context: Mapping[str, Any]) -> str:
    """A piece of a page rendered without the request, so that nothing of the reader's (a
    CSRF token, a user name) can get into what cached_html hands every reader, but with the
    display setting every template knows (its zone's label)."""
    return render_to_string(template_name, {**display_context(), **context})


def cached_html(key: str, render: Callable[[], str]) -> SafeString:
    """A rendered piece of a page (its tables, mostly: rendering a hundred rows through the
    template engine cost 20-40 ms a view), cached under `key` and the reader's display time
    zone, in which its times are written. `key` must name the version of every row the piece
    shows and whatever of the request it reads; the piece must hold nothing else of the
    reader's (no CSRF token, no user name), since every reader with the same key gets it."""
    return mark_safe(cached(display_key(key), lambda: str(render())))


def display_key(key: str) -> str:
    """`key` with the reader's display time zone, for a value that holds times written in it
    (cached_html's pieces, or a piece cached with what the page draws around it)."""
    return f"html:{timezone.get_current_timezone_name()}:{key}"


def cached(
    key: str,
    compute: Callable[[], T],
    *,
    timeout: int = CACHE_TTL_S,
    fresh: Callable[[T], bool] | None = None,
) -> T:
    """The cached value under `key`, else compute() (stored for next time). Fails open.
    `fresh`, when given, says whether a cached value may still be served (one drawn from a
    window that slides with the clock, say): if not, it is computed again."""
    full_key = f"{KEY_PREFIX}:{code_version()}:{key}"
    try:
        found = cache.get(full_key)
    except Exception:  # cache down: compute, as if nothing were cached
        logger.warning("run figures not read from the cache: cache unavailable", exc_info=True)
        found = None
    if found is not None and (fresh is None or fresh(cast(T, found))):
        # The cache hands back what compute() stored under this key, so it is a T.
        return cast(T, found)
    value = compute()
    try:
        cache.set(full_key, value, timeout)
    except Exception:
        logger.warning("run figures not cached: cache unavailable", exc_info=True)
    return value
