"""Writes of GPU health from dcgm-exporter pushes: the raw samples and their summaries, each
device's state (the last readings, compared with the next push's), the devices' places on their
hosts, and the health events the readings signal (telemetry.dcgm finds them). What an event
means for a run (an interruption) is the logbook's: logbook.services.gpu_health calls
dcgm_readings_record, then opens interruptions from the events it returns."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import F

from telemetry import dcgm, device_samples
from telemetry.models import Device, DeviceEvent, DeviceHealthState, Host, Project
from telemetry.services import devices_ensure, fleet_version_bump, hosts_ensure


@dataclass(frozen=True)
class Readings:
    devices: dict[str, Device]  # by UUID
    events: list[DeviceEvent]  # the events this push raised (not those seen before)


def dcgm_sample_partitions_ensure(
    *, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> None:
    """The day partitions the push's samples go to. Call before the push's transaction:
    making a day's partition locks the samples table until its transaction ends, and the
    beat has usually made it already."""
    moments = {received_at}
    moments.update(_stamp(t) for gpu in gpus for t in gpu.timestamps.values())
    device_samples.device_sample_partitions_ensure(moments=moments, now=received_at)


@transaction.atomic(savepoint=False)  # inside the push's transaction: no savepoint queries
def dcgm_readings_record(
    *, project: Project, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> Readings:
    """Store one push's readings (raw samples and their 5-minute summaries, each device's
    state) and record the health events they signal. Devices are placed on the host the
    exporter names. Readings without a timestamp are dated `received_at`. Holds a row lock on
    each device's state, so two pushes for the same GPU compare readings one after the
    other."""
    known = _known_lock(project=project, gpus=gpus)
    if known is not None:
        hosts, devices, states = known
    else:
        hosts = {
            host.name: host
            for host in hosts_ensure(project=project, names=[gpu.host for gpu in gpus])
        }
        devices = {
            device.uuid: device
            for device in devices_ensure(project=project, uuids=[gpu.uuid for gpu in gpus])
        }
        _devices_place(gpus=gpus, hosts=hosts, devices=devices)
        states = _states_lock(devices=list(devices.values()), received_at=received_at)

    samples: list[tuple[int, datetime, dict[str, float]]] = []
    events: list[DeviceEvent] = []
    for gpu in gpus:
        device = devices[gpu.uuid]
        state = states[device.pk]

        def at(name: str, gpu: dcgm.GpuReadings = gpu) -> datetime:
            stamp = gpu.timestamps.get(name)
            return received_at if stamp is None else _stamp(stamp)

        samples += _samples_by_moment(device.pk, gpu, at)
        # An empty state is one just created: the device was never seen.
        previous = state.last_values or None
        for found in dcgm.events_detect(previous=previous, current=gpu.values):
            event, created = DeviceEvent.objects.get_or_create(
                device=device,
                kind=found.kind,
                occurred_at=at(found.field),
                defaults={
                    "project": project,
                    "host": hosts[gpu.host],
                    "field": found.field,
                    "previous_value": found.previous,
                    "value": found.value,
                    "xid": found.xid,
                    "first_sight": found.first_sight,
                    "message": _event_message(found, gpu),
                },
            )
            if created:
                events.append(event)
        _state_update(state=state, gpu=gpu, received_at=received_at, xid_at=at(dcgm.XID))
    device_samples.device_samples_record(rows=samples, now=received_at)
    _states_save(list(states.values()))
    return Readings(devices=devices, events=events)


def device_events_interrupted(*, event_ids: list[int]) -> None:
    """The events interrupted one more run (the logbook opened an interruption for them)."""
    DeviceEvent.objects.filter(pk__in=event_ids).update(runs_interrupted=F("runs_interrupted") + 1)


def _stamp(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


def _samples_by_moment(
    device_id: int, gpu: dcgm.GpuReadings, at: Callable[[str], datetime]
) -> list[tuple[int, datetime, dict[str, float]]]:
    """The GPU's readings as a raw row per moment: one row unless the exporter stamped its
    fields with different times."""
    by_moment: dict[datetime, dict[str, float]] = {}
    for name, value in gpu.values.items():
        by_moment.setdefault(at(name), {})[name] = value
    return [(device_id, moment, values) for moment, values in by_moment.items()]


def _known_lock(
    *, project: Project, gpus: Sequence[dcgm.GpuReadings]
) -> tuple[dict[str, Host], dict[str, Device], dict[int, DeviceHealthState]] | None:
    """A fleet's steady state in one query: every GPU of the push already has a device on
    the host the exporter names, and a health state, which is locked. Returns the hosts by
    name, devices by UUID and states by device id, or None when anything is new or moved:
    then the caller takes the path that creates and places them, which locks the states
    found here again, in the same order. Reading them one table at a time was 15% of a
    push's web CPU, the lock another query."""
    uuids = {gpu.uuid: gpu for gpu in gpus}
    states = list(
        DeviceHealthState.objects.select_for_update(of=("self",))
        .filter(device__project=project, device__uuid__in=list(uuids))
        .select_related("device__host")
        .order_by("device_id")  # the lock order of _states_lock
    )
    placed = all(
        state.device.host is not None and state.device.host.name == uuids[state.device.uuid].host
        for state in states
    )
    if len(states) != len(uuids) or not placed:
        return None
    devices = {state.device.uuid: state.device for state in states}
    hosts = {device.host.name: device.host for device in devices.values()}
    _devices_place(gpus=gpus, hosts=hosts, devices=devices)
    return hosts, devices, {state.device_id: state for state in states}


