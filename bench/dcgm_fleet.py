"""The DCGM fleet phase: dcgm-exporter text from a simulated fleet of 8-GPU hosts, pushed to
/api/v1/ingest/prometheus at the rate the fleet needs at the exporter's 30 s period (12,500
hosts, 100,000 GPUs: 417 pushes/s; issue 31), the fleet page read while it pushes, and the
disk it takes.

Open loop, as a fleet is: push i is due at i / rate seconds whether or not the server kept
up, and is sent by whichever of the sender threads is free. A push's latency is from its
send to its answer; `backlog` is the pushes due but not yet answered when the schedule ends,
and `drain_s` how long after that the last answer came. Every host pushed once before the
clock starts (unmeasured), so its devices and health state exist, as in a fleet's steady state.

One reader (bench-reader, on-call in the project) loads /fleet/ every FLEET_PAGE_EVERY_S
through the measured run: `fleet_page_p95_ms` is the page's latency while the fleet pushes.
The per-token push rate (INGEST_RATE_LIMIT) is at its production default for this phase
(`Chronicle.production_push_rate`; the stack turns every rate limit off for the others): the
fleet must pass it.

Each push is one host's 8 GPUs x 20 DCGM fields, 16 of which Chronicle keeps (the exporter's
default counters, the uncorrectable ECC counters and thermal throttling) and 4 it skips
(framebuffer and profiling fields), in the exporter's own rendering.

Bytes per GPU per day come from pg_total_relation_size of the raw samples' partitions and
of the summaries (after VACUUM FULL: a closed 5-minute bucket is not updated again),
divided by the readings (raw) or rows (summaries) measured and multiplied by a day's at a
30 s period.

`python -m bench.dcgm_fleet` runs this phase alone on a private stack."""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import queue
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.cpu import CpuMeter
from bench.load import chronicle_server_pids, percentile, post
from stack.chronicle import Chronicle

HOSTS = 12_500
PERIOD_S = 30.0
GPUS_PER_HOST = 8
FLEET_PAGE_EVERY_S = 0.5
# Llama 3's 54-day run: what the README's disk figure is for.
DAYS = 54
RETENTION_DAYS = 7  # DEVICE_SAMPLE_RETENTION_DAYS's default
SUMMARY_BUCKET_S = 300  # telemetry.device_samples.SUMMARY_BUCKET_S
PATH = "/api/v1/ingest/prometheus"

# (name, type, help, value for GPU g of host h at round r): the exporter's rendering.
KEPT = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "%d", 1980),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "%d", 2619),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", "%d", 58),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "%d", 66),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "%f", 612.457),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ).", "%d", 8312450172),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "%d", 0),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "%d", 98),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "%d", 41),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "%d", 0),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for uncorrectable errors", "%d", 0),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for correctable errors", "%d", 0),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", "%d", 0),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
     "%d", 0),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
     "%d", 0),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter",
     "Throttling duration due to thermal constraints (in us).", "%d", 0),
]  # fmt: skip
SKIPPED = [
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "%d", 1931),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "%d", 79147),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
     "%f", 0.97),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
     "Ratio of cycles the tensor (HMMA) pipe is active.", "%f", 0.61),
]  # fmt: skip
SAMPLES_PER_GPU_DAY = len(KEPT) * int(86_400 / PERIOD_S)
SUMMARIES_PER_GPU_DAY = 86_400 // SUMMARY_BUCKET_S


def pushes_per_s(hosts: int = HOSTS) -> float:
    return hosts / PERIOD_S


def host_text(host: int, round_no: int) -> bytes:
    """One scrape of host `host`'s 8 GPUs, values moving a little from round to round."""
    name = f"gpu-node-{host:05d}"
    text = _template(host % 5, round_no).replace("@HOST@", name).replace("@ID@", f"{host:08x}")
    return text.encode()


