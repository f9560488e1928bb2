"""`make demo` with DATABASE_URL naming a database that does not exist yet creates it, as the
embedded cluster does, instead of failing with a traceback."""

from __future__ import annotations

import os
import urllib.parse
import uuid

import psycopg
import pytest

from stack import postgres


def test_a_missing_database_is_created_once_and_a_dead_server_says_so() -> None:
    # given the suite's server and a database name nobody uses
    server = urllib.parse.urlsplit(os.environ.get("DATABASE_URL", ""))
    if server.scheme not in ("postgres", "postgresql"):
        pytest.fail("the suite runs with DATABASE_URL set (see stack.pytest_plugin)")
    name = f"chronicle_ensure_{uuid.uuid4().hex[:8]}"
    url = urllib.parse.urlunsplit(server._replace(path=f"/{name}"))
    try:
        # when the demo ensures it twice
        created = postgres.database_ensure(url)
        again = postgres.database_ensure(url)
        # then the first call created it, the second found it, and it takes connections
        assert (created, again) == (True, False)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (name,)
    finally:
        with psycopg.connect(
            urllib.parse.urlunsplit(server._replace(path="/postgres")), autocommit=True
        ) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
    # and a server that does not answer raises the driver's error (the demo prints it)
    with pytest.raises(psycopg.OperationalError):
        postgres.database_ensure("postgres://postgres@127.0.0.1:1/nothing")
