"""`python -m bench.rank_timings`: per-rank timings at 16,384 ranks, in-process against
DATABASE_URL (use a scratch database: it is migrated and written to). Not part of
`python -m bench` yet.

Measures the server's own time (no HTTP): each step's `rank_timings` event gathered by
rank 0 (16,384 ranks x 4 sections; validation, storage, the run's progress), the rollup
of those steps into distributions and heat-map buckets, straggler detection, and the
heat map and spread reads of a 54-day run (synthetic, full-size rows written by
PostgreSQL): the whole run, its last day, and the spread over all its steps. The job makes a step
every 6 s; ingest keeps up when the per-step work stays well under 6 s."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
django.setup()

from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from ingest import services  # noqa: E402
from logbook.services import stragglers  # noqa: E402
from telemetry import rank_heat  # noqa: E402
from telemetry.models import Project, Run  # noqa: E402
from telemetry.selectors import ranks as rank_selectors  # noqa: E402
from telemetry.services import rank_timings  # noqa: E402

SECTIONS = ("step", "forward", "backward", "data_loading")
STEP_S = 6.0


def log(message: str) -> None:
    print(f"[bench.rank_timings] {message}", file=sys.stderr, flush=True)


def fill_long_run(project: Project, name: str, *, ranks: int, days: int, rng: Any) -> Run:
    """A `days`-long single-attempt run with every level of rank buckets and a distribution
    row per step of section `step`, written by PostgreSQL from a few synthetic per-rank
    vectors (cycled) so the rows are full size without days of ingest. Rank ranks // 3 is 20%
    slower throughout, on host h{rank // 8}."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=days)
    run = Run.objects.create(project=project, name=name, last_seen_at=end, last_step_at=end)
    attempt = run.attempts.create(number=1, started_at=start)
    slow = ranks // 3
    attempt.rank_placements.create(rank=slow, host=f"h{slow // 8:05d}", device=f"GPU-{slow}")
    variants = 8
    vectors = []
    for _ in range(variants):
        means = rng.normal(6.0, 0.06, ranks)
        means[slow] *= 1.2
        group = rank_heat.group_ranks_for(ranks)
        slowest_s, slowest_rank = rank_heat.slowest_per_group(range(ranks), means, group)
        vectors.append((means.tolist(), group, slowest_s, slowest_rank))
    with connection.cursor() as cursor:
        for width in rank_timings.bucket_levels():
            count = days * 86_400 // width
            for offset, (means, group, slowest_s, slowest_rank) in enumerate(vectors):
                cursor.execute(
                    "INSERT INTO telemetry_rankbucket (attempt_id, section, bucket_s,"
                    " bucket_start, ranks, means_s, medians_s, counts, group_ranks,"
                    " group_slowest_s, group_slowest_rank)"
                    " SELECT %s, 'step', %s, %s + make_interval(secs => i * %s), %s::integer[],"
                    " %s::real[], %s::real[], array_fill(100 * %s / %s, ARRAY[%s]), %s,"
                    " %s::real[], %s::integer[]"
                    " FROM generate_series(%s, %s - 1, %s) AS i",
                    [attempt.pk, width, start, width, list(range(ranks)), means, means, width,
                     settings.RANK_BUCKET_S, ranks, group, slowest_s, slowest_rank,
                     offset, count, variants],
                )  # fmt: skip
        steps = days * 86_400 // int(STEP_S)
        cursor.execute(
            "INSERT INTO telemetry_rankstepstats (attempt_id, section, step, recorded_at,"
            " rank_count, min_s, median_s, p90_s, p99_s, max_s, slowest_ranks, slowest_s)"
            " SELECT %s, 'step', i, %s + make_interval(secs => i * %s), %s, 5.8, 6.0,"
            " 6.08, 6.14, 7.2, ARRAY[%s, 1, 2, 3, 4], ARRAY[7.2, 6.2, 6.2, 6.2, 6.2]"
            " FROM generate_series(0, %s - 1) AS i",
            [attempt.pk, start, STEP_S, ranks, slow, steps],
        )
        for width, source, step, columns in (
            (100, "telemetry_rankstepstats", "step", f"count(*), {rank_timings.MERGE_STEPS}"),
            (10_000, "telemetry_rankstepblock", "first_step",
             f"sum(step_count), {rank_timings.MERGE_BLOCKS}"),
        ):  # fmt: skip
            level = "" if width == 100 else " AND steps = 100"
            cursor.execute(
                "INSERT INTO telemetry_rankstepblock (attempt_id, section, steps, first_step,"
                " step_count, min_s, median_s, p90_s, p99_s, max_s, slowest_rank)"
                f" SELECT attempt_id, section, %s, {step} / %s * %s, {columns} FROM {source}"
                f" WHERE attempt_id = %s{level} GROUP BY attempt_id, section, {step} / %s",
                [width, width, width, attempt.pk, width],
            )
        cursor.execute("ANALYZE telemetry_rankstepblock")
        cursor.execute("ANALYZE telemetry_rankbucket")
        cursor.execute("ANALYZE telemetry_rankstepstats")
    return run


def stored_rows(run: Run) -> dict[str, object]:
    """Rows and bytes the run left in each rank-timing table (bytes: the run's share of the
    table's heap, TOAST and indexes, by its share of rows)."""
    found: dict[str, object] = {}
    with connection.cursor() as cursor:
        for table in ("telemetry_rankbucket", "telemetry_rankstepstats", "telemetry_rankstepblock"):
            cursor.execute(
                f"SELECT count(*), (SELECT count(*) FROM {table}),"
                f" pg_total_relation_size('{table}') FROM {table} t"
                " JOIN telemetry_attempt a ON a.id = t.attempt_id WHERE a.run_id = %s",
                [run.pk],
            )
            mine, total, size = cursor.fetchone()
            found[table] = {"rows": mine, "bytes": int(size * mine / max(1, total))}
        cursor.execute(
            "SELECT bucket_s, count(*) FROM telemetry_rankbucket t"
            " JOIN telemetry_attempt a ON a.id = t.attempt_id WHERE a.run_id = %s"
            " GROUP BY bucket_s ORDER BY bucket_s",
            [run.pk],
        )
        found["rankbucket_rows_per_level"] = {str(w): n for w, n in cursor.fetchall()}
    return found


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog="python -m bench.rank_timings", description=__doc__)
    parser.add_argument("--ranks", type=int, default=16_384)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--reads", type=int, default=10)
    parser.add_argument("--days", type=int, default=54, help="Length of the run the pages read.")
    args = parser.parse_args(argv)
    call_command("migrate", verbosity=0)
    rank_timings.rank_partitions_maintain()
    project, _ = Project.objects.get_or_create(slug="bench-ranks", defaults={"name": "bench"})
    token, _ = services.token_create(project=project, name=f"bench-{time.time():.0f}")
    run_name = f"ranks-{time.time():.0f}"
    rng = np.random.default_rng(16)
    hosts = [f"h{rank // 8:05d}" for rank in range(args.ranks)]
    start = datetime.now(UTC) - timedelta(seconds=STEP_S * args.steps)
    ingest_s: list[float] = []
    began = datetime.now(UTC)
    for step in range(args.steps):
        base = rng.normal(1.0, 0.01, args.ranks)
        base[args.ranks // 3] *= 1.2  # a planted straggler
        event = {
            "type": "rank_timings",
            "time": (start + timedelta(seconds=STEP_S * step)).timestamp(),
            "first_step": step,
            "ranks": list(range(args.ranks)),
            "sections": {
                name: [round(float(v), 5) for v in base * share]
                for name, share in zip(SECTIONS, (6.0, 2.0, 3.5, 0.2), strict=True)
            },
        }
        if step == 0:
            event["hosts"] = hosts
        body = json.dumps(
            {"batch_id": f"{run_name}-{step}", "run": run_name, "attempt": 1, "events": [event]}
        ).encode()
        t0 = time.perf_counter()
        acceptance = services.batch_submit(token=token, body=body)
        services.batch_process(batch_pk=acceptance.batch.pk)
        ingest_s.append(time.perf_counter() - t0)
    run = Run.objects.get(project=project, name=run_name)
    attempt = run.attempts.get()
    t0 = time.perf_counter()
    rollup = rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=began)
    rollup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    stragglers.stragglers_detect(attempt_id=attempt.pk)
    detect_s = time.perf_counter() - t0

    # 54 days of buckets at every level and 777,600 steps of distributions, synthetic and
    # full size, in a run of their own: what the pages read at the end of a Llama-3-long run.
    log(f"filling 54 days of {args.ranks:,}-rank buckets (all levels, full-size arrays)")
    t0 = time.perf_counter()
    long_run = fill_long_run(project, f"{run_name}-54d", ranks=args.ranks, days=args.days, rng=rng)
    fill_s = time.perf_counter() - t0
    end = long_run.last_seen_at
    heatmap_s, day_s, spread_s = [], [], []
    for _ in range(args.reads):
        t0 = time.perf_counter()
        whole = rank_selectors.rank_heatmap(run=long_run, section="step")
        heatmap_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rank_selectors.rank_heatmap(run=long_run, section="step", since=end - timedelta(days=1))
        day_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rank_selectors.rank_spread(run=long_run, section="step")
        spread_s.append(time.perf_counter() - t0)
    assert whole is not None
    stored = stored_rows(long_run)
    result = {
        "ranks": args.ranks,
        "steps": args.steps,
        "ingest_per_step_s": {"median": statistics.median(ingest_s), "p95": p95(ingest_s),
                              "max": max(ingest_s)},
        "ingest_share_of_6s": statistics.mean(ingest_s) / STEP_S,
        "rollup_s": rollup_s,
        "rollup_steps": rollup.steps,
        "rollup_per_step_s": rollup_s / max(1, args.steps),
        "straggler_detect_s": detect_s,
        "long_run_days": args.days,
        "long_run_fill_s": fill_s,
        "heatmap_whole_run_p95_s": p95(heatmap_s),
        "heatmap_whole_run_bucket_s": whole.bucket_s,
        "heatmap_whole_run_cells": [len(whole.row_labels), len(whole.times)],
        "heatmap_last_day_p95_s": p95(day_s),
        "spread_whole_run_p95_s": p95(spread_s),
        "long_run_stored": stored,
        "loadavg": os.getloadavg(),
    }  # fmt: skip
    print(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