def _states_lock(*, devices: list[Device], received_at: datetime) -> dict[int, DeviceHealthState]:
    """The devices' health states, locked (created empty for devices never seen)."""

    def lock() -> dict[int, DeviceHealthState]:
        rows = (
            DeviceHealthState.objects.select_for_update()
            .filter(device__in=devices)
            .order_by("device_id")  # one lock order for every push: no deadlock between two
        )
        return {state.device_id: state for state in rows}

    states = lock()
    if len(states) < len(devices):
        DeviceHealthState.objects.bulk_create(
            [
                DeviceHealthState(device=device, last_push_at=received_at)
                for device in devices
                if device.pk not in states
            ],
            ignore_conflicts=True,  # a push racing this one may create them too
        )
        states = lock()
    return states


def _devices_place(
    *, gpus: Sequence[dcgm.GpuReadings], hosts: dict[str, Host], devices: dict[str, Device]
) -> None:
    """The exporter knows where a GPU is now: follow it (a board moved to another host)."""
    changed = []
    for gpu in gpus:
        device = devices[gpu.uuid]
        host = hosts[gpu.host]
        before = (device.host_id, device.index_on_host, device.accelerator_type)
        device.host = host
        if gpu.gpu_index is not None:
            device.index_on_host = gpu.gpu_index
        if gpu.model_name and not device.accelerator_type:
            device.accelerator_type = gpu.model_name
        if (device.host_id, device.index_on_host, device.accelerator_type) != before:
            changed.append(device)
    if changed:
        Device.objects.bulk_update(changed, ["host", "index_on_host", "accelerator_type"])
        # The fleet page shows each device's host.
        fleet_version_bump(project_id=changed[0].project_id)


def _event_message(found: dcgm.HealthEvent, gpu: dcgm.GpuReadings) -> str:
    where = f"GPU {gpu.gpu_index} ({gpu.uuid})" if gpu.gpu_index is not None else gpu.uuid
    text = f"{found.message} on {where} of {gpu.host}"
    if found.kind == DeviceEvent.Kind.XID and gpu.xid_message:
        text += f"; exporter says: {gpu.xid_message}"
    if found.first_sight:
        text += "; first reading of this device, so it may predate the current run"
    return text


def _state_update(
    *, state: DeviceHealthState, gpu: dcgm.GpuReadings, received_at: datetime, xid_at: datetime
) -> None:
    xid = gpu.values.get(dcgm.XID)
    if xid is not None and int(xid) != state.last_xid:
        state.last_xid = int(xid)
        state.last_xid_message = (gpu.xid_message or dcgm.xid_message(int(xid)))[:200]
        state.last_xid_at = xid_at
    # Fields missing from this push keep their last value: a counter disabled and enabled
    # again is compared with what it last said.
    state.last_values = {**state.last_values, **gpu.values}
    state.fields_sent = sorted(gpu.fields_sent)
    state.model_name = gpu.model_name or state.model_name
    state.last_push_at = received_at


def _states_save(states: list[DeviceHealthState]) -> None:
    """One UPDATE for the push's devices: bulk_update's CASE per field and row cost more CPU
    than the rest of the push together (profile in docs/performance.md, "GPU health at fleet
    scale").
    The rows travel as one JSON document: as a jsonb[] parameter, psycopg escaped every quote
    of every state's JSON with a regular expression substitution (512 a push)."""
    rows = [
        {
            "device_id": state.device_id,
            "last_values": state.last_values,
            "fields_sent": state.fields_sent,
            "last_xid": state.last_xid,
            "last_xid_message": state.last_xid_message,
            "last_xid_at": state.last_xid_at and state.last_xid_at.isoformat(),
            "model_name": state.model_name,
            "last_push_at": state.last_push_at.isoformat(),
        }
        for state in states
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {DeviceHealthState._meta.db_table} AS s SET last_values = u.last_values,"
            " fields_sent = u.fields_sent, last_xid = u.last_xid,"
            " last_xid_message = u.last_xid_message, last_xid_at = u.last_xid_at,"
            " model_name = u.model_name, last_push_at = u.last_push_at"
            " FROM jsonb_to_recordset(%s::jsonb) AS u(device_id bigint, last_values jsonb,"
            " fields_sent jsonb, last_xid integer, last_xid_message text,"
            " last_xid_at timestamptz, model_name text, last_push_at timestamptz)"
            " WHERE s.device_id = u.device_id",
            [json.dumps(rows)],
        )
