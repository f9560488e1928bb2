"""The Python client (clients/python) against a live Chronicle: the live test server, the
real Celery worker, PostgreSQL. Outages are made with a forwarding proxy on 127.0.0.1 that
the tests stop, restart, or tell to answer 503 / 429 first; kills are real SIGKILLs of client
processes."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Sum

from ingest.models import IngestBatch
from logbook.models import Checkpoint, Interruption, LogbookEntry
from telemetry.models import Attempt, MetricPoint, Run

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))

from chronicle_client import ChronicleError  # noqa: E402
from chronicle_client import Run as ClientRun  # noqa: E402
from chronicle_client.spool import (  # noqa: E402
    KIND_METRICS,
    Spool,
    frame,
    read_ack,
    scan,
)
from chronicle_client.transport import RetryPolicy, Transport  # noqa: E402

# Fast retries for tests; the defaults (1 s doubling to 60 s) are asserted in the unit test.
FAST = {"retry_base_s": 0.02, "retry_cap_s": 0.3, "flush_interval_s": 0.05}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Proxy:
    """Forwards POSTs to the live server. `canned` answers go out first, without forwarding;
    stop() closes the port (connection refused), start() opens it again on the same port."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.port = _free_port()
        self.canned: list[tuple[int, str | None]] = []
        self.log: list[tuple[float, int]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                retry_after = None
                if proxy.canned:
                    status, retry_after = proxy.canned.pop(0)
                    answer = json.dumps({"detail": f"canned {status}"}).encode()
                else:
                    status, answer, retry_after = proxy.forward(self.path, self.headers, body)
                proxy.log.append((time.monotonic(), status))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                if retry_after:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                with contextlib.suppress(ConnectionError):  # a SIGKILLed client is gone
                    self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def forward(self, path: str, headers: Any, body: bytes) -> tuple[int, bytes, str | None]:
        names = ("Authorization", "Content-Type", "Content-Encoding")
        request = urllib.request.Request(
            self.target + path,
            data=body,
            headers={name: headers[name] for name in names if headers.get(name)},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read(), None
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("Retry-After")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture
def proxy(live_server: Any) -> Any:
    proxy = Proxy(live_server.url)
    yield proxy
    proxy.stop()


def _all_batches_done() -> bool:
    statuses = set(IngestBatch.objects.values_list("status", flat=True))
    assert "dead" not in statuses
    return bool(statuses) and statuses == {"done"}


def _client_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(CLIENT_DIR)}


def _sync(directory: Path, url: str, token: str) -> tuple[int, dict[str, Any], str]:
    command = [
        sys.executable, "-m", "chronicle_client", "sync", str(directory), "--url", url,
        "--token", token, "--timeout", "60", "--retry-base", "0.05", "--retry-cap", "0.5",
    ]  # fmt: skip
    done = subprocess.run(command, env=_client_env(), capture_output=True, text=True, timeout=90)
    stats = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    return done.returncode, stats, done.stderr


# --- Pure parts: the spool format and the retry policy -------------------------------------


def test_spool_skips_a_torn_last_record_and_resyncs_after_corruption(tmp_path):
    # given a segment with ten records, one corrupted in the middle and the last torn
    spool = Spool(tmp_path)
    spool.open_writer({"run": "r", "attempt": 1, "rank": 0, "host": "h"})
    for step in range(10):
        spool.append(KIND_METRICS, json.dumps([step, 0, {"loss": step}]).encode())
    spool.fsync()
    path = spool.segments()[0]
    data = bytearray(path.read_bytes())
    records = scan(path, 0, live=False).records
    data[records[4].offset + 13] ^= 0xFF  # a payload byte of step 3: its CRC fails
    path.write_bytes(bytes(data[:-3]))  # and step 9 is cut short

    # when the segment is read as a dead one
    result = scan(path, 0, live=False)

    # then steps 3 and 9 are skipped and counted, everything else is read
    steps = [json.loads(r.payload)[0] for r in result.records if r.kind == KIND_METRICS]
    assert steps == [0, 1, 2, 4, 5, 6, 7, 8]
    assert result.torn is True
    assert result.corrupt_bytes == records[4].end - records[4].offset
    # and while a writer is live, the same cut-short tail means "not written yet", not torn
    assert scan(path, 0, live=True).torn is False
    spool.release()


def test_ack_file_keeps_the_last_whole_entry(tmp_path):
    spool = Spool(tmp_path)
    path = tmp_path / "x-000001.spool"
    path.write_bytes(frame(KIND_METRICS, b"[0,0,{}]"))
    spool.ack(path, 11)
    spool.ack(path, 19)
    ack = path.with_suffix(".ack")
    ack.write_bytes(ack.read_bytes() + b"\x01\x02\x03")  # a torn third entry
    assert read_ack(path) == 19
    spool.release()


def test_retry_after_is_a_floor_and_backoff_is_capped():
    policy = RetryPolicy(base_s=1.0, cap_s=60.0)
    # full jitter: uniform in [0, min(60, 2^(n-1))]
    assert all(0 <= policy.delay(3, None) <= 4 for _ in range(200))
    assert all(policy.delay(20, None) <= 60 for _ in range(200))
    assert all(policy.delay(1, 7.0) >= 7.0 for _ in range(200))
    # a Retry-After of an hour is clamped to five minutes
    assert policy.delay(1, 3600.0) == 300.0


def test_log_does_not_wait_for_the_network(tmp_path):
    # given a run whose server is unreachable, so the sender thread is busy retrying
    run = ClientRun(
        "latency", url=f"http://127.0.0.1:{_free_port()}", token="t", spool_dir=tmp_path, **FAST
    )
    # when the loop logs 20,000 steps
    for step in range(20_000):
        run.log({"loss": 1.0 / (step + 1), "lr": 3e-4}, step=step)
    # then every point was taken while none could be sent: log() never waited on a send
    # (what a call costs is python -m bench.client_overhead's figure, not a limit here)
    assert run.stats.points_logged == 40_000
    assert run.stats.points_sent == 0
    run.finish(timeout=0)


# --- Against the live server ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_metrics_and_events_land_in_the_models(
    live_server, celery_worker, ingest_token, wait, tmp_path
):
    # given a restarted job (attempt 2) that says why attempt 1 ended
    with ClientRun(
        "client-run",
        url=live_server.url,
        token=ingest_token,
        attempt=2,
        host="node-a",
        resumed_from_step=100,
        run_info={"accelerator_type": "H100-SXM", "accelerator_count": 8},
        spool_dir=tmp_path,
        **FAST,
    ) as run:
        run.interruption("faulty-gpu", attempt=1, step=130, message="XID 79", hosts=["node-b"])
        for step in range(100, 150):
            run.log({"loss": 4.0 - step / 100, "grad_norm": float("nan")}, step=step)
        save_started = time.monotonic()
        with run.checkpoint(150, tier="object_store") as saved:
            time.sleep(0.05)  # the blocking part of a save
            saved.size_bytes = 1234
        save_s = time.monotonic() - save_started
        run.note("LR warm restart", "Dropped the LR by 2x.", kind="config_change", step=150)
        run.heartbeat()
        assert run.flush(timeout=20)
        wait(
            lambda: IngestBatch.objects.filter(batch_id__contains="-hb1").exists(),
            what="the heartbeat",
        )

    # then the worker stored each of them where it belongs
    wait(_all_batches_done, what="the worker")
    stored = Run.objects.get(name="client-run")
    assert (stored.accelerator_type, stored.accelerator_count) == ("H100-SXM", 8)
    attempt = Attempt.objects.get(run=stored, number=2)
    assert attempt.status == "completed" and attempt.resumed_from_step == 100
    assert list(attempt.hosts.values_list("name", flat=True)) == ["node-a"]
    losses = dict(
        MetricPoint.objects.filter(series__attempt=attempt, series__name="loss").values_list(
            "step", "value"
        )
    )
    assert len(losses) == 50 and losses[120] == pytest.approx(2.8)
    assert (
        MetricPoint.objects.filter(series__name="grad_norm", series__attempt=attempt).count() == 50
    )
    checkpoint = Checkpoint.objects.get(run=stored, step=150)
    # the save's own time: at least the sleep, at most the block around it
    assert 0.05 <= checkpoint.blocking_save_s <= save_s
    assert (checkpoint.size_bytes, checkpoint.tier, checkpoint.status) == (
        1234,
        "object_store",
        "saved",
    )
    interruption = Interruption.objects.get(run=stored)
    assert interruption.attempt.number == 1 and interruption.root_cause.slug == "faulty-gpu"
    assert interruption.message == "XID 79"
    note = LogbookEntry.objects.get(run=stored, title="LR warm restart")
    assert note.kind == "config_change" and note.is_automatic and note.step == 150
    # and the heartbeat went out as an empty batch
    assert IngestBatch.objects.filter(batch_id__contains="-hb1", metric_count=0).exists()


