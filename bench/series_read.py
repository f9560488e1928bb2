"""Time long-series reads in-process (no HTTP): `series_for_run` and the series API view, on
a database that already holds data (e.g. a copy of the Llama-3-scale data set), plus the
cost of a 1,000-point insert batch. A developer's tool for the rollup work, not part of
`make bench` (which measures over HTTP on its own stack).

    DATABASE_URL=postgres://... .venv/bin/python -m bench.series_read --load   # once
    DATABASE_URL=postgres://... .venv/bin/python -m bench.series_read

--load adds a run "bench-charts" with a 1,000,000-point and a 100,000-point series (one
attempt each, COPYed like bench/charts.py) so a single long series can be timed too."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # In-process requests through django.test.Client: plain HTTP to "testserver".
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
    import django

    django.setup()


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def timed(what: str, fn: Callable[[], Any], repeats: int) -> dict[str, Any]:
    fn()  # warm-up: connection, plans, caches
    ms = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - began) * 1000)
    figure = {
        "what": what,
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(_percentile(ms, 95), 1),
        "min_ms": round(min(ms), 1),
    }
    print(
        f"{what:55s} min {figure['min_ms']:7.1f}  p50 {figure['p50_ms']:7.1f}  "
        f"p95 {figure['p95_ms']:7.1f} ms"
    )
    return figure


def load(sizes: dict[str, int]) -> None:
    from django.db import connection, transaction

    from bench.charts import series_values
    from telemetry import services
    from telemetry.models import Project

    project, _ = Project.objects.get_or_create(slug="bench-charts", defaults={"name": "charts"})
    run = services.run_upsert(project=project, name="bench-charts")
    attempt = services.attempt_ensure(run=run, number=1)
    ids = services.series_ensure(run=run, attempt=attempt, names=sizes)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    connection.ensure_connection()
    with (
        transaction.atomic(),
        connection.connection.cursor() as cursor,
        cursor.copy(
            "COPY telemetry_metricpoint (series_id, step, value, wall_time) "
            "FROM STDIN (FORMAT BINARY)"
        ) as copy,
    ):
        copy.set_types(["int8", "int8", "float8", "timestamptz"])
        for name, size in sizes.items():
            values = series_values(size).tolist()
            for step in range(size):
                copy.write_row((ids[name], step, values[step], base + timedelta(seconds=step)))
    print(f"loaded run {run.pk}: {sizes}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--llama-run", type=int, default=1)
    parser.add_argument("--skip-llama-api", action="store_true")
    parser.add_argument("--insert-batches", type=int, default=20)
    args = parser.parse_args()
    _setup()
    sizes = {"bench_1m": 1_000_000, "bench_100k": 100_000}
    if args.load:
        load(sizes)
        return

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from telemetry.models import Run
    from telemetry.selectors import series as selectors

    charts_run = Run.objects.get(name="bench-charts")
    llama = Run.objects.get(pk=args.llama_run)
    user, _ = get_user_model().objects.get_or_create(
        username="bench-reader", defaults={"is_superuser": True, "is_staff": True}
    )
    client = Client()
    client.force_login(user)
    figures = []
    for name in sizes:
        figures.append(
            timed(
                f"series_for_run {name} -> 4000",
                lambda n=name: selectors.series_for_run(run=charts_run, name=n, max_points=4000),
                args.repeats,
            )
        )
        figures.append(
            timed(
                f"GET series api {name} -> 4000",
                lambda n=name: _ok(
                    client.get(f"/api/v1/runs/{charts_run.pk}/series?name={n}&max_points=4000")
                ),
                args.repeats,
            )
        )
    for name in ("loss", "grad_norm"):
        figures.append(
            timed(
                f"series_for_run llama {name} (467 attempts) -> 1500",
                lambda n=name: selectors.series_for_run(run=llama, name=n, max_points=1500),
                args.repeats,
            )
        )
    if not args.skip_llama_api:
        figures.append(
            timed(
                "GET series api llama loss -> 2000",
                lambda: _ok(client.get(f"/api/v1/runs/{llama.pk}/series?name=loss")),
                args.repeats,
            )
        )

    # Insert cost: 1,000-point batches (8 metrics x 125 steps, as a job sends them) into a
    # scratch run, rolled back so the data set is left as it was; rounds with the rollup
    # trigger disabled (what ingest cost before rollups) alternate with rounds with it.
    costs: dict[bool, list[float]] = {False: [], True: []}
    redelivered: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(6):
        with_rollups = bool(round_ % 2)
        _insert_round(args.insert_batches, with_rollups, costs, redelivered)
    connection.close()
    for with_rollups in (False, True):
        ms = costs[with_rollups]
        label = "with rollups" if with_rollups else "without rollups (trigger disabled)"
        print(
            f"{'insert 1,000-point batch, ' + label:55s} min {min(ms):7.2f}  "
            f"p50 {statistics.median(ms):7.2f}  p95 {_percentile(ms, 95):7.2f} ms  "
            f"(redelivered p50 {statistics.median(redelivered[with_rollups]):.2f} ms)"
        )
    print(
        "insert cost ratio (p50 with / without rollups): "
        f"{statistics.median(costs[True]) / statistics.median(costs[False]):.2f}"
    )


def _insert_round(
    batches: int,
    with_rollups: bool,
    costs: dict[bool, list[float]],
    redelivered: dict[bool, list[float]],
) -> None:
    from django.db import connection, transaction

    from telemetry import services
    from telemetry.models import Project

    project, _ = Project.objects.get_or_create(slug="bench-charts", defaults={"name": "charts"})
    metrics = [f"m{i}" for i in range(8)]
    base = datetime(2026, 2, 1, tzinfo=UTC)
    with transaction.atomic():
        if not with_rollups:
            with connection.cursor() as cursor:
                # One trigger keeps the rollups, the throughput sums and the series check
                # (telemetry migration 0021): without it, the insert alone.
                cursor.execute(
                    "ALTER TABLE telemetry_metricpoint DISABLE TRIGGER telemetry_metricpoint_added"
                )
        run = services.run_upsert(project=project, name="bench-insert-scratch")
        attempt = services.attempt_ensure(run=run, number=1)
        services.series_ensure(run=run, attempt=attempt, names=metrics)
        for batch in range(batches + 1):
            points = [
                (m, step, float(step % 97) / 7.0, base + timedelta(seconds=step))
                for step in range(batch * 125, (batch + 1) * 125)
                for m in metrics
            ]
            for again in (False, True):
                began = time.perf_counter()
                with transaction.atomic():
                    services.metric_points_insert(
                        run=run, attempt=attempt, points=points, record_progress=False
                    )
                elapsed = (time.perf_counter() - began) * 1000
                if again:
                    redelivered[with_rollups].append(elapsed)
                elif batch:  # the first batch creates the rollup rows' pages: warm-up
                    costs[with_rollups].append(elapsed)
        transaction.set_rollback(True)


def _ok(response: Any) -> Any:
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code}: {response.content[:300]!r}")
    return response


if __name__ == "__main__":
    main()
