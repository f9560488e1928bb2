"""The ceiling: PostgreSQL binary COPY of the same rows into a table shaped like
telemetry_metricpoint (same columns, same (series, step) primary key), one transaction, from
psycopg on the same machine. Nothing end to end can beat it on this store."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.load import METRIC_NAMES, Workload
from stack.chronicle import DB_NAME
from stack.postgres import PostgresServer

TABLE = "bench_copy_ceiling"


@dataclass
class CopyFigure:
    rows: int
    seconds: float
    rows_per_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(pg: PostgresServer, load: Workload, *, db: str = DB_NAME) -> CopyFigure:
    from datetime import UTC, datetime

    times = [datetime.fromtimestamp(t, tz=UTC) for t in load.times.tolist()]
    steps = load.steps.tolist()
    # Rows built before the clock starts: the ceiling is the database's, not Python's.
    rows = [
        (series_id, step, value, moment)
        for series_id, name in enumerate(METRIC_NAMES, start=1)
        for step, value, moment in zip(steps, load.values[name].tolist(), times, strict=True)
    ]
    with pg.connect(db) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(
            f"CREATE TABLE {TABLE} (series_id bigint NOT NULL, step bigint NOT NULL, "
            "value double precision, wall_time timestamptz, PRIMARY KEY (series_id, step))"
        )
        conn.autocommit = False
        start = time.perf_counter()
        with conn.cursor() as cursor:
            copy_sql = (
                f"COPY {TABLE} (series_id, step, value, wall_time) FROM STDIN (FORMAT BINARY)"
            )
            with cursor.copy(copy_sql) as copy:
                copy.set_types(["int8", "int8", "float8", "timestamptz"])
                for row in rows:
                    copy.write_row(row)
        conn.commit()
        seconds = time.perf_counter() - start
        conn.autocommit = True
        conn.execute(f"DROP TABLE {TABLE}")
    return CopyFigure(
        rows=len(rows), seconds=round(seconds, 3), rows_per_s=round(len(rows) / seconds, 1)
    )
