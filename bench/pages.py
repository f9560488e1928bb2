"""Every dashboard page and JSON endpoint at Llama 3 scale, under 8 concurrent readers while
ingest runs: p50/p95 per URL (loopback round trips; the readers share the 2-core machine with
the server, so these are upper bounds of server time)."""

from __future__ import annotations

import http.client
import re
import secrets
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from bench.llama_scale import PROJECT_SLUG
from bench.load import percentile
from stack.chronicle import Chronicle

# The one list of what is measured: (label, path template). {run} is the Llama-scale run,
# {host} one of its hosts (of a rack whose two hosts failed together: a grouped failure).
PAGES: list[tuple[str, str]] = [
    ("run list", "/"),
    ("run page", "/runs/{run}/"),
    ("run page, time axis", "/runs/{run}/?axis=time"),
    ("MFU", "/runs/{run}/mfu/"),
    ("goodput", "/runs/{run}/goodput/"),
    ("checkpoints", "/runs/{run}/checkpoints/"),
    ("ranks", "/runs/{run}/ranks/"),
    ("logbook", "/runs/{run}/logbook/"),
    ("triage queue", "/incidents/"),
    ("failures", "/failures/"),
    ("SDC ledger", "/sdc/"),
    ("fleet", "/fleet/"),
    ("fleet, one run", "/fleet/?run={run}"),
    ("fleet host", f"/fleet/hosts/{{host}}/?project={PROJECT_SLUG}"),
    ("slowdowns", "/slowdowns/"),
    ("API runs", "/api/v1/runs"),
    ("API series (loss)", "/api/v1/runs/{run}/series?name=loss"),
    ("API MFU", "/api/v1/runs/{run}/mfu"),
    ("API goodput", "/api/v1/runs/{run}/goodput"),
    ("API checkpoints", "/api/v1/runs/{run}/checkpoints"),
    ("API failures", "/api/v1/failures"),
    ("API SDC", "/api/v1/sdc"),
    ("API fleet hosts", "/api/v1/fleet/hosts"),
    ("API incident groups", "/api/v1/fleet/incident-groups"),
    ("API at-risk", "/api/v1/fleet/at-risk"),
    ("API run sites", "/api/v1/runs/{run}/sites"),
    ("API slowdowns", "/api/v1/runs/{run}/slowdowns"),
]

_READER = """
from django.contrib.auth import get_user_model
from telemetry.models import Membership, Project
user, _ = get_user_model().objects.get_or_create(username="bench-reader")
user.set_password(PASSWORD)
user.save()
for project in Project.objects.all():
    Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": Membership.Role.ONCALL})
"""


def reader_password(app: Chronicle) -> str:
    """Makes "bench-reader" an on-call member of every project existing now (a regular user,
    not a superuser, so the pages pay for their project scoping as real readers do) and
    returns its new password."""
    password = secrets.token_urlsafe(16)
    app.manage("shell", "-c", _READER.replace("PASSWORD", repr(password)))
    return password


