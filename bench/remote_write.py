"""The remote-write phase: a Prometheus in front of a simulated fleet of 8-GPU hosts (12,500
hosts, 100,000 GPUs, scraped every 30 s) forwarding their DCGM series to
/api/v1/ingest/remote-write in requests of Prometheus's default size (max_samples_per_send
2,000: here 12 hosts' 160 series, 1,920 samples), with the fleet page read meanwhile.

Open loop, as Prometheus's shards are: request i is due at i / rate seconds whether or not the
server kept up. Each host's scrape is bench.dcgm_fleet's (the same 20 fields, 16 kept, 4
skipped), so the CPU per sample compares with the push path's on the same data. `backlog` is
the requests due but unanswered when the schedule ends; `drain_s` how long the last took after.

The request bodies are built by the load generator from a per-round template of one host (its
WriteRequest serialised by the `protobuf` package), copied with each host's name and id
substituted (same length, so the protobuf lengths stay right): building 33 requests a second
field by field would take a core of the load generator's own.

`python -m bench.remote_write --hosts 12500 --seconds 300` runs this phase alone on a private
stack, and `--compare-push` also runs the push phase at the same fleet size for the CPU per
sample of both.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import math
import os
import queue
import re
import statistics
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.cpu import CpuMeter
from bench.dcgm_fleet import (
    GPUS_PER_HOST,
    HOSTS,
    KEPT,
    PERIOD_S,
    SKIPPED,
    _read_fleet_page,
    _sizes,
    _template,
)
from bench.dcgm_fleet import FleetFigure as _PushFigure
from bench.isolation import INGEST_NICE
from bench.load import chronicle_server_pids, percentile, post
from stack.chronicle import Chronicle
from stack.processes import free_port

PATH = "/api/v1/ingest/remote-write"
HOSTS_PER_REQUEST = 12
SERIES_PER_HOST = (len(KEPT) + len(SKIPPED)) * GPUS_PER_HOST
# Placeholders as long as what replaces them: gpu-node-%05d and %08x.
HOST_MARK = "gpu-node-#####"
ID_MARK = "########"


@dataclass
class RemoteWriteFigure:
    hosts: int
    gpus: int
    requests_per_s_target: float
    samples_per_s_target: float
    seconds: float
    requests: int
    answered: int
    samples_per_s: float
    p50_ms: float
    p95_ms: float
    max_ms: float
    backlog: int
    drain_s: float
    failures: list[str] = field(default_factory=list)
    server_cpu_s: float = float("nan")
    server_cpu_share: float = float("nan")
    cpu_us_per_sample: float = float("nan")
    web_cpu_us_per_sample: float = float("nan")
    db_cpu_us_per_sample: float = float("nan")
    # The samples/s every core would hold at this CPU per sample, and the fleet that is.
    cpu_bound_samples_per_s: float = float("nan")
    cpu_bound_hosts: float = float("nan")
    fleet_page_reads: int = 0
    fleet_page_errors: int = 0
    fleet_page_p50_ms: float = float("nan")
    fleet_page_p95_ms: float = float("nan")
    # "shared": one gunicorn pool serves the pushes and the page; "split": the pushes go to an
    # ingest pool at a lower CPU priority and the page to a pool of its own (split_pools).
    layout: str = "split"
    raw_bytes_per_gpu_day: float = float("nan")
    summary_bytes_per_gpu_day: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _host_name(host: int) -> str:
    return f"gpu-node-{host:05d}"


_LINE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _series(labels: list[tuple[str, str]], value: float, stamp_ms: int) -> bytes:
    """prompb.TimeSeries: labels (1: name, 2: value) and one sample (1: double, 2: int64).
    The load generator encodes it itself so that it imports nothing of the product; the
    receiver decodes with the protobuf package, so a mistake here is a 400 in the run."""
    body = b"".join(
        _field(1, _field(1, name.encode()) + _field(2, text.encode())) for name, text in labels
    )
    sample = b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(stamp_ms)
    return _field(1, body + _field(2, sample))


@functools.lru_cache(maxsize=16)
def _host_template(host_class: int, round_no: int, stamp_ms: int) -> bytes:
    """One host's scrape as a serialised WriteRequest, its name and id left as marks."""
    text = _template(host_class, round_no).replace("@HOST@", HOST_MARK).replace("@ID@", ID_MARK)
    parts = []
    for line in text.split("\n"):
        matched = _LINE.fullmatch(line)
        if matched is None:
            continue
        name, label_text, value = matched.groups()
        labels = sorted([("__name__", name), *_LABEL.findall(label_text),
                         ("instance", f"{HOST_MARK}:9400"), ("job", "dcgm")])  # fmt: skip
        parts.append(_series(labels, float(value), stamp_ms))
    return b"".join(parts)


