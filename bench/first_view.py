"""`python -m bench.first_view`: server time of the first (cold) and warm views of every page
and JSON endpoint of the Llama-scale run, in-process (Django's test client: no network, no
gunicorn), against issue 15's targets: first view <= 1 s, warm p95 <= 300 ms. --cold N views
each page N times from an emptied cache (p50 and p95; the verdict takes the p95). One request
before any is timed warms the process (imports, templates, connections), which is no page's
cost. With --profile PATH-PART, cProfile of the cold view of the pages whose path contains it.

Needs a database holding the run (`manage.py generate_llama_scale`) and a cache of its own:
each cold view starts from an emptied cache (cache.clear()), so never point it at a shared
Redis database. DEBUG=1 and PYTHONPATH=. as for manage.py.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
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
    args = parser.parse_args()

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.test import Client

    from telemetry.models import Run

    run = Run.objects.get(name=RUN_NAME)
    user, _ = get_user_model().objects.get_or_create(username="bench-first-view")
    user.is_superuser = True
    user.save()
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    client.get(f"/runs/{run.pk}/ranks/")
    print(f"run {run.pk}, load average {os.getloadavg()[0]:.2f}")
    print(f"  {'path':<40}{'status':>7}{'cold p50':>10}{'cold p95':>10}"
          f"{'warm p50':>10}{'warm p95':>10}  verdict")  # fmt: skip
    for template in PATHS:
        path = template.format(run=run.pk)
        cold, warm = [], []
        for _ in range(max(1, args.cold)):
            cache.clear()
            began = time.perf_counter()
            status = client.get(path).status_code
            cold.append((time.perf_counter() - began) * 1000)
            for _ in range(args.warm):
                began = time.perf_counter()
                client.get(path)
                warm.append((time.perf_counter() - began) * 1000)
        cold_ok = "{run}" not in template or _p95(cold) <= PAGE_FIRST_VIEW_MS
        verdict = "pass" if status == 200 and cold_ok and _p95(warm) <= PAGE_P95_MS else "MISS"
        print(f"  {path:<40}{status:>7}{statistics.median(cold):>10.0f}{_p95(cold):>10.0f}"
              f"{statistics.median(warm):>10.0f}{_p95(warm):>10.0f}  {verdict}")  # fmt: skip
        if args.profile and args.profile in path:
            cache.clear()
            profile = cProfile.Profile()
            profile.runcall(client.get, path)
            pstats.Stats(profile).sort_stats("cumulative").print_stats(30)


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)] if values else 0.0


if __name__ == "__main__":
    main()
