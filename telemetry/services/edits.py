"""Rows edited whole, field by field: the Django admin's forms save and delete projects, runs,
attempts and hardware here, so the versions the cached pages key on move in the same transaction and
the next page shows the edit. Quarantine is not edited that way: it goes through the fleet
page (logbook.services.quarantine, audited)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import transaction

from telemetry.models import Attempt, Cluster, Device, Host, MetricSeries, Project, Run, Site
from telemetry.services import fleet_version_bump, run_data_version_bump

# Hardware and places: every project's fleet lists them (a host's name, its cluster).
Hardware = Site | Cluster | Host | Device


@transaction.atomic
def hardware_save(*, row: Hardware) -> None:
    row.save()
    fleet_version_bump(project_id=None)


@transaction.atomic
def hardware_delete(*, rows: Sequence[Hardware]) -> None:
    for row in rows:
        row.delete()
    fleet_version_bump(project_id=None)


@transaction.atomic
def project_save(*, project: Project) -> None:
    """A project's name or slug: its fleet pages show them."""
    project.save()
    fleet_version_bump(project_id=project.pk)


@transaction.atomic
def projects_delete(*, projects: Sequence[Project]) -> None:
    """Projects with everything that is theirs (runs, tokens, members: the cascade). No page
    of another project shows them: nothing else to move."""
    for project in projects:
        project.delete()


@transaction.atomic
def run_save(*, run: Run) -> None:
    """A run's description (a rename, its model's shape): its pages, and the fleet pages of
    its project, which list runs by name (both projects' if it moved)."""
    before = Run.objects.filter(pk=run.pk).values_list("project_id", flat=True).first()
    run.save()
    run_data_version_bump(run_id=run.pk)
    for project_id in sorted({run.project_id, before or run.project_id}):
        fleet_version_bump(project_id=project_id)


@transaction.atomic
def runs_delete(*, runs: Sequence[Run]) -> None:
    for run in runs:
        fleet_version_bump(project_id=run.project_id)
        run.delete()


@transaction.atomic
def attempt_save(*, attempt: Attempt, hosts: Iterable[Host] | None = None) -> None:
    """An attempt's times, status or resume step, and with `hosts` the hosts it ran on (the
    fleet lists a quarantined host with the runs that ran on it)."""
    attempt.save()
    if hosts is not None:
        attempt.hosts.set(hosts)
        fleet_version_bump(project_id=attempt.run.project_id)
    run_data_version_bump(run_id=attempt.run_id)


@transaction.atomic
def attempts_delete(*, attempts: Sequence[Attempt]) -> None:
    for attempt in attempts:
        run_data_version_bump(run_id=attempt.run_id)
        fleet_version_bump(project_id=attempt.run.project_id)
        attempt.delete()


@transaction.atomic
def series_delete(*, series: Sequence[MetricSeries]) -> None:
    """Series deleted with their points (a metric logged by mistake): their runs' charts."""
    for one in series:
        run_data_version_bump(run_id=one.run_id)
        one.delete()
