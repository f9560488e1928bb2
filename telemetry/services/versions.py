"""The versions the cached pages key on (telemetry.run_cache): each write that changes what a
run's pages or the fleet pages show moves one, in its transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db.models import F

from telemetry.models import Project, Run


@dataclass
class _Deferred:
    runs: set[int] = field(default_factory=set)
    # None: every project.
    projects: set[int | None] = field(default_factory=set)


_deferred: ContextVar[_Deferred | None] = ContextVar("version_bumps_deferred", default=None)


def run_data_version_bump(*, run_id: int) -> None:
    """Say that something the run's pages show changed: the figures cached under its previous
    data_version are not read again. Call it in the transaction of the change, so the page
    that reads the new version reads the new data."""
    pending = _deferred.get()
    if pending is not None:
        pending.runs.add(run_id)
        return
    Run.objects.filter(pk=run_id).update(data_version=F("data_version") + 1)


def fleet_version_bump(*, project_id: int | None) -> None:
    """Say that what the fleet pages list for the project's runs changed (an incident, the
    hardware it names). None for every project. In the transaction of the change."""
    pending = _deferred.get()
    if pending is not None:
        pending.projects.add(project_id)
        return
    projects = (
        Project.objects.all() if project_id is None else Project.objects.filter(pk=project_id)
    )
    projects.update(fleet_version=F("fleet_version") + 1)


@contextmanager
def version_bumps_deferred() -> Iterator[None]:
    """An ingest batch calls many services, each of which bumps a version; made there and
    then, the first would lock the run's row for the rest of the batch, while batches of one
    run share it by taking that lock last (see ingest.services.processing._apply). Inside this
    block the bumps are collected, and made once at its end, still in the batch's transaction
    (not at all if the block raises: the transaction is rolled back anyway).
    run_progress_record, the batch's last write, bumps the run's version itself."""
    pending = _Deferred()
    token = _deferred.set(pending)
    try:
        yield
    finally:
        _deferred.reset(token)
    for run_id in sorted(pending.runs):
        run_data_version_bump(run_id=run_id)
    if None in pending.projects:
        fleet_version_bump(project_id=None)
    else:
        for project_id in sorted(p for p in pending.projects if p is not None):
            fleet_version_bump(project_id=project_id)
