"""The database's functions have one canonical source, telemetry/sql/<name>.sql (the text
pg_get_functiondef gives after `migrate`); the trigger migrations reverse and re-apply to
the same functions and triggers; `python -O manage.py migrate` runs from an empty database.

A change to a trigger function edits its file and adds a migration holding the new text,
verbatim (docs/hot-paths.md): the first test fails until the two agree."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
SQL_DIR = ROOT / "telemetry" / "sql"
# Functions written in the project's migrations: not an extension's, in the current schema.
FUNCTIONS = """
    SELECT p.proname, pg_get_functiondef(p.oid)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = current_schema() AND p.prokind = 'f'
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
    ORDER BY 1
"""
# Each trigger of the project's tables, with the function it runs and when.
TRIGGERS = """
    SELECT t.tgname, c.relname, p.proname, pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid
    WHERE NOT t.tgisinternal AND c.relname LIKE 'telemetry\\_%'
    ORDER BY 1, 2
"""


def _rows(sql: str) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


def _live() -> dict[str, str]:
    return {name: text for name, text in _rows(FUNCTIONS)}


def _canonical() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(SQL_DIR.glob("*.sql"))}


def _same(text: str) -> str:
    """The text as compared: the file's leading `--` comment lines, and trailing white space
    of each line and of the whole, aside."""
    lines = text.strip().splitlines()
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "\n".join(line.rstrip() for line in lines)


@pytest.mark.django_db
def test_each_live_function_is_its_canonical_source():
    live, canonical = _live(), _canonical()
    # The rule would hold vacuously if the functions were not found.
    assert "telemetry_metricpoint_added" in live
    assert sorted(live) == sorted(canonical), "a function without its file, or a file too many"
    differ = [name for name in live if _same(live[name]) != _same(canonical[name])]
    assert differ == [], f"telemetry/sql/ and the migrated database differ: {differ}"


@pytest.mark.django_db(transaction=True)
def test_the_trigger_migrations_reverse_and_reapply(migrate_to):
    # given the migrated database's functions and triggers
    functions, triggers = _live(), _rows(TRIGGERS)
    names = {name for name, *_ in triggers}
    assert "telemetry_metricpoint_added" in names

    # when the one-trigger migration (0021) is reversed
    migrate_to([("telemetry", "0020_run_data_until")])
    # then the three triggers it replaced are back, and its own is gone
    before = {name for name, *_ in _rows(TRIGGERS)}
    assert {"telemetry_metricpoint_rollup", "telemetry_metricpoint_series_check",
            "telemetry_metricpoint_throughputsum"} <= before  # fmt: skip
    assert "telemetry_metricpoint_added" not in before

    # when every trigger migration is reversed (back before the rollups, 0005)
    migrate_to([("telemetry", "0004_dcgm_gpu_health")])
    # then no trigger of theirs is left on the points table
    assert not [row for row in _rows(TRIGGERS) if row[1] == "telemetry_metricpoint"]

    # when they are applied again
    migrate_to([("telemetry", leaf) for leaf in _telemetry_leaves()])
    # then the functions and triggers are what they were
    assert _live() == functions
    assert _rows(TRIGGERS) == triggers


def _telemetry_leaves() -> list[str]:
    from django.db.migrations.loader import MigrationLoader

    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    return [name for app, name in graph.leaf_nodes() if app == "telemetry"]


def test_migrate_runs_under_python_optimised_from_an_empty_database(db: Any):
    # given an empty database beside the test database, on the same server
    settings = connection.settings_dict
    name = f"h_optimised_{uuid.uuid4().hex[:8]}"
    params = {
        "host": settings["HOST"] or None,
        "port": settings["PORT"] or None,
        "user": settings["USER"] or None,
        "password": settings["PASSWORD"] or None,
        "dbname": "postgres",
    }
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = psycopg.conninfo.make_conninfo(**{**params, "dbname": name})
        # when every migration runs with asserts compiled out (python -O)
        done = subprocess.run(
            [sys.executable, "-O", "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
            env={**os.environ, "DATABASE_URL": _url(params, name),
                 "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1"},
        )  # fmt: skip
        # then it succeeds, and leaves the same functions as the test database's
        assert done.returncode == 0, done.stderr[-3000:]
        with psycopg.connect(url) as migrated:
            found = {row[0]: row[1] for row in migrated.execute(FUNCTIONS).fetchall()}
        assert {n: _same(t) for n, t in found.items()} == {n: _same(t) for n, t in _live().items()}
    finally:
        with psycopg.connect(**params, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _url(params: dict[str, Any], name: str) -> str:
    from urllib.parse import quote

    user = quote(params["user"] or "postgres")
    password = f":{quote(params['password'])}" if params["password"] else ""
    host = quote(params["host"] or "127.0.0.1", safe="")
    port = f":{params['port']}" if params["port"] else ""
    return f"postgres://{user}{password}@{host}{port}/{name}"
