"""The README's demo path, as a newcomer takes it: Chronicle started the way `make demo`
starts it (config.demo: the embedded PostgreSQL, `load_demo`, runserver), the printed login,
every link of the navigation and of the demo run's pages opened in Chromium, and the
README's curl example posted with the printed token and found on the run page.

Nothing here uses the suite's database: the demo brings its own cluster, in a temporary
directory, and must leave no PostgreSQL process behind when it is stopped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from stack import free_port

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 240
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
# Pages whose links are followed too (once per path): the run list and navigation, the demo
# run's pages, and the pages the README's tour reaches from them.
EXPANDED = [r"^/$", r"^/runs/\d+/", r"^/incidents/$", r"^/failures/$", r"^/sdc/$",
            r"^/fleet/$", r"^/fleet/hosts/[^/]+/$", r"^/admin/$"]  # fmt: skip
HOST_PAGES = 2  # of the fleet's many hosts, this many host pages
MAX_PAGES = 250


@dataclass
class Demo:
    url: str
    username: str
    password: str
    token: str
    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    """`python -m config.demo` (what `make demo` runs) on a free port, its PostgreSQL data in
    a temporary directory, with the environment a newcomer has (no database or Redis URL)."""
    root = Path(tempfile.mkdtemp(prefix="chronicle-demo-path-"))
    root.chmod(0o755)  # PostgreSQL may run as another account (root cannot run it)
    port = free_port()
    log_path = root / "demo.log"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DEBUG"}
    }
    command = [sys.executable, "-m", "config.demo", "--port", str(port),
               "--data-dir", str(root / "postgres")]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        output = _wait_for_serving(process, log_path, f"http://127.0.0.1:{port}/login/")
        login = re.search(r"Log in\s+(\S+) / (\S+)", output)
        token = re.search(r"^(chr_\S+)$", output, re.MULTILINE)
        assert login and token, output
        yield Demo(
            url=f"http://127.0.0.1:{port}",
            username=login[1],
            password=login[2],
            token=token[1],
            process=process,
            data_dir=root / "postgres",
            log_path=log_path,
        )
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_serving(process: subprocess.Popen[bytes], log_path: Path, url: str) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        output = log_path.read_text(errors="replace")
        if "Serving on" in output:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        return output
            except OSError:
                pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"`make demo` did not serve:\n{output[-4000:]}")
        time.sleep(0.25)


def _matches(patterns: list[str], path: str) -> bool:
    return any(re.search(pattern, path) for pattern in patterns)


def _is_document(path: str) -> bool:
    """What a browser opens as a page (others, like the logbook's .md export, download)."""
    return not path.startswith("/api/") and not re.search(r"\.(md|csv|json|txt)$", path)


@pytest.mark.browser
def test_the_readme_demo_path_in_a_browser(demo, browser, page_drawn):
    # given the demo, logged in with the login it printed
    context = browser.new_context()
    page = context.new_page()
    console: list[str] = []
    failed: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: console.append(str(exc)))
    page.on(
        "response",
        lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    page.goto(f"{demo.url}/login/")
    page.fill("#id_username", demo.username)
    page.fill("#id_password", demo.password)
    with page.expect_navigation():
        page.click("button[type=submit]")
    page_drawn(page)
    assert urlsplit(page.url).path == "/", page.url

    # when every link of the navigation and of the demo run's pages is opened
    queue = ["/"]
    seen = {"/"}
    expanded: set[str] = set()
    hosts = 0
    opened: list[str] = []
    while queue:
        target = queue.pop(0)
        path = urlsplit(target).path
        assert len(opened) < MAX_PAGES, f"more than {MAX_PAGES} pages: {opened[-20:]}"
        opened.append(target)
        if not _is_document(path):
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
        if _matches(CHART_PAGES, path):
            assert charts, f"{target}: its chart is missing"

        if not _matches(EXPANDED, path) or path in expanded:
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

    visited_paths = {urlsplit(link).path for link in opened}
    for expected in [*CHART_PAGES, r"^/runs/\d+/logbook/$", r"^/incidents/$", r"^/admin/$"]:
        assert any(re.search(expected, p) for p in visited_paths), (expected, sorted(visited_paths))

    # when the README's curl example is sent with the printed token
    curl = _readme_curl()
    request = urllib.request.Request(
        f"{demo.url}{urlsplit(curl['url']).path}",
        data=curl["body"].encode(),
        headers={"Authorization": f"Bearer {demo.token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status in (200, 201, 202), answer.status
    sent = json.loads(curl["body"])

    # then its run is listed, and its points are on the run page's chart
    page.goto(f"{demo.url}/")
    with page.expect_navigation():
        page.click(f"text={sent['run']}")
    page_drawn(page)
    metric = sent["metrics"][0]["name"]
    drawn = page.evaluate(
        f"Array.from(document.querySelectorAll('figure.chart[data-metric=\"{metric}\"]'))"
        # _fullData: the traces as drawn (plotly decodes the figure's binary arrays there)
        ".flatMap(f => f._fullData.map(t => [Array.from(t.x), Array.from(t.y)]))"
    )
    points = {(x, y) for xs, ys in drawn for x, y in zip(xs, ys, strict=True)}
    for point in sent["metrics"]:
        assert (point["step"], point["value"]) in points, (point, drawn)
    assert console == [] and failed == [], (console, failed)
    context.close()


def test_stopping_the_demo_stops_its_postgresql(demo):
    # given the demo serving, with its PostgreSQL running
    pid = int((demo.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])

    # when it is stopped as a process manager would (SIGTERM)
    demo.process.send_signal(signal.SIGTERM)
    code = demo.process.wait(timeout=60)

    # then it exits cleanly and its PostgreSQL is gone, not orphaned
    assert code == 0, demo.log_path.read_text()[-3000:]
    assert "Embedded PostgreSQL stopped." in demo.log_path.read_text()
    assert not Path(f"/proc/{pid}").exists()
    assert not (demo.data_dir / "postmaster.pid").exists()


def _readme_curl() -> dict[str, str]:
    """The README's first `curl -X POST` example: its URL and its JSON body."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"curl -X POST (\S+).*?-d '(.*?)'", readme, re.DOTALL)
    assert block, "the README has no curl example"
    return {"url": block[1], "body": block[2]}