@pytest.mark.django_db(transaction=True)
def test_503_and_429_are_retried_after_retry_after(
    proxy, celery_worker, ingest_token, wait, tmp_path
):
    # given a server that answers 503 then 429, each with Retry-After: 1, then accepts
    proxy.canned = [(503, "1"), (429, "1")]
    proxy.start()
    run = ClientRun("retried", url=proxy.url, token=ingest_token, spool_dir=tmp_path, **FAST)

    # when the job logs
    for step in range(10):
        run.log({"loss": float(step)}, step=step)
    delivered = run.finish(timeout=20)

    # then the batch went through on the third try, each retry waiting out Retry-After
    assert delivered
    times = [when for when, _ in proxy.log]
    assert [status for _, status in proxy.log][:3] == [503, 429, 202]
    assert times[1] - times[0] >= 1.0 and times[2] - times[1] >= 1.0
    assert run.stats.retries == 2
    wait(_all_batches_done, what="the worker")
    assert MetricPoint.objects.filter(series__run__name="retried").count() == 10


@pytest.mark.django_db(transaction=True)
def test_network_errors_are_retried_until_the_server_is_up(
    proxy, celery_worker, ingest_token, wait, tmp_path
):
    # given a job that starts while nothing listens at the server's address
    run = ClientRun("late-server", url=proxy.url, token=ingest_token, spool_dir=tmp_path, **FAST)
    run.log({"loss": 1.5}, step=0)
    wait(lambda: run.stats.retries >= 2, what="connection-refused retries")

    # when the server comes up
    proxy.start()

    # then the spooled point arrives
    assert run.finish(timeout=20)
    wait(_all_batches_done, what="the worker")
    assert MetricPoint.objects.get(series__run__name="late-server").value == 1.5


