"""Prometheus remote-write at /api/v1/ingest/remote-write: the same readings and events as the
text push for the same samples, several scrapes of a GPU in one request, the limits and bad
input (4xx with a reason, never a 5xx, never a partial write), and a real Prometheus
(Debian's `prometheus`) scraping dcgm-exporter text and remote-writing it to the live server."""

from __future__ import annotations

import math
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cramjam
import pytest

from ingest.prometheus import exposition_parse
from ingest.remote_write import MAX_ROUNDS, WriteRequest, write_request_parse
from logbook.models import Interruption
from stack import free_port
from telemetry.models import DeviceEvent, DeviceSample, Host
from telemetry.services import attempt_ensure, run_upsert

FIXTURE = (Path(__file__).parent / "fixtures" / "dcgm_exposition.txt").read_text()
URL = "/api/v1/ingest/remote-write"
A01_GPU0 = "GPU-3f6a1e0b-8c2d-4b7e-9a51-2d0c6e8f1a42"
XID = "DCGM_FI_DEV_XID_ERRORS"


def fixture_series(text: str = FIXTURE) -> list[tuple[dict[str, str], float]]:
    """The text's samples as (labels with __name__, value), read by the push path's parser's
    own line reader so both paths start from the same samples."""
    from ingest.prometheus import _library_sample_parse

    samples = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip() and not line.startswith("#"):
            name, labels, value, _ = _library_sample_parse(number, line)
            samples.append(({"__name__": name, **labels}, value))
    return samples


def write_request(
    series: list[tuple[dict[str, str], list[tuple[float, int]]]], *, compress: bool = True
) -> bytes:
    """A WriteRequest body as Prometheus sends it: series of (labels, [(value, ms)])."""
    request = WriteRequest()
    for labels, samples in series:
        entry = request.timeseries.add()
        for name, value in sorted(labels.items()):
            entry.labels.add(name=name, value=value)
        for value, stamp_ms in samples:
            entry.samples.add(value=value, timestamp=stamp_ms)
    body = request.SerializeToString()
    return bytes(cramjam.snappy.compress_raw(body)) if compress else body


def at(stamp_ms: int, text: str = FIXTURE) -> list[tuple[dict[str, str], list[tuple[float, int]]]]:
    return [(labels, [(value, stamp_ms)]) for labels, value in fixture_series(text)]


def with_value(text: str, uuid: str, field: str, value: str) -> str:
    return "\n".join(
        line.rsplit(" ", 1)[0] + " " + value
        if line.startswith(field + "{") and f'UUID="{uuid}"' in line
        else line
        for line in text.split("\n")
    )


# Scrapes of a few minutes ago: within the raw samples' retention, and not in the future.
NOW_MS = (int(time.time()) - 300) * 1000


@pytest.fixture
def running_on_a01(project: Any) -> Any:
    """A run whose attempt is running on node-a01."""
    run = run_upsert(project=project, name="llama-dcgm")
    return attempt_ensure(
        run=run, number=1, started_at=datetime(2026, 11, 2, tzinfo=UTC), hosts=["node-a01"]
    )


@pytest.fixture
def remote_write(client: Any, ingest_token: str) -> Callable[..., Any]:
    def post(body: bytes, *, query: str = "", **headers: Any) -> Any:
        meta = {
            "HTTP_AUTHORIZATION": f"Bearer {ingest_token}",
            "HTTP_CONTENT_ENCODING": "snappy",
            "HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION": "0.1.0",
            **headers,
        }
        content_type = meta.pop("content_type", "application/x-protobuf")
        return client.post(URL + query, data=body, content_type=content_type, **meta)

    return post


# --- Parsing (pure) ------------------------------------------------------------------------


def test_a_write_request_reads_as_the_same_text_pushed():
    # given the fixture's samples, once as text and once as a WriteRequest stamped at NOW_MS
    pushed = {(gpu.host, gpu.uuid): gpu for gpu in exposition_parse(text=FIXTURE).gpus}
    body = write_request(at(NOW_MS), compress=False)

    # when the request is parsed
    parsed = write_request_parse(body)

    # then one round with every GPU, each field as the text path read it, stamped NOW_MS
    (round_,) = parsed.rounds
    written = {(gpu.host, gpu.uuid): gpu for gpu in round_}
    assert set(written) == set(pushed) and len(written) == 4
    for key, gpu in written.items():
        assert gpu.values == pushed[key].values
        assert (gpu.gpu_index, gpu.model_name, gpu.xid_message) == (
            pushed[key].gpu_index, pushed[key].model_name, pushed[key].xid_message
        )  # fmt: skip
        assert gpu.fields_sent == pushed[key].fields_sent
        assert set(gpu.timestamps.values()) <= {NOW_MS / 1000}
    assert parsed.skipped_samples == sum(exposition_parse(text=FIXTURE).skipped.values()) > 0