def request_body(first_host: int, hosts: int, round_no: int, stamp_ms: int) -> bytes:
    """Hosts first_host.. (wrapping at `hosts`) at round `round_no`, snappy-compressed.
    Concatenated WriteRequests parse as one with all their series (repeated fields merge)."""
    import cramjam

    parts = []
    for offset in range(HOSTS_PER_REQUEST):
        host = (first_host + offset) % hosts
        template = _host_template(host % 5, round_no % 5, stamp_ms)
        parts.append(
            template.replace(HOST_MARK.encode(), _host_name(host).encode()).replace(
                ID_MARK.encode(), f"{host:08x}".encode()
            )
        )
    return bytes(cramjam.snappy.compress_raw(b"".join(parts)))


Job = tuple[int, int]  # (first host, round)


def _send(
    address: tuple[str, int], token: str, hosts: int, started_ms: int,
    jobs: queue.Queue[tuple[float, Job] | None], out: dict[str, Any], lock: threading.Lock,
) -> None:  # fmt: skip
    conn: http.client.HTTPConnection | None = None
    headers = {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
        "Authorization": f"Bearer {token}",
    }
    while (job := jobs.get()) is not None:
        _due, (first, round_no) = job
        body = request_body(first, hosts, round_no, started_ms + int(round_no * PERIOD_S * 1000))
        began = time.monotonic()
        conn, status, payload = post(conn, address, PATH, body, headers)
        done = time.monotonic()
        with lock:
            out["answers"].append(done)
            if status == 200:
                out["latencies"].append(done - began)
            else:
                out["failures"].append(f"{status} {payload[:200]!r}")
    if conn is not None:
        conn.close()


def _run(
    address: tuple[str, int],
    token: str,
    hosts: int,
    jobs_list: list[Job],
    rate: float,
    senders: int,
) -> tuple[dict[str, Any], float, float]:
    jobs: queue.Queue[tuple[float, Job] | None] = queue.Queue()
    out: dict[str, Any] = {"answers": [], "latencies": [], "failures": []}
    lock = threading.Lock()
    started_ms = int(time.time() * 1000) - 60_000
    threads = [
        threading.Thread(
            target=_send,
            args=(address, token, hosts, started_ms, jobs, out, lock),
            daemon=True,
        )
        for _ in range(senders)
    ]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    for i, job in enumerate(jobs_list):
        due = start + i / rate
        time.sleep(max(0.0, due - time.monotonic()))
        jobs.put((due, job))
    end = start + len(jobs_list) / rate
    for _ in threads:
        jobs.put(None)
    for thread in threads:
        thread.join()
    return out, start, end


