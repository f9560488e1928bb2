"""The fault-injection harness: own servers, fault injectors, a retrying client, verification.

Every process is started here, tracked by its PID and stopped by that PID in `finally`
blocks; nothing touches the machine's shared PostgreSQL or Redis. PostgreSQL refuses to run
as root, so it runs as the `postgres` system user (subprocess `user=`, which keeps the PID of
the postmaster itself, unlike `runuser`, which forks).

This module does not import Django: it talks to its own PostgreSQL with psycopg and drives
Chronicle through `manage.py`, gunicorn and `celery` subprocesses, like an operator would.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent
PG_USER = "postgres"
# initdb refuses root: as root, run PostgreSQL as the postgres system user; else as ourselves.
PG_OS_USER = PG_USER if os.geteuid() == 0 else None
DB_NAME = "chronicle"
PROJECT_SLUG = "chaos"
METRICS = ("loss", "grad_norm", "learning_rate", "tokens_seen")
# Event times sit in the past: the API refuses times more than a day in the future.
BASE_EPOCH = 1_763_700_000
# Processing attempts after which a batch is parked as dead (settings default, set explicitly).
MAX_PROCESS_ATTEMPTS = 5
SWEEP_AFTER_S = 5
READY_TIMEOUT_S = 60


def log(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- Processes ---------------------------------------------------------------------------------


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


def free_port() -> int:
    """A port the kernel says is free on loopback now (a tiny race, acceptable in tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc (no psutil dependency)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Proc:
    """One process the harness started, known by its PID."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.alive():
            kill_pid(self.pid, signal.SIGKILL)
        self.popen.wait()

    def stop(self, timeout_s: float = 20) -> None:
        """Ask politely by PID, then SIGKILL; also SIGKILL children it left behind."""
        kids = children_of(self.pid) if self.alive() else []
        if self.alive():
            kill_pid(self.pid, self.stop_signal)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                kill_pid(self.pid, signal.SIGKILL)
                self.popen.wait()
        for kid in kids:
            if pid_alive(kid):
                kill_pid(kid, signal.SIGKILL)


def spawn(
    name: str,
    command: Sequence[str],
    *,
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
    user: str | None = None,
    stop_signal: int = signal.SIGTERM,
) -> Proc:
    with log_path.open("ab") as log_file:
        popen = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            user=user,
            group=user,
            extra_groups=[] if user else None,
        )
    return Proc(name=name, popen=popen, log_path=log_path, stop_signal=stop_signal)


def wait_until(
    predicate: Callable[[], Any], *, timeout_s: float, what: str, interval_s: float = 0.1
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(Exception):
            result = predicate()
            if result:
                return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


class Postgres:
    """A private PostgreSQL cluster in `root`, owned by the postgres user, on a spare port."""

    def __init__(self, root: Path) -> None:
        self.root = root / "pg"
        self.data = self.root / "data"
        self.sockets = self.root / "run"
        self.port = free_port()
        self.bindir = pg_bindir()
        self.proc: Proc | None = None
        self.starts = 0

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
        self.starts += 1
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


class Redis:
    """A private redis-server on a spare port, without persistence."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.proc: Proc | None = None
        self.generation = 0

    def start(self) -> None:
        self.generation += 1
        # A fresh, empty directory per start: a restart is a restart with the data wiped.
        data = self.root / f"redis-{self.generation}"
        data.mkdir()
        # fmt: off
        command = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(data),
            "--daemonize", "no", "--protected-mode", "yes",
        ]
        # fmt: on
        self.proc = spawn(
            "redis",
            command,
            log_path=self.root / "redis.log",
            cwd=data,
        )
        wait_until(self._ping, timeout_s=READY_TIMEOUT_S, what="redis-server to answer PING")

    def _ping(self) -> bool:
        if self.proc is None or not self.proc.alive():
            raise RuntimeError("redis-server exited")
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def restart_wiped(self, down_s: float) -> None:
        assert self.proc is not None
        self.proc.kill()
        time.sleep(down_s)
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


