"""The fault injectors: SIGKILL a Celery pool child (mid-task when one is busy) or the worker's
main process, SIGKILL a gunicorn worker, restart Redis wiped, crash-restart PostgreSQL; each
recorded with its time."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass

import psycopg

from stack.chronicle import DB_NAME, Chronicle
from stack.postgres import PostgresServer
from stack.processes import children_of, kill_pid, log, pid_alive, process_owning_port


@dataclass
class Fault:
    kind: str
    at: float  # time.monotonic() of the injection
    detail: str


class Injector:
    """The faults of the issue, each recorded with its time."""

    def __init__(self, app: Chronicle, *, concurrency: int = 2) -> None:
        self.app = app
        self.concurrency = concurrency
        self.faults: list[Fault] = []
        self.lock = threading.Lock()

    def _record(self, kind: str, detail: str, at: float) -> None:
        with self.lock:
            self.faults.append(Fault(kind=kind, at=at, detail=detail))
        log(f"fault {kind}: {detail}")

    def busy_pool_child(self, timeout_s: float = 8.0) -> int | None:
        """A pool child inside a processing transaction (mid-task), waiting up to `timeout_s`
        for one; None if the pool stayed idle."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            kids = self.app.pool_children()
            with contextlib.suppress(psycopg.Error):
                for port in in_transaction_client_ports(self.app.pg):
                    owner = process_owning_port(port, kids)
                    if owner is not None:
                        return owner
            time.sleep(0.02)
        return None

    def kill_pool_child(self) -> None:
        victim = self.busy_pool_child()
        state = "mid-task"
        if victim is None:
            kids = self.app.pool_children()
            if not kids:
                raise RuntimeError("no pool child to kill")
            victim, state = random.choice(kids), "idle"
        at = time.monotonic()
        kill_pid(victim)
        self._record("pool_child_sigkill", f"SIGKILL pool child {victim} ({state})", at)

    def kill_worker_main(self, restart_after_s: float = 1.0) -> None:
        worker = self.app.worker
        assert worker is not None
        state = "mid-task" if self.busy_pool_child() is not None else "idle"
        kids = children_of(worker.pid)
        at = time.monotonic()
        worker.kill()
        # Orphaned pool children would finish their task and exit; kill them by PID so a
        # crashed worker's whole process tree is gone, as after an OOM kill of the container.
        time.sleep(0.2)
        for kid in kids:
            if pid_alive(kid):
                kill_pid(kid)
        self._record(
            "worker_main_sigkill", f"SIGKILL worker main {worker.pid} and pool {kids} ({state})", at
        )
        time.sleep(restart_after_s)
        self.app.start_worker(concurrency=self.concurrency)

    def kill_web_worker(self) -> None:
        workers = self.app.web_workers()
        if not workers:
            raise RuntimeError("no gunicorn worker to kill")
        victim = random.choice(workers)
        at = time.monotonic()
        kill_pid(victim)
        self._record("web_worker_sigkill", f"SIGKILL gunicorn worker {victim}", at)

    def restart_redis_wiped(self, down_s: float = 2.0) -> None:
        at = time.monotonic()
        self.app.redis.restart_wiped(down_s=down_s)
        self._record("redis_restart_wiped", f"SIGKILL redis, {down_s}s down, empty restart", at)

    def restart_postgres(self, down_s: float = 3.0) -> None:
        at = time.monotonic()
        self.app.pg.crash_restart(down_s=down_s)
        self._record("postgres_restart", f"immediate shutdown, {down_s}s down, restart", at)

    def by_kind(self) -> Counter[str]:
        return Counter(fault.kind for fault in self.faults)


def in_transaction_client_ports(pg: PostgresServer) -> list[int]:
    """Client ports of sessions inside a transaction on Chronicle's database."""
    rows = pg.rows(
        "SELECT client_port FROM pg_stat_activity WHERE datname = %s "
        "AND xact_start IS NOT NULL AND pid <> pg_backend_pid() AND client_port IS NOT NULL",
        [DB_NAME],
        database=DB_NAME,
    )
    return [int(port) for (port,) in rows]


def backend_client_pids(pg: PostgresServer, blocked_by: int) -> list[tuple[int, int]]:
    """(backend pid, client port) of sessions waiting on a lock held by `blocked_by`."""
    rows = pg.rows(
        "SELECT pid, client_port FROM pg_stat_activity "
        "WHERE %s = ANY(pg_blocking_pids(pid)) AND client_port IS NOT NULL",
        [blocked_by],
        database=DB_NAME,
    )
    return [(int(pid), int(port)) for pid, port in rows]
