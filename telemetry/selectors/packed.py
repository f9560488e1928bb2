"""Raw-SQL reads of telemetry's big tables for the other apps, returned as plain values
(numpy arrays, ids, sets of names): a million steps of a metric packed as binary strings, the
step starts PostgreSQL keeps in chunks, the points of one metric at the same steps in two
attempts. Callers never name telemetry's tables: to change how these are stored, change
this module."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from django.db import connection

from telemetry.models import Attempt, MetricPoint, MetricSeries, Run, StepStartChunk
from telemetry.selectors.series import reading

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# timestamptz counts microseconds from 2000-01-01 UTC.
_PG_EPOCH_US = 946_684_800_000_000


def series_points_packed(
    *, series_ids: Sequence[int], start: datetime | None = None, end: datetime | None = None
) -> dict[int, tuple[IntArray, FloatArray, FloatArray]]:
    """Each series' points with a wall time in [start, end] (either end open): steps, values
    and wall times as epoch seconds (NaN where none), in step order. One query."""
    # A million steps per metric: each series' steps, values and epoch seconds as one
    # big-endian binary string each, decoded with numpy.
    conditions, params = ["series_id = ANY(%s)"], [list(series_ids)]
    if start is not None:
        conditions.append("wall_time >= %s")
        params.append(start)
    if end is not None:
        conditions.append("wall_time <= %s")
        params.append(end)
    sql = (
        "SELECT series_id, string_agg(int8send(step), ''), string_agg(float8send(value), ''), "
        "string_agg(float8send(coalesce(date_part('epoch', wall_time), 'NaN')), '') "
        f"FROM {MetricPoint._meta.db_table} WHERE {' AND '.join(conditions)} GROUP BY series_id"
    )
    found = {}
    with reading().cursor() as cursor:
        cursor.execute(sql, params)
        for series_id, steps, values, times in cursor.fetchall():
            found[series_id] = _in_step_order(
                np.frombuffer(bytes(steps), dtype=">i8").astype(np.int64),
                np.frombuffer(bytes(values), dtype=">f8").astype(np.float64),
                np.frombuffer(bytes(times), dtype=">f8").astype(np.float64),
            )
    return found


def _in_step_order(
    steps: IntArray, values: FloatArray, times: FloatArray
) -> tuple[IntArray, FloatArray, FloatArray]:
    """string_agg concatenates rows in the order the scan meets them, which is the order
    they were stored: a batch of later steps processed before an earlier one (the worker
    takes batches in any order) came back between them, and the slowdown detector saw one
    slowdown as two. Sorted here, where it costs one argsort, not three ordered aggregates."""
    if steps.size < 2 or bool(np.all(steps[1:] >= steps[:-1])):
        return steps, values, times
    order = np.argsort(steps, kind="stable")
    return steps[order], values[order], times[order]


def step_starts_recorded(*, run: Run) -> dict[int, FloatArray]:
    """(step, start) rows per attempt number, as (n, 2) arrays, from the step_times events."""
    # A million steps: read packed, a few hundred rows of 4,096 steps each, as PostgreSQL
    # keeps them (StepStartChunk), not aggregated from the million rows on every first view.
    # Start times come as microseconds: / 1e6 gives the double nearest the exact seconds,
    # as date_part and datetime.timestamp() give them.
    sql = (
        f"SELECT a.number, c.steps, c.started_us FROM {StepStartChunk._meta.db_table} c "
        f"JOIN {Attempt._meta.db_table} a ON a.id = c.attempt_id "
        "WHERE a.run_id = %s ORDER BY a.number, c.bucket"
    )
    packed: dict[int, tuple[list[bytes], list[bytes]]] = {}
    read = reading()
    read.ensure_connection()
    # 16 MB of arrays: asked for in binary, not as hex text for PostgreSQL to write and
    # psycopg to decode (120-170 -> 50-70 ms). Django's cursors bind parameters on the client,
    # which cannot ask for binary results, so this one query takes a psycopg cursor of its own.
    with psycopg.Cursor(read.connection) as cursor:
        cursor.execute(sql, [run.pk], binary=True)
        for number, steps, times in cursor.fetchall():
            parts = packed.setdefault(number, ([], []))
            parts[0].append(bytes(steps))
            parts[1].append(bytes(times))
    found = {}
    for number, (steps, times) in packed.items():
        step_array = np.frombuffer(b"".join(steps), dtype=">i8")
        micros = np.frombuffer(b"".join(times), dtype=">i8").astype(np.int64) + _PG_EPOCH_US
        pairs = np.empty((step_array.size, 2), dtype=np.float64)
        pairs[:, 0] = step_array
        pairs[:, 1] = micros.astype(np.float64) / 1e6
        found[number] = pairs
    return found


def step_ends_with_durations(
    *, run: Run, metric: str, numbers: list[int]
) -> dict[int, tuple[FloatArray, FloatArray]]:
    """Per attempt number: (step, wall time) rows as an (n, 2) array, and the metric's finite
    values at those steps (a step's duration, when the metric is step_time_s). One query."""
    sql = (
        "SELECT a.number, string_agg(int8send(p.step), ''), "
        "string_agg(float8send(date_part('epoch', p.wall_time)), ''), "
        "string_agg(float8send(p.value), '') "
        f"FROM {MetricPoint._meta.db_table} p "
        f"JOIN {MetricSeries._meta.db_table} s ON s.id = p.series_id "
        f"JOIN {Attempt._meta.db_table} a ON a.id = s.attempt_id "
        "WHERE s.run_id = %s AND s.name = %s AND a.number = ANY(%s) "
        "AND p.wall_time IS NOT NULL "
        "AND p.value NOT IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8) "
        "GROUP BY a.number"
    )
    found = {}
    with reading().cursor() as cursor:
        cursor.execute(sql, [run.pk, metric, numbers])
        for number, steps, ends, values in cursor.fetchall():
            step_array, value_array, end_array = _in_step_order(
                np.frombuffer(bytes(steps), dtype=">i8").astype(np.int64),
                np.frombuffer(bytes(values), dtype=">f8").astype(np.float64),
                np.frombuffer(bytes(ends), dtype=">f8").astype(np.float64),
            )
            pairs = np.empty((step_array.size, 2), dtype=np.float64)
            pairs[:, 0] = step_array
            pairs[:, 1] = end_array
            found[number] = (pairs, value_array)
    return found


def series_names_known(*, project_id: int, run_name: str, names: Sequence[str]) -> set[str]:
    """Which of `names` the run (by project and name) already has a series of. One query, on
    the primary (ingest asks it for every batch)."""
    # Written out: it runs for every batch, and the ORM's query cost ~1.4 ms of the web
    # process's CPU and ~0.9 ms of PostgreSQL's (DISTINCT over a join); this one, a quarter
    # and a half of those.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT name FROM {MetricSeries._meta.db_table} WHERE name = ANY(%s) AND run_id = "
            f"(SELECT id FROM {Run._meta.db_table} WHERE project_id = %s AND name = %s)",
            [list(names), project_id, run_name],
        )
        return {name for (name,) in cursor}