def test_host_from_instance_and_from_a_named_label():
    gpu = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "UUID": "GPU-1", "gpu": "0"}
    body = write_request([
        ({**gpu, "instance": "node-c3:9400"}, [(60.0, NOW_MS)]),
        ({**gpu, "UUID": "GPU-2", "instance": "[fd00::7]:9400"}, [(61.0, NOW_MS)]),
        ({**gpu, "UUID": "GPU-3", "node": "node-d4", "instance": "x:1"}, [(62.0, NOW_MS)]),
        ({**gpu, "UUID": "GPU-4"}, [(63.0, NOW_MS)]),
    ], compress=False)  # fmt: skip
    parsed = write_request_parse(body, host_labels=("node",))
    assert sorted((g.host, g.uuid) for g in parsed.rounds[0]) == [
        ("fd00::7", "GPU-2"), ("node-c3", "GPU-1"), ("node-d4", "GPU-3")
    ]  # fmt: skip
    # the series that names no host is dropped, counted by its reason
    assert parsed.dropped == {"no host label (Hostname, hostname, instance or host_label)": 1}


def _series_of(labels: list[tuple[str, str]], value: float) -> Any:
    request = WriteRequest()
    entry = request.timeseries.add()
    for name, text in labels:  # in this order, repeats kept
        entry.labels.add(name=name, value=text)
    entry.samples.add(value=value, timestamp=NOW_MS)
    return request


def test_labels_out_of_order_or_repeated_read_as_each_series_alone():
    # given a GPU's series as Prometheus sends them (sorted), then series of the same GPU
    # whose labels come in another order, repeat a label, or carry two names
    gpu = [("Hostname", "a01"), ("UUID", "GPU-1"), ("gpu", "0")]
    temp, power = ("__name__", "DCGM_FI_DEV_GPU_TEMP"), ("__name__", "DCGM_FI_DEV_POWER_USAGE")
    odd = [
        ([*gpu[:2], power, gpu[2]], 300.0),  # the name elsewhere
        ([temp, *gpu, ("UUID", "GPU-2")], 71.0),  # the UUID twice: the last one stands
        ([*gpu[:2], temp, gpu[2], power], 301.0),  # two names: the last one stands
    ]
    request = _series_of([*gpu[:2], temp, gpu[2]], 70.0)
    for labels, value in odd:
        request.MergeFrom(_series_of(labels, value))

    # when the request is parsed
    parsed = write_request_parse(request.SerializeToString())

    # then each series reads as it would alone (the last of a repeated label standing)
    alone = [
        write_request_parse(_series_of(labels, value).SerializeToString()) for labels, value in odd
    ]
    gpus = {gpu.uuid: gpu for gpu in parsed.rounds[0]}
    assert gpus["GPU-1"].values == {"DCGM_FI_DEV_GPU_TEMP": 70.0, "DCGM_FI_DEV_POWER_USAGE": 301.0}
    assert gpus["GPU-2"].values == {"DCGM_FI_DEV_GPU_TEMP": 71.0}
    assert [gpu.values for one in alone for gpu in one.rounds[0]] == [
        {"DCGM_FI_DEV_POWER_USAGE": 300.0},
        {"DCGM_FI_DEV_GPU_TEMP": 71.0},
        {"DCGM_FI_DEV_POWER_USAGE": 301.0},
    ]


def test_several_scrapes_of_a_gpu_are_rounds_oldest_first():
    series = [
        (labels, [(value, NOW_MS + 30_000), (value, NOW_MS)]) for labels, value in fixture_series()
    ]
    parsed = write_request_parse(write_request(series, compress=False))
    assert len(parsed.rounds) == 2
    assert {gpu.timestamps[XID] for gpu in parsed.rounds[0]} == {NOW_MS / 1000}
    assert {gpu.timestamps[XID] for gpu in parsed.rounds[1]} == {NOW_MS / 1000 + 30}


# --- Through the endpoint -------------------------------------------------------------------


