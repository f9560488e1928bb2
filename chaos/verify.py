"""What was sent against what was stored, counted with SQL on the stack's own database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from chaos.load import METRICS, PROJECT_SLUG, Batch
from stack.chronicle import DB_NAME
from stack.postgres import PostgresServer


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


def stored_counts(pg: PostgresServer, run: str) -> Stored:
    with pg.connect(DB_NAME) as conn:
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


def backlog(pg: PostgresServer, run: str) -> tuple[int, int]:
    """(batches accepted, batches still pending) of the run."""
    [(total, pending)] = pg.rows(
        "SELECT count(*), count(*) FILTER (WHERE status = 'pending') "
        "FROM ingest_ingestbatch WHERE run_name = %s",
        [run],
        database=DB_NAME,
    )
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


def batch_row(pg: PostgresServer, batch_id: str) -> tuple[str, int, str]:
    """(status, processing attempts, last error) of the batch; ("missing", 0, "") if absent."""
    rows = pg.rows(
        "SELECT status, process_attempts, last_error FROM ingest_ingestbatch WHERE batch_id = %s",
        [batch_id],
        database=DB_NAME,
    )
    return ("missing", 0, "") if not rows else (rows[0][0], int(rows[0][1]), rows[0][2])