class Chronicle:
    """Chronicle's processes (migrate, gunicorn, Celery worker and beat) on the private servers."""

    def __init__(self, root: Path, pg: Postgres, redis: Redis) -> None:
        self.root = root
        self.pg = pg
        self.redis = redis
        self.web_port = free_port()
        self.web: Proc | None = None
        self.worker: Proc | None = None
        self.beat: Proc | None = None
        self.worker_starts = 0
        self.orphans: list[int] = []
        self._sweeper_app: Any = None

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            # The harness's servers only: never inherit the shared ones of the test session.
            if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DEBUG")
        }
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            DATABASE_URL=self.pg.url(),
            REDIS_URL=self.redis.url(),
            SECRET_KEY="chaos-" + secrets.token_urlsafe(32),
            ALLOWED_HOSTS="127.0.0.1,localhost,testserver",
            SECURE_SSL_REDIRECT="0",
            SESSION_COOKIE_SECURE="0",
            CSRF_COOKIE_SECURE="0",
            SECURE_HSTS_SECONDS="0",
            CELERY_TASK_ALWAYS_EAGER="0",
            INGEST_SWEEP_AFTER_S=str(SWEEP_AFTER_S),
            INGEST_MAX_PROCESS_ATTEMPTS=str(MAX_PROCESS_ATTEMPTS),
            LOG_LEVEL="INFO",
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env

    def manage(self, *args: str, **extra_env: str) -> str:
        result = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env(**extra_env),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def migrate(self) -> None:
        self.manage("migrate", "--noinput", "-v", "0")

    def create_token(self, project: str = PROJECT_SLUG) -> str:
        out = self.manage("create_ingest_token", project, "--create-project", "--name", "chaos")
        return out.strip().splitlines()[-1]

    # -- web
    def start_web(self, workers: int = 2) -> None:
        # fmt: off
        command = [
            str(BIN / "gunicorn"), "config.wsgi", "--bind", f"127.0.0.1:{self.web_port}",
            "--workers", str(workers), "--timeout", "60", "--graceful-timeout", "5",
            "--no-control-socket",
        ]
        # fmt: on
        self.web = spawn(
            "gunicorn",
            command,
            log_path=self.root / "gunicorn.log",
            env=self.env(),
        )
        wait_until(
            lambda: len(self.web_workers()) == workers and self._web_answers(),
            timeout_s=READY_TIMEOUT_S,
            what="gunicorn to serve",
        )

    def _web_answers(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.web_port, timeout=5)
        try:
            conn.request("POST", "/api/v1/ingest", body=b"{}")
            return conn.getresponse().status == 401
        finally:
            conn.close()

    def web_workers(self) -> list[int]:
        return children_of(self.web.pid) if self.web and self.web.alive() else []

    @property
    def base_url(self) -> tuple[str, int]:
        return ("127.0.0.1", self.web_port)

    # -- Celery
    def start_worker(self, concurrency: int = 2) -> None:
        self.worker_starts += 1
        log_path = self.root / f"worker-{self.worker_starts}.log"
        # fmt: off
        command = [
            PYTHON, "-m", "celery", "-A", "config", "worker", "--queues", "ingest,default",
            "--concurrency", str(concurrency), "--pool", "prefork", "--loglevel", "INFO",
            "--hostname", f"chaos{self.worker_starts}-{os.getpid()}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]
        # fmt: on
        self.worker = spawn(
            "celery-worker",
            command,
            log_path=log_path,
            env=self.env(),
        )
        proc = self.worker
        wait_until(
            lambda: _worker_ready(proc, concurrency),
            timeout_s=READY_TIMEOUT_S,
            what="the Celery worker to be ready",
            interval_s=0.2,
        )

    def pool_children(self) -> list[int]:
        return children_of(self.worker.pid) if self.worker and self.worker.alive() else []

    def start_beat(self) -> None:
        # fmt: off
        command = [
            PYTHON, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
            # Keep beat's state file in the temp dir, not in the source tree.
            "--schedule", str(self.root / "celerybeat-schedule"),
        ]
        # fmt: on
        self.beat = spawn(
            "celery-beat",
            command,
            log_path=self.root / "beat.log",
            env=self.env(),
        )

    def sweep_now(self) -> None:
        """Publish `ingest.batches_sweep`, the task beat sends every 30 s, so a short run
        need not wait for beat's schedule. The worker runs it like beat's own."""
        from celery import Celery

        if self._sweeper_app is None:
            self._sweeper_app = Celery("chaos-sweeper", broker=self.redis.url())
            self._sweeper_app.conf.broker_connection_retry_on_startup = True
        try:
            self._sweeper_app.send_task(
                "ingest.batches_sweep",
                queue="default",
                retry=True,
                retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5},
            )
        except Exception as exc:  # Redis may be down on purpose right now.
            log(f"sweep publish failed ({exc!r}); next tick")

    def stop(self) -> None:
        for proc in (self.beat, self.worker, self.web):
            if proc is not None:
                proc.stop()
        for pid in self.orphans:
            if pid_alive(pid):
                kill_pid(pid)


def _worker_ready(proc: Proc, concurrency: int) -> bool:
    if not proc.alive():
        raise RuntimeError(f"the Celery worker exited:\n{proc.log_text()[-3000:]}")
    return "ready." in proc.log_text() and len(children_of(proc.pid)) >= concurrency