@pytest.mark.django_db
def test_remote_write_stores_readings_and_opens_the_xid_interruption(remote_write, running_on_a01):
    # given a first scrape (every GPU seen, no event)
    first = remote_write(write_request(at(NOW_MS)))
    assert first.status_code == 200, first.content
    assert first.json()["events"] == 0 and first.json()["devices"] == 4
    assert DeviceSample.objects.count() == 4
    assert set(Host.objects.values_list("name", flat=True)) == {"node-a01", "node-b07"}

    # when the next scrape has XID 79 on node-a01's GPU 0 (the run's host)
    crashed = with_value(FIXTURE, A01_GPU0, XID, "79")
    second = remote_write(write_request(at(NOW_MS + 30_000, crashed)))

    # then one XID event on that GPU and one interruption on the run, as the text push makes
    assert second.status_code == 200, second.content
    assert second.json()["events"] == 1
    event = DeviceEvent.objects.get()
    assert (event.kind, event.device.uuid, event.value) == ("xid", A01_GPU0, 79.0)
    (interruption,) = Interruption.objects.all()
    assert second.json()["interruptions"] == [interruption.pk]
    assert interruption.run_id == running_on_a01.run_id
    assert list(interruption.devices.values_list("uuid", flat=True)) == [A01_GPU0]
    # stored at the scrape's time, not the request's
    assert DeviceSample.objects.filter(device__uuid=A01_GPU0).latest("sampled_at").sampled_at == (
        datetime.fromtimestamp((NOW_MS + 30_000) / 1000, tz=UTC)
    )


@pytest.mark.django_db
def test_a_catch_up_request_compares_the_scrapes_in_order(remote_write, running_on_a01):
    # given one request holding three scrapes: clean, XID 79, XID 79 again
    crashed = with_value(FIXTURE, A01_GPU0, XID, "79")
    series: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], list[tuple[float, int]]]] = {}
    for offset, text in ((0, FIXTURE), (30_000, crashed), (60_000, crashed)):
        for labels, value in fixture_series(text):
            key = tuple(sorted(labels.items()))
            series.setdefault(key, (labels, []))[1].append((value, NOW_MS + offset))
    response = remote_write(write_request(list(series.values())))

    # then the change is one event (not two), and each scrape's readings are stored
    assert response.status_code == 200, response.content
    assert response.json()["events"] == 1 and DeviceEvent.objects.count() == 1
    assert DeviceSample.objects.filter(device__uuid=A01_GPU0).count() == 3
    assert Interruption.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "headers", "status", "says"),
    [
        (b"not snappy at all", {}, 400, "snappy"),
        (bytes(cramjam.snappy.compress_raw(b"\xff\xff\xff")), {}, 400, "WriteRequest"),
        # a series whose one label's name is not UTF-8
        (bytes(cramjam.snappy.compress_raw(b"\x0a\x05\x0a\x03\x0a\x01\xff")), {}, 400, "UTF-8"),
        (b"\xff\xff\xff\xff\x7f", {}, 413, "would be"),
        (b"x", {"content_type": "text/plain"}, 415, "application/x-protobuf"),
        (b"x", {"HTTP_CONTENT_ENCODING": "gzip"}, 415, "snappy"),
    ],
)
def test_bad_bodies_get_a_4xx_that_says_why(remote_write, body, headers, status, says):
    response = remote_write(body, **headers)
    assert response.status_code == status, response.content
    assert says in response.json()["detail"]


@pytest.mark.django_db
def test_a_series_of_ten_thousand_samples_is_refused_whole(remote_write):
    # given a request whose one GPU temperature series carries 10,000 scrapes, and a good series
    labels = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "UUID": "GPU-1", "Hostname": "node-z9"}
    long = [(60.0, NOW_MS - step * 1000) for step in range(10_000)]
    good = ({**labels, "UUID": "GPU-2"}, [(61.0, NOW_MS)])
    response = remote_write(write_request([good, (labels, long)]))
    # then a 400 naming the limit, and nothing of the request stored (no partial write)
    assert response.status_code == 400, response.content
    assert str(MAX_ROUNDS) in response.json()["detail"]
    assert not DeviceSample.objects.exists() and not Host.objects.exists()


@pytest.mark.django_db
def test_nan_inf_and_unknown_series_are_not_readings_nor_errors(remote_write):
    base = {"UUID": "GPU-1", "Hostname": "node-z9", "gpu": "0"}
    body = write_request([
        ({**base, "__name__": "DCGM_FI_DEV_GPU_TEMP"}, [(math.nan, NOW_MS)]),
        ({**base, "__name__": "DCGM_FI_DEV_POWER_USAGE"}, [(math.inf, NOW_MS)]),
        ({**base, "__name__": "DCGM_FI_DEV_SM_CLOCK"}, [(-math.inf, NOW_MS)]),
        ({**base, "__name__": "DCGM_FI_DEV_MEM_CLOCK"}, [(2619.0, NOW_MS)]),
        ({"__name__": "node_cpu_seconds_total", "cpu": "0"}, [(1.0, NOW_MS)]),
        ({**base, "__name__": XID}, [(79.5, NOW_MS)]),
    ])  # fmt: skip
    response = remote_write(body)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert (answer["stored_samples"], answer["skipped_samples"]) == (1, 1)
    assert answer["dropped"] == {"XID not an XID code": 1}
    (sample,) = DeviceSample.objects.all()
    assert sample.readings_by_field() == {"DCGM_FI_DEV_MEM_CLOCK": 2619.0}