@functools.lru_cache(maxsize=32)
def _template(host_class: int, round_no: int) -> str:
    """host_text with the host's name and id left as @HOST@ and @ID@: a host's values depend
    on it only through host % 5, and building 417 scrapes a second line by line took a core
    of the load generator's own."""
    lines: list[str] = []
    for metric, kind, text, form, base in KEPT + SKIPPED:
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
        for gpu in range(GPUS_PER_HOST):
            wobble = (host_class * 7 + gpu * 3 + round_no) % 5
            if metric == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
                value = form % (base + round_no * 18_000_000 + gpu)
            elif base and kind == "gauge":
                value = form % (base + wobble)
            else:
                value = form % base
            extra = ',err_code="0",err_msg="No Error"' if metric.endswith("XID_ERRORS") else ""
            lines.append(
                f'{metric}{{gpu="{gpu}",UUID="GPU-@ID@-{gpu:04x}-4000-8000-0000b3nch000",'
                f'pci_bus_id="00000000:{0x18 + gpu * 0x11:02X}:00.0",device="nvidia{gpu}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="@HOST@",'
                f'DCGM_FI_DRIVER_VERSION="550.90.07"{extra}}} {value}'
            )
    return "\n".join(lines) + "\n"


@dataclass
class FleetFigure:
    hosts: int
    target_per_s: float
    seconds: float
    pushes: int
    answered: int
    pushes_per_s: float
    p50_ms: float
    p95_ms: float
    max_ms: float
    max_send_lag_ms: float  # how late the latest push was sent after it was due
    backlog: int  # due but unanswered when the schedule ended
    drain_s: float  # from the schedule's end to the last answer
    failures: list[str] = field(default_factory=list)
    server_cpu_s: float = float("nan")
    server_cpu_share: float = float("nan")  # of all the machine's cores, until the last answer
    # Server CPU (web, worker, PostgreSQL, Redis) per push, and the pushes/s that would use
    # every core: steadier than wall-clock figures when others share the machine.
    cpu_ms_per_push: float = float("nan")
    cpu_bound_pushes_per_s: float = float("nan")
    web_cpu_ms_per_push: float = float("nan")  # gunicorn's share of it
    db_cpu_ms_per_push: float = float("nan")  # PostgreSQL's
    # /fleet/ read while the fleet pushes (one reader, FLEET_PAGE_EVERY_S apart).
    fleet_page_reads: int = 0
    fleet_page_errors: int = 0
    fleet_page_p50_ms: float = float("nan")
    fleet_page_p95_ms: float = float("nan")
    raw_bytes: int = 0
    raw_samples: int = 0  # readings (field values), 16 a GPU a push
    raw_rows: int = 0  # a row per GPU and moment
    summary_bytes: int = 0
    summary_rows: int = 0
    bytes_per_sample: float = float("nan")  # per reading
    bytes_per_row: float = float("nan")
    bytes_per_summary: float = float("nan")
    raw_bytes_per_gpu_day: float = float("nan")
    summary_bytes_per_gpu_day: float = float("nan")
    # The fleet's hosts: the raw window (and today's partition), DAYS of summaries, both.
    fleet_raw_gb: float = float("nan")
    fleet_summary_gb: float = float("nan")
    fleet_disk_gb: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Push = tuple[int, int]  # (host, round)


def _send(
    address: tuple[str, int], token: str, jobs: queue.Queue[tuple[float, Push] | None],
    out: dict[str, Any], lock: threading.Lock,
) -> None:  # fmt: skip
    conn: http.client.HTTPConnection | None = None
    headers = {"Content-Type": "text/plain; version=0.0.4", "Authorization": f"Bearer {token}"}
    while (job := jobs.get()) is not None:
        due, (host, round_no) = job
        body = host_text(host, round_no)
        began = time.monotonic()
        conn, status, payload = post(conn, address, PATH, body, headers)
        done = time.monotonic()
        with lock:
            out["lags"].append(began - due)
            out["answers"].append(done)
            if status == 200:
                out["latencies"].append(done - began)
            else:
                out["failures"].append(f"{status} {payload[:200]!r}")
    if conn is not None:
        conn.close()


