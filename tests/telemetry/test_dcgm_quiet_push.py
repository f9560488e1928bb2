"""A DCGM push in a fleet's steady state (no event; every GPU known and in place) runs in a
transaction of its own begun with the lock and committed with the write: two round trips. It
stores exactly what the full path (the push's transaction through Django) stores, and leaves
no transaction or lock behind when it gives up or fails."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from ingest.prometheus import exposition_parse
from logbook.services.gpu_health import dcgm_push_record
from telemetry import device_samples
from telemetry.models import (
    Device,
    DeviceEvent,
    DeviceHealthState,
    DeviceSample,
    DeviceSampleSummary,
    Host,
)
from telemetry.services import device_samples as sample_writes

FIXTURE = (Path(__file__).parents[1] / "ingest" / "fixtures" / "dcgm_exposition.txt").read_text()
START = datetime(2026, 11, 27, 6, 0, 3, tzinfo=UTC)
TEMP = "DCGM_FI_DEV_GPU_TEMP"
XID = "DCGM_FI_DEV_XID_ERRORS"
GENERIC = "SET LOCAL plan_cache_mode = force_generic_plan"
# After PUSHES, the same day (its partition made).
LATER = START + timedelta(minutes=10)


def _text(round_no: int, *, xid: str = "0", stamp_ms: int | None = None) -> str:
    """The fixture with its temperatures moved by `round_no`, its XIDs set to `xid`, and
    (`stamp_ms`) a timestamp on every temperature sample."""
    lines = []
    for line in FIXTURE.split("\n"):
        if line.startswith(TEMP + "{"):
            head, value = line.rsplit(" ", 1)
            line = f"{head} {float(value) + round_no}"
            if stamp_ms is not None:
                line += f" {stamp_ms}"
        elif line.startswith(XID + "{"):
            line = line.rsplit(" ", 1)[0] + f" {xid}"
        lines.append(line)
    return "\n".join(lines)


# Pushes 30 s apart across two 5-minute buckets: steady ones, an XID (an event: the full
# path), a timestamped push (two raw rows a GPU) and the same push re-sent (nothing added).
PUSHES = [
    *[(_text(n), START + timedelta(seconds=30 * n)) for n in range(4)],
    (_text(4, xid="79"), START + timedelta(seconds=120)),
    (_text(5, xid="79"), START + timedelta(seconds=150)),
    (_text(6, xid="79", stamp_ms=1_795_759_390_000), START + timedelta(seconds=300)),
    (_text(6, xid="79", stamp_ms=1_795_759_390_000), START + timedelta(seconds=300)),
    *[(_text(n, xid="79"), START + timedelta(seconds=30 * n)) for n in range(11, 14)],
]


def _stored() -> dict[str, Any]:
    """Every row the pushes stored, by GPU UUID and host name rather than ids."""
    uuid = dict(Device.objects.values_list("id", "uuid"))
    host = dict(Host.objects.values_list("id", "name"))
    return {
        "samples": sorted(
            (uuid[s.device_id], s.sampled_at, tuple(s.readings)) for s in DeviceSample.objects.all()
        ),
        "summaries": sorted(
            (
                uuid[s.device_id],
                s.bucket_start,
                tuple(s.sample_counts),
                tuple(s.value_sums),
                tuple(s.value_maxes),
            )
            for s in DeviceSampleSummary.objects.all()
        ),
        "states": sorted(
            (
                uuid[s.device_id],
                sorted(s.last_values().items()),
                s.fields_sent(),
                s.last_xid,
                s.last_xid_message,
                s.last_xid_at,
                s.model_name,
                s.last_push_at,
            )
            for s in DeviceHealthState.objects.all()
        ),
        "events": sorted(
            (
                uuid[e.device_id],
                host[e.host_id],
                e.kind,
                e.occurred_at,
                e.field,
                e.value,
                e.previous_value,
                e.xid,
                e.first_sight,
                e.message,
            )
            for e in DeviceEvent.objects.all()
        ),
        "devices": sorted(
            (d.uuid, host[d.host_id], d.index_on_host, d.accelerator_type)
            for d in Device.objects.all()
        ),
    }


def _forget_all() -> None:
    DeviceSample.objects.all().delete()
    DeviceSampleSummary.objects.all().delete()
    DeviceEvent.objects.all().delete()
    DeviceHealthState.objects.all().delete()
    Device.objects.all().delete()
    Host.objects.all().delete()


def _push_all(project: Any, *, full_path: bool) -> list[tuple[int, int, int]]:
    outcomes = []
    for text, received_at in PUSHES:
        gpus = exposition_parse(text=text).gpus
        if full_path:
            # Inside a transaction the quiet path steps aside: every push takes the full one.
            with transaction.atomic():
                outcome = dcgm_push_record(project=project, gpus=gpus, received_at=received_at)
        else:
            outcome = dcgm_push_record(project=project, gpus=gpus, received_at=received_at)
        outcomes.append((outcome.devices, outcome.samples, len(outcome.events)))
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_the_quiet_path_stores_what_the_full_path_stores(project: Any) -> None:
    sample_writes.device_sample_partitions_forget()
    # given the same pushes through the full path (each in the caller's transaction)
    full_outcomes = _push_all(project, full_path=True)
    full = _stored()
    _forget_all()

    # when they go through the quiet path where it applies
    with CaptureQueriesContext(connection) as queries:
        quiet_outcomes = _push_all(project, full_path=False)

    # then every row stored is the same, and so are the answers
    assert _stored() == full
    assert quiet_outcomes == full_outcomes
    assert full["events"] and len(full["samples"]) > 4 * len(PUSHES) // 2
    # and every push but the first (GPUs made) and the XID's (events) took the quiet path
    quiet = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith(f"BEGIN; {GENERIC}; EXECUTE")
    ]
    assert len(quiet) == len(PUSHES)  # the two that went on tried it first


@pytest.mark.django_db(transaction=True)
def test_a_steady_push_is_two_round_trips_and_leaves_the_connection_idle(project: Any) -> None:
    # given a fleet's GPUs known (pushed once)
    sample_writes.device_sample_partitions_forget()
    _push_all(project, full_path=False)
    gpus = exposition_parse(text=_text(14, xid="79")).gpus

    # when they push again, with nothing to report
    with CaptureQueriesContext(connection) as queries:
        outcome = dcgm_push_record(project=project, gpus=gpus, received_at=LATER)

    # then the push is the lock with its BEGIN, and the write with its COMMIT
    assert [q["sql"].split(" (")[0] for q in queries.captured_queries] == [
        f"BEGIN; {GENERIC}; EXECUTE telemetry_dcgm_known_lock",
        "EXECUTE telemetry_dcgm_push_write",
    ]
    assert queries.captured_queries[1]["sql"].endswith("; COMMIT")
    assert (outcome.devices, outcome.events) == (4, [])
    # the lock planned once for the connection, never afresh for a push's UUIDs
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE name = 'telemetry_dcgm_known_lock'"
        )
        generic_plans, custom_plans = cursor.fetchone()
    assert generic_plans >= len(PUSHES) and custom_plans == 0
    # committed: the connection is out of any transaction, the rows are there
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert DeviceSample.objects.filter(sampled_at=LATER).count() == 4


@pytest.mark.django_db(transaction=True)
def test_a_failed_quiet_push_stores_nothing_and_holds_no_lock(project: Any, monkeypatch) -> None:
    # given a fleet's GPUs known
    sample_writes.device_sample_partitions_forget()
    _push_all(project, full_path=False)
    before = _stored()

    # when a push fails after its states were locked (here, building the write)
    def fail(**_: Any) -> Any:
        raise RuntimeError("write failed")

    monkeypatch.setattr(device_samples, "device_samples_params", fail)
    gpus = exposition_parse(text=_text(14, xid="79")).gpus
    with CaptureQueriesContext(connection) as queries, pytest.raises(RuntimeError, match="write"):
        dcgm_push_record(project=project, gpus=gpus, received_at=LATER)
    assert [q["sql"].split(" (")[0] for q in queries.captured_queries] == [
        f"BEGIN; {GENERIC}; EXECUTE telemetry_dcgm_known_lock",
        "ROLLBACK",
    ]

    # then the transaction is rolled back on the same connection: nothing stored, no lock
    # held (another session takes them at once), the next push goes through
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _stored() == before
    other = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT device_id FROM telemetry_devicehealthstate FOR UPDATE NOWAIT")
            assert len(cursor.fetchall()) == 4
    finally:
        other.close()
    monkeypatch.undo()
    outcome = dcgm_push_record(project=project, gpus=gpus, received_at=LATER)
    assert outcome.devices == 4
    assert DeviceSample.objects.filter(sampled_at=LATER).count() == 4
