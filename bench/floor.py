"""The floor: the least a server can do to store MLflow's log-batch durably, as the ceiling
Chronicle's ingest is measured against. A WSGI app that parses the body with orjson and
writes its points with one binary COPY and one commit per request (so a 200 means durable,
as Chronicle's 2xx does), with none of Chronicle's work: no auth, no idempotency, no
attempts, no series, no rollups, no validation beyond what COPY refuses.

It answers just enough of MLflow's REST API for `mlflow_side.create_run`, so the same load
(load.mlflow_ingest) drives it. Served by gunicorn with MLflow's default of 4 workers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg

from bench.mlflow_side import call
from stack.postgres import PostgresServer
from stack.processes import BIN, Proc, free_port, start_proc, wait_until

DB_NAME = "floor"
API = "/api/2.0/mlflow/"
_connection: psycopg.Connection[Any] | None = None


def _copy_points(doc: dict[str, Any]) -> None:
    global _connection
    if _connection is None:
        _connection = psycopg.connect(os.environ["FLOOR_DATABASE_URL"])
    with _connection.cursor() as cursor:
        sql = "COPY floor_point (run_id, key, step, ts_ms, value) FROM STDIN (FORMAT BINARY)"
        with cursor.copy(sql) as copy:
            copy.set_types(["text", "text", "int8", "int8", "float8"])
            run_id = doc["run_id"]
            for metric in doc["metrics"]:
                copy.write_row(
                    (run_id, metric["key"], metric["step"], metric["timestamp"],
                     float(metric["value"]))
                )  # fmt: skip
    _connection.commit()


def application(
    environ: dict[str, Any], start_response: Callable[[str, list[tuple[str, str]]], Any]
) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    status, answer = "200 OK", b"{}"
    if path == API + "runs/log-batch":
        _copy_points(orjson.loads(body))
    elif path == API + "runs/create":
        answer = orjson.dumps({"run": {"info": {"run_id": uuid.uuid4().hex}}})
    elif path == API + "experiments/create":
        answer = b'{"experiment_id": "1"}'
    else:  # experiments/get-by-name and anything else: not found
        status, answer = "404 Not Found", b'{"error_code": "RESOURCE_DOES_NOT_EXIST"}'
    start_response(status, [("Content-Type", "application/json")])
    return [answer]


@dataclass
class FloorServer:
    proc: Proc
    port: int

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def stop(self) -> None:
        self.proc.stop()

    def stored(self, pg: PostgresServer) -> int:
        return int(pg.rows("SELECT count(*) FROM floor_point", database=DB_NAME)[0][0])


def start(pg: PostgresServer, root: Path, *, workers: int = 4) -> FloorServer:
    pg.create_database(DB_NAME)
    with pg.connect(DB_NAME) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS floor_point (run_id text NOT NULL, key text NOT NULL, "
            "step bigint NOT NULL, ts_ms bigint NOT NULL, value double precision)"
        )
    port = free_port()
    command = [
        str(BIN / "gunicorn"), "bench.floor:application", "--bind", f"127.0.0.1:{port}",
        "--workers", str(workers), "--no-control-socket",
    ]  # fmt: skip
    env = {**os.environ, "FLOOR_DATABASE_URL": pg.url_for(DB_NAME)}
    proc = start_proc("floor", command, log_path=root / "floor.log", env=env)
    server = FloorServer(proc=proc, port=port)

    def ready() -> bool:
        if not proc.alive():
            raise RuntimeError(f"the floor server exited:\n{proc.log_text()[-3000:]}")
        try:
            return call(server.address, "POST", API + "experiments/create", {})[0] == 200
        except OSError:
            return False

    wait_until(ready, timeout_s=60, what="the floor server")
    return server
