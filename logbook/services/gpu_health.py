"""GPU health from dcgm-exporter pushes: store the readings, find health events, and open an
interruption on the runs that were using the device's host.

An event always becomes a DeviceEvent (fleet health shows it whether or not a run was
affected). It also opens an Interruption on each run of the pushing project whose latest
attempt is running and lists the host, unless the reading may predate that run
(`first_sight`), or that attempt already has an open GPU-health interruption on that host
(a failing GPU keeps raising counters every push; one incident per attempt is enough).

The attempt is linked but not ended: unlike a job's own interruption event, a GPU signal
does not prove the job stopped (a thermal limit only throttles it). The job's
attempt_ended, or its next attempt_started, says whether it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F, OuterRef, Subquery

from logbook.models import IncidentSource, Interruption
from logbook.services import autotriage
from logbook.services.interruptions import interruption_record
from telemetry import dcgm
from telemetry.models import (
    Attempt,
    DeviceEvent,
    Project,
)
from telemetry.services import device_health

SOURCE_KEY_PREFIX = "dcgm:"

# Taxonomy slugs (logbook.taxonomy): which Llama 3 Table 5 component a signal points at.
MEMORY_XIDS = {48, 63, 64, 92, 94, 95, 140}
GSP_XIDS = {119, 120}
CAUSE_BY_KIND = {
    DeviceEvent.Kind.ECC_UNCORRECTABLE: "gpu-hbm3-memory",
    DeviceEvent.Kind.ROW_REMAP: "gpu-hbm3-memory",
    DeviceEvent.Kind.ROW_REMAP_FAILURE: "gpu-hbm3-memory",
    DeviceEvent.Kind.THERMAL: "gpu-thermal-interface-sensor",
}
# Most telling first: it names the interruption when one push raises several signals.
KIND_RANK = [
    DeviceEvent.Kind.XID,
    DeviceEvent.Kind.ECC_UNCORRECTABLE,
    DeviceEvent.Kind.ROW_REMAP_FAILURE,
    DeviceEvent.Kind.ROW_REMAP,
    DeviceEvent.Kind.THERMAL,
]
HIGH_SEVERITY = {
    DeviceEvent.Kind.XID,
    DeviceEvent.Kind.ECC_UNCORRECTABLE,
    DeviceEvent.Kind.ROW_REMAP_FAILURE,
}


def root_cause_slug(event: DeviceEvent) -> str:
    if event.kind == DeviceEvent.Kind.XID:
        if event.xid in MEMORY_XIDS:
            return "gpu-hbm3-memory"
        if event.xid in GSP_XIDS:
            return "gpu-system-processor"
        return "faulty-gpu"
    return CAUSE_BY_KIND[event.kind]


@dataclass(frozen=True)
class PushOutcome:
    devices: int
    samples: int
    events: list[DeviceEvent]
    interruptions: list[Interruption]


def dcgm_push_record(
    *, project: Project, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> PushOutcome:
    """Store one push's readings and the health events they signal (telemetry's
    device_health.dcgm_readings_record) and open interruptions on the runs using the affected
    hosts, in one transaction."""
    device_health.dcgm_sample_partitions_ensure(gpus=gpus, received_at=received_at)
    if gpus:
        # A fleet's steady state: no event, so no interruption to open, in a transaction of
        # its own (two round trips, not four).
        quiet = device_health.dcgm_readings_record_quiet(
            project=project, gpus=gpus, received_at=received_at
        )
        if quiet is not None:
            return PushOutcome(
                devices=len(quiet.devices),
                samples=sum(len(gpu.values) for gpu in gpus),
                events=[],
                interruptions=[],
            )
    return _push_record(project=project, gpus=gpus, received_at=received_at)


@transaction.atomic
def _push_record(
    *, project: Project, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> PushOutcome:
    if not gpus:
        return PushOutcome(devices=0, samples=0, events=[], interruptions=[])
    readings = device_health.dcgm_readings_record(
        project=project, gpus=gpus, received_at=received_at
    )
    events = readings.events
    interruptions = _interruptions_open(
        project=project, events=events, devices=readings.devices, received_at=received_at
    )
    # An interruption the job reported a minute ago may be explained by these events.
    autotriage.evidence_arrived(event_ids=[event.pk for event in events if not event.first_sight])
    return PushOutcome(
        devices=len(readings.devices),
        samples=sum(len(gpu.values) for gpu in gpus),
        events=events,
        interruptions=interruptions,
    )


def _interruptions_open(
    *,
    project: Project,
    events: list[DeviceEvent],
    devices: dict[str, int],
    received_at: datetime,
) -> list[Interruption]:
    """One interruption per (running attempt, host) for this push's events on that host."""
    by_host: dict[int, list[DeviceEvent]] = {}
    for event in events:
        if not event.first_sight and event.host_id is not None:
            by_host.setdefault(event.host_id, []).append(event)
    if not by_host:
        return []
    latest = (
        Attempt.objects.filter(run=OuterRef("attempt__run")).order_by("-number").values("pk")[:1]
    )
    using = (
        Attempt.hosts.through.objects.filter(
            host_id__in=list(by_host),
            attempt__status=Attempt.Status.RUNNING,
            attempt__run__project=project,
        )
        .annotate(latest_pk=Subquery(latest))
        .filter(attempt_id=F("latest_pk"))
        .select_related("attempt__run", "host")
        .order_by("attempt_id", "host_id")
    )
    uuids = {device_id: uuid for uuid, device_id in devices.items()}
    opened: list[Interruption] = []
    for link in using:
        attempt, host = link.attempt, link.host
        # Its source, not the interruption's first key: the job's crash report may have
        # opened the incident this GPU's signal joined.
        already_open = Interruption.objects.filter(
            attempt=attempt,
            hosts=host,
            sources__kind=IncidentSource.Kind.DCGM,
            status=Interruption.Status.OPEN,
        ).exists()
        if already_open:
            continue
        mine = sorted(by_host[host.pk], key=lambda event: (KIND_RANK.index(event.kind), event.pk))
        lead = mine[0]
        interruption = interruption_record(
            run=attempt.run,
            source_key=f"{SOURCE_KEY_PREFIX}{host.pk}:{lead.pk}",
            occurred_at=min(event.occurred_at for event in mine),
            attempt=attempt,
            # A GPU signal does not prove the job stopped (see the module's docstring).
            ends_attempt=False,
            category=root_cause_slug(lead),
            hosts=[host.name],
            devices=sorted({uuids[event.device_id] for event in mine}),
            message="dcgm-exporter: " + " | ".join(event.message for event in mine),
            detected_at=received_at,
            # The newest step the run had reported when the signal arrived.
            step=attempt.run.last_step,
            severity=Interruption.Severity.HIGH
            if lead.kind in HIGH_SEVERITY
            else Interruption.Severity.MEDIUM,
        )
        device_health.device_events_interrupted(event_ids=[event.pk for event in mine])
        opened.append(interruption)
    return opened