@contextlib.contextmanager
def stack(*, concurrency: int = 2, web_workers: int = 2, beat: bool = False) -> Iterator[Chronicle]:
    """PostgreSQL, Redis, migrations, gunicorn and a Celery worker, all private; everything
    is stopped by PID on the way out, whatever happened."""
    root = Path(tempfile.mkdtemp(prefix="chronicle-chaos-"))
    # The postgres user must reach its own directory inside this root-owned one.
    root.chmod(0o755)
    pg = Postgres(root)
    redis = Redis(root)
    app = Chronicle(root, pg, redis)
    ok = False
    try:
        pg.init()
        pg.start()
        pg.create_database()
        redis.start()
        app.migrate()
        app.start_web(workers=web_workers)
        app.start_worker(concurrency=concurrency)
        if beat:
            app.start_beat()
        log(
            f"stack up in {root}: postgres :{pg.port} (pid {pg.proc.pid}), redis :{redis.port}, "
            f"web :{app.web_port} (pid {app.web.pid}), worker pid {app.worker.pid}"
        )
        yield app
        ok = True
    finally:
        app.stop()
        redis.stop()
        pg.stop()
        if ok and not os.environ.get("CHAOS_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"logs kept in {root}")


# --- Fault injectors -----------------------------------------------------------------------------


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


# --- The load ----------------------------------------------------------------------------------


def point_value(metric_index: int, step: int) -> float:
    """Deterministic values, multiples of 1/1024 below 1000: exact in float8 and in any sum,
    so the checksum compares exactly, whatever order PostgreSQL adds them in."""
    return ((step * 7919 + metric_index * 104_729 + 13) % 1_000_003) / 1024


@dataclass(frozen=True)
class Batch:
    batch_id: str
    body: bytes
    points: int
    value_sum: Decimal
    weighted_sum: Decimal  # sum of value * (step + 1): catches values landing on wrong steps
    incidents: int
    checkpoints: int
    logbook_entries: int


def make_batches(run: str, n_points: int, points_per_batch: int) -> list[Batch]:
    """Batches covering n_points points of len(METRICS) series, with events: a checkpoint
    every batch, an interruption (incident, with a client `id`) every 4th batch and a note
    (logbook entry, without `id`: keyed by the batch's row) every 3rd batch."""
    steps_per_batch = max(1, points_per_batch // len(METRICS))
    total_steps = -(-n_points // len(METRICS))
    batches = []
    for index, first in enumerate(range(0, total_steps, steps_per_batch)):
        steps = range(first, min(first + steps_per_batch, total_steps))
        metrics = []
        value_sum = Decimal(0)
        weighted = Decimal(0)
        for step in steps:
            for m, name in enumerate(METRICS):
                value = point_value(m, step)
                metrics.append({"name": name, "step": step, "value": value})
                value_sum += Decimal(value)
                weighted += Decimal(value) * (step + 1)
        last = steps[-1]
        events: list[dict[str, Any]] = [
            {"type": "checkpoint_saved", "time": BASE_EPOCH + last, "step": last, "attempt": 1},
        ]
        if index % 4 == 0:
            events.append(
                {
                    "type": "interruption",
                    "id": f"{run}-incident-{index}",
                    "time": BASE_EPOCH + last,
                    "attempt": 1,
                    "category": "faulty-gpu",
                    "step": last,
                    "message": f"chaos incident {index}",
                }
            )
        if index % 3 == 0:
            events.append(
                {"type": "note", "time": BASE_EPOCH + last, "title": f"chaos note {index}"}
            )
        body = {
            "batch_id": f"{run}-{index:06d}",
            "run": run,
            "attempt": 1,
            "metrics": metrics,
            "events": events,
        }
        batches.append(
            Batch(
                batch_id=body["batch_id"],
                body=json.dumps(body, separators=(",", ":")).encode(),
                points=len(metrics),
                value_sum=value_sum,
                weighted_sum=weighted,
                incidents=int(index % 4 == 0),
                checkpoints=1,
                logbook_entries=int(index % 3 == 0),
            )
        )
    return batches


@dataclass
class ClientStats:
    accepted: int = 0  # 202
    duplicates: int = 0  # 200: a retry of a batch whose first answer was lost
    failed: list[str] = field(default_factory=list)
    retries: Counter[str] = field(default_factory=Counter)
    last_accept_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class LoadClient:
    """Sends batches at a steady pace from a few threads; retries network errors, 429 and 5xx
    with jittered exponential backoff, honouring Retry-After, with the same batch_id and body
    every time, and never retries other 4xx (as docs/ingest.md asks of clients)."""

    def __init__(
        self,
        address: tuple[str, int],
        token: str,
        *,
        threads: int = 4,
        give_up_after_s: float = 240,
        seed: int = 6,
    ) -> None:
        self.address = address
        self.token = token
        self.threads = threads
        self.give_up_after_s = give_up_after_s
        self.rng = random.Random(seed)
        self.stats = ClientStats()

    def run(self, batches: Sequence[Batch], duration_s: float) -> ClientStats:
        work: queue.Queue[tuple[int, Batch]] = queue.Queue()
        for item in enumerate(batches):
            work.put(item)
        start = time.monotonic()
        gap = duration_s / max(1, len(batches))
        workers = [
            threading.Thread(target=self._loop, args=(work, start, gap), daemon=True)
            for _ in range(self.threads)
        ]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        return self.stats

    def _loop(self, work: queue.Queue[tuple[int, Batch]], start: float, gap: float) -> None:
        conn: http.client.HTTPConnection | None = None
        while True:
            try:
                index, batch = work.get_nowait()
            except queue.Empty:
                break
            delay = start + index * gap - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            conn = self._send(conn, batch)
        if conn is not None:
            conn.close()

    def _send(
        self, conn: http.client.HTTPConnection | None, batch: Batch
    ) -> http.client.HTTPConnection | None:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        deadline = time.monotonic() + self.give_up_after_s
        tries = 0
        while True:
            tries += 1
            retry_after: float | None = None
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(*self.address, timeout=30)
                conn.request("POST", "/api/v1/ingest", body=batch.body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                status = response.status
                retry_after_header = response.getheader("Retry-After")
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as exc:
                if conn is not None:
                    conn.close()
                conn = None
                reason = f"network:{type(exc).__name__}"
            else:
                if status in (200, 202):
                    with self.stats.lock:
                        if status == 202:
                            self.stats.accepted += 1
                        else:
                            self.stats.duplicates += 1
                        self.stats.last_accept_at = time.monotonic()
                    return conn
                if status != 429 and status < 500:
                    with self.stats.lock:
                        self.stats.failed.append(f"{batch.batch_id}: {status} {payload[:200]!r}")
                    return conn
                reason = f"http:{status}"
                if retry_after_header and retry_after_header.isdigit():
                    retry_after = float(retry_after_header)
            with self.stats.lock:
                self.stats.retries[reason] += 1
            if time.monotonic() > deadline:
                with self.stats.lock:
                    self.stats.failed.append(f"{batch.batch_id}: gave up after {tries} tries")
                return conn
            backoff = min(4.0, 0.1 * 2 ** min(tries, 6)) * self.rng.uniform(0.5, 1.5)
            time.sleep(min(10.0, retry_after) if retry_after is not None else backoff)


# --- Verification --------------------------------------------------------------------------------


@dataclass
class Expected:
    batches: int
    points: int
    value_sum: Decimal
    weighted_sum: Decimal
    incidents: int
    checkpoints: int
    logbook_entries: int

    @classmethod
    def of(cls, batches: Sequence[Batch]) -> Expected:
        return cls(
            batches=len(batches),
            points=sum(b.points for b in batches),
            value_sum=sum((b.value_sum for b in batches), Decimal(0)),
            weighted_sum=sum((b.weighted_sum for b in batches), Decimal(0)),
            incidents=sum(b.incidents for b in batches),
            checkpoints=sum(b.checkpoints for b in batches),
            logbook_entries=sum(b.logbook_entries for b in batches),
        )


@dataclass
class Stored:
    points: int
    distinct_points: int
    value_sum: Decimal
    weighted_sum: Decimal
    series: int
    attempts: int
    incidents: int
    incident_keys: int
    checkpoints: int
    logbook_entries: int
    batch_status: dict[str, int]
    max_process_attempts: int


def stored_counts(pg: Postgres, run: str) -> Stored:
    with pg.connect() as conn:
        run_id = conn.execute(
            "SELECT r.id FROM telemetry_run r JOIN telemetry_project p ON p.id = r.project_id "
            "WHERE p.slug = %s AND r.name = %s",
            [PROJECT_SLUG, run],
        ).fetchone()
        run_pk = run_id[0] if run_id else -1
        points, distinct, value_sum, weighted = conn.execute(
            "SELECT count(*), count(DISTINCT (p.series_id, p.step)), "
            "coalesce(sum(p.value::numeric), 0), coalesce(sum(p.value::numeric * (p.step + 1)), 0) "
            "FROM telemetry_metricpoint p JOIN telemetry_metricseries s ON s.id = p.series_id "
            "WHERE s.run_id = %s",
            [run_pk],
        ).fetchone()

        def scalar(sql: str) -> int:
            return int(conn.execute(sql, [run_pk]).fetchone()[0])

        statuses = dict(
            conn.execute(
                "SELECT status, count(*) FROM ingest_ingestbatch WHERE run_name = %s "
                "GROUP BY status",
                [run],
            ).fetchall()
        )
        max_attempts = conn.execute(
            "SELECT coalesce(max(process_attempts), 0) FROM ingest_ingestbatch WHERE run_name = %s",
            [run],
        ).fetchone()[0]
        return Stored(
            points=points,
            distinct_points=distinct,
            value_sum=Decimal(value_sum),
            weighted_sum=Decimal(weighted),
            series=scalar("SELECT count(*) FROM telemetry_metricseries WHERE run_id = %s"),
            attempts=scalar("SELECT count(*) FROM telemetry_attempt WHERE run_id = %s"),
            incidents=scalar("SELECT count(*) FROM logbook_interruption WHERE run_id = %s"),
            incident_keys=scalar(
                "SELECT count(DISTINCT source_key) FROM logbook_interruption WHERE run_id = %s"
            ),
            checkpoints=scalar("SELECT count(*) FROM logbook_checkpoint WHERE run_id = %s"),
            logbook_entries=scalar("SELECT count(*) FROM logbook_logbookentry WHERE run_id = %s"),
            batch_status=statuses,
            max_process_attempts=int(max_attempts),
        )


def backlog(pg: Postgres, run: str) -> tuple[int, int]:
    """(batches accepted, batches still pending) of the run."""
    with pg.connect() as conn:
        total, pending = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'pending') "
            "FROM ingest_ingestbatch WHERE run_name = %s",
            [run],
        ).fetchone()
    return int(total), int(pending)


def problems_of(expected: Expected, stored: Stored) -> list[str]:
    """Every way the stored state differs from what was sent (empty: exactly once)."""
    checks = [
        ("points", expected.points, stored.points),
        ("distinct points", expected.points, stored.distinct_points),
        ("value checksum", expected.value_sum, stored.value_sum),
        ("step-weighted checksum", expected.weighted_sum, stored.weighted_sum),
        ("series", len(METRICS), stored.series),
        ("attempts", 1, stored.attempts),
        ("incidents", expected.incidents, stored.incidents),
        ("incident keys", expected.incidents, stored.incident_keys),
        ("checkpoints", expected.checkpoints, stored.checkpoints),
        ("logbook entries", expected.logbook_entries, stored.logbook_entries),
        ("batches done", expected.batches, stored.batch_status.get("done", 0)),
        ("batches pending", 0, stored.batch_status.get("pending", 0)),
        ("batches dead", 0, stored.batch_status.get("dead", 0)),
    ]
    return [f"{name}: expected {want}, got {got}" for name, want, got in checks if want != got]


# --- The scenario -----------------------------------------------------------------------------


@dataclass
class Report:
    run: str
    expected: Expected
    stored: Stored
    client: ClientStats
    faults: list[Fault]
    send_s: float
    drain_after_last_fault_s: float | None
    drain_after_last_accept_s: float | None
    drain_limit_s: float
    problems: list[str]

    @property
    def lost(self) -> int:
        return max(0, self.expected.points - self.stored.distinct_points)

    @property
    def duplicated(self) -> int:
        # The (series, step) primary key makes a second copy impossible; a point stored that
        # was never sent (or on the wrong key) would show here as an excess.
        return (self.stored.points - self.stored.distinct_points) + max(
            0, self.stored.distinct_points - self.expected.points
        )

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "passed": self.passed,
            "points_sent": self.expected.points,
            "points_stored": self.stored.points,
            "points_lost": self.lost,
            "points_duplicated": self.duplicated,
            "checksum_sent": str(self.expected.value_sum),
            "checksum_stored": str(self.stored.value_sum),
            "batches_sent": self.expected.batches,
            "batch_status": self.stored.batch_status,
            "max_process_attempts": self.stored.max_process_attempts,
            "incidents": [self.expected.incidents, self.stored.incidents],
            "checkpoints": [self.expected.checkpoints, self.stored.checkpoints],
            "logbook_entries": [self.expected.logbook_entries, self.stored.logbook_entries],
            "client_accepted_202": self.client.accepted,
            "client_duplicate_200": self.client.duplicates,
            "client_retries": dict(self.client.retries),
            "client_failed": self.client.failed,
            "faults": dict(Counter(f.kind for f in self.faults)),
            "fault_log": [f"{f.kind}: {f.detail}" for f in self.faults],
            "send_s": round(self.send_s, 1),
            "drain_after_last_fault_s": _round(self.drain_after_last_fault_s),
            "drain_after_last_accept_s": _round(self.drain_after_last_accept_s),
            "drain_limit_s": self.drain_limit_s,
            "problems": self.problems,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def scenario_plan(quick: bool) -> tuple[float, list[tuple[float, str]]]:
    """(send duration, [(offset in the send window, fault)]): every kind at least once; the
    full run kills pool children and the worker main several times."""
    if quick:
        return 24.0, [
            (3.0, "pool_child"),
            (6.0, "web_worker"),
            (8.0, "worker_main"),
            (12.0, "redis"),
            (16.0, "postgres"),
            (20.0, "pool_child"),
        ]
    return 120.0, [
        (8.0, "pool_child"),
        (15.0, "web_worker"),
        (22.0, "worker_main"),
        (32.0, "pool_child"),
        (42.0, "redis"),
        (55.0, "pool_child"),
        (65.0, "worker_main"),
        (75.0, "postgres"),
        (88.0, "pool_child"),
        (98.0, "worker_main"),
        (108.0, "pool_child"),
    ]


def run_scenario(
    *,
    points: int,
    quick: bool,
    points_per_batch: int = 400,
    drain_limit_s: float = 120.0,
    sweep_every_s: float | None = None,
    app: Chronicle | None = None,
) -> Report:
    """Send `points` points while injecting the planned faults; wait for the backlog to drain
    and verify. The full run uses real celery beat (its 30 s schedule) as the sweeper; the
    quick run publishes the same sweep task every `sweep_every_s` so it fits in ~90 s.
    `app`: an already running stack (its worker must have concurrency 2), else a new one."""
    if sweep_every_s is None:
        sweep_every_s = 5.0 if quick else 0.0
    duration_s, plan = scenario_plan(quick)
    run = f"chaos-{time.strftime('%Y%m%d-%H%M%S')}"
    batches = make_batches(run, points, points_per_batch)
    expected = Expected.of(batches)
    with contextlib.ExitStack() as exit_stack:
        if app is None:
            app = exit_stack.enter_context(
                stack(concurrency=2, web_workers=2, beat=not sweep_every_s)
            )
        token = app.create_token()
        injector = Injector(app, concurrency=2)
        client = LoadClient(app.base_url, token, threads=4)
        stop = threading.Event()
        fault_errors: list[str] = []

        def faults() -> None:
            actions = {
                "pool_child": injector.kill_pool_child,
                "worker_main": injector.kill_worker_main,
                "web_worker": injector.kill_web_worker,
                "redis": injector.restart_redis_wiped,
                "postgres": injector.restart_postgres,
            }
            for offset, kind in plan:
                delay = start + offset - time.monotonic()
                if delay > 0 and stop.wait(delay):
                    return
                try:
                    actions[kind]()
                except Exception as exc:
                    fault_errors.append(f"{kind}: {exc!r}")
                    log(f"fault {kind} failed: {exc!r}")

        def sweeper() -> None:
            while not stop.wait(sweep_every_s):
                app.sweep_now()

        log(f"sending {expected.points} points in {len(batches)} batches over {duration_s:.0f}s")
        start = time.monotonic()
        fault_thread = threading.Thread(target=faults, daemon=True)
        fault_thread.start()
        sweep_thread = threading.Thread(target=sweeper, daemon=True) if sweep_every_s else None
        if sweep_thread:
            sweep_thread.start()
        try:
            stats = client.run(batches, duration_s)
            send_s = time.monotonic() - start
            fault_thread.join()
            log(f"client done in {send_s:.1f}s: {stats.accepted} accepted, retries {stats.retries}")
            last_fault = max((f.at for f in injector.faults), default=start)
            drained_at = _wait_drained(app.pg, run, len(batches), last_fault + drain_limit_s)
        finally:
            stop.set()
            fault_thread.join(timeout=60)
            if sweep_thread:
                sweep_thread.join(timeout=10)
        stored = stored_counts(app.pg, run)
    problems = problems_of(expected, stored)
    problems += [f"client: {failure}" for failure in stats.failed]
    problems += [f"fault injection failed: {error}" for error in fault_errors]
    missing = {"pool_child_sigkill", "worker_main_sigkill", "web_worker_sigkill"}
    missing |= {"redis_restart_wiped", "postgres_restart"}
    missing -= set(injector.by_kind())
    problems += [f"fault never injected: {kind}" for kind in sorted(missing)]
    if drained_at is None:
        problems.append(f"backlog not drained within {drain_limit_s:.0f}s of the last fault")
    return Report(
        run=run,
        expected=expected,
        stored=stored,
        client=stats,
        faults=injector.faults,
        send_s=send_s,
        drain_after_last_fault_s=None if drained_at is None else drained_at - last_fault,
        drain_after_last_accept_s=None
        if drained_at is None
        else drained_at - (stats.last_accept_at or start),
        drain_limit_s=drain_limit_s,
        problems=problems,
    )


def _wait_drained(pg: Postgres, run: str, batches: int, deadline: float) -> float | None:
    """When every sent batch is accepted and none is pending; None after the deadline."""
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.Error):
            total, pending = backlog(pg, run)
            if total >= batches and pending == 0:
                return time.monotonic()
        time.sleep(0.25)
    return None


def summary_table(report: Report) -> str:
    d = report.as_dict()
    faults = d["faults"]
    status = d["batch_status"]
    retries = ", ".join(f"{k} {v}" for k, v in sorted(d["client_retries"].items())) or "none"
    rows = [
        ("points sent", f"{d['points_sent']:,}"),
        ("points stored", f"{d['points_stored']:,}"),
        ("points lost", f"{d['points_lost']:,}"),
        ("points duplicated", f"{d['points_duplicated']:,}"),
        ("value checksum", "match" if d["checksum_sent"] == d["checksum_stored"] else
         f"MISMATCH sent {d['checksum_sent']} stored {d['checksum_stored']}"),
        ("batches sent / done", f"{d['batches_sent']} / {status.get('done', 0)} "
         f"(pending {status.get('pending', 0)}, dead {status.get('dead', 0)}, "
         f"max processing attempts {d['max_process_attempts']})"),
        ("incidents sent / stored", "{} / {}".format(*d["incidents"])),
        ("checkpoints sent / stored", "{} / {}".format(*d["checkpoints"])),
        ("logbook entries sent / stored", "{} / {}".format(*d["logbook_entries"])),
        ("client answers", f"{d['client_accepted_202']} x 202, "
         f"{d['client_duplicate_200']} x 200 duplicate; retries: {retries}"),
        *[(f"faults: {kind}", str(count)) for kind, count in sorted(faults.items())],
        ("send window", f"{d['send_s']} s"),
        ("backlog drain after last fault", f"{d['drain_after_last_fault_s']} s "
         f"(limit {d['drain_limit_s']:.0f} s)"),
        ("backlog drain after last accept", f"{d['drain_after_last_accept_s']} s"),
        ("verdict", "PASS" if report.passed else "FAIL"),
    ]  # fmt: skip
    width = max(len(label) for label, _ in rows)
    lines = [f"Chronicle chaos run {report.run}", "-" * (width + 40)]
    lines += [f"{label.ljust(width)}  {value}" for label, value in rows]
    lines += [f"  problem: {problem}" for problem in report.problems]
    return "\n".join(lines)


# --- The poison batch ----------------------------------------------------------------------------


def in_transaction_client_ports(pg: Postgres) -> list[int]:
    """Client ports of sessions inside a transaction on Chronicle's database."""
    with pg.connect() as conn:
        rows = conn.execute(
            "SELECT client_port FROM pg_stat_activity WHERE datname = %s "
            "AND xact_start IS NOT NULL AND pid <> pg_backend_pid() AND client_port IS NOT NULL",
            [DB_NAME],
        ).fetchall()
    return [int(port) for (port,) in rows]


def backend_client_pids(pg: Postgres, blocked_by: int) -> list[tuple[int, int]]:
    """(backend pid, client port) of sessions waiting on a lock held by `blocked_by`."""
    with pg.connect() as conn:
        rows = conn.execute(
            "SELECT pid, client_port FROM pg_stat_activity "
            "WHERE %s = ANY(pg_blocking_pids(pid)) AND client_port IS NOT NULL",
            [blocked_by],
        ).fetchall()
    return [(int(pid), int(port)) for pid, port in rows]


def process_owning_port(local_port: int, candidates: Sequence[int]) -> int | None:
    """Which of `candidates` holds the TCP socket whose local port is `local_port`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if int(parts[1].rsplit(":", 1)[1], 16) == local_port:
                    inodes.add(parts[9])
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        return pid
    return None


@dataclass
class PoisonReport:
    batch_id: str
    status: str
    process_attempts: int
    last_error: str
    kills: list[int]
    orphans_terminated: int
    attempts_after_quiet: int
    dead_logged: bool
    admin_lists_it: bool
    neighbours_expected: Expected
    neighbours_stored: Stored
    elapsed_s: float


def poison_scenario(
    app: Chronicle, *, timeout_s: float = 90, quiet_s: float = 8, sweep_every_s: float = 5
) -> PoisonReport:
    """A batch that crashes its worker every time it is processed.

    The harness holds a row lock on the poison run, so processing that batch blocks at its
    first write to the run; the harness finds the waiting session (pg_blocking_pids), maps its
    client port to the pool child that owns the socket and SIGKILLs that child: every delivery
    of the batch dies mid-task, as a batch that triggers an OOM or a segfault would. Batches of
    other runs are processed meanwhile. The batch must end dead after a bounded number of
    attempts, and then nothing may process it again."""
    poison_run = f"poison-{time.strftime('%H%M%S')}"
    neighbour_run = f"neighbours-{time.strftime('%H%M%S')}"
    token = app.create_token()
    client = LoadClient(app.base_url, token, threads=1)
    setup = make_batches(poison_run, len(METRICS), len(METRICS))  # creates the run row
    client.run(setup, 0)
    wait_until(lambda: backlog(app.pg, poison_run) == (1, 0), timeout_s=30, what="the setup batch")
    # No attempt number: the batch goes to the workers (a metric batch naming its attempt
    # would be written in the request, and this scenario is about worker crashes).
    poison_body = {
        "batch_id": f"{poison_run}-poison",
        "run": poison_run,
        "metrics": [{"name": "loss", "step": step, "value": 1.0} for step in range(1, 200)],
    }
    poison = Batch(
        batch_id=poison_body["batch_id"],
        body=json.dumps(poison_body).encode(),
        points=199,
        value_sum=Decimal(199),
        weighted_sum=Decimal(0),
        incidents=0,
        checkpoints=0,
        logbook_entries=0,
    )
    neighbours = make_batches(neighbour_run, 2_000, 200)
    kills: list[int] = []
    handled: dict[int, float] = {}  # backend pid -> when its client was killed
    orphans_terminated = 0
    start = time.monotonic()
    with app.pg.connect() as lock_conn:
        lock_conn.autocommit = False
        lock_pid = lock_conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        lock_conn.execute(
            "SELECT id FROM telemetry_run WHERE name = %s FOR UPDATE", [poison_run]
        ).fetchone()
        sender = threading.Thread(target=lambda: client.run([poison, *neighbours], 5), daemon=True)
        sender.start()
        deadline = start + timeout_s
        next_sweep = start + sweep_every_s
        status = "pending"
        while time.monotonic() < deadline:
            if time.monotonic() > next_sweep:
                app.sweep_now()
                next_sweep += sweep_every_s
            status = _batch_row(app.pg, poison.batch_id)[0]
            if status == "dead":
                break
            app_kids = app.pool_children()
            for backend, port in backend_client_pids(app.pg, lock_pid):
                if backend in handled:
                    # PostgreSQL notices a vanished client within client_connection_check_
                    # interval; if it has not, end the session as the kernel's RST would.
                    if time.monotonic() - handled[backend] > 5:
                        with app.pg.connect() as admin:
                            admin.execute("SELECT pg_terminate_backend(%s)", [backend])
                        orphans_terminated += 1
                        handled[backend] = float("inf")
                    continue
                owner = process_owning_port(port, app_kids)
                if owner is not None:
                    kill_pid(owner)
                    kills.append(owner)
                    handled[backend] = time.monotonic()
                    log(f"poison: SIGKILL pool child {owner} (session {backend})")
            time.sleep(0.05)
        sender.join(timeout=30)
        # Quiet period: sweeps keep running; a dead batch must not be attempted again.
        attempts_at_dead = _batch_row(app.pg, poison.batch_id)[1]
        quiet_end = time.monotonic() + quiet_s
        while time.monotonic() < quiet_end:
            if time.monotonic() > next_sweep:
                app.sweep_now()
                next_sweep += sweep_every_s
            for backend, port in backend_client_pids(app.pg, lock_pid):
                if backend not in handled:
                    owner = process_owning_port(port, app.pool_children())
                    if owner is not None:
                        kill_pid(owner)
                        kills.append(owner)
                        handled[backend] = time.monotonic()
            time.sleep(0.5)
        lock_conn.rollback()
    elapsed = time.monotonic() - start
    status, attempts, last_error = _batch_row(app.pg, poison.batch_id)
    wait_until(
        lambda: backlog(app.pg, neighbour_run)[1] == 0, timeout_s=30, what="neighbours drained"
    )
    worker_logs = "".join(p.read_text(errors="replace") for p in app.root.glob("worker-*.log"))
    return PoisonReport(
        batch_id=poison.batch_id,
        status=status,
        process_attempts=attempts,
        last_error=last_error,
        kills=kills,
        orphans_terminated=orphans_terminated,
        attempts_after_quiet=attempts - attempts_at_dead,
        dead_logged="parked as dead" in worker_logs,
        admin_lists_it=admin_lists_dead(app, poison.batch_id),
        neighbours_expected=Expected.of(neighbours),
        neighbours_stored=stored_counts(app.pg, neighbour_run),
        elapsed_s=elapsed,
    )


def _batch_row(pg: Postgres, batch_id: str) -> tuple[str, int, str]:
    with pg.connect() as conn:
        row = conn.execute(
            "SELECT status, process_attempts, last_error FROM ingest_ingestbatch "
            "WHERE batch_id = %s",
            [batch_id],
        ).fetchone()
    return ("missing", 0, "") if row is None else (row[0], int(row[1]), row[2])


_ADMIN_CHECK = """
from django.contrib.auth import get_user_model
from django.test import Client
user, _ = get_user_model().objects.get_or_create(
    username="chaos-admin", defaults={"is_staff": True, "is_superuser": True})
client = Client()
client.force_login(user)
page = client.get("/admin/ingest/ingestbatch/", {"status__exact": "dead"})
print(page.status_code, BATCH_ID in page.content.decode())
"""


def admin_lists_dead(app: Chronicle, batch_id: str) -> bool:
    """Whether the admin's Ingest batches list, filtered to status=dead, shows the batch
    (rendered through Django's test client against the harness database)."""
    code = _ADMIN_CHECK.replace("BATCH_ID", repr(batch_id))
    # DEBUG=1 only for this render: production static storage wants a collectstatic manifest.
    out = app.manage("shell", "-c", code, DEBUG="1")
    return out.strip().splitlines()[-1] == "200 True"
