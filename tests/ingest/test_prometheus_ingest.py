"""dcgm-exporter text pushed to /api/v1/ingest/prometheus: devices, samples and state stored,
each health event, interruptions on the run using the host, no event on repeats, limits,
auth, and the real prometheus_client.push_to_gateway (parsing: test_prometheus_parsing.py)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest import prometheus
from logbook.models import Interruption
from telemetry.dcgm import FIELDS, HEALTH_COUNTERS_OFF_BY_DEFAULT
from telemetry.models import Attempt, Device, DeviceEvent, DeviceHealthState, DeviceSample, Host
from telemetry.selectors.dcgm import (
    dcgm_device_health,
    dcgm_missing_counters,
    device_events_for_user,
)
from telemetry.services import attempt_ensure, run_upsert
from tests.ingest.dcgm_exposition import (
    A01_GPU0,
    A01_GPU1,
    B07_GPU0,
    DBE,
    FIXTURE,
    UNMAPPED,
    URL,
    default_counters_only,
    exposition,
)


@pytest.fixture
def push(client: Any, ingest_token: str) -> Callable[..., Any]:
    def post(text: str | bytes, *, path: str = URL, token: str | None = None, **extra: Any) -> Any:
        body = text.encode() if isinstance(text, str) else text
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token or ingest_token}", **extra}
        content_type = headers.pop("content_type", "text/plain; version=0.0.4; charset=utf-8")
        return client.post(path, data=body, content_type=content_type, **headers)

    return post


@pytest.fixture
def running_on_a01(project: Any) -> Attempt:
    """A run whose latest attempt is running on node-a01."""
    run = run_upsert(project=project, name="llama-dcgm")
    attempt_ensure(run=run, number=1, started_at=datetime(2026, 11, 1, tzinfo=UTC))
    Attempt.objects.filter(run=run, number=1).update(status=Attempt.Status.FAILED)
    return attempt_ensure(
        run=run, number=2, started_at=datetime(2026, 11, 2, tzinfo=UTC), hosts=["node-a01"]
    )


# --- The endpoint ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_push_stores_devices_samples_and_state(push):
    # when the fixture is pushed
    response = push(FIXTURE)

    # then every mapped reading of the four GPUs is stored, on its host
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["devices"] == 4 and body["samples"] == len(FIELDS) * 4
    assert body["skipped_samples"] == len(UNMAPPED) * 4
    assert body["events"] == [] and body["interruptions"] == []
    assert body["missing_health_counters"] == []
    rows = DeviceSample.objects.all()
    assert len(rows) == 4  # a row per GPU and moment
    assert sum(len(row.readings_by_field()) for row in rows) == len(FIELDS) * 4
    device = Device.objects.select_related("host").get(uuid=B07_GPU0)
    assert (device.host.name, device.index_on_host) == ("node-b07", 0)
    assert device.accelerator_type == "NVIDIA H100 80GB HBM3"
    history = DeviceSample.objects.filter(device=device).order_by("sampled_at")
    assert [row.readings_by_field()["DCGM_FI_DEV_POWER_USAGE"] for row in history] == [655.902]
    health = dcgm_device_health(host=Host.objects.get(name="node-a01"))
    assert [one.device.uuid for one in health] == [A01_GPU0, A01_GPU1]
    temp = next(r for r in health[1].readings if r.name == "DCGM_FI_DEV_GPU_TEMP")
    # the last XID is its own column ("Last XID error 79code" read as a measurement)
    assert all(r.name != "DCGM_FI_DEV_XID_ERRORS" for one in health for r in one.readings)
    assert (temp.value, temp.unit) == (71.0, "°C")


@pytest.mark.django_db
def test_missing_default_disabled_counters_are_reported(push):
    # given an exporter on its shipped default counters
    response = push(default_counters_only())

    # then both the answer and the host page's selector name every disabled health counter
    assert response.status_code == 200, response.content
    assert response.json()["missing_health_counters"] == HEALTH_COUNTERS_OFF_BY_DEFAULT
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in HEALTH_COUNTERS_OFF_BY_DEFAULT
    host = Host.objects.get(name="node-a01")
    assert dcgm_missing_counters(host=host) == HEALTH_COUNTERS_OFF_BY_DEFAULT
    # and once the exporter runs with docs/dcgm-counters.csv, the warning goes
    push(FIXTURE)
    assert dcgm_missing_counters(host=host) == []
    # a host no exporter pushed for has nothing to warn about
    assert dcgm_missing_counters(host=Host.objects.create(name="quiet")) == []


def test_counters_file_enables_every_mapped_field():
    lines = (Path(__file__).parents[2] / "docs" / "dcgm-counters.csv").read_text().splitlines()
    enabled = {
        line.split(",")[0].strip() for line in lines if line.strip() and not line.startswith("#")
    }
    assert set(FIELDS) <= enabled


EVENT_CASES = [
    # (field, value after the baseline, event kind, root cause slug)
    ("DCGM_FI_DEV_XID_ERRORS", "79", "xid", "faulty-gpu"),
    ("DCGM_FI_DEV_XID_ERRORS", "48", "xid", "gpu-hbm3-memory"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "2", "ecc_uncorrectable", "gpu-hbm3-memory"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "1", "row_remap", "gpu-hbm3-memory"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "1", "row_remap_failure", "gpu-hbm3-memory"),
    ("DCGM_FI_DEV_GPU_TEMP", "91", "thermal", "gpu-thermal-interface-sensor"),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "4000000", "thermal", "gpu-thermal-interface-sensor"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("field", "value", "kind", "cause"), EVENT_CASES)
def test_each_event_interrupts_the_run_using_the_host(
    push, running_on_a01, field, value, kind, cause
):
    # given a baseline push
    assert push(FIXTURE).status_code == 200

    # when GPU 0 of node-a01 (used by the run's running attempt) reports the signal
    response = push(exposition({(A01_GPU0, field): value}))

    # then one event and one interruption on the run, naming the host and the device
    assert response.status_code == 200, response.content
    body = response.json()
    assert [(e["kind"], e["device"], e["host"]) for e in body["events"]] == [
        (kind, A01_GPU0, "node-a01")
    ]
    event = DeviceEvent.objects.get()
    assert (event.field, event.value, event.first_sight) == (field, float(value), False)
    (interruption,) = Interruption.objects.all()
    assert body["interruptions"] == [interruption.pk]
    assert interruption.run_id == running_on_a01.run_id
    assert interruption.attempt_id == running_on_a01.pk
    assert interruption.root_cause.slug == cause
    assert list(interruption.hosts.values_list("name", flat=True)) == ["node-a01"]
    assert list(interruption.devices.values_list("uuid", flat=True)) == [A01_GPU0]
    assert not interruption.planned
    event.refresh_from_db()
    assert event.runs_interrupted == 1
    # the attempt goes on: a GPU signal does not prove the job stopped
    running_on_a01.refresh_from_db()
    assert running_on_a01.status == Attempt.Status.RUNNING

    # and the same readings again change nothing
    again = push(exposition({(A01_GPU0, field): value}))
    assert again.json()["events"] == [] and again.json()["interruptions"] == []
    assert DeviceEvent.objects.count() == 1 and Interruption.objects.count() == 1


@pytest.mark.django_db
def test_event_without_a_run_on_the_host_is_a_fleet_record_only(
    push, running_on_a01, alice, charlie
):
    # given a baseline, then an XID on node-b07, which no running attempt lists
    push(FIXTURE)
    response = push(exposition({(B07_GPU0, "DCGM_FI_DEV_XID_ERRORS"): "79"}))

    # then an event, no interruption, visible to the project's members only
    assert [e["kind"] for e in response.json()["events"]] == ["xid"]
    assert Interruption.objects.count() == 0
    assert DeviceEvent.objects.get().runs_interrupted == 0
    assert [e.device.uuid for e in device_events_for_user(user=alice)] == [B07_GPU0]
    assert list(device_events_for_user(user=charlie)) == []
    b07 = Host.objects.get(name="node-b07")
    assert device_events_for_user(user=alice, host=b07).count() == 1
    assert device_events_for_user(user=alice, host=Host.objects.get(name="node-a01")).count() == 0


@pytest.mark.django_db
def test_only_the_latest_running_attempt_of_the_pushing_project_is_interrupted(
    push, project, other_project, running_on_a01
):
    # given another project's run on the same host, and an older attempt that lists it
    other = run_upsert(project=other_project, name="theirs")
    attempt_ensure(run=other, number=1, hosts=["node-a01"])
    Attempt.objects.filter(run=running_on_a01.run, number=1).first().hosts.add(
        Host.objects.get(name="node-a01", project=project)
    )
    push(FIXTURE)

    # when an XID arrives with this project's token
    push(exposition({(A01_GPU1, "DCGM_FI_DEV_XID_ERRORS"): "13"}))

    # then only this project's current attempt is interrupted
    assert list(Interruption.objects.values_list("run__name", "attempt__number")) == [
        ("llama-dcgm", 2)
    ]


@pytest.mark.django_db
def test_an_open_gpu_interruption_is_not_repeated_while_counters_rise(push, running_on_a01):
    # given a baseline, then two DBE increases on successive pushes
    push(FIXTURE)
    push(exposition({(A01_GPU0, DBE): "1"}))
    second = push(exposition({(A01_GPU0, DBE): "3"}))

    # then two events, one interruption for the attempt
    assert [e["kind"] for e in second.json()["events"]] == ["ecc_uncorrectable"]
    assert second.json()["interruptions"] == []
    assert DeviceEvent.objects.count() == 2
    assert Interruption.objects.count() == 1


@pytest.mark.django_db
def test_first_sight_xid_is_recorded_but_blames_no_run(push, running_on_a01):
    response = push(exposition({(A01_GPU0, "DCGM_FI_DEV_XID_ERRORS"): "79"}))
    assert [e["kind"] for e in response.json()["events"]] == ["xid"]
    assert DeviceEvent.objects.get().first_sight
    assert Interruption.objects.count() == 0


@pytest.mark.django_db
def test_one_push_with_several_signals_on_a_host_opens_one_interruption(push, running_on_a01):
    push(FIXTURE)
    response = push(exposition({
        (A01_GPU0, "DCGM_FI_DEV_GPU_TEMP"): "90",
        (A01_GPU1, "DCGM_FI_DEV_XID_ERRORS"): "79",
    }))  # fmt: skip
    assert sorted(e["kind"] for e in response.json()["events"]) == ["thermal", "xid"]
    (interruption,) = Interruption.objects.all()
    # named by the most telling signal, listing both devices
    assert interruption.root_cause.slug == "faulty-gpu"
    assert sorted(interruption.devices.values_list("uuid", flat=True)) == [A01_GPU0, A01_GPU1]


@pytest.mark.django_db
def test_query_count_does_not_grow_with_the_number_of_gpus(push, django_assert_max_num_queries):
    # given a push of one host's two GPUs and one of four GPUs (no events in either)
    two = "\n".join(line for line in FIXTURE.split("\n") if "node-b07" not in line)
    with CaptureQueriesContext(connection) as small:
        assert push(two).status_code == 200
    Device.objects.all().delete()

    # then the four-GPU push takes no more queries than the two-GPU one
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert push(FIXTURE).status_code == 200


@pytest.mark.django_db
def test_a_known_fleet_push_reads_its_gpus_in_one_query_and_follows_a_moved_board(push):
    # given every GPU of the fixture pushed once (devices, hosts and states exist)
    push(FIXTURE)

    # when the same GPUs push again
    with CaptureQueriesContext(connection) as again:
        assert push(exposition({(A01_GPU0, "DCGM_FI_DEV_GPU_TEMP"): "70"})).status_code == 200

    # then the push is two statements prepared on the connection: hosts, devices and states
    # read by one locking query (not one per table), then one writing samples, summaries and
    # states
    run = [q["sql"] for q in again.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert [sql.split(" (")[0] for sql in run] == [
        # its generic plan: PostgreSQL kept planning it afresh for each push's UUIDs
        "SET LOCAL plan_cache_mode = force_generic_plan; EXECUTE telemetry_dcgm_known_lock",
        "EXECUTE telemetry_dcgm_push_write",
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements")
        prepared = dict(cursor.fetchall())
    lock = prepared["telemetry_dcgm_known_lock"]
    assert "FOR UPDATE OF" in lock and "telemetry_host" in lock
    assert "telemetry_devicehealthstate" in lock and "telemetry_device " in lock
    write = prepared["telemetry_dcgm_push_write"]
    assert "INSERT INTO telemetry_devicesample " in write
    assert "INSERT INTO telemetry_devicesamplesummary" in write
    assert "UPDATE telemetry_devicehealthstate" in write
    # when an XID follows, then every column of the state is saved (one UPDATE from arrays)
    assert push(exposition({(A01_GPU0, "DCGM_FI_DEV_XID_ERRORS"): "79"})).status_code == 200
    state = DeviceHealthState.objects.get(device__uuid=A01_GPU0)
    assert state.last_values()["DCGM_FI_DEV_GPU_TEMP"] != 70.0  # the fixture's again
    assert (state.last_xid, state.model_name) == (79, "NVIDIA H100 80GB HBM3")
    assert state.last_xid_message and state.last_xid_at == state.last_push_at
    assert abs(state.last_push_at - datetime.now(UTC)).total_seconds() < 60
    assert set(state.fields_sent()) == set(FIELDS)

    # when one board shows up in another host
    moved = FIXTURE.replace('Hostname="node-a01"', 'Hostname="node-a02"')
    assert push(moved).status_code == 200

    # then its device follows it there
    device = Device.objects.select_related("host").get(uuid=A01_GPU0)
    assert device.host.name == "node-a02"


# --- Limits and errors -------------------------------------------------------------------------


@pytest.mark.django_db
def test_limits_and_clear_errors(push, settings, monkeypatch):
    bad = push('DCGM_FI_DEV_GPU_TEMP{UUID="G",Hostname="h"} sixty\n')
    assert bad.status_code == 400 and bad.json()["detail"].startswith("line 1:")

    settings.INGEST_MAX_BODY_BYTES = 1000
    big = push(FIXTURE)
    assert big.status_code == 413
    assert (
        big.json()["detail"]
        == f"The body is {len(FIXTURE.encode())} bytes; the limit is 1000 bytes."
    )
    settings.INGEST_MAX_BODY_BYTES = 8 * 1024 * 1024

    monkeypatch.setattr(prometheus, "MAX_SAMPLE_LINES", 10)
    many = push(FIXTURE)
    assert many.status_code == 413 and "the limit is 10" in many.json()["detail"]
    monkeypatch.undo()

    wrong_type = push(FIXTURE, content_type="application/json")
    assert wrong_type.status_code == 415 and "text/plain" in wrong_type.json()["detail"]
    snappy = push(b"x", HTTP_CONTENT_ENCODING="snappy")
    assert snappy.status_code == 415
    assert DeviceSample.objects.count() == 0


@pytest.mark.django_db
def test_gzip_body_and_host_from_the_query_string(push):
    text = FIXTURE.replace('Hostname="node-a01",', "").replace('hostname="node-b07",', "")
    response = push(
        gzip.compress(text.encode()), path=f"{URL}?host=node-z09", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 200, response.content
    assert set(Device.objects.values_list("host__name", flat=True)) == {"node-z09"}


@pytest.mark.django_db
def test_pushgateway_path_names_the_host(push):
    text = FIXTURE.replace('Hostname="node-a01",', "").replace('hostname="node-b07",', "")
    response = push(text, path=f"{URL}/metrics/job/dcgm/hostname/node-c03")
    assert response.status_code == 200, response.content
    assert set(Device.objects.values_list("host__name", flat=True)) == {"node-c03"}
    malformed = push(text, path=f"{URL}/metrics/instance/x")
    assert malformed.status_code == 400 and "/metrics/job/<job>" in malformed.json()["detail"]


@pytest.mark.django_db
def test_only_an_ingest_token_may_push(client, push, alice):
    assert client.post(URL, data=FIXTURE, content_type="text/plain").status_code == 401
    assert push(FIXTURE, token="chr_not-a-token").status_code == 401
    client.force_login(alice)
    assert client.post(URL, data=FIXTURE, content_type="text/plain").status_code == 401
    assert DeviceSample.objects.count() == 0


# --- The real Pushgateway client ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_push_to_gateway_against_the_live_server(live_server, project, ingest_token):
    from prometheus_client import CollectorRegistry, Counter, Gauge, push_to_gateway
    from prometheus_client.exposition import default_handler

    # given a registry with DCGM metrics as a relay script would re-export them (no host label)
    registry = CollectorRegistry()
    labels = ["gpu", "UUID", "modelName"]
    temp = Gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", labels, registry=registry)
    xid = Gauge("DCGM_FI_DEV_XID_ERRORS", "Last XID.", labels, registry=registry)
    replay = Counter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "PCIe retries.", labels, registry=registry)
    gpu = ("0", "GPU-55aa0c1e-7b3d-4e2f-a1b0-c9d8e7f6a5b4", "NVIDIA H100 80GB HBM3")
    temp.labels(*gpu).set(64)
    xid.labels(*gpu).set(0)
    replay.labels(*gpu).inc(5)

    def chronicle_handler(url, method, timeout, headers, data):
        headers.append(("Authorization", f"Bearer {ingest_token}"))
        return default_handler(url, method, timeout, headers, data)

    # when it is pushed twice, the second time with a new XID, gzip-compressed
    gateway = f"{live_server.url}/api/v1/ingest/prometheus"
    push_to_gateway(
        gateway,
        job="dcgm",
        registry=registry,
        grouping_key={"hostname": "node-c03"},
        handler=chronicle_handler,
    )
    xid.labels(*gpu).set(79)
    push_to_gateway(
        gateway,
        job="dcgm",
        registry=registry,
        grouping_key={"hostname": "node-c03"},
        handler=chronicle_handler,
        compression="gzip",
    )

    # then the device is on the host of the path, with its readings and the XID event
    device = Device.objects.select_related("host").get(uuid=gpu[1])
    assert device.host.name == "node-c03"
    latest: dict[str, float] = {}
    for row in DeviceSample.objects.filter(device=device).order_by("sampled_at"):
        latest.update(row.readings_by_field())
    assert latest == {
        "DCGM_FI_DEV_GPU_TEMP": 64.0,
        "DCGM_FI_DEV_XID_ERRORS": 79.0,
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 5.0,
    }
    assert list(DeviceEvent.objects.values_list("kind", "xid")) == [("xid", 79)]


@pytest.mark.django_db
@pytest.mark.parametrize("index", ["²", "\u0661", "0x1"])
def test_a_gpu_index_that_is_not_ascii_digits_is_left_out_not_a_500(push, index):
    # "²".isdigit() is true and int("²") raises: the push answered 500.
    text = f'DCGM_FI_DEV_GPU_TEMP{{gpu="{index}",UUID="GPU-1",Hostname="h1"}} 60\n'
    response = push(text)
    assert response.status_code == 200, response.content
    assert Device.objects.get(uuid="GPU-1").index_on_host is None
