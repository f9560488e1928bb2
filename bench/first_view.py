"""`python -m bench.first_view`: server time of the first (cold) and warm views of every page
and JSON endpoint of the Llama-scale run, in-process (Django's test client: no network, no
gunicorn), against issue 15's targets: first view <= 1 s, warm p95 <= 300 ms. --cold N views
each page N times from an emptied cache (p50 and p95; the verdict takes the p95). One request
before any is timed warms the process (imports, templates, connections), which is no page's
cost. With --profile PATH-PART, cProfile of the cold view of the pages whose path contains it.
"cold CPU" is the server CPU of a cold view: this process's and its PostgreSQL backend's (read
from /proc, so PostgreSQL on this machine), which a loaded machine's neighbours do not inflate
as they do wall time.

Needs a database holding the run (`python -m bench.generate_llama_scale`) and a cache of its own:
each cold view starts from an emptied cache (cache.clear()), so never point it at a shared
Redis database. DEBUG=1 and PYTHONPATH=. as for manage.py.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import statistics
import time

from bench.llama_scale import RUN_NAME
from bench.report import PAGE_FIRST_VIEW_MS, PAGE_P95_MS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

PATHS = [
    "/runs/{run}/",
    "/runs/{run}/?axis=time",
    "/runs/{run}/mfu/",
    "/runs/{run}/goodput/",
    "/runs/{run}/checkpoints/",
    "/runs/{run}/ranks/",
    "/runs/{run}/logbook/",
    "/failures/",
    "/sdc/",
    "/incidents/",
    "/api/v1/runs/{run}/series?name=loss",
    "/api/v1/runs/{run}/mfu",
    "/api/v1/runs/{run}/goodput",
    "/api/v1/runs/{run}/checkpoints",
]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.first_view", description=__doc__)
    parser.add_argument("--warm", type=int, default=10, help="Warm requests per page.")
    parser.add_argument("--cold", type=int, default=1, help="Cold requests per page.")
    parser.add_argument("--profile", default="", help="Profile the cold view of these paths.")
    parser.add_argument("--profile-sort", default="cumulative", help="e.g. tottime.")
    parser.add_argument(
        "--only", default="", help="Only the paths this regular expression finds (e.g. goodput)."
    )
    args = parser.parse_args()

    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.test import Client

    # Start as gunicorn's workers do (config/wsgi.py: Django set up, the views imported, the
    # start-up objects frozen out of the garbage collector's way).
    import config.wsgi  # noqa: F401
    from telemetry.models import Run

    run = Run.objects.get(name=RUN_NAME)
    user, _ = get_user_model().objects.get_or_create(username="bench-first-view")
    user.is_superuser = True
    user.save()
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    client.get(f"/runs/{run.pk}/ranks/")
    print(f"run {run.pk}, load average {os.getloadavg()[0]:.2f}")
    print(f"  {'path':<40}{'status':>7}{'cold p50':>10}{'cold p95':>10}{'CPU p50':>9}"
          f"{'CPU p95':>9}{'warm p50':>10}{'warm p95':>10}  verdict")  # fmt: skip
    for template in PATHS:
        path = template.format(run=run.pk)
        if args.only and not re.search(args.only, path):
            continue
        cold, cpu, warm = [], [], []
        for _ in range(max(1, args.cold)):
            cache.clear()
            began, began_cpu = time.perf_counter(), _server_cpu_ms()
            status = client.get(path).status_code
            cold.append((time.perf_counter() - began) * 1000)
            cpu.append(_server_cpu_ms() - began_cpu)
            for _ in range(args.warm):
                began = time.perf_counter()
                client.get(path)
                warm.append((time.perf_counter() - began) * 1000)
        cold_ok = "{run}" not in template or _p95(cold) <= PAGE_FIRST_VIEW_MS
        verdict = "pass" if status == 200 and cold_ok and _p95(warm) <= PAGE_P95_MS else "MISS"
        print(f"  {path:<40}{status:>7}{statistics.median(cold):>10.0f}{_p95(cold):>10.0f}"
              f"{statistics.median(cpu):>9.0f}{_p95(cpu):>9.0f}"
              f"{statistics.median(warm):>10.0f}{_p95(warm):>10.0f}  {verdict}")  # fmt: skip
        if args.profile and args.profile in path:
            cache.clear()
            profile = cProfile.Profile()
            profile.runcall(client.get, path)
            pstats.Stats(profile).sort_stats(args.profile_sort).print_stats(30)


def _server_cpu_ms() -> float:
    """CPU time so far of this process and of the PostgreSQL backends of its open connections
    (utime + stime from /proc/PID/stat, in clock ticks)."""
    from django.db import connections

    total = time.process_time() * 1000
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        pid = connection.connection.info.backend_pid
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # PostgreSQL on another machine: its share is not counted
            continue
        total += (int(fields[11]) + int(fields[12])) * tick_ms
    return total


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)] if values else 0.0


if __name__ == "__main__":
    main()
