"""Chart queries: a 1,000,000-point and a 100,000-point series loaded straight into
Chronicle's tables with COPY, read through GET /api/v1/runs/<id>/series downsampled to 4,000
points (min and max per bucket kept); MLflow's full `get-history` and sampled
`get-history-bulk-interval` (2,500 points) of the same 100,000-point series for comparison.

Times are loopback round trips measured by the client, one request at a time: with nothing
else in flight they are the server's time plus well under a millisecond of transport."""

from __future__ import annotations

import http.client
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import numpy as np

from bench import llama_scale as ls
from bench.load import percentile, send_all
from chaos.load import BASE_EPOCH
from chaos.verify import backlog
from stack.chronicle import DB_NAME, Chronicle
from stack.processes import wait_until

MAX_POINTS = 4000
SERIES = {"bench_1m": 1_000_000, "bench_100k": 100_000}
MLFLOW_SAMPLED_POINTS = 2500


@dataclass
class QueryFigure:
    system: str
    what: str
    points: int
    returned: int
    repeats: int
    p50_ms: float
    p95_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def series_values(n: int, *, seed: int = 11) -> np.ndarray:
    """A loss curve with noise and a spike every ~50,000 steps (what a sampler must keep)."""
    steps = np.arange(n, dtype=np.int64)
    values = ls.metric_values(steps, 4.0, seed=seed)["loss"]
    values[(steps % 49_999) == 25_000] += 3.0
    return values


def load_series(app: Chronicle, token: str, run: str, sizes: dict[str, int]) -> int:
    """Create the run and its series through ingest (one point each), then COPY the rest.
    Returns the run's id."""
    body = {
        "batch_id": f"{run}-seed",
        "run": run,
        "attempt": 1,
        "metrics": [{"name": name, "step": 0, "value": 0.0} for name in sizes],
    }
    sent = send_all(
        app.base_url,
        "/api/v1/ingest",
        [json.dumps(body).encode()],
        clients=1,
        headers={"Authorization": f"Bearer {token}"},
    )
    if sent.failures:
        raise RuntimeError(f"seeding the chart run failed: {sent.failures}")
    wait_until(lambda: backlog(app.pg, run) == (1, 0), timeout_s=60, what="the chart run")
    with app.pg.connect(DB_NAME) as conn:
        rows = conn.execute(
            "SELECT s.id, s.name, r.id FROM telemetry_metricseries s "
            "JOIN telemetry_run r ON r.id = s.run_id WHERE r.name = %s",
            [run],
        ).fetchall()
        conn.autocommit = False
        base = datetime.fromtimestamp(BASE_EPOCH, tz=UTC).timestamp()
        with conn.cursor() as cursor:
            copy_sql = (
                "COPY telemetry_metricpoint (series_id, step, value, wall_time) "
                "FROM STDIN (FORMAT BINARY)"
            )
            with cursor.copy(copy_sql) as copy:
                copy.set_types(["int8", "int8", "float8", "timestamptz"])
                for series_id, name, _ in rows:
                    values = series_values(sizes[name]).tolist()
                    for step in range(1, sizes[name]):
                        moment = datetime.fromtimestamp(base + step * 4.0, tz=UTC)
                        copy.write_row((series_id, step, values[step], moment))
        conn.commit()
        conn.autocommit = True
        conn.execute("ANALYZE telemetry_metricpoint")
    return int(rows[0][2])


def timed_get(
    address: tuple[str, int],
    path: str,
    *,
    repeats: int,
    cookie: str = "",
    check: Callable[[Any], int] | None = None,
) -> tuple[list[float], int]:
    """(latencies in seconds, points returned) of `repeats` sequential GETs on one keep-alive
    connection, after one untimed warm-up."""
    conn = http.client.HTTPConnection(*address, timeout=300)
    headers = {"Cookie": cookie} if cookie else {}
    samples: list[float] = []
    returned = 0
    try:
        for index in range(repeats + 1):
            began = time.perf_counter()
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            elapsed = time.perf_counter() - began
            if response.status != 200:
                raise RuntimeError(f"GET {path}: {response.status} {payload[:300]!r}")
            if index == 0:
                returned = check(json.loads(payload)) if check else 0
                continue
            samples.append(elapsed)
    finally:
        conn.close()
    return samples, returned


def _figure(
    system: str, what: str, points: int, returned: int, samples: list[float]
) -> QueryFigure:
    ms = [s * 1000 for s in samples]
    return QueryFigure(
        system=system,
        what=what,
        points=points,
        returned=returned,
        repeats=len(ms),
        p50_ms=round(statistics.median(ms), 2),
        p95_ms=round(percentile(ms, 95), 2),
    )


def chronicle_queries(
    app: Chronicle, run_id: int, cookie: str, sizes: dict[str, int], *, repeats: int
) -> list[QueryFigure]:
    figures = []
    for name, size in sizes.items():
        query = urlencode({"name": name, "max_points": MAX_POINTS})
        samples, returned = timed_get(
            app.base_url,
            f"/api/v1/runs/{run_id}/series?{query}",
            repeats=repeats,
            cookie=cookie,
            check=lambda doc: int(doc["returned_points"]),
        )
        figures.append(
            _figure("chronicle", f"series {size:,} -> {MAX_POINTS:,}", size, returned, samples)
        )
    return figures


def mlflow_queries(server: Any, size: int, *, repeats: int) -> list[QueryFigure]:
    """Log the same series (as metric `loss`) with log-batch, then read it back both ways."""
    from bench import mlflow_side

    run_id = mlflow_side.create_run(server.address, "bench-charts")
    values = series_values(size).tolist()
    bodies = []
    for first in range(0, size, 1000):
        metrics = [
            {"key": "loss", "value": values[s], "timestamp": (BASE_EPOCH + s * 4) * 1000,
             "step": s}
            for s in range(first, min(first + 1000, size))
        ]  # fmt: skip
        bodies.append(json.dumps({"run_id": run_id, "metrics": metrics}).encode())
    sent = send_all(server.address, "/api/2.0/mlflow/runs/log-batch", bodies, clients=4, headers={})
    if sent.failures:
        raise RuntimeError(f"MLflow log-batch failed: {sent.failures[:3]}")
    full = urlencode({"run_id": run_id, "metric_key": "loss"})
    samples, returned = timed_get(
        server.address,
        f"/api/2.0/mlflow/metrics/get-history?{full}",
        repeats=max(2, repeats // 4),
        check=lambda doc: len(doc.get("metrics", [])),
    )
    figures = [_figure("mlflow", f"get-history {size:,} (full)", size, returned, samples)]
    sampled = urlencode(
        {"run_ids": run_id, "metric_key": "loss", "max_results": MLFLOW_SAMPLED_POINTS}
    )
    samples, returned = timed_get(
        server.address,
        f"/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval?{sampled}",
        repeats=repeats,
        check=lambda doc: len(doc.get("metrics", [])),
    )
    figures.append(
        _figure(
            "mlflow",
            f"get-history-bulk-interval {size:,} -> {MLFLOW_SAMPLED_POINTS}",
            size,
            returned,
            samples,
        )
    )
    return figures
