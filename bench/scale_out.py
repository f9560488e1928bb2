"""The scale-out phase: the ingest phase's native load (1,000-point batches in the `columns`
form, 4 clients) sent to 1, 2 and 4 gunicorn web processes, with a Celery worker of 1 and of 2
processes, all on the same stack and machine: how ingest grows with processes here, and
where it stops. Each shape's points/s are counted when queryable, as in the ingest phase,
with the server CPU per point (PostgreSQL included).

Metric batches naming their attempt are written by the web process that receives them
(INGEST_WRITE_METRICS_AT_ONCE), so the worker count matters only for what is queued (events,
batches without an attempt); the phase measures the default path, where that shows."""

from __future__ import annotations

from typing import Any

from bench import load
from stack.chronicle import Chronicle
from stack.processes import Proc, free_port

WEB_PROCESSES = (1, 2, 4)
WORKERS = (1, 2)
CLIENTS = 4


def measure(
    app: Chronicle,
    token: str,
    workload: load.Workload,
    *,
    stamp: str,
    web_now: int,
    workers_now: int,
) -> list[dict[str, Any]]:
    """Every (web processes, workers) shape's ingest figure, as a dict with `web_processes`
    and `workers`. The stack's own pool (`web_now` processes) serves its shape; the others get
    a pool of their own for the phase. The worker is restarted at each count and left at
    `workers_now`."""
    pools: dict[int, tuple[Proc | None, int]] = {web_now: (None, app.web_port)}
    found: list[dict[str, Any]] = []
    try:
        for web in WEB_PROCESSES:
            if web not in pools:
                port = free_port()
                pools[web] = (app.start_pool(f"gunicorn-scale-{web}", port, workers=web), port)
        for workers in WORKERS:
            _worker_restart(app, workers)
            for web in WEB_PROCESSES:
                figure = load.chronicle_ingest(
                    app, token, workload, clients=CLIENTS, form="columns",
                    run=f"bench-scale-{stamp}-web{web}-workers{workers}",
                    address=("127.0.0.1", pools[web][1]),
                )  # fmt: skip
                found.append({"web_processes": web, "workers": workers, **figure.as_dict()})
    finally:
        for proc, _ in pools.values():
            if proc is not None:
                proc.stop()
                app.pools.remove(proc)
        _worker_restart(app, workers_now)
    return found


def _worker_restart(app: Chronicle, concurrency: int) -> None:
    if app.worker is not None:
        app.worker.stop()
    app.start_worker(concurrency=concurrency)
