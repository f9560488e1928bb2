"""Pages under ingest. Page p95 with the server idle, then while ingest clients saturate it,
in two layouts on the same machine and data:

- shared: one gunicorn pool serves pages and ingest, all on the primary (`make web` alone);
- split: ingest on its own pool at a lower CPU priority (`make web-ingest`), pages on their
  own pool reading from a streaming replica (`DATABASE_REPLICA_URL`; stack.postgres
  .start_replica), as README "Scaling out" describes.

The ratio busy/idle is what a reader feels when a job floods the server; the target is
≤ 1.5. Ingest's throughput in each layout is reported beside it, so the price is visible."""

from __future__ import annotations

import http.client
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench import load, pages
from stack.chronicle import Chronicle
from stack.processes import free_port

# What an operator keeps open while a job runs (and what a flood would slow first).
PAGES: list[tuple[str, str]] = [
    ("run list", "/"),
    ("run page", "/runs/{run}/"),
    ("goodput", "/runs/{run}/goodput/"),
    ("API series (loss)", "/api/v1/runs/{run}/series?name=loss"),
    ("fleet", "/fleet/"),
]
INGEST_NICE = 10


@dataclass
class Layout:
    layout: str
    idle_p50_ms: float
    idle_p95_ms: float
    busy_p50_ms: float
    busy_p95_ms: float
    ratio_p95: float
    ingest_points_per_s: float
    page_requests: int
    page_errors: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(
    app: Chronicle,
    token: str,
    run_id: int,
    cookie: str,
    workload: load.Workload,
    *,
    stamp: str,
    readers: int = 2,
    rounds: int = 6,
    ingest_clients: int = 4,
    pool_workers: int = 2,
) -> list[Layout]:
    paths = [template.format(run=run_id) for _, template in PAGES]
    shared = app.base_url
    figures = [
        _layout("shared", app, token, workload, shared, shared, paths, cookie,
                readers=readers, rounds=rounds, clients=ingest_clients, stamp=stamp),
    ]  # fmt: skip
    replica = app.start_replica()
    pages_port, ingest_port = free_port(), free_port()
    app.start_pool(
        "gunicorn-pages", pages_port, workers=pool_workers,
        DATABASE_REPLICA_URL=replica.url_for("chronicle"),
    )  # fmt: skip
    app.start_pool("gunicorn-ingest", ingest_port, workers=pool_workers, nice=INGEST_NICE)
    figures.append(
        _layout("split", app, token, workload, ("127.0.0.1", pages_port),
                ("127.0.0.1", ingest_port), paths, cookie, readers=readers, rounds=rounds,
                clients=ingest_clients, stamp=stamp)
    )  # fmt: skip
    return figures


def _layout(
    name: str,
    app: Chronicle,
    token: str,
    workload: load.Workload,
    pages_at: tuple[str, int],
    ingest_at: tuple[str, int],
    paths: list[str],
    cookie: str,
    *,
    readers: int,
    rounds: int,
    clients: int,
    stamp: str,
) -> Layout:
    for path in paths:  # warm: the cached path is what a reader who keeps a page open gets
        _read(pages_at, path, cookie)
    idle, idle_errors = _readers(pages_at, paths, cookie, readers=readers, rounds=rounds)
    stop = threading.Event()
    sent: list[load.IngestFigure] = []

    def flood() -> None:
        index = 0
        while not stop.is_set():
            sent.append(
                load.chronicle_ingest(
                    app,
                    token,
                    workload.later(index),
                    clients=clients,
                    run=f"bench-flood-{stamp}-{name}",
                    batch_prefix=f"bench-flood-{stamp}-{name}-{index}",
                    address=ingest_at,
                )
            )
            index += 1

    feeder = threading.Thread(target=flood, daemon=True)
    feeder.start()
    time.sleep(2)  # let the flood reach its pace before reading
    try:
        busy, busy_errors = _readers(pages_at, paths, cookie, readers=readers, rounds=rounds)
    finally:
        stop.set()
        feeder.join(timeout=600)
    points = sum(f.points for f in sent)
    seconds = sum(f.seconds for f in sent)
    idle_p95, busy_p95 = load.percentile(idle, 95), load.percentile(busy, 95)
    return Layout(
        layout=name,
        idle_p50_ms=round(statistics.median(idle), 1),
        idle_p95_ms=round(idle_p95, 1),
        busy_p50_ms=round(statistics.median(busy), 1),
        busy_p95_ms=round(busy_p95, 1),
        ratio_p95=round(busy_p95 / idle_p95, 2),
        ingest_points_per_s=round(points / seconds, 1) if seconds else 0.0,
        page_requests=len(idle) + len(busy),
        page_errors=idle_errors + busy_errors,
    )


def _readers(
    address: tuple[str, int], paths: list[str], cookie: str, *, readers: int, rounds: int
) -> tuple[list[float], int]:
    """Milliseconds of every 200 from `readers` threads walking `paths` `rounds` times, and
    the count of other answers (RuntimeError if none was a 200)."""
    samples: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def reader(offset: int) -> None:
        order = paths[offset:] + paths[:offset]
        for _ in range(rounds):
            for path in order:
                elapsed, status = _read(address, path, cookie)
                with lock:
                    if status == 200:
                        samples.append(elapsed * 1000)
                    else:
                        errors.append(f"{status} {path}")

    threads = [
        threading.Thread(target=reader, args=(i % len(paths),), daemon=True) for i in range(readers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if not samples:
        raise RuntimeError(f"no page answered 200: {sorted(set(errors))[:5]} with {cookie!r}")
    return samples, len(errors)


def _read(address: tuple[str, int], path: str, cookie: str) -> tuple[float, int]:
    conn = http.client.HTTPConnection(*address, timeout=300)
    try:
        return pages._get_on(conn, address, path, cookie)[:2]
    finally:
        conn.close()
