"""What the tests against a running `make demo` share (tests/test_demo_path.py,
tests/stack/test_demo_stop.py): the demo started as `make demo` starts it, on a free port with
its own servers; the ways a user talks to it (log in, POST as a job, wait for an outcome); and
a pool child of its worker stuck in C code, with its process tree watched."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import psycopg
import pytest
from celery import Celery

from config.queues import QUEUE_DEFAULT
from config.redis_urls import celery_broker_url
from stack import free_port, postgres
from stack.processes import children_of, pid_alive, wait_until
from tests.stack.stuck_task import STUCK_TASK

ROOT = Path(__file__).resolve().parent.parent
# A fresh demo migrates and loads in ~80 s on 2 quiet cores; at load 13 (a full suite beside
# benchmarks) migrating alone took 77 s and serving missed a 240 s budget.
START_TIMEOUT_S = 420
# `make` would reinstall when pyproject.toml is newer than the install stamp (a checkout
# touches it); -o keeps the installed virtualenv, as a deployment that installed once would.
MAKE = ["make", "--no-print-directory", "-o", ".venv/.installed-run"]
# Production settings with one module more for the demo's worker to import: the task that gets
# a pool child stuck in C code (tests.stack.stuck_task).
STUCK_SETTINGS = "tests.stack.stuck_worker_settings"
# A demo whose worker can get a pool child stuck: the demo's stop then gives web, beat and the
# worker's warm shutdown 3 s each (20 s by default) before it SIGKILLs the group, as the stuck
# child never lets the worker end and all of the timeout would be spent waiting.
STUCK_DEMO_ENV = {"DJANGO_SETTINGS_MODULE": STUCK_SETTINGS, "DEMO_STOP_TIMEOUT_S": "3"}
# Generous: a demo stops web, beat and worker (each given DEMO_STOP_TIMEOUT_S) and its servers;
# on a loaded machine that takes longer. A stuck child does not end on its own, so no wait
# is too long.
STOPPED_TIMEOUT_S = 240


@dataclass
class Demo:
    url: str
    username: str
    password: str
    token: str
    process: subprocess.Popen[bytes]
    var_dir: Path
    log_path: Path


@contextlib.contextmanager
def demo_started(*, through_make: bool = False, **extra_env: str) -> Iterator[Demo]:
    """`python -m config.demo` (what `make demo` runs; `make demo` itself if `through_make`)
    on a free port, its data in a temporary directory, with the environment a newcomer has (no
    database or Redis URL) and `extra_env`."""
    root = Path(tempfile.mkdtemp(prefix="chronicle-demo-path-"))
    root.chmod(0o755)  # PostgreSQL may run as another account (root cannot run it)
    port = free_port()
    log_path = root / "demo.log"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DEBUG"}
    } | extra_env
    command = [sys.executable, "-m", "config.demo", "--port", str(port),
               "--var-dir", str(root / "var")]  # fmt: skip
    if through_make:
        command = [*MAKE, "demo", f"PORT={port}", f"DEMO_VAR_DIR={root / 'var'}"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        output = wait_for_serving(process, log_path, f"http://127.0.0.1:{port}/login/")
        login = re.search(r"Log in\s+(\S+) / (\S+)", output)
        token = re.search(r"^(chr_\S+)$", output, re.MULTILINE)
        assert login and token, output
        yield Demo(
            url=f"http://127.0.0.1:{port}",
            username=login[1],
            password=login[2],
            token=token[1],
            process=process,
            var_dir=root / "var",
            log_path=log_path,
        )
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def wait_for_serving(process: subprocess.Popen[bytes], log_path: Path, url: str) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        output = log_path.read_text(errors="replace")
        if "Started a Celery worker" in output:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        return output
            except OSError:
                pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"`make demo` did not serve:\n{output[-4000:]}")
        time.sleep(0.25)


def log_in(page: Any, demo: Demo) -> None:
    """With the login the demo printed."""
    page.goto(f"{demo.url}/login/")
    page.fill("#id_username", demo.username)
    page.fill("#id_password", demo.password)
    with page.expect_navigation():
        page.click("button[type=submit]")


def matches(patterns: list[str], path: str) -> bool:
    return any(re.search(pattern, path) for pattern in patterns)


def is_document(path: str) -> bool:
    """What a browser opens as a page (others, like the logbook's .md export, download)."""
    return not path.startswith("/api/") and not re.search(r"\.(md|csv|json|txt)$", path)


class StepTimes:
    """The wall-clock times a rank printed for its steps, read as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.times: list[float] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("step "):
                with self._lock:
                    self.times.append(float(line.split()[1]))

    def count(self) -> int:
        with self._lock:
            return len(self.times)

    def time_of(self, count: int) -> float:
        """When the step that made `count` steps was taken (time.time())."""
        with self._lock:
            return self.times[min(count, len(self.times)) - 1]


def last_step_at(demo: Demo, run: str) -> float:
    """When the demo's server saw `run` reach its last step (epoch seconds), from its
    database."""
    url = postgres.socket_url(demo.var_dir / "postgres", "chronicle")
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT last_step_at FROM telemetry_run WHERE name = %s", [run])
        return row.fetchone()[0].timestamp()


def readme_job() -> str:
    """The README's per-rank job: the Python block that calls run.rank_timer()."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    job = [block for block in blocks if "rank_timer()" in block]
    assert len(job) == 1, "the README has no per-rank job"
    return job[0]


def send(demo: Demo, path: str, body: str, content_type: str = "application/json") -> Any:
    request = urllib.request.Request(
        f"{demo.url}{path}", data=body.encode(), method="POST",
        headers={"Authorization": f"Bearer {demo.token}", "Content-Type": content_type},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status in (200, 202), answer.status
        return json.loads(answer.read())


def until(read: Any, what: str, timeout_s: float = 120) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = read()
        if found:
            return found
        time.sleep(1)
    pytest.fail(f"{what}: not within {timeout_s:.0f} s")


def prometheus(host: str, uuid: str, values: dict[str, float], at_s: float) -> str:
    labels = f'gpu="0",UUID="{uuid}",Hostname="{host}"'
    return "".join(f"{k}{{{labels}}} {v:g} {int(at_s * 1000)}\n" for k, v in values.items())


def run_named(api: Any, name: str) -> dict[str, Any] | None:
    return next((run for run in api("/api/v1/runs") if run["name"] == name), None)


def serving_processes(demo: Demo) -> None:
    """Assert that the demo started through make (make's one child: python -m config.demo)
    runs PostgreSQL, Redis, gunicorn, the Celery worker and beat."""
    (serving,) = children_of(demo.process.pid)
    assert "config.demo" in command_of(serving), command_of(serving)
    names = {command_of(pid) for pid in children_of(serving)}
    assert any("postgres" in name for name in names), names
    assert any("redis-server" in name for name in names), names
    assert any("gunicorn" in name for name in names), names
    assert sum("celery" in name for name in names) == 2, names


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def readme_curl() -> dict[str, str]:
    """The README's first `curl -X POST` example: its URL and its JSON body."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"curl -X POST (\S+).*?-d '(.*?)'", readme, re.DOTALL)
    assert block, "the README has no curl example"
    return {"url": block[1], "body": block[2]}


# Pages whose main content is a chart: each must draw at least one, with traces.
CHART_PAGES = [
    r"^/runs/\d+/$",
    r"^/runs/\d+/mfu/$",
    r"^/runs/\d+/goodput/$",
    r"^/runs/\d+/checkpoints/$",
    r"^/failures/$",
    r"^/sdc/$",
    r"^/fleet/$",
    r"^/fleet/hosts/[^/]+/$",
]
RUN_PAGE = r"^/runs/\d+/$"
NO_METRICS = "No metrics reported yet."
# Pages whose links are followed too (once per path): the run list and navigation, the demo
# run's pages, and the pages the README's tour reaches from them.
EXPANDED = [r"^/$", r"^/runs/\d+/", r"^/incidents/$", r"^/failures/$", r"^/sdc/$",
            r"^/fleet/$", r"^/fleet/hosts/[^/]+/$", r"^/webhooks/$", r"^/projects/"]  # fmt: skip
HOST_PAGES = 2  # of the fleet's many hosts, this many host pages
MAX_PAGES = 250


def walk_every_page(
    page: Any, context: Any, demo: Demo, page_drawn: Any, console: list[str], failed: list[str]
) -> tuple[list[str], list[str]]:
    """Open every link of the navigation and of the pages EXPANDED names, from "/", each
    asserted to answer without error, log no console error and draw its charts (a page of
    CHART_PAGES at least one); the pages opened, and the run pages that drew metrics."""
    queue = ["/"]
    seen = {"/"}
    expanded: set[str] = set()
    hosts = 0
    opened: list[str] = []
    charted_runs: list[str] = []
    metricless: set[str] = set()
    while queue:
        target = queue.pop(0)
        path = urlsplit(target).path
        assert len(opened) < MAX_PAGES, f"more than {MAX_PAGES} pages: {opened[-20:]}"
        opened.append(target)
        if not is_document(path):
            answer = context.request.get(f"{demo.url}{target}")
            assert answer.status < 400, (target, answer.status)
            continue
        response = page.goto(f"{demo.url}{target}")
        # A run page draws its first chart at once and the others one per frame after it.
        page_drawn(page)

        # then each answers without error, logs no console error, and draws its charts
        assert response is not None and response.status < 400, (
            target,
            response and response.status,
        )
        assert failed == [], (target, failed)
        assert console == [], (target, console)
        charts = page.evaluate(
            "Array.from(document.querySelectorAll('figure.chart'))"
            ".map(f => f.classList.contains('js-plotly-plot') ? f.data.length : 0)"
        )
        assert all(traces > 0 for traces in charts), (target, charts)
        if matches(CHART_PAGES, path):
            # A run that sent no metrics (the fleet's evaluation jobs, the triage history)
            # says so on its page instead of drawing a chart.
            # (the run page is opened before its MFU, goodput and checkpoint pages)
            run = re.match(r"^/runs/(\d+)/", path)
            if re.match(RUN_PAGE, path) and page.locator(f"text={NO_METRICS}").count():
                metricless.add(run[1])
            assert charts or (run and run[1] in metricless), f"{target}: its chart is missing"
            if re.match(RUN_PAGE, path) and charts:
                charted_runs.append(path)

        if not matches(EXPANDED, path) or path in expanded:
            continue
        expanded.add(path)
        hrefs = page.evaluate(
            "Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))"
        )
        for href in hrefs:
            absolute = urljoin(f"{demo.url}{target}", href)
            parts = urlsplit(absolute)
            if f"{parts.scheme}://{parts.netloc}" != demo.url or not parts.path:
                continue  # another site (none expected) or a fragment of this page
            link = parts.path + (f"?{parts.query}" if parts.query else "")
            if link in seen:
                continue
            if re.match(r"^/fleet/hosts/", parts.path):
                if hosts == HOST_PAGES:
                    continue
                hosts += 1
            seen.add(link)
            queue.append(link)

    return opened, charted_runs


def process_tree(pid: int) -> list[int]:
    """`pid`'s descendants, from /proc."""
    found = []
    for child in children_of(pid):
        found += [child, *process_tree(child)]
    return found


def still_running(pids: list[int], timeout_s: float = STOPPED_TIMEOUT_S) -> list[int]:
    """The pids still running (zombies aside) after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [pid for pid in pids if pid_alive(pid)]


def kill_left(pids: list[int]) -> None:
    """SIGKILL to a test's own processes still running, should it fail."""
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _blocks(pid: int, sig: signal.Signals) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.MULTILINE)[1], 16)
    return bool(mask >> (sig - 1) & 1)


def stick_a_pool_child(redis_url: str, started: Path) -> int:
    """Send the stuck task (tests.stack.stuck_task) to the worker on `redis_url`; the pid of
    the pool child running it, once it holds SIGTERM back."""
    # Not the process's current app: the suite's tests after this one in the same process
    # enqueue through the current app, which would then name this demo's Redis, gone with it.
    app = Celery(broker=celery_broker_url(redis_url), set_as_current=False)
    try:
        app.send_task(STUCK_TASK, args=[str(started)], queue=QUEUE_DEFAULT)
    finally:
        app.close()
    child = wait_until(
        lambda: int(started.read_text()), timeout_s=180, what="a pool child to take the task"
    )
    wait_until(lambda: _blocks(child, signal.SIGTERM), timeout_s=60, what="SIGTERM blocked")
    return int(child)


def demo_redis_url(demo: Demo) -> str:
    """The URL of the Redis the demo started, as it printed it."""
    url = re.search(r"Redis up \(.*, on (\S+)\)$", demo.log_path.read_text(), re.MULTILINE)
    assert url, demo.log_path.read_text()[-2000:]
    return url[1]
