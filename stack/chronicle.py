"""Chronicle's own processes (migrate, gunicorn, Celery worker and beat) on a private
PostgreSQL and Redis (stack.postgres, stack.redis), and `chronicle_stack`, which starts all of
them and stops them by PID. Used by the fault-injection run (chaos) and the benchmark (bench).

This module does not import Django: it drives Chronicle through `manage.py`, gunicorn and
`celery` subprocesses, like an operator would."""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from config.queues import WORKER_QUEUES
from stack import postgres, redis
from stack.postgres import PostgresServer
from stack.processes import (
    BIN,
    PYTHON,
    READY_TIMEOUT_S,
    ROOT,
    Proc,
    children_of,
    free_port,
    log,
    start_proc,
    wait_until,
)
from stack.redis import RedisServer

DB_NAME = "chronicle"
# Room for gunicorn, the Celery pool and the load's connections; and a backend whose client
# was SIGKILLed notices within a second even while it waits on a lock, and releases its row
# locks (production should set it too).
PG_SETTINGS = {"max_connections": "200", "client_connection_check_interval": "1000"}

# Processing attempts after which a batch is parked as dead (settings default, set explicitly).
MAX_PROCESS_ATTEMPTS = 5
SWEEP_AFTER_S = 5

# The bench and chaos loads measure and stress the server, not the per-token and per-project
# rate limits (whose defaults are below one client's full speed): every one of them is off,
# for every ingest path alike (native's token and project buckets; the per-token push rate
# the MLflow and Prometheus endpoints keep), so the bench's native and /mlflow figures are
# measured the same way. The DCGM fleet phase turns the push rate back to its production
# default (`Chronicle.production_push_rate`): a fleet must pass it.
RATE_LIMITS_OFF = {
    "INGEST_TOKEN_POINTS_PER_S": "0",
    "INGEST_TOKEN_REQUESTS_PER_S": "0",
    "INGEST_PROJECT_POINTS_PER_S": "0",
    "INGEST_PROJECT_REQUESTS_PER_S": "0",
    "INGEST_RATE_LIMIT": "0",
    "INGEST_PROJECT_MAX_IN_FLIGHT": "0",
    "INGEST_PROJECT_PUSH_RATE": "0",
}


