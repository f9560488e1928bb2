"""Reads of the straggler ledger: a run's records, and the records as fleet incidents (where
they count toward a host's or device's repeat-offender total)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, QuerySet

from logbook.models import StragglerRecord
from logbook.selectors.offenders import VIA_NAMED, Incident
from telemetry.models import Host, Run


def straggler_records_for_run(*, run: Run) -> QuerySet[StragglerRecord]:
    """The run's straggler records, open ones first, newest first."""
    return (
        StragglerRecord.objects.filter(run=run)
        .select_related("attempt", "host", "device", "resolved_by_attempt")
        .order_by("status", "-last_window_at", "rank")
    )


def straggler_records_for_attempt(*, attempt_id: int) -> list[StragglerRecord]:
    """The attempt's straggler records, earliest first: on an incident's page, the ranks that
    were slow in the attempt it ended."""
    return list(
        StragglerRecord.objects.filter(attempt_id=attempt_id)
        .select_related("host", "device", "resolved_by_attempt")
        .order_by("first_window_at", "rank")[:50]
    )


def straggler_incidents(
    *,
    runs: QuerySet[Run] | list[int],
    since: datetime | None,
    until: datetime | None,
    host: Host | None = None,
) -> list[tuple[str, int, Incident]]:
    """(hardware kind, hardware id, incident) for each straggler record of `runs` in the
    window, once for its host and once for its device. One query."""
    records = StragglerRecord.objects.filter(run__in=runs)
    if since is not None:
        records = records.filter(last_window_at__gte=since)
    if until is not None:
        records = records.filter(first_window_at__lt=until)
    if host is not None:
        records = records.filter(Q(host=host) | Q(device__host=host))
    found = []
    for pk, at, run_id, run_name, project, rank, status, step_host, device in records.values_list(
        "pk",
        "first_window_at",
        "run_id",
        "run__name",
        "run__project__slug",
        "rank",
        "status",
        "host_id",
        "device_id",
    ):
        incident = Incident(
            "straggler", pk, at, run_id, run_name, project, f"Straggler rank {rank}", status, None,
            VIA_NAMED, names_device=device is not None,
        )  # fmt: skip
        if step_host is not None:
            found.append(("host", step_host, incident))
        if device is not None:
            found.append(("device", device, incident))
    return found
