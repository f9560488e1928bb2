"""MLflow's tracking server, the comparison: installed from PyPI into its own virtualenv
(var/bench-mlflow-venv, full `mlflow` plus psycopg2 for its PostgreSQL store), started on the
stack's PostgreSQL in a database of its own, on a spare loopback port, stopped by PID."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stack.postgres import PostgresServer
from stack.processes import ROOT, Proc, free_port, start_proc, wait_until

VENV = ROOT / "var" / "bench-mlflow-venv"
PACKAGES = ("mlflow", "psycopg2-binary")
DB_NAME = "mlflow"


def log(message: str) -> None:
    print(f"[bench {__import__('time').strftime('%H:%M:%S')}] {message}", file=sys.stderr)


def ensure_installed() -> tuple[Path | None, str]:
    """(path of the `mlflow` executable, version or the reason it is missing). Installs once;
    later runs reuse the virtualenv."""
    mlflow = VENV / "bin" / "mlflow"
    if not mlflow.exists():
        log(f"installing {' '.join(PACKAGES)} into {VENV} (a few minutes the first time)")
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run(
                [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", *PACKAGES],
                check=True,
                timeout=1800,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            return None, f"MLflow could not be installed: {exc}"
    try:
        out = subprocess.run(
            [str(mlflow), "--version"], capture_output=True, text=True, check=True, timeout=120
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"MLflow is installed but does not run: {exc}"
    return mlflow, out.stdout.strip()


@dataclass
class MlflowServer:
    proc: Proc
    port: int
    version: str

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def stop(self) -> None:
        self.proc.stop()


def start(
    mlflow: Path, version: str, pg: PostgresServer, root: Path, *, workers: int
) -> MlflowServer:
    with pg.connect("postgres") as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    port = free_port()
    artifacts = root / "mlflow-artifacts"
    artifacts.mkdir(exist_ok=True)
    # fmt: off
    command = [
        str(mlflow), "server",
        "--backend-store-uri", f"postgresql+psycopg2://postgres@127.0.0.1:{pg.port}/{DB_NAME}",
        "--default-artifact-root", artifacts.as_uri(),
        "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
    ]
    # fmt: on
    proc = start_proc("mlflow", command, log_path=root / "mlflow.log", env=_env())
    server = MlflowServer(proc=proc, port=port, version=version)

    def ready() -> bool:
        if not proc.alive():
            raise RuntimeError(f"mlflow server exited:\n{proc.log_text()[-3000:]}")
        status, _ = call(server.address, "GET", "/api/2.0/mlflow/experiments/search?max_results=1")
        return status == 200

    # The first start creates MLflow's schema with alembic: slow.
    wait_until(ready, timeout_s=240, what="the MLflow server", interval_s=0.5)
    return server


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE"))}
    env["PATH"] = f"{VENV / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def call(
    address: tuple[str, int],
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One request to a tracking server at `address`: MLflow's, or Chronicle's
    MLflow-compatible API when `path` starts with /mlflow and `headers` carry the token."""
    conn = http.client.HTTPConnection(*address, timeout=120)
    try:
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=json.dumps(body) if body else None, headers=all_headers)
        response = conn.getresponse()
        payload = response.read()
        return response.status, json.loads(payload) if payload else None
    finally:
        conn.close()


def create_run(
    address: tuple[str, int],
    experiment: str,
    *,
    prefix: str = "",
    headers: dict[str, str] | None = None,
) -> str:
    """A new run in `experiment` (created if missing), through the MLflow REST API at
    `prefix` ("" on MLflow's server, "/mlflow" on Chronicle's)."""
    api = f"{prefix}/api/2.0/mlflow"
    status, found = call(
        address, "GET", f"{api}/experiments/get-by-name?experiment_name={experiment}",
        headers=headers,
    )  # fmt: skip
    if status == 200:
        experiment_id = found["experiment"]["experiment_id"]
    else:
        status, made = call(
            address, "POST", f"{api}/experiments/create", {"name": experiment}, headers=headers
        )
        if status != 200:
            raise RuntimeError(f"MLflow experiments/create: {status} {made}")
        experiment_id = made["experiment_id"]
    status, run = call(
        address, "POST", f"{api}/runs/create", {"experiment_id": experiment_id}, headers=headers
    )
    if status != 200:
        raise RuntimeError(f"MLflow runs/create: {status} {run}")
    return run["run"]["info"]["run_id"]