@pytest.mark.django_db(transaction=True)
def test_a_400_is_not_retried_and_raises_with_the_servers_message(
    proxy, celery_worker, ingest_token, tmp_path
):
    proxy.start()
    # given a note of a kind the server does not know (the client leaves that to the server)
    run = ClientRun(
        "refused",
        url=proxy.url,
        token=ingest_token,
        spool_dir=tmp_path,
        start=False,
        end_attempt=False,
        **FAST,
    )
    run.note("odd", kind="not-a-kind")

    # when it is flushed, then the server's own message is raised, after a single request
    with pytest.raises(ChronicleError) as raised:
        run.flush(timeout=20)
    assert raised.value.status == 400
    assert "kind" in raised.value.detail and "not-a-kind" in raised.value.detail
    assert [status for _, status in proxy.log] == [400]
    assert run.stats.batches_rejected == 1
    # and the refused body is kept beside the spool, not resent
    assert len(list(tmp_path.rglob("rejected/*.json"))) == 1
    run.finish(timeout=5)
    assert [status for _, status in proxy.log] == [400]

    # and a revoked or wrong token is a 401 that is raised at once, not retried
    transport = Transport(proxy.url, "wrong-token")
    with pytest.raises(ChronicleError) as unauthorized:
        transport.send(b'{"batch_id": "x", "run": "r"}')
    assert unauthorized.value.status == 401 and unauthorized.value.detail
    assert [status for _, status in proxy.log] == [400, 401]


CHILD = r"""
import json, mmap, os, sys, time
from chronicle_client import Run

config = json.loads(sys.argv[1])
fd = os.open(config["progress"], os.O_RDWR)
progress = mmap.mmap(fd, 8)
run = Run(config["run"], url=config["url"], token=config["token"], attempt=1,
          spool_dir=config["spool"], segment_bytes=config.get("segment_bytes", 256 * 1024),
          retry_base_s=0.02, retry_cap_s=0.3, flush_interval_s=0.05)
start = int.from_bytes(progress[:8], "little")
for step in range(start, config["steps"]):
    run.log({"loss": (step % 997) * 0.25, "lr": (step % 13) * 0.5}, step=step)
    # What the parent reads after a SIGKILL: every step below this was logged.
    progress[:8] = (step + 1).to_bytes(8, "little")
    if step % 500 == 0:
        time.sleep(config.get("pause_s", 0.01))
if config.get("linger"):
    time.sleep(3600)
run.finish(timeout=config.get("flush_timeout_s", 30))
"""