def metric_series_attempts(*, run: Run, metric: str) -> dict[int, tuple[int, int]]:
    """The metric's series in every attempt of the run: series id -> (attempt id, attempt
    number). A small keyed read, on the primary (in an ingest batch's transaction)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.id, s.attempt_id, a.number FROM {MetricSeries._meta.db_table} s "
            f"JOIN {Attempt._meta.db_table} a ON a.id = s.attempt_id "
            "WHERE s.run_id = %s AND s.name = %s",
            [run.pk, metric],
        )
        return {series_id: (attempt_id, number) for series_id, attempt_id, number in cursor}


def points_at_shared_steps(
    *, series_id: int, other_series_ids: Sequence[int], steps: Sequence[int] | None
) -> list[tuple[Any, ...]]:
    """The series' points joined with the other series' points at the same steps (only
    `steps` when given): (step, value, wall_time, other series id, its value, its wall_time)
    rows. Both sides are read through the (series, step) primary key. On the primary."""
    point = MetricPoint._meta.db_table
    sql = (
        f"SELECT mine.step, mine.value, mine.wall_time, theirs.series_id, theirs.value, "
        f"theirs.wall_time FROM {point} mine "
        f"JOIN {point} theirs ON theirs.series_id = ANY(%s) AND theirs.step = mine.step "
        f"WHERE mine.series_id = %s"
    )
    params: list[Any] = [list(other_series_ids), series_id]
    if steps is not None:
        sql += " AND mine.step = ANY(%s)"
        params.append(sorted(set(steps)))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
