"""Writes of GPU health from dcgm-exporter pushes: the raw samples and their summaries, each
device's state (the last readings, compared with the next push's), the devices' places on their
hosts, and the health events the readings signal (telemetry.dcgm finds them). What an event
means for a run (an interruption) is the logbook's: logbook.services.gpu_health calls
dcgm_readings_record, then opens interruptions from the events it returns."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from config.prepared import Prepared, array_literal, prepared_execute
from config.raw_transaction import RawTransaction, raw_transaction, raw_transaction_possible
from telemetry import dcgm, device_samples
from telemetry.models import Device, DeviceEvent, DeviceHealthState, Host, Project
from telemetry.push_marks import push_mark
from telemetry.services import device_samples as sample_writes
from telemetry.services import devices_ensure, fleet_version_bump, hosts_ensure


class PlacementRefused(Exception):
    """A push that names more GPUs to create or move than one push may place
    (settings.DCGM_MAX_PLACEMENTS_PER_PUSH); nothing was written."""

    def __init__(self, *, unplaced: int, limit: int) -> None:
        super().__init__(f"{unplaced} GPUs to place, at most {limit} a push")
        self.unplaced = unplaced
        self.limit = limit


@dataclass(frozen=True)
class Readings:
    devices: dict[str, int]  # device ids by UUID
    events: list[DeviceEvent]  # the events this push raised (not those seen before)


def dcgm_sample_partitions_ensure(
    *, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> None:
    """The day partitions the push's samples go to. Call before the push's transaction:
    making a day's partition locks the samples table until its transaction ends, and the
    beat has usually made it already."""
    moments = {received_at}
    # The distinct stamps first: a push's readings mostly share a few (a datetime each was
    # 8% of a remote-write request's web CPU).
    moments.update(map(_stamp, set().union(*(gpu.timestamps.values() for gpu in gpus))))
    sample_writes.device_sample_partitions_ensure(moments=moments, now=received_at)


@transaction.atomic(savepoint=False)  # inside the push's transaction: no savepoint queries
def dcgm_readings_record(
    *, project: Project, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> Readings:
    """Store one push's readings (raw samples and their 5-minute summaries, each device's
    state) and record the health events they signal. Devices are placed on the host the
    exporter names. Readings without a timestamp are dated `received_at`. Holds a row lock on
    each device's state, so two pushes for the same GPU compare readings one after the
    other.

    A fleet's steady state (every GPU known, in place, with a state) is two statements: the
    states locked and read with their devices and hosts, then one that inserts the samples,
    adds them to the summaries and saves the states. Both are prepared once per connection
    (config.prepared). dcgm_readings_record_quiet is the same in a transaction of its own."""
    known = _known_lock(project_id=project.pk, gpus=gpus)
    if not _in_place(known, gpus):
        # Placing hardware is the costly part of a push (a host, a device and a state row
        # each, and the fleet's caches): bounded per push so that no push, however it is
        # written, nears the web's timeout (issue 42; docs/gpu-health.md, "Limits of one push").
        unplaced = _unplaced_count(known, gpus)
        if unplaced > settings.DCGM_MAX_PLACEMENTS_PER_PUSH:
            raise PlacementRefused(unplaced=unplaced, limit=settings.DCGM_MAX_PLACEMENTS_PER_PUSH)
        _hardware_ensure(project=project, gpus=gpus, received_at=received_at)
        known = _known_lock(project_id=project.pk, gpus=gpus)

    events: list[DeviceEvent] = []
    for gpu, found in _push_events(known=known, gpus=gpus):
        for health_event in found:
            event, created = DeviceEvent.objects.get_or_create(
                device_id=known[gpu.uuid].device_id,
                kind=health_event.kind,
                occurred_at=_reading_at(gpu, health_event.field, received_at),
                defaults={
                    "project": project,
                    "host_id": known[gpu.uuid].host_id,
                    "field": health_event.field,
                    "previous_value": health_event.previous,
                    "value": health_event.value,
                    "xid": health_event.xid,
                    "first_sight": health_event.first_sight,
                    "message": _event_message(health_event, gpu),
                },
            )
            if created:
                events.append(event)
    with connection.cursor() as cursor:
        prepared_execute(cursor, _PUSH_WRITE, _push_write_params(known, gpus, received_at))
    transaction.on_commit(lambda: push_mark(project_id=project.pk))
    return Readings(devices={uuid: row.device_id for uuid, row in known.items()}, events=events)


def dcgm_readings_record_quiet(
    *, project: Project, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> Readings | None:
    """dcgm_readings_record for a push that raises no health event on GPUs all known and in
    place (a fleet's steady state), in two round trips where the transaction took four: the
    lock is sent with its BEGIN, the write with its COMMIT (each round trip cost the web
    process and PostgreSQL more CPU, in waking up, than the statements around it). Returns
    None, having written nothing and released its locks, when the push needs
    dcgm_readings_record (an event to record, a GPU to create or place), and at once inside a
    transaction: this one begins and commits its own."""
    if not raw_transaction_possible():
        return None
    with raw_transaction() as window:
        known = _known_lock(project_id=project.pk, gpus=gpus, window=window)
        if not _in_place(known, gpus) or any(
            found for _, found in _push_events(known=known, gpus=gpus)
        ):
            return None  # the window rolls back: nothing written, the locks released
        window.execute(_PUSH_WRITE, _push_write_params(known, gpus, received_at), commit=True)
    push_mark(project_id=project.pk)  # committed: the window was its transaction
    return Readings(devices={uuid: row.device_id for uuid, row in known.items()}, events=[])


def _push_events(
    *, known: dict[str, _Known], gpus: Sequence[dcgm.GpuReadings]
) -> Iterator[tuple[dcgm.GpuReadings, list[dcgm.HealthEvent]]]:
    """Each GPU of the push with the health events between its state and its readings."""
    for gpu in gpus:
        # An empty state is one just created: the device was never seen.
        previous = known[gpu.uuid].last_values or None
        yield gpu, dcgm.events_detect(previous=previous, current=gpu.values)


def _push_write_params(
    known: dict[str, _Known], gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> list[Any]:
    """_PUSH_WRITE's parameters: the push's raw rows, and each device's state after it."""
    samples: list[tuple[int, datetime, dict[str, float]]] = []
    states: list[_StateRow] = []
    stamps: dict[float, datetime] = {}
    for gpu in gpus:
        gpu_known = known[gpu.uuid]
        samples += _samples_by_moment(gpu_known.device_id, gpu, received_at, stamps)
        states.append(_state_row(known=gpu_known, gpu=gpu, received_at=received_at))
    # A push's GPUs mostly send the same fields: their positions' text is made once.
    positions: dict[frozenset[str], str] = {}
    for state in states:
        if state.fields_sent not in positions:
            positions[state.fields_sent] = _positions_literal(state.fields_sent)
    return [
        *device_samples.device_samples_params(rows=samples, now=received_at),
        array_literal(state.device_id for state in states),
        array_literal(device_samples.readings_literal(state.readings) for state in states),
        array_literal(positions[state.fields_sent] for state in states),
        array_literal(state.last_xid for state in states),
        array_literal(state.last_xid_message for state in states),
        array_literal(state.last_xid_at for state in states),
        array_literal(state.model_name for state in states),
        received_at,
    ]


_POSITIONS = {name: position for position, name in enumerate(dcgm.FIELDS)}


def _positions_literal(fields: frozenset[str]) -> str:
    """PostgreSQL's text of the smallint[] of the fields' positions in telemetry.dcgm.FIELDS."""
    return "{" + ",".join(str(p) for p in sorted(_POSITIONS[name] for name in fields)) + "}"


def device_events_interrupted(*, event_ids: list[int]) -> None:
    """The events interrupted one more run (the logbook opened an interruption for them)."""
    DeviceEvent.objects.filter(pk__in=event_ids).update(runs_interrupted=F("runs_interrupted") + 1)


def _stamp(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


def _reading_at(gpu: dcgm.GpuReadings, name: str, received_at: datetime) -> datetime:
    """When the GPU's reading `name` was taken: its timestamp, else when the push came."""
    stamp = gpu.timestamps.get(name)
    return received_at if stamp is None else _stamp(stamp)


def _samples_by_moment(
    device_id: int, gpu: dcgm.GpuReadings, received_at: datetime, stamps: dict[float, datetime]
) -> list[tuple[int, datetime, dict[str, float]]]:
    """The GPU's readings as a raw row per moment: one row unless the exporter stamped its
    fields with different times. `stamps`: the push's datetimes by epoch seconds, so far."""
    if not gpu.timestamps:
        return [(device_id, received_at, dict(gpu.values))] if gpu.values else []
    distinct = set(gpu.timestamps.values())
    if len(distinct) == 1 and gpu.timestamps.keys() == gpu.values.keys():
        # Every reading stamped with one time (remote-write's scrape time): the common case.
        (stamp,) = distinct
        moment = stamps.get(stamp) or stamps.setdefault(stamp, _stamp(stamp))
        return [(device_id, moment, dict(gpu.values))]
    by_moment: dict[datetime, dict[str, float]] = {}
    for name, value in gpu.values.items():
        by_moment.setdefault(_reading_at(gpu, name, received_at), {})[name] = value
    return [(device_id, moment, values) for moment, values in by_moment.items()]


@dataclass(frozen=True)
class _Known:
    """A GPU of the push as its locked health state row found it, with its device's place."""

    device_id: int
    host_id: int | None
    host_name: str | None
    index_on_host: int | None
    accelerator_type: str
    last_values: dict[str, float]
    last_xid: int
    last_xid_message: str
    last_xid_at: datetime | None
    model_name: str
    pci_bus_id: str


_STATE = DeviceHealthState._meta.db_table
_DEVICE = Device._meta.db_table
_HOST = Host._meta.db_table
# The push's GPUs that have a health state, with their devices and hosts; the states locked
# in device order (one lock order for every push: no deadlock between two). Reading them one
# table at a time through the ORM was 15% of a push's web CPU, and building the ORM's query
# ~20% more (py-spy).
_KNOWN_LOCK = Prepared(
    name="telemetry_dcgm_known_lock",
    types=("bigint", "text[]"),
    sql=f"""SELECT d.uuid, d.id, d.host_id, h.name, d.index_on_host, d.accelerator_type,
        s.last_readings, s.last_xid, s.last_xid_message, s.last_xid_at, s.model_name,
        d.pci_bus_id
    FROM {_STATE} s JOIN {_DEVICE} d ON d.id = s.device_id LEFT JOIN {_HOST} h ON h.id = d.host_id
    WHERE d.project_id = $1 AND d.uuid = ANY($2)
    ORDER BY s.device_id FOR UPDATE OF s""",
)
_STATE_TYPES = ("bigint[]", "text[]", "text[]", "integer[]", "text[]", "timestamptz[]", "text[]")
# The push's samples and summaries (sample_writes.RECORD_CTES, $1-$5), and its states
# ($6-$12 a column each, in arrays; $13 when the push came). The readings and the fields sent
# are arrays by position in telemetry.dcgm.FIELDS, each sent as its text (as the samples'
# readings are).
_PUSH_WRITE = Prepared(
    name="telemetry_dcgm_push_write",
    types=(*sample_writes.RECORD_TYPES, *_STATE_TYPES, "timestamptz"),
    sql=f"""WITH {sample_writes.RECORD_CTES}, saved AS (
        UPDATE {_STATE} AS s SET last_readings = u.last_readings::float8[],
            sent_positions = u.sent_positions::smallint[], last_xid = u.last_xid,
            last_xid_message = u.last_xid_message, last_xid_at = u.last_xid_at,
            model_name = u.model_name, last_push_at = $13
        FROM unnest($6::bigint[], $7::text[], $8::text[], $9::integer[], $10::text[],
            $11::timestamptz[], $12::text[]) AS u(device_id, last_readings, sent_positions,
            last_xid, last_xid_message, last_xid_at, model_name)
        WHERE s.device_id = u.device_id
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM rows), (SELECT count(*) FROM summed),
        (SELECT count(*) FROM saved)""",
)


def _known_lock(
    *,
    project_id: int,
    gpus: Sequence[dcgm.GpuReadings],
    window: RawTransaction | None = None,
) -> dict[str, _Known]:
    """The push's GPUs that have a health state, by UUID, their states locked (`window`: in
    the hand-made transaction, begun by the same round trip)."""
    params = [project_id, array_literal(g.uuid for g in gpus)]
    # The generic plan, planned once per connection: PostgreSQL otherwise often keeps
    # planning the lock afresh for its `uuid = ANY($2)` (800 plans in 800 pushes, 0.4 ms
    # each, in one in-process run; 0.27 ms in make bench's). Only for the transaction.
    generic = "SET LOCAL plan_cache_mode = force_generic_plan"
    with contextlib.nullcontext(window.cursor) if window else connection.cursor() as cursor:
        if window:
            window.execute(_KNOWN_LOCK, params, before=[generic])
        else:
            prepared_execute(cursor, _KNOWN_LOCK, params, before=[generic])
        return {
            uuid: _Known(device_id, host_id, host, index, model, _by_field(readings), *rest)
            for uuid, device_id, host_id, host, index, model, readings, *rest in cursor.fetchall()
        }


def _by_field(readings: list[float | None]) -> dict[str, float]:
    return {
        name: value for name, value in zip(dcgm.FIELDS, readings, strict=False) if value is not None
    }


def _in_place(known: dict[str, _Known], gpus: Sequence[dcgm.GpuReadings]) -> bool:
    """Whether every GPU of the push has a state and a device placed as the exporter says:
    on the host it names, at its index and PCI bus id, with its model (the first one seen)."""
    return all(_gpu_in_place(known.get(gpu.uuid), gpu) for gpu in gpus)


def _unplaced_count(known: dict[str, _Known], gpus: Sequence[dcgm.GpuReadings]) -> int:
    return sum(not _gpu_in_place(known.get(gpu.uuid), gpu) for gpu in gpus)


def _gpu_in_place(row: _Known | None, gpu: dcgm.GpuReadings) -> bool:
    return not (
        row is None
        or row.host_name != gpu.host
        or (gpu.gpu_index is not None and row.index_on_host != gpu.gpu_index)
        or (gpu.model_name and not row.accelerator_type)
        or (gpu.pci_bus_id and row.pci_bus_id != gpu.pci_bus_id)
    )


def _hardware_ensure(
    *, project: Project, gpus: Sequence[dcgm.GpuReadings], received_at: datetime
) -> None:
    """Hosts, devices and health states for the push's GPUs (created on first sight), each
    device placed where the exporter says it is now."""
    hosts = {
        host.name: host for host in hosts_ensure(project=project, names=[gpu.host for gpu in gpus])
    }
    devices = {
        device.uuid: device
        for device in devices_ensure(project=project, uuids=[gpu.uuid for gpu in gpus])
    }
    _devices_place(gpus=gpus, hosts=hosts, devices=devices)
    DeviceHealthState.objects.bulk_create(
        [DeviceHealthState(device=device, last_push_at=received_at) for device in devices.values()],
        ignore_conflicts=True,  # a state that exists stays; a push racing this one may create it
    )


def _devices_place(
    *, gpus: Sequence[dcgm.GpuReadings], hosts: dict[str, Host], devices: dict[str, Device]
) -> None:
    """The exporter knows where a GPU is now: follow it (a board moved to another host)."""
    changed = []
    for gpu in gpus:
        device = devices[gpu.uuid]
        host = hosts[gpu.host]
        before = (device.host_id, device.index_on_host, device.accelerator_type, device.pci_bus_id)
        device.host = host
        if gpu.gpu_index is not None:
            device.index_on_host = gpu.gpu_index
        if gpu.model_name and not device.accelerator_type:
            device.accelerator_type = gpu.model_name
        if gpu.pci_bus_id:
            device.pci_bus_id = gpu.pci_bus_id
        after = (device.host_id, device.index_on_host, device.accelerator_type, device.pci_bus_id)
        if after != before:
            changed.append(device)
    if changed:
        # One UPDATE from arrays: Django's bulk_update writes a CASE of one branch per row
        # for each field, which PostgreSQL evaluates for every row, quadratic in the push
        # (20,000 new devices ran past gunicorn's 30 s timeout, issue 42 finding 1).
        with connection.cursor() as cursor:
            cursor.execute(
                f"""UPDATE {_DEVICE} AS d SET host_id = u.host_id,
                    index_on_host = u.index_on_host, accelerator_type = u.accelerator_type,
                    pci_bus_id = u.pci_bus_id
                FROM unnest(%s::bigint[], %s::bigint[], %s::smallint[], %s::text[], %s::text[])
                    AS u(id, host_id, index_on_host, accelerator_type, pci_bus_id)
                WHERE d.id = u.id""",
                [
                    [device.pk for device in changed],
                    [device.host_id for device in changed],
                    [device.index_on_host for device in changed],
                    [device.accelerator_type for device in changed],
                    [device.pci_bus_id for device in changed],
                ],
            )
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


@dataclass(frozen=True)
class _StateRow:
    """A device's health state after a push, as _PUSH_WRITE saves it."""

    device_id: int
    readings: list[float | None]
    fields_sent: frozenset[str]
    last_xid: int
    last_xid_message: str
    last_xid_at: datetime | None
    model_name: str


def _state_row(*, known: _Known, gpu: dcgm.GpuReadings, received_at: datetime) -> _StateRow:
    """The device's health state after this push."""
    last_xid, last_xid_message, last_xid_at = (
        known.last_xid,
        known.last_xid_message,
        known.last_xid_at,
    )
    xid = gpu.values.get(dcgm.XID)
    if xid is not None and int(xid) != known.last_xid:
        last_xid = int(xid)
        last_xid_message = (gpu.xid_message or dcgm.xid_message(last_xid))[:200]
        last_xid_at = _reading_at(gpu, dcgm.XID, received_at)
    return _StateRow(
        device_id=known.device_id,
        # Fields missing from this push keep their last value: a counter disabled and
        # enabled again is compared with what it last said.
        readings=device_samples.readings_array({**known.last_values, **gpu.values}),
        fields_sent=frozenset(gpu.fields_sent),
        last_xid=last_xid,
        last_xid_message=last_xid_message,
        last_xid_at=last_xid_at,
        model_name=gpu.model_name or known.model_name,
    )