class Job:
    """A training job in a subprocess, killable, with its progress in a shared file."""

    def __init__(self, tmp_path: Path, **config: Any) -> None:
        self.progress_path = tmp_path / "progress"
        if not self.progress_path.exists():
            self.progress_path.write_bytes(b"\0" * 8)
        self.config = {**config, "progress": str(self.progress_path)}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, **overrides: Any) -> None:
        config = json.dumps({**self.config, **overrides})
        self.process = subprocess.Popen([sys.executable, "-c", CHILD, config], env=_client_env())

    @property
    def step(self) -> int:
        with (
            open(self.progress_path, "rb") as file,
            mmap.mmap(file.fileno(), 8, access=mmap.ACCESS_READ) as progress,
        ):
            return int.from_bytes(progress[:8], "little")

    def kill(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        return self.step


@pytest.mark.django_db(transaction=True)
def test_a_sigkilled_job_loses_nothing_and_a_torn_last_record_is_skipped(
    live_server, celery_worker, ingest_token, wait, tmp_path
):
    # given a job that logged 1,000 steps while the server was unreachable, then was SIGKILLed
    job = Job(
        tmp_path,
        run="killed",
        url=f"http://127.0.0.1:{_free_port()}",
        token=ingest_token,
        spool=str(tmp_path / "spool"),
        steps=1000,
        linger=True,
    )
    job.start()
    wait(lambda: job.step == 1000, what="the job to log 1,000 steps")
    assert job.kill() == 1000
    # and the machine "crashed" in the middle of writing the last record (step 999)
    segments = sorted((tmp_path / "spool").rglob("*.spool"))
    assert len(segments) == 1
    segments[0].write_bytes(segments[0].read_bytes()[:-4])

    # when the spool is synced
    status, stats, stderr = _sync(tmp_path / "spool", live_server.url, ingest_token)

    # then steps 0..998 arrive (2 points each), the torn record is counted, the spool is empty
    assert status == 0, stderr
    assert stats["torn_records"] == 1 and stats["points_sent"] == 1998
    assert not list((tmp_path / "spool").rglob("*.spool"))
    wait(_all_batches_done, what="the worker")
    steps = set(
        MetricPoint.objects.filter(series__run__name="killed", series__name="loss").values_list(
            "step", flat=True
        )
    )
    assert steps == set(range(999))


@pytest.mark.django_db(transaction=True)
def test_100k_points_through_an_outage_and_two_sigkills(
    proxy, celery_worker, ingest_token, wait, tmp_path
):
    started = time.monotonic()
    steps = 50_000  # two metrics per step: 100,000 points
    job = Job(
        tmp_path,
        run="outage",
        url=proxy.url,
        token=ingest_token,
        spool=str(tmp_path / "spool"),
        steps=steps,
        pause_s=0.02,
    )
    # given a job that starts with the server up
    proxy.start()
    job.start()
    wait(lambda: job.step >= 8_000 and len(proxy.log) >= 2, what="first batches delivered")
    # when the server goes down, and the job is SIGKILLed during the outage
    proxy.stop()
    wait(lambda: job.step >= 18_000, what="logging during the outage")
    first_kill = job.kill()
    # and restarts (still down); the server comes back; the job is SIGKILLed again
    job.start()
    wait(lambda: job.step >= 28_000, what="the restarted job")
    proxy.start()
    before = len(proxy.log)
    wait(
        lambda: job.step >= 38_000 and len(proxy.log) >= before + 2,
        what="the restarted job delivering its backlog",
    )
    second_kill = job.kill()
    # and the last restart finishes during a second outage, leaving its spool behind
    proxy.stop()
    job.start(flush_timeout_s=0.5)
    assert job.process is not None and job.process.wait(timeout=60) == 0
    assert job.step == steps
    proxy.start()
    status, stats, stderr = _sync(tmp_path / "spool", proxy.url, ingest_token)

    # then the server holds exactly the points logged: count and checksum
    assert status == 0, stderr
    assert stats["errors"] == [] and not list((tmp_path / "spool").rglob("*.spool"))
    wait(_all_batches_done, timeout_s=60, what="the worker")
    points = MetricPoint.objects.filter(series__run__name="outage")
    expected_sum = sum((s % 997) * 0.25 + (s % 13) * 0.5 for s in range(steps))
    assert points.count() == 2 * steps
    assert points.aggregate(total=Sum("value"))["total"] == expected_sum
    for name in ("loss", "lr"):
        assert points.filter(series__name=name).values("step").distinct().count() == steps
    assert Attempt.objects.filter(run__name="outage").count() == 1
    elapsed = time.monotonic() - started
    print(
        f"100k test: {2 * steps} points, {IngestBatch.objects.count()} batches, "
        f"killed at steps {first_kill} and {second_kill}, {len(proxy.log)} proxied requests, "
        f"sync sent {stats['points_sent']} points, {elapsed:.1f} s"
    )


MULTI_RANK = r"""
import sys
from chronicle_client import Run

url, token, spool, rank = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with Run("multi", url=url, token=token, attempt=1, rank=rank, host=f"node-{rank}",
         spool_dir=spool, retry_base_s=0.02, retry_cap_s=0.3, flush_interval_s=0.05) as run:
    for step in range(200):
        metrics = {f"rank{rank}/step_time_s": 0.5 + rank}
        if rank == 0:
            metrics["loss"] = 3.0 - step / 1000
        run.log(metrics, step=step)
"""


@pytest.mark.django_db(transaction=True)
def test_four_ranks_one_run_one_attempt(live_server, celery_worker, ingest_token, wait, tmp_path):
    # when four ranks of one job report at once
    processes = []
    for rank in range(4):
        arguments = [live_server.url, ingest_token, str(tmp_path), str(rank)]
        command = [sys.executable, "-c", MULTI_RANK, *arguments]
        processes.append(subprocess.Popen(command, env=_client_env()))
    assert [process.wait(timeout=60) for process in processes] == [0, 0, 0, 0]

    # then there is one run with one attempt, on all four hosts, ended once by rank 0
    wait(_all_batches_done, what="the worker")
    attempt = Attempt.objects.get(run__name="multi")
    assert attempt.number == 1 and attempt.status == "completed"
    assert sorted(attempt.hosts.values_list("name", flat=True)) == [f"node-{r}" for r in range(4)]
    points = MetricPoint.objects.filter(series__run__name="multi")
    for rank in range(4):
        assert points.filter(series__name=f"rank{rank}/step_time_s").count() == 200
        sent = IngestBatch.objects.filter(batch_id__contains=f"-r{rank}-")
        assert set(sent.values_list("rank", "host")) == {(rank, f"node-{rank}")}
    assert points.filter(series__name="loss").count() == 200
    assert points.count() == 5 * 200


def test_struct_sizes_match_the_documented_format():
    # the README documents an 11-byte record header and 12-byte ack entries
    assert struct.calcsize("<2scII") == 11 and struct.calcsize("<QI") == 12


@pytest.mark.django_db(transaction=True)
def test_a_batch_answered_500_again_and_again_is_dead_lettered_and_the_rest_still_goes(
    proxy, celery_worker, ingest_token, tmp_path, wait
):
    proxy.start()
    run = ClientRun(
        "wedge",
        url=proxy.url,
        token=ingest_token,
        spool_dir=tmp_path,
        start=False,
        end_attempt=False,
        **FAST,
    )
    # given a server that answers 500 to the first batch every time (a server bug)
    proxy.canned = [(500, None)] * 5
    run.log({"loss": 1.0}, step=1)

    # when it is flushed, then after five 500s it is set aside, reported, and kept whole
    with pytest.raises(ChronicleError) as raised:
        run.flush(timeout=20)
    assert raised.value.status == 500
    assert [status for _, status in proxy.log] == [500] * 5
    assert run.stats.batches_dead_lettered == 1 and run.stats.points_dead_lettered == 1
    (kept,) = tmp_path.rglob("dead-letter/*.json")
    (series,) = json.loads(kept.read_bytes())["series"]
    assert (series["name"], series["steps"], series["values"]) == ("loss", [1], [1.0])

    # and the batches after it are no longer held back
    run.log({"loss": 2.0}, step=2)
    assert run.flush(timeout=20)
    assert proxy.log[-1][1] == 202
    run.finish(timeout=5)
    wait(_all_batches_done, what="the worker")
    assert list(MetricPoint.objects.values_list("step", flat=True)) == [2]
