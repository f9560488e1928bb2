"""Reads of GPU health events for auto-triage (logbook.selectors.triage): the events
on a set of hosts in a time window, the events of a push by id, and an attempt's hosts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from telemetry.models import Attempt, DeviceEvent


@dataclass(frozen=True)
class HealthEventRow:
    pk: int
    kind: str
    xid: int | None
    occurred_at: datetime
    message: str
    host_id: int | None
    host_name: str
    device_uuid: str
    first_sight: bool


def _rows(events: object) -> list[HealthEventRow]:
    values = events.values_list(  # type: ignore[attr-defined]
        "pk", "kind", "xid", "occurred_at", "message", "host_id", "host__name", "device__uuid",
        "first_sight",
    )  # fmt: skip
    return [
        HealthEventRow(pk, kind, xid, at, message, host_id, host or "", uuid or "", first)
        for pk, kind, xid, at, message, host_id, host, uuid, first in values
    ]


def health_events_near(
    *, project_id: int, host_ids: Sequence[int], since: datetime, until: datetime
) -> list[HealthEventRow]:
    """The project's GPU health events on the hosts between since and until, oldest first
    (device_event_host_time_idx). Readings that may predate the run (first sight) are left
    out: they blame nothing."""
    if not host_ids:
        return []
    events = DeviceEvent.objects.filter(
        project_id=project_id,
        host_id__in=list(host_ids),
        occurred_at__gte=since,
        occurred_at__lte=until,
        first_sight=False,
    ).order_by("occurred_at", "pk")
    return _rows(events)


def health_events_by_id(*, event_ids: Sequence[int]) -> list[HealthEventRow]:
    return _rows(DeviceEvent.objects.filter(pk__in=list(event_ids)).order_by("pk"))


def attempt_host_ids(*, attempt_id: int) -> dict[int, str]:
    """The hosts an attempt ran on, id -> name."""
    return dict(
        Attempt.hosts.through.objects.filter(attempt_id=attempt_id).values_list(
            "host_id", "host__name"
        )
    )
