"""DATABASE_URL with several hosts (docs/operations.md, "Failover"): parsed into libpq's host
and port lists, its libpq parameters kept, and Django really connecting to the host that takes
writes when the first one listed is a read-only standby."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from config import database_url
from stack import postgres

ROOT = Path(__file__).resolve().parent.parent.parent


def test_a_multi_host_url_becomes_libpq_host_and_port_lists() -> None:
    settings = database_url.parse(
        "postgres://chronicle:s%40cret@db1:5433,db2,[::1]:5435/chronicle"
        "?target_session_attrs=read-write&sslmode=require",
        conn_max_age=60,
    )

    assert settings["HOST"] == "db1,db2,::1"
    assert settings["PORT"] == "5433,,5435"
    assert (settings["USER"], settings["PASSWORD"], settings["NAME"]) == (
        "chronicle",
        "s@cret",
        "chronicle",
    )
    assert settings["OPTIONS"] == {"target_session_attrs": "read-write", "sslmode": "require"}
    assert settings["CONN_MAX_AGE"] == 60


def test_a_single_host_url_keeps_its_libpq_parameters() -> None:
    settings = database_url.parse(
        "postgres://u@db:5432/x?target_session_attrs=read-write", conn_max_age=0
    )

    assert (settings["HOST"], settings["PORT"]) == ("db", 5432)
    assert settings["OPTIONS"] == {"target_session_attrs": "read-write"}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@a:1,b:2/x", "PostgreSQL's"),
        ("postgres://u@a:1,:2/x", "empty host"),
        ("postgres://u@a:1,b:xx/x", "not a number"),
    ],
)
def test_a_bad_multi_host_url_says_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(database_url.DatabaseUrlError, match=message):
        database_url.parse(url, conn_max_age=0)


SHOW = (
    "import django; django.setup(); from django.db import connection; "
    "c = connection.cursor(); c.execute('SELECT inet_server_port(), pg_is_in_recovery()'); "
    "print(*c.fetchone()); "
    "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'])"
)


@pytest.fixture(scope="module")
def primary_and_standby() -> Iterator[tuple[postgres.PostgresServer, postgres.PostgresServer]]:
    root = Path(tempfile.mkdtemp(prefix="chronicle-multihost-"))
    root.chmod(0o755)
    with (
        postgres.start(root / "primary", port=0) as primary,
        postgres.start_replica(primary, root / "standby") as standby,
    ):
        yield primary, standby


def test_django_connects_to_the_writable_host_of_a_multi_host_url(
    primary_and_standby: tuple[postgres.PostgresServer, postgres.PostgresServer],
) -> None:
    primary, standby = primary_and_standby
    # The read-only standby first: libpq must skip it for target_session_attrs=read-write.
    url = (
        f"postgres://postgres@127.0.0.1:{standby.port},127.0.0.1:{primary.port}/postgres"
        "?target_session_attrs=read-write"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG"}}
    env |= {"DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": url, "DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SHOW], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr
    first, options = done.stdout.strip().splitlines()
    assert first == f"{primary.port} False"
    # Chronicle's own connection options stay beside the URL's.
    assert "target_session_attrs" in options and "statement_timeout" in options
