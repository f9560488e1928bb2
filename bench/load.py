"""The load generator both servers get: the same points in 1,000-point batches of 10 metric
names, from 1 or 4 concurrent clients on persistent connections.

Chronicle's points count once they are queryable: the clock stops when the workers have
processed every batch (the IngestBatch backlog, polled in PostgreSQL), not at the last 202.
MLflow's `log-batch` is synchronous: the clock stops at the last answer.
"""

from __future__ import annotations

import http.client
import json
import queue
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench import llama_scale as ls
from bench.cpu import CpuMeter
from chaos.load import BASE_EPOCH
from chaos.verify import backlog
from stack.chronicle import Chronicle

POINTS_PER_BATCH = 1000
METRIC_NAMES = (*ls.METRICS, "eval_loss", "grad_norm_clipped")
STEPS_PER_BATCH = POINTS_PER_BATCH // len(METRIC_NAMES)


@dataclass(frozen=True)
class Workload:
    """Steps and values of every point, in batch order: one table both servers are fed."""

    steps: np.ndarray  # int64, one per step
    values: dict[str, np.ndarray]  # metric name -> float64 per step
    times: np.ndarray  # epoch seconds per step

    def part(self, index: int, parts: int) -> Workload:
        """The `index`-th of `parts` consecutive slices of its steps, cut at batch edges."""
        n_batches = -(-int(self.steps.size) // STEPS_PER_BATCH)
        first, end = (round(i * n_batches / parts) * STEPS_PER_BATCH for i in (index, index + 1))
        cut = slice(first, min(end, int(self.steps.size)))
        return Workload(
            steps=self.steps[cut],
            values={name: column[cut] for name, column in self.values.items()},
            times=self.times[cut],
        )

    def later(self, rounds: int) -> Workload:
        """The same workload `rounds` lengths further on: a live run's next steps."""
        shift = int(self.steps.size) * rounds
        return Workload(steps=self.steps + shift, values=self.values, times=self.times + shift * 4)

    @property
    def points(self) -> int:
        return int(self.steps.size) * len(METRIC_NAMES)

    def batches(self) -> list[slice]:
        return [
            slice(first, min(first + STEPS_PER_BATCH, self.steps.size))
            for first in range(0, self.steps.size, STEPS_PER_BATCH)
        ]


def workload(points: int, *, seed: int = 7) -> Workload:
    n_steps = max(1, -(-points // len(METRIC_NAMES)))
    steps = np.arange(n_steps, dtype=np.int64)
    base = ls.metric_values(steps, 4.0, seed=seed)
    values = {name: base[name] for name in ls.METRICS}
    values["eval_loss"] = base["loss"] + 0.03
    values["grad_norm_clipped"] = np.minimum(base["grad_norm"], 1.0)
    return Workload(steps=steps, values=values, times=BASE_EPOCH + steps * 4.0)


def chronicle_bodies(
    load: Workload, run: str, *, form: str = "rows", batch_prefix: str | None = None
) -> list[bytes]:
    """1,000-point batches: one object per point ("rows", the shape MLflow's log-batch also
    uses) or one object per metric with step/value/time arrays ("columns")."""
    bodies = []
    for index, part in enumerate(load.batches()):
        steps = load.steps[part].tolist()
        times = load.times[part].tolist()
        batch_id = f"{batch_prefix or run}-{index:06d}"
        body: dict[str, Any] = {"batch_id": batch_id, "run": run, "attempt": 1}
        if form == "columns":
            body["series"] = [
                {"name": name, "steps": steps, "values": load.values[name][part].tolist(),
                 "times": times}
                for name in METRIC_NAMES
            ]  # fmt: skip
        else:
            body["metrics"] = [
                {"name": name, "step": step, "value": value, "time": moment}
                for name in METRIC_NAMES
                for step, value, moment in zip(
                    steps, load.values[name][part].tolist(), times, strict=True
                )
            ]
        bodies.append(json.dumps(body, separators=(",", ":")).encode())
    return bodies


def mlflow_bodies(load: Workload, run_id: str) -> list[bytes]:
    bodies = []
    for part in load.batches():
        steps = load.steps[part].tolist()
        stamps = (load.times[part] * 1000).astype(np.int64).tolist()
        metrics = [
            {"key": name, "value": value, "timestamp": stamp, "step": step}
            for name in METRIC_NAMES
            for step, value, stamp in zip(
                steps, load.values[name][part].tolist(), stamps, strict=True
            )
        ]
        body = {"run_id": run_id, "metrics": metrics}
        bodies.append(json.dumps(body, separators=(",", ":")).encode())
    return bodies


@dataclass
class SendResult:
    latencies_s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    retries: int = 0
    last_answer_at: float = 0.0


def post(
    conn: http.client.HTTPConnection | None,
    address: tuple[str, int],
    path: str,
    body: bytes,
    headers: dict[str, str],
) -> tuple[http.client.HTTPConnection | None, int, bytes]:
    """POST on a keep-alive connection (opened if None). Returns the connection to reuse
    (None after a network error, with status 0 and the error as payload), status, body."""
    try:
        if conn is None:
            conn = http.client.HTTPConnection(*address, timeout=120)
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return conn, response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        if conn is not None:
            conn.close()
        return None, 0, repr(exc).encode()


def send_all(
    address: tuple[str, int],
    path: str,
    bodies: Sequence[bytes],
    *,
    clients: int,
    headers: dict[str, str],
    ok: tuple[int, ...] = (200, 202),
) -> SendResult:
    """POST every body once (retrying 429/5xx/network errors), from `clients` threads each on
    its own keep-alive connection."""
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    result = SendResult()
    lock = threading.Lock()
    all_headers = {"Content-Type": "application/json", **headers}

    def loop() -> None:
        conn: http.client.HTTPConnection | None = None
        while True:
            try:
                body = work.get_nowait()
            except queue.Empty:
                break
            for _ in range(20):
                began = time.perf_counter()
                conn, status, payload = post(conn, address, path, body, all_headers)
                elapsed = time.perf_counter() - began
                if status in ok:
                    with lock:
                        result.latencies_s.append(elapsed)
                        result.last_answer_at = time.monotonic()
                    break
                if status and status != 429 and status < 500:
                    with lock:
                        result.failures.append(f"{status} {payload[:300]!r}")
                    break
                with lock:
                    result.retries += 1
                time.sleep(0.2)
            else:
                with lock:
                    result.failures.append("gave up after 20 tries")
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return result


# --- Memory ---------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler:
    """Peak resident set size per process role, sampled every `every_s` from /proc (the web
    server's master and workers, the Celery worker's main process and pool children)."""

    def __init__(self, roles: dict[str, Callable[[], list[int]]], every_s: float = 0.2) -> None:
        self.roles = roles
        self.every_s = every_s
        self.peak_process: dict[str, int] = dict.fromkeys(roles, 0)
        self.peak_total: dict[str, int] = dict.fromkeys(roles, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            for role, pids in self.roles.items():
                sizes = [rss_bytes(pid) for pid in pids()]
                if sizes:
                    self.peak_process[role] = max(self.peak_process[role], max(sizes))
                    self.peak_total[role] = max(self.peak_total[role], sum(sizes))
            self._stop.wait(self.every_s)


def app_roles(app: Chronicle) -> dict[str, Callable[[], list[int]]]:
    def web() -> list[int]:
        return [app.web.pid, *app.web_workers()] if app.web else []

    def worker() -> list[int]:
        return [app.worker.pid, *app.pool_children()] if app.worker else []

    return {"web": web, "worker": worker}


# --- Measurements ---------------------------------------------------------------------------


@dataclass
class IngestFigure:
    system: str
    clients: int
    points: int
    batches: int
    seconds: float
    points_per_s: float
    p50_ms: float
    p95_ms: float
    retries: int
    failures: list[str]
    # CPU the servers used for these points (web, worker, PostgreSQL, Redis; bench.cpu).
    server_cpu_s: float = float("nan")
    points_per_cpu_s: float = float("nan")
    # Every request's latency, for figures summed over slices (`figures_sum`); not reported.
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        figure = asdict(self)
        del figure["latencies_ms"]
        return figure


def figures_sum(figures: Sequence[IngestFigure]) -> IngestFigure:
    """One form's slices as one measurement: their points, batches, seconds and CPU added,
    percentiles over every request."""
    return _figure_of(
        figures[0].system,
        figures[0].clients,
        points=sum(f.points for f in figures),
        batches=sum(f.batches for f in figures),
        seconds=sum(f.seconds for f in figures),
        ms=[latency for f in figures for latency in f.latencies_ms],
        retries=sum(f.retries for f in figures),
        failures=[failure for f in figures for failure in f.failures],
        cpu_s=sum(f.server_cpu_s for f in figures),
    )


def _figure_of(
    system: str,
    clients: int,
    *,
    points: int,
    batches: int,
    seconds: float,
    ms: list[float],
    retries: int,
    failures: list[str],
    cpu_s: float,
) -> IngestFigure:
    return IngestFigure(
        server_cpu_s=round(cpu_s, 2),
        points_per_cpu_s=round(points / cpu_s, 1) if cpu_s > 0 else float("nan"),
        system=system,
        clients=clients,
        points=points,
        batches=batches,
        seconds=round(seconds, 3),
        points_per_s=round(points / seconds, 1) if seconds > 0 else 0.0,
        p50_ms=round(statistics.median(ms), 2) if ms else float("nan"),
        p95_ms=round(percentile(ms, 95), 2),
        retries=retries,
        failures=failures[:5],
        latencies_ms=ms,
    )


def percentile(samples: Sequence[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    # Nearest rank: the value below which q% of the samples fall, never interpolated.
    rank = max(1, int(np.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def _figure(
    system: str,
    clients: int,
    load: Workload,
    n_batches: int,
    seconds: float,
    sent: SendResult,
    cpu_s: float,
) -> IngestFigure:
    return _figure_of(
        system,
        clients,
        points=load.points,
        batches=n_batches,
        seconds=seconds,
        ms=[s * 1000 for s in sent.latencies_s],
        retries=sent.retries,
        failures=sent.failures,
        cpu_s=cpu_s,
    )


def chronicle_ingest(
    app: Chronicle,
    token: str,
    load: Workload,
    *,
    clients: int,
    run: str,
    form: str = "rows",
    batch_prefix: str | None = None,
    drain_timeout_s: float = 600,
    address: tuple[str, int] | None = None,
) -> IngestFigure:
    """`address`: the gunicorn pool to send to (default: the stack's web pool)."""
    bodies = chronicle_bodies(load, run, form=form, batch_prefix=batch_prefix)
    earlier, _ = backlog(app.pg, run)  # the run's batches of earlier slices
    start = time.monotonic()
    with CpuMeter(lambda: chronicle_server_pids(app)) as cpu:
        sent = send_all(
            address or app.base_url,
            "/api/v1/ingest",
            bodies,
            clients=clients,
            headers={"Authorization": f"Bearer {token}"},
        )
        deadline = time.monotonic() + drain_timeout_s
        while True:
            total, pending = backlog(app.pg, run)
            if total - earlier >= len(bodies) - len(sent.failures) and pending == 0:
                break
            if time.monotonic() > deadline:
                sent.failures.append(f"backlog not drained: {pending} of {total} pending")
                break
            # Short: the poll's granularity is added to the measurement.
            time.sleep(0.01)
    system = "chronicle" if form == "rows" else f"chronicle-{form}"
    seconds = time.monotonic() - start
    return _figure(system, clients, load, len(bodies), seconds, sent, cpu.seconds)


def chronicle_server_pids(app: Chronicle) -> list[int]:
    """Every server process tree of the stack: gunicorn pools, the Celery worker,
    PostgreSQL (with a replica's, if any) and Redis."""
    procs = [*app.pools, app.worker]
    servers = [app.pg, app.redis, app.replica]
    return [p.pid for p in procs if p is not None and p.alive()] + [
        s.pid for s in servers if s is not None
    ]


def chronicle_mlflow_run(app: Chronicle, token: str, experiment: str) -> str:
    from bench import mlflow_side

    headers = {"Authorization": f"Bearer {token}"}
    return mlflow_side.create_run(app.base_url, experiment, prefix="/mlflow", headers=headers)


def chronicle_mlflow_ingest(
    app: Chronicle,
    token: str,
    load: Workload,
    *,
    clients: int,
    experiment: str,
    run_id: str | None = None,
) -> IngestFigure:
    """The same log-batch bodies as `mlflow_ingest`, sent to Chronicle's MLflow-compatible
    API (/mlflow, the token as MLflow's Bearer), to `run_id` (default: a new run of
    `experiment`). Each answer comes after its points are stored and processed (MLflow's
    read-after-write), so nothing is left to drain."""
    headers = {"Authorization": f"Bearer {token}"}
    run_id = run_id or chronicle_mlflow_run(app, token, experiment)
    bodies = mlflow_bodies(load, run_id)
    start = time.monotonic()
    with CpuMeter(lambda: chronicle_server_pids(app)) as cpu:
        sent = send_all(
            app.base_url, "/mlflow/api/2.0/mlflow/runs/log-batch", bodies, clients=clients,
            headers=headers,
        )  # fmt: skip
    seconds = time.monotonic() - start
    return _figure("chronicle-mlflow", clients, load, len(bodies), seconds, sent, cpu.seconds)


def mlflow_ingest(
    server: Any, pg_pid: int, load: Workload, *, clients: int, experiment: str, system: str
) -> IngestFigure:
    """log-batch bodies to an MLflow tracking server (MLflow's own, or the floor's), whose
    process tree and PostgreSQL's are the server CPU counted."""
    from bench import mlflow_side

    run_id = mlflow_side.create_run(server.address, experiment)
    bodies = mlflow_bodies(load, run_id)
    start = time.monotonic()
    with CpuMeter(lambda: [server.proc.pid, pg_pid]) as cpu:
        sent = send_all(
            server.address, "/api/2.0/mlflow/runs/log-batch", bodies, clients=clients, headers={}
        )
    seconds = time.monotonic() - start
    return _figure(system, clients, load, len(bodies), seconds, sent, cpu.seconds)


def settle(app: Chronicle, *, timeout_s: float = 120) -> None:
    """Bring the stack to rest before a measurement, so that none pays for the one before it:
    the worker's queues empty, every database vacuumed and analyzed (the work autovacuum would
    otherwise do on the last million rows while the next form is measured), and a checkpoint
    (the dirty pages written now, not during the next form). Every form and the floor start
    from the same state; the rows' own vacuum is left out of all of them alike."""
    import redis

    from config.queues import QUEUE_DEFAULT, QUEUE_INGEST, QUEUE_INGEST_OVERFLOW

    broker = redis.Redis.from_url(app.redis.url)
    deadline = time.monotonic() + timeout_s
    while any(broker.llen(q) for q in (QUEUE_INGEST, QUEUE_INGEST_OVERFLOW, QUEUE_DEFAULT)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker's queues did not empty in {timeout_s:.0f} s")
        time.sleep(0.1)
    broker.close()
    names = app.pg.rows("SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate")
    for (name,) in names:
        with app.pg.connect(name) as conn:
            conn.execute("VACUUM (ANALYZE)")
    with app.pg.connect() as conn:
        conn.execute("CHECKPOINT")