def _run(
    app: Chronicle, token: str, pushes: list[Push], rate: float, senders: int
) -> tuple[dict[str, Any], float, float]:
    """Send `pushes` (host, round) at `rate` per second. Returns the outcome, the start and
    the time the schedule ended (monotonic)."""
    jobs: queue.Queue[tuple[float, Push] | None] = queue.Queue()
    out: dict[str, Any] = {"lags": [], "answers": [], "latencies": [], "failures": []}
    lock = threading.Lock()
    threads = [
        threading.Thread(target=_send, args=(app.base_url, token, jobs, out, lock), daemon=True)
        for _ in range(senders)
    ]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    for i, push in enumerate(pushes):
        due = start + i / rate
        time.sleep(max(0.0, due - time.monotonic()))
        jobs.put((due, push))
    end = start + len(pushes) / rate
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
    seconds: float = 60.0,
    senders: int = 48,
    read_page: bool = True,
) -> FleetFigure:
    """`cookie`: a reader of the token's project, logged in (bench.pages.reader_cookie)."""
    rate = pushes_per_s(hosts)
    # Warm-up: every host once, its devices created (not measured).
    _run(app, token, [(h, 0) for h in range(hosts)], rate=rate * 4, senders=senders)
    app.manage("shell", "-c", _SQL_SHELL % "TRUNCATE telemetry_devicesample")
    count = int(seconds * rate)
    pushes = [(i % hosts, 1 + i // hosts) for i in range(count)]
    stop = threading.Event()
    page: dict[str, Any] = {"ms": [], "errors": 0}
    reader = threading.Thread(target=_read_fleet_page, args=(app, cookie, stop, page))
    with (
        CpuMeter(lambda: chronicle_server_pids(app)) as cpu,
        CpuMeter(lambda: [pool.pid for pool in app.pools if pool.alive()]) as web_cpu,
        CpuMeter(lambda: [app.pg.pid]) as db_cpu,
    ):
        if read_page:
            reader.start()
        try:
            out, start, end = _run(app, token, pushes, rate=rate, senders=senders)
        finally:
            stop.set()
            if read_page:
                reader.join()
    backlog = sum(1 for t in out["answers"] if t > end + 1.0 / rate)
    last = max(out["answers"], default=end)
    ms = [s * 1000 for s in out["latencies"]]
    figure = FleetFigure(
        hosts=hosts,
        target_per_s=round(rate, 2),
        seconds=round(end - start, 2),
        pushes=count,
        answered=len(ms),
        pushes_per_s=round(len(ms) / max(last - start, end - start), 2),
        p50_ms=round(statistics.median(ms), 1) if ms else float("nan"),
        p95_ms=round(percentile(ms, 95), 1),
        max_ms=round(max(ms, default=float("nan")), 1),
        max_send_lag_ms=round(max(out["lags"], default=0.0) * 1000, 1),
        backlog=backlog,
        drain_s=round(max(0.0, last - end), 2),
        failures=out["failures"][:5],
        server_cpu_s=round(cpu.seconds, 1),
        fleet_page_reads=len(page["ms"]),
        fleet_page_errors=page["errors"],
        fleet_page_p50_ms=round(statistics.median(page["ms"]), 1) if page["ms"] else float("nan"),
        fleet_page_p95_ms=round(percentile(page["ms"], 95), 1),
    )
    cores = os.cpu_count() or 1
    figure.server_cpu_share = round(cpu.seconds / (max(last, end) - start) / cores, 3)
    if ms:
        figure.cpu_ms_per_push = round(cpu.seconds / len(ms) * 1000, 1)
        figure.cpu_bound_pushes_per_s = round(cores * 1000 / figure.cpu_ms_per_push, 1)
        figure.web_cpu_ms_per_push = round(web_cpu.seconds / len(ms) * 1000, 1)
        figure.db_cpu_ms_per_push = round(db_cpu.seconds / len(ms) * 1000, 1)
    _sizes(app, figure)
    return figure


def _read_fleet_page(
    app: Chronicle,
    cookie: str,
    stop: threading.Event,
    page: dict[str, Any],
    at: tuple[str, int] | None = None,
) -> None:
    """GET /fleet/ every FLEET_PAGE_EVERY_S until `stop` (from `at`, by default the stack's
    web pool): each answer's milliseconds in page["ms"], anything but a 200 counted in
    page["errors"]."""
    while not stop.is_set():
        conn = http.client.HTTPConnection(*(at or app.base_url), timeout=60)
        began = time.monotonic()
        try:
            conn.request("GET", "/fleet/", headers={"Cookie": cookie})
            answer = conn.getresponse()
            answer.read()
            if answer.status == 200:
                page["ms"].append((time.monotonic() - began) * 1000)
            else:
                page["errors"] += 1
        except OSError:
            page["errors"] += 1
        finally:
            conn.close()
        stop.wait(FLEET_PAGE_EVERY_S)


# Run through `manage.py shell` on the stack: the bench process does not import Django.
_SQL_SHELL = "from django.db import connection; connection.cursor().execute(%r)"
_SIZES = """
import json
from django.db import connection
with connection.cursor() as c:
    c.execute("VACUUM FULL telemetry_devicesamplesummary")
    c.execute("VACUUM ANALYZE telemetry_devicesample")
    c.execute("SELECT coalesce(sum(pg_total_relation_size(relid)), 0)"
              " FROM pg_partition_tree('telemetry_devicesample') WHERE isleaf")
    raw_bytes = c.fetchone()[0]
    c.execute("SELECT count(*), coalesce(sum(cardinality(array_remove(readings, NULL))), 0)"
              " FROM telemetry_devicesample")
    rows, raw = c.fetchone()
    c.execute("SELECT pg_total_relation_size('telemetry_devicesamplesummary'),"
              " (SELECT count(*) FROM telemetry_devicesamplesummary)")
    summary_bytes, summaries = c.fetchone()
print(json.dumps([int(raw_bytes), int(raw), rows, int(summary_bytes), summaries]))
"""


def _sizes(app: Chronicle, figure: FleetFigure) -> None:
    out = app.manage("shell", "-c", _SIZES)
    raw_bytes, raw, rows, summary_bytes, summaries = json.loads(out.strip().splitlines()[-1])
    figure.raw_bytes, figure.raw_samples, figure.raw_rows = raw_bytes, raw, rows
    figure.summary_bytes, figure.summary_rows = summary_bytes, summaries
    if raw and summaries:
        figure.bytes_per_sample = round(raw_bytes / raw, 1)
        figure.bytes_per_row = round(raw_bytes / rows, 1)
        figure.bytes_per_summary = round(summary_bytes / summaries, 1)
        figure.raw_bytes_per_gpu_day = round(figure.bytes_per_sample * SAMPLES_PER_GPU_DAY)
        figure.summary_bytes_per_gpu_day = round(figure.bytes_per_summary * SUMMARIES_PER_GPU_DAY)
        gpus = figure.hosts * GPUS_PER_HOST
        figure.fleet_raw_gb = round(
            gpus * figure.raw_bytes_per_gpu_day * (RETENTION_DAYS + 1) / 1e9, 1
        )
        figure.fleet_summary_gb = round(gpus * figure.summary_bytes_per_gpu_day * DAYS / 1e9, 1)
        figure.fleet_disk_gb = round(figure.fleet_raw_gb + figure.fleet_summary_gb, 1)


def main(argv: list[str] | None = None) -> FleetFigure:
    from bench.pages import reader_cookie
    from stack.chronicle import chronicle_stack

    parser = argparse.ArgumentParser(prog="python -m bench.dcgm_fleet", description=__doc__)
    parser.add_argument("--hosts", type=int, default=HOSTS)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--senders", type=int, default=48)
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument(
        "--no-page",
        action="store_true",
        help="Push without reading /fleet/ meanwhile: the server CPU a push is the push path's "
        "alone (each page re-draw costs PostgreSQL CPU, and faster pages are read more often).",
    )
    args = parser.parse_args(argv)
    # pages: the fleet page is read while the fleet pushes (its static files collected).
    with (
        chronicle_stack(web_workers=args.web_workers, pages=True) as app,
        app.production_push_rate(),
    ):
        token = app.create_token("bench-dcgm")
        figure = measure(
            app, token, reader_cookie(app), hosts=args.hosts, seconds=args.seconds,
            senders=args.senders, read_page=not args.no_page,
        )  # fmt: skip
    print(json.dumps(figure.as_dict(), indent=2), file=sys.stdout)
    return figure


if __name__ == "__main__":
    main()
