"""Backups with PostgreSQL's own tools (stack.backup; docs/operations.md, "Backups and
restores"): a point-in-time restore to just before a bad migration, and `make restore`'s
refusal of a database that already has tables."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from stack import backup, postgres
from stack.processes import wait_until

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="chronicle-backup-"))
    path.chmod(0o755)
    yield path


def _archived(pg: postgres.PostgresServer, segment: str) -> bool:
    [(last,)] = pg.rows("SELECT last_archived_wal FROM pg_stat_archiver")
    return last is not None and last >= segment


def test_a_point_in_time_restore_stops_just_before_the_bad_migration(root: Path) -> None:
    archive = backup.archive_dir(root / "wal-archive")
    with postgres.start(root / "pg", port=0, settings=backup.archive_settings(archive)) as pg:
        pg.create_database("chronicle")
        major = backup.server_major(pg.url)
        with pg.connect("chronicle") as conn:
            conn.execute("CREATE TABLE incident (id int PRIMARY KEY, note text)")
            conn.execute(
                "INSERT INTO incident SELECT g, 'before the base backup' "
                "FROM generate_series(1, 100) g"
            )
        base = backup.base_backup(pg.url, root / "base", major=major)
        with pg.connect("chronicle") as conn:
            # After the base backup: only the archived WAL brings these back.
            conn.execute(
                "INSERT INTO incident SELECT g, 'after it' FROM generate_series(101, 150) g"
            )
            [(target,)] = conn.execute("SELECT now()").fetchall()
            time.sleep(1.5)
            conn.execute("INSERT INTO incident VALUES (999, 'a moment before the migration')")
            # The bad migration.
            conn.execute("DROP TABLE incident")
            [(segment,)] = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchall()
            conn.execute("SELECT pg_switch_wal()")
        wait_until(lambda: _archived(pg, segment), timeout_s=60, what="the WAL to be archived")
    assert base.bytes > 0

    restored_dir = root / "restored"
    backup.prepare_recovery(base.path, restored_dir)
    assert isinstance(target, datetime)
    with postgres.start(
        restored_dir, port=0, settings=backup.recovery_settings(archive, target)
    ) as restored:
        wait_until(
            lambda: restored.rows("SELECT NOT pg_is_in_recovery()")[0][0],
            timeout_s=120,
            what="the restore to reach its target and open for writes",
        )
        rows = restored.rows("SELECT count(*), max(id) FROM incident", database="chronicle")
        restored.rows(
            "INSERT INTO incident VALUES (1000, 'writable') RETURNING id", database="chronicle"
        )

    # Every row committed before the target, none after it, and the table the migration dropped.
    assert rows == [(150, 150)]


def test_make_restore_refuses_a_database_that_has_tables(root: Path) -> None:
    with postgres.start(root / "pg", port=0) as pg:
        pg.create_database("chronicle")
        with pg.connect("chronicle") as conn:
            conn.execute("CREATE TABLE kept (id int)")
            conn.execute("INSERT INTO kept VALUES (7)")
        dump = backup.dump(pg.url_for("chronicle"), root / "x.dump")
        done = subprocess.run(
            [sys.executable, "-m", "stack.backup", "restore", str(dump.path), "--into",
             pg.url_for("chronicle")],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 1
        assert "already has 1 tables" in done.stderr and "new database" in done.stderr
        # Into a new database name it restores every row.
        backup.restore(dump.path, pg.url_for("copy"))
        assert pg.rows("SELECT id FROM kept", database="copy") == [(7,)]
        with pytest.raises(psycopg.errors.UndefinedTable):
            pg.rows("SELECT 1 FROM not_there", database="copy")
