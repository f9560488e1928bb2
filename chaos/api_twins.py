"""`python -m chaos.api_twins OUT.json UNTIL`: every page's JSON twin, read from the database the
settings name (DATABASE_URL), written as one canonical JSON document.

What the restore drill compares before the backup and after the restore: the run list; each
run's MFU, goodput, checkpoints and every metric's series; the failure breakdown; the triage
queue and every incident's detail (its auto-triage suggestion and history among it); the
triage accuracy; the SDC ledger; the fleet's hosts, every page of them; the annotations; and
each run's logbook as its Markdown export (the logbook page's twin). Read as "drill-reader",
an on-call member of every project (a regular user, so the answers are project-scoped as a
reader's are), through Django's test client in this process: nothing but the database and
the cache is involved, and the caller gives each read a cache of its own (an empty Redis
database), so a restored database's answers are computed from its rows, not served from the
original's cache.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

READER = "drill-reader"
PAGE_SIZE = 1000


def reader() -> Any:
    """drill-reader, an on-call member of every project (created and joined once: on a
    restored database it is already there and nothing is written)."""
    from django.contrib.auth import get_user_model

    from telemetry.models import Membership, Project

    user, _ = get_user_model().objects.get_or_create(username=READER)
    for project in Project.objects.all():
        Membership.objects.get_or_create(
            project=project, user=user, defaults={"role": Membership.Role.ONCALL}
        )
    return user


def read_all(client: Any, until: str) -> dict[str, Any]:
    """{path: (status, body)} of every twin; a paged list is followed to its last page.
    `until` ends the fleet's repeat-offender window (by default it ends now, which moves
    between two reads)."""
    answers: dict[str, Any] = {}

    def get(path: str) -> Any:
        response = client.get(path)
        if response["Content-Type"].startswith("application/json"):
            body: Any = response.json()
        else:
            body = response.content.decode()
        answers[path] = [response.status_code, body]
        return body

    def paged(path: str) -> list[Any]:
        results: list[Any] = []
        url: str | None = f"{path}{'&' if '?' in path else '?'}page_size={PAGE_SIZE}"
        while url:
            parts = urlsplit(url)
            body = get(parts.path + (f"?{parts.query}" if parts.query else ""))
            results += body.get("results", [])
            url = body.get("next")
        return results

    runs = paged("/api/v1/runs")
    for run in runs:
        rid = run["id"]
        for tail in ("mfu", "goodput"):
            get(f"/api/v1/runs/{rid}/{tail}")
        paged(f"/api/v1/runs/{rid}/checkpoints")
        get(f"/runs/{rid}/logbook.md")
        for name in _series_names(rid):
            get(f"/api/v1/runs/{rid}/series?{urlencode({'name': name})}")
    get("/api/v1/failures")
    # Every status, not only the queue's default (open and triaged).
    queue = get("/api/v1/incidents?status=all")
    if queue.get("truncated"):
        # The queue shows its first 500: read the rest run by run.
        for run in runs:
            get(f"/api/v1/incidents?status=all&run={run['id']}")
    listed = {
        incident["id"]
        for path, (_, body) in list(answers.items())
        if path.startswith("/api/v1/incidents?")
        for incident in body.get("incidents", [])
    }
    for incident_id in sorted(listed):
        get(f"/api/v1/incidents/{incident_id}")
    get("/api/v1/triage/accuracy")
    get("/api/v1/sdc")
    paged(f"/api/v1/fleet/hosts?{urlencode({'until': until})}")
    get("/api/v1/annotations")
    return answers


def _series_names(run_id: int) -> list[str]:
    """The run's metric names (the series API reads one name; no twin lists them)."""
    from telemetry.models import MetricSeries

    names = MetricSeries.objects.filter(run_id=run_id).values_list("name", flat=True)
    return sorted(set(names))


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.test import Client

    client = Client()
    client.force_login(reader())
    answers = read_all(client, until=argv[1])
    Path(argv[0]).write_text(json.dumps(answers, sort_keys=True, indent=0) + "\n")
    print(f"{len(answers)} answers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