def measure(
    app: Chronicle,
    token: str,
    cookie: str,
    *,
    hosts: int = HOSTS,
    seconds: float = 300.0,
    senders: int = 16,
    read_page: bool = True,
    layout: str = "split",
) -> RemoteWriteFigure:
    """Hold the fleet's remote-write for `seconds` (after a warm-up round that makes every
    host's devices), reading /fleet/ meanwhile. With layout "split" the requests go to an
    ingest pool and the page to a pages pool (split_pools); "shared" sends both to the
    stack's one web pool."""
    ingest_at = pages_at = app.base_url
    if layout == "split":
        ingest_at, pages_at = split_pools(app)
    per_round = -(-hosts // HOSTS_PER_REQUEST)
    rate = per_round / PERIOD_S
    samples_per_request = HOSTS_PER_REQUEST * SERIES_PER_HOST
    # Warm-up: every host once (devices and health states made), not measured.
    warm = [(i * HOSTS_PER_REQUEST, 0) for i in range(per_round)]
    _run(ingest_at, token, hosts, warm, rate=rate * 4, senders=senders)
    count = int(seconds * rate)
    measured = [((i % per_round) * HOSTS_PER_REQUEST, 1 + i // per_round) for i in range(count)]
    stop = threading.Event()
    page: dict[str, Any] = {"ms": [], "errors": 0}
    reader = threading.Thread(
        target=_read_fleet_page, args=(app, cookie, stop, page), kwargs={"at": pages_at}
    )
    with (
        CpuMeter(lambda: chronicle_server_pids(app)) as cpu,
        CpuMeter(lambda: [pool.pid for pool in app.pools if pool.alive()]) as web_cpu,
        CpuMeter(lambda: [app.pg.pid]) as db_cpu,
    ):
        if read_page:
            reader.start()
        try:
            out, start, end = _run(ingest_at, token, hosts, measured, rate=rate, senders=senders)
        finally:
            stop.set()
            if read_page:
                reader.join()
    ms = [s * 1000 for s in out["latencies"]]
    last = max(out["answers"], default=end)
    samples = len(ms) * samples_per_request
    figure = RemoteWriteFigure(
        hosts=hosts,
        gpus=hosts * GPUS_PER_HOST,
        requests_per_s_target=round(rate, 2),
        samples_per_s_target=round(rate * samples_per_request, 1),
        seconds=round(end - start, 1),
        requests=count,
        answered=len(ms),
        samples_per_s=round(samples / max(last - start, end - start), 1),
        p50_ms=round(statistics.median(ms), 1) if ms else float("nan"),
        p95_ms=round(percentile(ms, 95), 1),
        max_ms=round(max(ms, default=float("nan")), 1),
        backlog=sum(1 for t in out["answers"] if t > end + 1.0 / rate),
        drain_s=round(max(0.0, last - end), 2),
        failures=out["failures"][:5],
        server_cpu_s=round(cpu.seconds, 1),
        fleet_page_reads=len(page["ms"]),
        fleet_page_errors=page["errors"],
        fleet_page_p50_ms=round(statistics.median(page["ms"]), 1) if page["ms"] else math.nan,
        fleet_page_p95_ms=round(percentile(page["ms"], 95), 1),
        layout=layout,
    )
    cores = os.cpu_count() or 1
    figure.server_cpu_share = round(cpu.seconds / (max(last, end) - start) / cores, 3)
    if samples:
        figure.cpu_us_per_sample = round(cpu.seconds / samples * 1e6, 2)
        figure.web_cpu_us_per_sample = round(web_cpu.seconds / samples * 1e6, 2)
        figure.db_cpu_us_per_sample = round(db_cpu.seconds / samples * 1e6, 2)
        figure.cpu_bound_samples_per_s = round(cores * 1e6 / figure.cpu_us_per_sample)
        per_host_s = SERIES_PER_HOST / PERIOD_S
        figure.cpu_bound_hosts = round(figure.cpu_bound_samples_per_s / per_host_s)
    sizes = _PushFigure(hosts=hosts, target_per_s=0, seconds=0, pushes=0, answered=0,
                        pushes_per_s=0, p50_ms=0, p95_ms=0, max_ms=0, max_send_lag_ms=0,
                        backlog=0, drain_s=0)  # fmt: skip
    _sizes(app, sizes)
    figure.raw_bytes_per_gpu_day = sizes.raw_bytes_per_gpu_day
    figure.summary_bytes_per_gpu_day = sizes.summary_bytes_per_gpu_day
    return figure


def split_pools(app: Chronicle, *, workers: int = 4) -> tuple[tuple[str, int], tuple[str, int]]:
    """The one-machine layout docs/operations.md ("Scaling out") recommends: ingest on a pool
    of its own at a lower CPU priority (`nice -n 10 make web-ingest`), pages on another, so a
    reader waits neither behind a queue of pushes nor for a share of CPU equal to theirs.
    Prometheus queues and retries what the ingest pool has not yet answered; a reader cannot.
    Returns (ingest address, pages address)."""
    ingest_port, pages_port = free_port(), free_port()
    app.start_pool("gunicorn-ingest", ingest_port, workers=workers, nice=INGEST_NICE)
    app.start_pool("gunicorn-pages", pages_port, workers=2)
    return ("127.0.0.1", ingest_port), ("127.0.0.1", pages_port)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from bench import dcgm_fleet
    from bench.pages import reader_cookie
    from stack.chronicle import chronicle_stack

    parser = argparse.ArgumentParser(prog="python -m bench.remote_write", description=__doc__)
    parser.add_argument("--hosts", type=int, default=HOSTS)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--senders", type=int, default=16)
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--no-page", action="store_true", help="Do not read /fleet/ meanwhile.")
    parser.add_argument(
        "--layout", choices=("split", "shared"), default="split",
        help="split (default): ingest on its own pool at nice 10, the page on another; "
        "shared: one pool for both.",
    )  # fmt: skip
    parser.add_argument(
        "--compare-push", action="store_true",
        help="Then push the same fleet's text through /api/v1/ingest/prometheus for as long, "
        "and print both CPU figures per kept sample.",
    )  # fmt: skip
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with (
        chronicle_stack(web_workers=args.web_workers, pages=True) as app,
        app.production_push_rate(),
    ):
        token = app.create_token("bench-remote-write")
        cookie = reader_cookie(app)
        figure = measure(
            app, token, cookie, hosts=args.hosts, seconds=args.seconds,
            senders=args.senders, read_page=not args.no_page, layout=args.layout,
        )  # fmt: skip
        results["remote_write"] = figure.as_dict()
        if args.compare_push:
            push_token = app.create_token("bench-dcgm")
            push = dcgm_fleet.measure(
                app, push_token, cookie, hosts=args.hosts, seconds=args.seconds,
                read_page=not args.no_page,
            )  # fmt: skip
            results["push"] = push.as_dict()
            kept_per_push = len(KEPT) * GPUS_PER_HOST
            sent_per_push = SERIES_PER_HOST
            results["cpu_us_per_sample"] = {
                "remote_write": figure.cpu_us_per_sample,
                "push": round(push.cpu_ms_per_push * 1000 / sent_per_push, 2),
                "push_per_kept_sample": round(push.cpu_ms_per_push * 1000 / kept_per_push, 2),
            }
    print(json.dumps(results, indent=2), file=sys.stdout)
    return results


if __name__ == "__main__":
    main()
