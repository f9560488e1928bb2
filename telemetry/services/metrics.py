"""Writes for what a run logs: its metric series and points (binary COPY), the rollups
rebuilt from them, step start times and job intervals. First write wins, so a redelivered
batch changes nothing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from psycopg.errors import UniqueViolation

from telemetry.models import Attempt, JobInterval, MetricPoint, MetricSeries, Run, StepStart
from telemetry.services.runs import run_progress_record
from telemetry.services.versions import run_data_version_bump


def series_ensure(*, run: Run, attempt: Attempt, names: Iterable[str]) -> dict[str, int]:
    """Series ids by metric name for one attempt, created where missing."""
    wanted = set(names)
    found = dict(
        MetricSeries.objects.filter(run=run, attempt=attempt, name__in=wanted).values_list(
            "name", "id"
        )
    )
    missing = wanted - found.keys()
    if missing:
        MetricSeries.objects.bulk_create(
            [MetricSeries(run=run, attempt=attempt, name=name) for name in sorted(missing)],
            ignore_conflicts=True,
        )
        found.update(
            MetricSeries.objects.filter(run=run, attempt=attempt, name__in=missing).values_list(
                "name", "id"
            )
        )
        run_data_version_bump(run_id=run.pk)
    return found


# Joins the caller's transaction without a savepoint: a failure aborts the whole batch
# anyway, and a savepoint costs two round trips per batch.
@transaction.atomic(savepoint=False)
def metric_points_insert(
    *,
    run: Run,
    attempt: Attempt,
    points: Sequence[tuple[str, int, float, datetime | None]],
    record_progress: bool = True,
    series_ids: dict[str, int] | None = None,
) -> int:
    """Store (name, step, value, wall_time) points of one attempt. A point already stored at
    the same (series, step) is kept as it was (first write wins), so a redelivered batch
    inserts nothing. Returns how many rows were new. With record_progress=False the caller
    moves the run's progress itself (once, last: it locks the run's row). `series_ids`, the
    attempt's series by name for every name of the points, spares series_ensure (a series
    that no longer exists fails the insert with foreign_key_violation)."""
    if not points:
        return 0
    if series_ids is None:
        series_ids = series_ensure(run=run, attempt=attempt, names={p[0] for p in points})
    inserted = _points_insert_postgresql(series_ids, points)
    if record_progress:
        latest = _latest(points)
        run_progress_record(
            run=run, last_step=max(p[1] for p in points), seen_at=latest, data_at=latest
        )
    return inserted


# Per-session staging table for point inserts (temporary: no WAL, invisible to others).
# ON COMMIT DELETE ROWS: PostgreSQL never vacuums a temporary table, so rows deleted from it
# stayed as dead tuples for as long as the connection lived (CONN_MAX_AGE), and every
# batch's DELETE below scanned all of them: 18 MB and 17 ms more per batch after 300
# batches on one connection. Truncated at each commit, the stage stays one batch long.
_POINTS_STAGE = "chronicle_points_stage"
_POINT_COLUMNS = "(series_id, step, value, wall_time)"
_POINT_TYPES = ["int8", "int8", "float8", "timestamptz"]

_PointRow = tuple[int, int, float, datetime | None]


def _points_insert_postgresql(
    series_ids: dict[str, int], points: Sequence[tuple[str, int, float, datetime | None]]
) -> int:
    # A live run's batch holds new steps only, so it is first copied straight into the
    # table: half the database CPU of staging it and inserting with ON CONFLICT (measured
    # on 1,000-point batches: ~3.5 ms against ~7.5 ms of the backend's CPU), since COPY
    # checks the primary key once per row where ON CONFLICT probes it, inserts
    # speculatively and confirms. A point already stored (a replayed step, a retry under a
    # new batch_id, a step twice in the batch, or another request's uncommitted point we
    # waited for) makes the COPY fail on the primary key; the savepoint undoes only the
    # COPY (its statement triggers never fired), and the staged insert below keeps the
    # first write, as before.
    names, steps, values, moments = zip(*points, strict=True)
    rows = list(zip(map(series_ids.__getitem__, names), steps, values, moments, strict=True))
    try:
        with transaction.atomic(), connection.cursor() as wrapper:
            return _points_copy(wrapper.cursor, MetricPoint._meta.db_table, rows)
    except UniqueViolation:
        pass
    return _points_insert_staged(rows)


def _points_copy(cursor: Any, table: str, rows: list[_PointRow]) -> int:
    # psycopg's own cursor: COPY is not in the DB-API. psycopg encodes each row in C.
    with cursor.copy(f"COPY {table} {_POINT_COLUMNS} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(_POINT_TYPES)
        write_row = copy.write_row
        for row in rows:
            write_row(row)
    return len(rows)


def _points_insert_staged(rows: list[_PointRow]) -> int:
    # Binary COPY into a temporary table, then one INSERT ... SELECT with the primary key as
    # the conflict target (duplicates inside the batch are skipped too). About twice as fast
    # as one INSERT over array parameters, which psycopg must render as text literals. The
    # DELETE ... RETURNING empties the stage in the same statement, so a second insert in
    # the same transaction starts clean.
    table = MetricPoint._meta.db_table
    with connection.cursor() as wrapper:
        cursor = wrapper.cursor
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {_POINTS_STAGE} "
            "(series_id bigint, step bigint, value float8, wall_time timestamptz) "
            "ON COMMIT DELETE ROWS"
        )
        _points_copy(cursor, _POINTS_STAGE, rows)
        cursor.execute(
            f"WITH staged AS (DELETE FROM {_POINTS_STAGE} RETURNING *) "
            f"INSERT INTO {table} {_POINT_COLUMNS} "
            "SELECT series_id, step, value, wall_time FROM staged "
            "ON CONFLICT (series_id, step) DO NOTHING"
        )
        return cursor.rowcount


# Series per rebuild statement: bounds the memory of one aggregation, and one transaction
# each so a large rebuild does not hold every series' rows locked at once.
ROLLUP_REBUILD_CHUNK = 200


def metric_rollups_rebuild(*, series_ids: Sequence[int]) -> int:
    """Recompute the rollups of these series from their points (PostgreSQL's function from
    migration 0005). Returns how many rollup rows were written."""
    return _rebuild("telemetry_metricrollup_rebuild", series_ids)


def metric_hour_sums_rebuild(*, series_ids: Sequence[int]) -> int:
    """Recompute the hour sums (MetricHourSum) of these series from their points, the
    throughput series' only (PostgreSQL's function from migration 0026). Returns how many
    rows were written."""
    return _rebuild("telemetry_metrichoursum_rebuild", series_ids)


def throughput_sums_rebuild(*, attempt_ids: Sequence[int]) -> int:
    """Recompute these attempts' throughput sums (ThroughputSum) from their points
    (PostgreSQL's function from migration 0012). Returns how many rows were written."""
    return _rebuild("telemetry_throughputsum_rebuild", attempt_ids)


def step_start_chunks_rebuild(*, attempt_ids: Sequence[int]) -> int:
    """Repack these attempts' step starts (StepStartChunk) from the table (PostgreSQL's
    function from migration 0013). Returns how many chunks were written."""
    return _rebuild("telemetry_stepstartchunk_rebuild", attempt_ids)


def _rebuild(function: str, ids: Sequence[int]) -> int:
    written = 0
    for first in range(0, len(ids), ROLLUP_REBUILD_CHUNK):
        chunk = list(ids[first : first + ROLLUP_REBUILD_CHUNK])
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SELECT {function}(%s::bigint[])", [chunk])
            written += cursor.fetchone()[0]
    return written


def _latest(points: Sequence[tuple[str, int, float, datetime | None]]) -> datetime | None:
    times = [p[3] for p in points if p[3] is not None]
    return max(times) if times else None


def step_starts_record(
    *, attempt: Attempt, first_step: int, start_times: Sequence[datetime]
) -> int:
    """Store when steps first_step, first_step + 1, ... of `attempt` began (first write wins).
    Returns how many rows were new."""
    before = StepStart.objects.filter(attempt=attempt).count()
    StepStart.objects.bulk_create(
        [
            StepStart(attempt=attempt, step=first_step + offset, started_at=moment)
            for offset, moment in enumerate(start_times)
        ],
        ignore_conflicts=True,
        batch_size=2000,
    )
    new = StepStart.objects.filter(attempt=attempt).count() - before
    if new:
        run_data_version_bump(run_id=attempt.run_id)
    return new


def interval_record(
    *,
    run: Run,
    attempt: Attempt,
    kind: str,
    started_at: datetime,
    ended_at: datetime,
    source_key: str,
    label: str = "",
    step: int | None = None,
) -> JobInterval:
    interval, created = JobInterval.objects.get_or_create(
        run=run,
        source_key=source_key,
        defaults={
            "attempt": attempt,
            "kind": kind,
            "label": label,
            "started_at": started_at,
            "ended_at": ended_at,
            "step": step,
        },
    )
    if created:
        run_data_version_bump(run_id=run.pk)
    return interval