class Chronicle:
    """Chronicle's processes (migrate, gunicorn, Celery worker and beat) on the private servers."""

    def __init__(self, root: Path, pg: PostgresServer, redis: RedisServer) -> None:
        self.root = root
        self.pg = pg
        self.redis = redis
        self.web_port = free_port()
        self.web: Proc | None = None
        self.worker: Proc | None = None
        self.beat: Proc | None = None
        # One key for every process of the stack: a session signed by one gunicorn pool
        # must be readable by the others.
        self.secret_key = "chaos-" + secrets.token_urlsafe(32)
        self.pools: list[Proc] = []  # every gunicorn started, `web` included
        self.replica: PostgresServer | None = None
        self.worker_starts = 0
        self._sweeper_app: Any = None
        self._web_workers = 2
        # Settings every process started from now on gets on top of env()'s: a value of None
        # leaves the setting to its default (production_push_rate).
        self.overrides: dict[str, str | None] = {}

    def env(self, **extra: str | None) -> dict[str, str]:
        """The environment of the stack's processes; an `extra` (or `overrides`) value of
        None removes the variable, so the setting takes its default."""
        env = {
            key: value
            for key, value in os.environ.items()
            # The private servers only: never inherit the shared ones of the test session.
            if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DEBUG")
        }
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            DATABASE_URL=self.pg.url_for(DB_NAME),
            REDIS_URL=self.redis.url,
            SECRET_KEY=self.secret_key,
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
            # Its own static files: the checkout's var/ may be collected into at the same time.
            STATIC_ROOT=str(self.root / "staticfiles"),
            **RATE_LIMITS_OFF,
        )
        for key, value in {**self.overrides, **extra}.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def manage(self, *args: str, timeout_s: float | None = 300, **extra_env: str) -> str:
        """`manage.py <args>` against the private servers; its stdout, or RuntimeError with the
        end of its stderr."""
        result = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env(**extra_env),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def migrate(self) -> None:
        self.manage("migrate", "--noinput", "-v", "0")

    def create_token(self, project: str = "chaos") -> str:
        out = self.manage("create_ingest_token", project, "--create-project", "--name", "chaos")
        return out.strip().splitlines()[-1]

    # -- web
    def start_web(self, workers: int = 2) -> None:
        self._web_workers = workers
        self.web = self.start_pool("gunicorn", self.web_port, workers=workers)

    def restart_web(self) -> None:
        """The stack's own gunicorn pool stopped and started again on its port (with the
        current `overrides`)."""
        if self.web is not None:
            self.web.stop()
            self.pools.remove(self.web)
        self.start_web(workers=self._web_workers)

    @contextlib.contextmanager
    def production_push_rate(self) -> Iterator[None]:
        """The web pool with the per-token push rate (INGEST_RATE_LIMIT) at its production
        default for the block, and off again after it: the DCGM fleet phase measures a fleet
        pushing through it, as one must in production."""
        self.overrides["INGEST_RATE_LIMIT"] = None
        self.overrides["INGEST_PROJECT_PUSH_RATE"] = None
        self.restart_web()
        try:
            yield
        finally:
            del self.overrides["INGEST_RATE_LIMIT"]
            del self.overrides["INGEST_PROJECT_PUSH_RATE"]
            self.restart_web()

    def start_pool(
        self, name: str, port: int, *, workers: int, nice: int = 0, **extra_env: str
    ) -> Proc:
        """A gunicorn pool of `workers` on `port`, serving every URL (which requests reach
        it is the proxy's choice, as in production: docs/operations.md, "Scaling out"). `nice`
        lowers
        its CPU priority; `extra_env` adds settings (DATABASE_REPLICA_URL, say)."""
        # fmt: off
        command = [
            str(BIN / "gunicorn"), "config.wsgi", "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers), "--timeout", "60", "--graceful-timeout", "5",
            "--no-control-socket",
        ]
        # fmt: on
        if nice:
            command = ["nice", "-n", str(nice), *command]
        proc = start_proc(
            name, command, log_path=self.root / f"{name}.log", env=self.env(**extra_env)
        )
        self.pools.append(proc)
        wait_until(
            lambda: len(children_of(proc.pid)) == workers and self._web_answers(port),
            timeout_s=READY_TIMEOUT_S,
            what=f"{name} to serve",
        )
        return proc

    def start_replica(self) -> PostgresServer:
        """A streaming read replica of the stack's PostgreSQL (stopped with the stack)."""
        if self.replica is None:
            self.replica = postgres.start_replica(
                self.pg, self.root / "pg-replica", settings=PG_SETTINGS
            )
        return self.replica

    def _web_answers(self, port: int) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
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
            PYTHON, "-m", "celery", "-A", "config", "worker", "--queues", WORKER_QUEUES,
            "--concurrency", str(concurrency), "--pool", "prefork", "--loglevel", "INFO",
            "--hostname", f"chaos{self.worker_starts}-{os.getpid()}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]
        # fmt: on
        self.worker = start_proc(
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

    def log_tails(self, lines: int = 60) -> str:
        """The last `lines` lines of every process's log, oldest worker first: what a failed
        chaos test prints, since the stack's directory is removed when the stack stops."""
        parts = []
        for path in sorted(self.root.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(parts)

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
        self.beat = start_proc(
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
            # Not the process's current app: a test process (tests/chaos) that publishes
            # after this would otherwise send every later task to this stack's Redis.
            self._sweeper_app = Celery("chaos-sweeper", broker=self.redis.url, set_as_current=False)
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
        for proc in (self.beat, self.worker, *self.pools):
            if proc is not None:
                proc.stop()
        if self.replica is not None:
            self.replica.stop()


def _worker_ready(proc: Proc, concurrency: int) -> bool:
    if not proc.alive():
        raise RuntimeError(f"the Celery worker exited:\n{proc.log_text()[-3000:]}")
    return "ready." in proc.log_text() and len(children_of(proc.pid)) >= concurrency


@contextlib.contextmanager
def chronicle_stack(
    *,
    concurrency: int = 2,
    web_workers: int = 2,
    beat: bool = False,
    pages: bool = False,
    pg_dir: Path | None = None,
) -> Iterator[Chronicle]:
    """PostgreSQL, Redis, migrations, gunicorn and a Celery worker, all private; everything
    is stopped by PID on the way out (Chronicle's processes first), whatever happened.
    `pages`: collect the static files first, as `make web` does, for a stack whose pages are
    loaded in a browser (WhiteNoise indexes them when gunicorn starts: collected later, the
    page's scripts answer 404 and no chart is drawn). `pg_dir`: PostgreSQL's data directory,
    kept after the stack stops (and reused when it holds one), instead of one in the
    temporary directory. CHAOS_KEEP=1 keeps the temporary directory with every log."""
    root = Path(tempfile.mkdtemp(prefix="chronicle-chaos-"))
    # The postgres user must reach its own directory inside this root-owned one.
    root.chmod(0o755)
    ok = False
    try:
        with (
            postgres.start(pg_dir or root / "pg", port=0, settings=PG_SETTINGS) as pg,
            redis.start(root / "redis") as rd,
        ):
            pg.create_database(DB_NAME)
            app = Chronicle(root, pg, rd)
            try:
                app.migrate()
                if pages:
                    app.manage("collectstatic", "--noinput", "-v", "0")
                app.start_web(workers=web_workers)
                app.start_worker(concurrency=concurrency)
                if beat:
                    app.start_beat()
                log(
                    f"stack up in {root}: postgres :{pg.port} (pid {pg.pid}), "
                    f"redis :{rd.port}, web :{app.web_port} (pid {app.web and app.web.pid}), "
                    f"worker pid {app.worker and app.worker.pid}"
                )
                yield app
                ok = True
            finally:
                app.stop()
    finally:
        if ok and not os.environ.get("CHAOS_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"logs kept in {root}")