def reader_cookie(app: Chronicle) -> str:
    """The Cookie header of bench-reader (reader_password), logged in through /login/."""
    password = reader_password(app)
    conn = http.client.HTTPConnection(*app.base_url, timeout=60)
    try:
        conn.request("GET", "/login/")
        response = conn.getresponse()
        form = response.read().decode()
        cookies = _cookies(response)
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        if response.status != 200 or match is None:
            raise RuntimeError(f"GET /login/: {response.status}, no CSRF token")
        body = urlencode(
            {"username": "bench-reader", "password": password, "csrfmiddlewaretoken": match[1]}
        )
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
        }
        conn.request("POST", "/login/", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        cookies.update(_cookies(response))
    finally:
        conn.close()
    if response.status != 302 or "sessionid" not in cookies:
        raise RuntimeError(f"POST /login/ answered {response.status}: not logged in")
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


def _cookies(response: http.client.HTTPResponse) -> dict[str, str]:
    found = {}
    for header in response.headers.get_all("Set-Cookie") or []:
        name, _, rest = header.partition("=")
        found[name.strip()] = rest.split(";", 1)[0]
    return found


@dataclass
class PageFigure:
    label: str
    path: str
    requests: int
    errors: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    first_ms: float  # the first (cold) request, alone, before the concurrent phase
    # A page of the Llama-scale run: its first view has a target of its own (bench.report).
    run_scoped: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(
    app: Chronicle,
    run_id: int,
    cookie: str,
    *,
    host: str = "",
    readers: int = 8,
    rounds: int = 5,
    cold_limit_s: float = 20.0,
) -> list[PageFigure]:
    """A cold request per page first, alone; then `readers` threads each walk the list
    `rounds` times, each starting at a different page so they do not march in step. A page
    whose cold request fails or takes over `cold_limit_s` is left out of the concurrent walk
    (8 readers on it would only pile up behind gunicorn's timeout) and reported as it was."""
    paths = [(label, template.format(run=run_id, host=host)) for label, template in PAGES]
    template_of = dict(PAGES)
    first: dict[str, tuple[float, int]] = {}
    for _, path in paths:
        first[path] = _get(app.base_url, path, cookie)
    walk = [(label, path) for label, path in paths
            if first[path][1] == 200 and first[path][0] <= cold_limit_s]  # fmt: skip
    samples: dict[str, list[float]] = {path: [] for _, path in paths}
    errors: dict[str, list[str]] = {path: [] for _, path in paths}
    for _, path in paths:
        if first[path][1] != 200:
            errors[path].append(f"cold {first[path][1]}")
    lock = threading.Lock()

    def reader(offset: int) -> None:
        conn = http.client.HTTPConnection(*app.base_url, timeout=300)
        order = walk[offset % len(walk) :] + walk[: offset % len(walk)]
        for _ in range(rounds):
            for _, path in order:
                elapsed, status, conn = _get_on(conn, app.base_url, path, cookie)
                with lock:
                    if status == 200:
                        samples[path].append(elapsed)
                    else:
                        errors[path].append(str(status))
        conn.close()

    threads = [threading.Thread(target=reader, args=(i * 3,), daemon=True) for i in range(readers)]
    for thread in threads if walk else []:
        thread.start()
    for thread in threads if walk else []:
        thread.join()
    figures = []
    for label, path in paths:
        # Left out of the walk: its only sample is the cold one.
        ms = [s * 1000 for s in samples[path]] or (
            [first[path][0] * 1000] if first[path][1] == 200 else []
        )
        figures.append(
            PageFigure(
                label=label,
                path=path,
                requests=len(samples[path]),
                errors=len(errors[path]),
                p50_ms=round(statistics.median(ms), 1) if ms else float("nan"),
                p95_ms=round(percentile(ms, 95), 1) if ms else float("nan"),
                max_ms=round(max(ms), 1) if ms else float("nan"),
                first_ms=round(first[path][0] * 1000, 1),
                run_scoped="{run}" in template_of[label],
            )
        )
    return figures


def _get(address: tuple[str, int], path: str, cookie: str) -> tuple[float, int]:
    conn = http.client.HTTPConnection(*address, timeout=300)
    elapsed, status, conn = _get_on(conn, address, path, cookie)
    conn.close()
    return elapsed, status


def _get_on(
    conn: http.client.HTTPConnection, address: tuple[str, int], path: str, cookie: str
) -> tuple[float, int, http.client.HTTPConnection]:
    began = time.perf_counter()
    try:
        conn.request("GET", path, headers={"Cookie": cookie})
        response = conn.getresponse()
        response.read()
        status = response.status
    except (OSError, http.client.HTTPException):
        conn.close()
        conn = http.client.HTTPConnection(*address, timeout=300)
        status = 0
    return time.perf_counter() - began, status, conn
