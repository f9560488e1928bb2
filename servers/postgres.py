"""A private PostgreSQL cluster: initdb into a temporary directory, start the postmaster on a
spare loopback port, stop it by PID.

    with start(root) as pg:   # initdb, start, CREATE DATABASE chronicle
        psycopg.connect(pg.url())
    # stopped (SIGINT, fast shutdown) on the way out

PostgreSQL refuses to run as root, so as root it runs as the `postgres` system user
(subprocess `user=`, which keeps the PID of the postmaster itself, unlike `runuser`, which
forks)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from servers.processes import READY_TIMEOUT_S, Proc, free_port, kill_pid, spawn, wait_until

PG_USER = "postgres"
# initdb refuses root: as root, run PostgreSQL as the postgres system user; else as ourselves.
PG_OS_USER = PG_USER if os.geteuid() == 0 else None
DB_NAME = "chronicle"


def pg_bindir() -> Path:
    """PostgreSQL's server binaries: `pg_config --bindir` when it has initdb (on Debian it
    often points at the client-only /usr/bin), else the newest /usr/lib/postgresql/*/bin."""
    candidates: list[Path] = []
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, check=True, text=True)
        candidates.append(Path(out.stdout.strip()))
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates.extend(versions)
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "postgres").exists():
            return candidate
    raise RuntimeError("no PostgreSQL server binaries (initdb, postgres) found")


class Postgres:
    """A private PostgreSQL cluster in `root`, owned by the postgres user, on a spare port."""

    def __init__(self, root: Path) -> None:
        self.root = root / "pg"
        self.data = self.root / "data"
        self.sockets = self.root / "run"
        self.port = free_port()
        self.bindir = pg_bindir()
        self.proc: Proc | None = None

    def init(self) -> None:
        self.root.mkdir()
        self.sockets.mkdir()
        if PG_OS_USER:
            shutil.chown(self.root, PG_OS_USER, PG_OS_USER)
            shutil.chown(self.sockets, PG_OS_USER, PG_OS_USER)
        # fmt: off
        command = [
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", PG_USER, "-A", "trust",
            "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions",
        ]
        # fmt: on
        subprocess.run(
            command,
            cwd=self.root,
            user=PG_OS_USER,
            group=PG_OS_USER,
            extra_groups=[] if PG_OS_USER else None,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"},
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        # fmt: off
        command = [
            str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
            "-c", "listen_addresses=127.0.0.1",
            "-c", f"unix_socket_directories={self.sockets}",
            "-c", "max_connections=200",
            # A backend whose client was SIGKILLed notices within a second even while it
            # waits on a lock, and releases its row locks (production should set it too).
            "-c", "client_connection_check_interval=1000",
        ]
        # fmt: on
        self.proc = spawn(
            "postgres",
            command,
            log_path=self.root.parent / "postgres.log",
            cwd=self.root,
            user=PG_OS_USER,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"},
            # SIGINT is PostgreSQL's "fast" shutdown: roll back sessions, checkpoint, exit.
            stop_signal=signal.SIGINT,
        )
        wait_until(self._ready, timeout_s=READY_TIMEOUT_S, what="PostgreSQL to accept connections")

    def _ready(self) -> bool:
        if self.proc is None or not self.proc.alive():
            raise RuntimeError(f"PostgreSQL exited:\n{self.proc.log_text()[-2000:]}")
        with psycopg.connect(self.url("postgres"), connect_timeout=2):
            return True

    def url(self, db: str = DB_NAME) -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{db}"

    def connect(self, db: str = DB_NAME) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url(db), autocommit=True, connect_timeout=5)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of one query on a fresh connection to the `chronicle` database."""
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def create_database(self) -> None:
        with self.connect("postgres") as conn:
            conn.execute(f"CREATE DATABASE {DB_NAME}")

    def crash_restart(self, down_s: float) -> None:
        """SIGQUIT (immediate shutdown: no checkpoint, crash recovery on start), stay down
        for `down_s`, start again on the same port and data directory."""
        assert self.proc is not None
        kill_pid(self.proc.pid, signal.SIGQUIT)
        self.proc.popen.wait(timeout=30)
        time.sleep(down_s)
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout_s=30)

    def __enter__(self) -> Postgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(root: Path) -> Postgres:
    """A new cluster in `root`/pg with the `chronicle` database, answering on a spare port;
    stopped again if it fails half-way."""
    pg = Postgres(root)
    try:
        pg.init()
        pg.start()
        pg.create_database()
    except BaseException:
        pg.stop()
        raise
    return pg
