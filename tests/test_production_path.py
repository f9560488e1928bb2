"""The README's "Running in production", as written: a database of its own on the local
PostgreSQL and a Redis database of its own, the README's environment, `make migrate`, then
`make web`, `make worker` and `make beat` as processes on a free port. Over plain HTTP with
the documented PLAIN_HTTP=1: `/` sends to the login page (not to https), the superuser logs
in, a batch posted with a token from `create_ingest_token` is processed by the worker and
its point read back through the API and the run's page; beat runs. `make check-deploy`
passes with the README's production settings (behind a TLS proxy, BEHIND_TLS_PROXY=1).

Nothing here uses the suite's database or Redis database; every process it starts is
stopped at the end (each make in a session of its own, stopped as a group).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import psycopg
import pytest

from config.redis_urls import redis_db, redis_url_with_db
from stack import free_port
from tests.demo_path_support import MAKE

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 120
PASSWORD = "prod-path-pw-1"


def _database_url() -> str:
    """A database of the test's own beside the suite's, on the same PostgreSQL server."""
    base = os.environ["DATABASE_URL"]
    parts = urllib.parse.urlsplit(base)
    name = f"{parts.path.strip('/') or 'chronicle'}_production_path"
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def _admin_connection(url: str) -> psycopg.Connection[Any]:
    parts = urllib.parse.urlsplit(url)
    return psycopg.connect(
        urllib.parse.urlunsplit(parts._replace(path="/postgres")), autocommit=True
    )


@pytest.fixture
def production_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The README's environment, on a fresh database and a Redis database of its own."""
    database_url = _database_url()
    name = urllib.parse.urlsplit(database_url).path.strip("/")
    with _admin_connection(database_url) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    redis_url = os.environ["REDIS_URL"]
    # The suite's processes use db, db-1, ...: this one flips the high bit (15 -> 7, 1 -> 9).
    own_redis = redis_url_with_db(redis_url, redis_db(redis_url) ^ 8)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST", "DJANGO_", "CELERY", "FUZZ", "COV_"))
    }
    env.update(
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=database_url,
        REDIS_URL=own_redis,
        DEBUG="0",
        # `make web` collects static files; into its own directory, not the checkout's var/,
        # where the demo tests may be collecting at the same time (a fresh clone raced there).
        STATIC_ROOT=str(tmp_path / "staticfiles"),
    )
    import redis

    redis.Redis.from_url(own_redis).flushdb()
    yield env
    redis.Redis.from_url(own_redis).flushdb()
    with _admin_connection(database_url) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _run(command: list[str], env: dict[str, str], **extra: Any) -> str:
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, **extra
    )
    assert done.returncode == 0, (
        f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


class Answer:
    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status_code, self.headers, self.text = status, headers, body.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.text)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx is the answer, as a browser's first response is


class Browser:
    """Requests with a cookie jar (the session and CSRF cookies), redirects not followed."""

    def __init__(self) -> None:
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(CookieJar()), _NoRedirect()
        )

    def send(
        self, url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        request = urllib.request.Request(url, data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=10) as response:
                return Answer(response.status, response.headers, response.read())
        except urllib.error.HTTPError as exc:
            return Answer(exc.code, exc.headers, exc.read())


class Processes:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, what: str, command: list[str], env: dict[str, str]) -> Path:
        log_path = self.log_dir / f"{what}.log"
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make and its gunicorn/celery stop as one group
        )
        self.started.append((what, process))
        return log_path

    def alive(self, what: str) -> bool:
        return dict(self.started)[what].poll() is None

    def stop(self) -> None:
        for _, process in reversed(self.started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _, process in reversed(self.started):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait(predicate: Any, what: str, log: Path, timeout_s: float = START_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except OSError:  # nothing listening yet
            result = None
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(
        f"{what} did not happen in {timeout_s} s; {log}:\n{log.read_text()[-3000:]}"
    )


def test_the_readme_production_path_works_as_written(production_env, tmp_path) -> None:
    env = production_env
    processes = Processes(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        # given the README's steps: migrate, the three processes, a superuser and a token
        _run([*MAKE, "migrate"], env)
        web_log = processes.start(
            "web",
            [*MAKE, "web", "HOST=127.0.0.1", f"PORT={port}"],
            {**env, "PLAIN_HTTP": "1", "WEB_WORKERS": "2"},
        )
        worker_log = processes.start("worker", [*MAKE, "worker"], env)
        beat_log = processes.start("beat", [*MAKE, "beat"], env)
        _run(
            [".venv/bin/python", "manage.py", "createsuperuser", "--noinput",
             "--username", "admin", "--email", "admin@example.org"],
            {**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
        )  # fmt: skip
        token = _run(
            [".venv/bin/python", "manage.py", "create_ingest_token", "prod", "--create-project"],
            env,
        ).strip()
        assert token.startswith("chr_"), token

        # when the site answers over plain HTTP: the login page, not a redirect to https
        session = Browser()
        _wait(lambda: session.send(f"{base}/login/").status_code == 200, "the web server", web_log)
        home = session.send(f"{base}/")
        assert home.status_code == 302, home.status_code
        assert home.headers["Location"].startswith("/login/")

        # and the superuser logs in
        login_page = session.send(f"{base}/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.text)
        assert csrf, login_page.text[:500]
        logged_in = session.send(
            f"{base}/login/",
            data=urllib.parse.urlencode(
                {"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": csrf[1]}
            ).encode(),
            headers={"Referer": f"{base}/login/"},
        )
        assert logged_in.status_code == 302, logged_in.text[:500]

        # and a job posts a batch with an event, which the worker processes
        batch = {
            "batch_id": "prod-path-1",
            "run": "prod-path-run",
            "attempt": 1,
            "metrics": [{"name": "loss", "step": 7, "value": 2.25, "time": time.time() - 60}],
            "events": [{"type": "attempt_started", "time": time.time() - 120, "attempt": 1}],
        }
        accepted = Browser().send(
            f"{base}/api/v1/ingest",
            data=json.dumps(batch).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        assert accepted.status_code == 202, accepted.text

        # then the point reads back through the API and the run's page
        def run_id() -> int | None:
            runs = session.send(f"{base}/api/v1/runs").json()
            rows = runs.get("results", runs) if isinstance(runs, dict) else runs
            return next((row["id"] for row in rows if row["name"] == "prod-path-run"), None)

        def the_point() -> dict[str, Any] | None:
            found = run_id()
            if found is None:
                return None
            series = session.send(f"{base}/api/v1/runs/{found}/series?name=loss").json()
            return series if series.get("total_points") == 1 else None

        series = _wait(the_point, "the worker processing the batch", worker_log)
        assert series["attempts"][0]["steps"] == [7]
        assert series["attempts"][0]["values"] == [2.25]
        page = session.send(f"{base}/runs/{series['run']}/")
        assert page.status_code == 200 and "prod-path-run" in page.text

        # and beat runs its schedule
        _wait(lambda: "beat: Starting" in beat_log.read_text(), "celery beat", beat_log)
        assert all(processes.alive(what) for what in ("web", "worker", "beat"))
    finally:
        processes.stop()

    # and Django's deployment checklist passes with the README's production settings
    readme_env = {**env, "ALLOWED_HOSTS": "chronicle.example.org", "BEHIND_TLS_PROXY": "1"}
    _run([*MAKE, "check-deploy"], readme_env)
