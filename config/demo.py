"""`make demo`: Chronicle on this machine with nothing installed but Python.

    python -m config.demo --host 127.0.0.1 --port 8000

Without DATABASE_URL it starts the embedded PostgreSQL in ./var/postgres (stack.postgres;
the settings' default DATABASE_URL is its Unix socket), then migrates, loads the demo with
`manage.py load_demo` and serves with `manage.py runserver`, Celery eager. Ctrl-C or SIGTERM
stops the server and then PostgreSQL; if this process is killed outright, both children get a
signal from the kernel and stop too. With DATABASE_URL set, that database is used and nothing
is started.

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
from pathlib import Path
from types import FrameType

import psycopg

from stack import postgres
from stack.processes import spawn, stop_process

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "var" / "postgres"
DATABASE_NAME = "chronicle"


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
    if is_loopback(host):
        env["DEBUG"] = "1"
        return env
    print(
        f"HOST={host} is not a loopback address: DEBUG is off (no traceback pages on the "
        "network). Set ALLOWED_HOSTS to the names clients use (default: any)."
    )
    return env | {
        "DEBUG": "0",
        # Plain HTTP, like runserver: no HTTPS redirect or Secure-only cookies.
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        "ALLOWED_HOSTS": os.environ.get("ALLOWED_HOSTS") or "*",
    }


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)


def serve(host: str, port: int, data_dir: Path = DATA_DIR) -> int:
    env = demo_env(host)
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{port}/"
    database = None
    server = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise Stopped

    # SIGINT too: a shell that starts us in the background ignores it, and we still want a
    # Ctrl-C (or a kill -INT) to stop the children in order.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        if not os.environ.get("DATABASE_URL"):
            started = time.monotonic()
            database = postgres.start(data_dir)
            database.create_database(DATABASE_NAME)
            if data_dir.resolve() != DATA_DIR:
                # The settings' default is DATA_DIR's socket; anywhere else is named.
                env["DATABASE_URL"] = database.url_for(DATABASE_NAME)
            print(
                f"Embedded PostgreSQL up in {time.monotonic() - started:.1f}s "
                f"(pid {database.pid}, data in {data_dir})"
            )
        else:
            try:
                if postgres.database_ensure(os.environ["DATABASE_URL"]):
                    print("Created the database DATABASE_URL names.")
            except psycopg.OperationalError as exc:
                print(f"DATABASE_URL: the database server does not answer or refuses: {exc}")
                return 1
        manage(env, "migrate", "--noinput", "-v", "0")
        print("Loading the demo run...")
        # Eager Celery logs every task at INFO, which would break the load's progress lines.
        manage(env | {"LOG_LEVEL": "WARNING"}, "load_demo", "--url", url)
        manage(env, "collectstatic", "--noinput", "-v", "0")
        print(f"Serving on {url} (Ctrl-C to stop)", flush=True)
        server = spawn(
            [sys.executable, "manage.py", "runserver", f"{url_host}:{port}", "--noreload"],
            log=None,
            account=None,
            death_signal=signal.SIGTERM,
            own_session=False,  # a Ctrl-C in the terminal stops it directly
            env=env,
        )
        return server.wait()
    except Stopped:
        return 0
    except subprocess.CalledProcessError as exc:
        return exc.returncode or 1
    finally:
        # A second Ctrl-C (or a SIGTERM sent to the whole process group) must not cut the
        # shutdown short and leave PostgreSQL running.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        if server is not None:
            stop_process(server, first=signal.SIGTERM, timeout_s=10)
        if database is not None:
            database.stop()
            print("Embedded PostgreSQL stopped.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--data-dir", type=Path, default=DATA_DIR, help="the embedded PostgreSQL's data"
    )
    args = parser.parse_args(argv)
    return serve(args.host, args.port, args.data_dir)


if __name__ == "__main__":
    sys.exit(main())