@pytest.mark.django_db
def test_only_an_ingest_token_may_write(client):
    response = client.post(URL, data=write_request(at(NOW_MS)),
                           content_type="application/x-protobuf",
                           HTTP_CONTENT_ENCODING="snappy")  # fmt: skip
    assert response.status_code == 401


# --- A real Prometheus ----------------------------------------------------------------------


class _Exporters:
    """dcgm-exporter stand-ins: GET /<host>/metrics answers the fixture for that host, with
    XID 79 on its GPU 0 once `crash` names it."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts
        self.crash: set[str] = set()
        exporters = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host = self.path.strip("/").split("/")[0]
                text = exporters.text(host)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(text.encode())

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def text(self, host: str) -> str:
        # node-a01's two GPUs, renamed to this host and given UUIDs of its own.
        lines = [
            line.replace('Hostname="node-a01"', f'Hostname="{host}"').replace(
                "GPU-", f"GPU-{host}-"
            )
            for line in FIXTURE.split("\n")
            if line.startswith("#") or 'Hostname="node-a01"' in line
        ]
        text = "\n".join(lines) + "\n"
        if host in self.crash:
            text = with_value(text, f"GPU-{host}-{A01_GPU0[4:]}", XID, "79")
        return text


@pytest.fixture
def prometheus(tmp_path: Path, live_server: Any) -> Iterator[Callable[..., Any]]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail(
            "Debian's prometheus is not on PATH (make test installs it: apt-get install prometheus)"
        )
    processes: list[subprocess.Popen[bytes]] = []

    def start(*, exporters: _Exporters, url: str, token: str) -> subprocess.Popen[bytes]:
        targets = ", ".join(f'"127.0.0.1:{exporters.port}"' for _ in range(1))
        jobs = "\n".join(
            f"""  - job_name: dcgm-{host}
    metrics_path: /{host}/metrics
    static_configs:
      - targets: [{targets}]"""
            for host in exporters.hosts
        )
        config = tmp_path / "prometheus.yml"
        config.write_text(f"""global:
  scrape_interval: 5s
scrape_configs:
{jobs}
remote_write:
  - url: {url}
    authorization:
      credentials: {token}
    write_relabel_configs:
      - source_labels: [__name__]
        regex: "DCGM_.*"
        action: keep
    queue_config:
      batch_send_deadline: 1s
      max_shards: 2
      min_backoff: 100ms
      max_backoff: 1s
""")
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{free_port()}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb"),
        )  # fmt: skip
        processes.append(process)
        return process

    yield start
    # Stopped before the live server (this fixture asks for it): a Prometheus still sending
    # to a server that has gone would only log refusals. It flushes its queue on SIGTERM and
    # may retry for a while; SIGKILL after a grace period, it keeps nothing we need.
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_a_real_prometheus_remote_writes_fifty_exporters(
    prometheus, live_server, project, ingest_token, wait
):
    # given 50 exporters, a run on node-007, and Prometheus scraping them all every 5 s (one
    # live server in the test process takes them; more often only queues them behind a lock)
    hosts = [f"node-{number:03d}" for number in range(50)]
    run = run_upsert(project=project, name="llama-remote-write")
    attempt_ensure(
        run=run, number=1, started_at=datetime(2026, 11, 2, tzinfo=UTC), hosts=["node-007"]
    )
    exporters = _Exporters(hosts)
    prometheus(exporters=exporters, url=f"{live_server.url}{URL}", token=ingest_token)

    # when their readings have arrived, node-007's GPU 0 reports XID 79
    wait(lambda: Host.objects.filter(project=project).count() == 50, timeout_s=90,
         what="all 50 hosts' readings through remote-write")  # fmt: skip
    exporters.crash.add("node-007")

    # then one XID event on that GPU and one interruption on the run, naming host and device
    wait(lambda: Interruption.objects.filter(run=run).exists(), timeout_s=60,
         what="the XID 79 interruption")  # fmt: skip
    event = DeviceEvent.objects.get(kind="xid")
    assert (event.host.name, event.device.uuid, event.value) == (
        "node-007", f"GPU-node-007-{A01_GPU0[4:]}", 79.0
    )  # fmt: skip
    interruption = Interruption.objects.get(run=run)
    assert list(interruption.hosts.values_list("name", flat=True)) == ["node-007"]
    assert DeviceEvent.objects.count() == 1
    assert DeviceSample.objects.filter(device__host__name="node-012").count() >= 1
