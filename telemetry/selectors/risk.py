"""Reads for the at-risk list: which of a project's GPUs show a precursor of failure, with
their readings and XIDs over telemetry.risk.LOOKBACK, assessed by telemetry.risk.

Not every GPU is read: the candidates are those whose newest readings hold a precursor
counter above zero (DeviceHealthState.last_readings) or that reported a precursor XID in the
lookback, at most MAX_CANDIDATES of them (the most recently pushed first). Their history
is read from the 5-minute summaries (each counter's maximum in a bucket is its value at the
bucket's end), one bucket an hour: a rate over hours needs no more, and 24 rows a GPU keep a
fleet's read to one query of thousands of rows, not millions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Q

from telemetry import risk
from telemetry.device_samples import SUMMARY_FIELDS, SUMMARY_TABLE
from telemetry.models import DeviceEvent, DeviceHealthState

MAX_CANDIDATES = 500
_COUNTERS = [name for name in risk.FIELDS_READ if name in SUMMARY_FIELDS]


@dataclass(frozen=True)
class DeviceRisk:
    project_id: int
    device_id: int
    device: str
    host: str
    host_id: int | None
    risk: risk.Risk


def at_risk_devices(*, project_ids: Sequence[int], now: datetime) -> list[DeviceRisk]:
    """The projects' GPUs at risk at `now`, highest score first. Three queries."""
    since = now - risk.LOOKBACK
    nonzero = Q()
    for name in _COUNTERS:
        # Django's array index transform is 0-based, like SUMMARY_FIELDS (telemetry.dcgm.FIELDS).
        nonzero |= Q(**{f"last_readings__{SUMMARY_FIELDS.index(name)}__gt": 0})
    xid_rows = list(
        DeviceEvent.objects.filter(
            project_id__in=project_ids,
            kind=DeviceEvent.Kind.XID,
            xid__in=sorted(risk.PRECURSOR_XIDS),
            occurred_at__gte=since,
            occurred_at__lte=now,
        ).values_list("device_id", "occurred_at", "xid")
    )
    xids: dict[int, list[risk.XidSeen]] = {}
    for device_id, at, code in xid_rows:
        xids.setdefault(device_id, []).append(risk.XidSeen(at, code))
    states = (
        DeviceHealthState.objects.filter(device__project_id__in=project_ids)
        .filter(nonzero | Q(device_id__in=list(xids)))
        .filter(last_push_at__gte=since)
        .order_by("-last_push_at")
        .values_list(
            "device_id", "device__uuid", "device__project_id", "device__host_id",
            "device__host__name",
        )[:MAX_CANDIDATES]
    )  # fmt: skip
    candidates = {row[0]: row for row in states}
    readings = _hourly_readings(list(candidates), since=since, now=now)
    found = []
    for device_id, (_, uuid, project_id, host_id, host_name) in candidates.items():
        assessed = risk.assess(readings.get(device_id, []), xids.get(device_id, []), now=now)
        if assessed.at_risk:
            found.append(
                DeviceRisk(project_id, device_id, uuid, host_name or "", host_id, assessed)
            )
    found.sort(key=lambda one: (-one.risk.score, one.host, one.device))
    return found


def risk_at(*, device_ids: Sequence[int], at: datetime) -> dict[int, risk.Risk]:
    """What the detector said of each device at `at` (before an incident on it), from the
    same readings and XIDs the list reads. Two queries."""
    since = at - risk.LOOKBACK
    readings = _hourly_readings(list(device_ids), since=since, now=at)
    xids: dict[int, list[risk.XidSeen]] = {}
    for device_id, occurred_at, code in DeviceEvent.objects.filter(
        device_id__in=list(device_ids), kind=DeviceEvent.Kind.XID, occurred_at__gte=since,
        occurred_at__lt=at,
    ).values_list("device_id", "occurred_at", "xid"):  # fmt: skip
        xids.setdefault(device_id, []).append(risk.XidSeen(occurred_at, code))
    return {
        device_id: risk.assess(readings.get(device_id, []), xids.get(device_id, []), now=at)
        for device_id in device_ids
    }


def _hourly_readings(
    device_ids: list[int], *, since: datetime, now: datetime
) -> dict[int, list[risk.Reading]]:
    """Each device's newest summary bucket of every hour in [since, now], oldest first, as
    readings of the counters the detector reads (a counter's bucket maximum is its value at
    the bucket's end; a gauge's is whether it was ever set in the bucket)."""
    if not device_ids:
        return {}
    # PostgreSQL arrays are 1-based; SUMMARY_FIELDS positions are 0-based.
    columns = ", ".join(f"value_maxes[{SUMMARY_FIELDS.index(name) + 1}]" for name in _COUNTERS)
    sql = f"""
        SELECT DISTINCT ON (device_id, date_trunc('hour', bucket_start))
            device_id, bucket_start, {columns}
        FROM {SUMMARY_TABLE}
        WHERE device_id = ANY(%s) AND bucket_start >= %s AND bucket_start <= %s
        ORDER BY device_id, date_trunc('hour', bucket_start), bucket_start DESC
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [device_ids, since, now])
        rows = cursor.fetchall()
    readings: dict[int, list[risk.Reading]] = {}
    for device_id, at, *values in rows:
        present = {name: v for name, v in zip(_COUNTERS, values, strict=True) if v is not None}
        readings.setdefault(device_id, []).append(risk.Reading(at, present))
    for series in readings.values():
        series.sort(key=lambda one: one.at)
    return readings
