"""`python -m bench.rank_timings`: per-rank timings at 16,384 ranks, in-process against
DATABASE_URL (use a scratch database: it is migrated and written to). Not part of
`python -m bench` yet.

Measures the server's own time (no HTTP): each step's `rank_timings` event gathered by
rank 0 (16,384 ranks x 4 sections; validation, storage, the run's progress), the rollup
of those steps into distributions and heat-map buckets, straggler detection, and the
heat map and spread reads over a day of synthetic 10-minute buckets. The job makes a step
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

import numpy as np  # noqa: E402
from django.core.management import call_command  # noqa: E402

from ingest import services  # noqa: E402
from logbook.services import stragglers  # noqa: E402
from telemetry import rank_timings  # noqa: E402
from telemetry.models import Project, RankBucket, Run  # noqa: E402
from telemetry.selectors import ranks as rank_selectors  # noqa: E402

SECTIONS = ("step", "forward", "backward", "data_loading")
STEP_S = 6.0


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog="python -m bench.rank_timings", description=__doc__)
    parser.add_argument("--ranks", type=int, default=16_384)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--reads", type=int, default=10)
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

    # A day of 10-minute buckets (144 per section), synthetic, for the reads.
    means = rng.normal(6.0, 0.06, args.ranks).astype(float)
    day = datetime(2026, 1, 1, tzinfo=UTC)
    RankBucket.objects.bulk_create(
        [
            RankBucket(
                attempt=attempt,
                section=name,
                bucket_s=600,
                bucket_start=day + timedelta(minutes=10 * index),
                ranks=list(range(args.ranks)),
                means_s=means.tolist(),
                medians_s=means.tolist(),
                counts=[100] * args.ranks,
            )
            for name in SECTIONS
            for index in range(144)
        ],
        batch_size=16,
    )
    heatmap_s, spread_s = [], []
    for _ in range(args.reads):
        t0 = time.perf_counter()
        rank_selectors.rank_heatmap(run=run, section="step")
        heatmap_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rank_selectors.rank_spread(run=run, section="step")
        spread_s.append(time.perf_counter() - t0)
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
        "heatmap_one_day_p95_s": p95(heatmap_s),
        "spread_p95_s": p95(spread_s),
        "loadavg": os.getloadavg(),
    }  # fmt: skip
    print(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
