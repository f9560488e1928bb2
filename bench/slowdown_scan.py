"""`python -m bench.slowdown_scan --run <id>`: issue 35's slowdown pass at Llama scale, in
process against the database the settings name (DATABASE_URL): the stack's, after
`bench.generate_llama_scale` loaded the run. Prints one JSON object.

A live run is scanned again by every pass of the beat (config/celery.py,
`diagnosis-slowdowns-refresh`), and each scan reads the whole run
(diagnosis.services.slowdowns.slowdowns_scan), so one scan of the 54-day run says how far a
live job's slowdowns trail its data (the pass's interval plus a scan, or two scans back to
back once a scan outlasts the interval) and what the pass costs a worker per hour of the job.
CPU is the scanning process's own plus its PostgreSQL backend's (both on this machine)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.cpu import TICKS_PER_S

# The share of one core the pass may take for one live run at the end of the Llama run: a
# budget of ours (the worker also rolls up rank timings, stragglers and the rest).
LIVE_CORE_BUDGET = 0.25


def _backend_cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def beat_interval_s() -> float:
    from config.celery import app

    return float(app.conf.beat_schedule["diagnosis-slowdowns-refresh"]["schedule"])


def measure(*, run_id: int, repeats: int = 3) -> dict[str, Any]:
    """Scan the run `repeats` times (the first stores what it finds; the rest find it
    stored, as a live run's every pass does) and return the figures (Django set up)."""
    from django.db import connection
    from django.db.models import Min

    from diagnosis.models import Slowdown
    from diagnosis.services.slowdowns import slowdowns_scan
    from telemetry.models import Attempt, Run

    run = Run.objects.get(pk=run_id)
    began = Attempt.objects.filter(run=run).aggregate(first=Min("started_at"))["first"]
    covered_h = (run.last_seen_at - began).total_seconds() / 3600.0 if began else 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = int(cursor.fetchone()[0])
    scans = []
    for _ in range(repeats):
        wall, own, db = time.perf_counter(), time.process_time(), _backend_cpu_s(backend)
        changed = slowdowns_scan(run_id=run_id)
        scans.append({
            "wall_s": time.perf_counter() - wall,
            "worker_cpu_s": time.process_time() - own,
            "db_cpu_s": _backend_cpu_s(backend) - db,
            "changed": changed,
        })  # fmt: skip
    # The stored rows' pass: every scan after the first, as a live run's passes are.
    steady = scans[1:] or scans
    scan_s = statistics.median(s["wall_s"] for s in steady)
    worker_cpu_s = statistics.median(s["worker_cpu_s"] for s in steady)
    db_cpu_s = statistics.median(s["db_cpu_s"] for s in steady)
    cpu_s = worker_cpu_s + db_cpu_s
    interval = beat_interval_s()
    # Passes start every interval, or back to back once a scan outlasts it; data that lands
    # just after a pass read the run waits for the next pass to start and finish.
    period_s = max(interval, scan_s)
    slowdowns = list(Slowdown.objects.filter(run=run).order_by("start_step"))
    return {
        "run": run_id,
        "repeats": repeats,
        "scans": [{k: round(v, 3) for k, v in s.items()} for s in scans],
        "first_scan_s": round(scans[0]["wall_s"], 3),
        "scan_s": round(scan_s, 3),
        "worker_cpu_s": round(worker_cpu_s, 3),
        "db_cpu_s": round(db_cpu_s, 3),
        "cpu_s": round(cpu_s, 3),
        "run_hours_covered": round(covered_h, 1),
        "cpu_ms_per_run_hour": round(1000 * cpu_s / covered_h, 3) if covered_h else None,
        # The budget spread over the hours this scan covers: the same limit, per hour.
        "cpu_ms_per_run_hour_limit": (
            round(1000 * LIVE_CORE_BUDGET * interval / covered_h, 3) if covered_h else None
        ),
        "beat_interval_s": interval,
        "keeps_up": scan_s <= interval,
        "lag_s": round(period_s + scan_s, 1),
        "live_cpu_s_per_hour": round(cpu_s * 3600.0 / period_s, 1),
        "live_cpu_s_per_hour_limit": LIVE_CORE_BUDGET * 3600.0,
        "slowdowns": [
            {
                "attempt": one.attempt_id,
                "start_step": one.start_step,
                "end_step": one.end_step,
                "drop_pct": one.drop_pct,
                "cause": one.cause_kind,
            }
            for one in slowdowns
        ],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.slowdown_scan", description=__doc__)
    parser.add_argument("--run", type=int, required=True, help="The Llama-scale run's id.")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(measure(run_id=args.run, repeats=args.repeats)))


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    main()
