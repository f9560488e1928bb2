"""Reads behind the MFU and goodput pages: load a run's inputs (its telemetry, and the
checkpoints, restores and interruptions the logbook keeps), build the pure inputs of
telemetry.mfu and telemetry.goodput, and return what the pages and the JSON show. Every
function costs a fixed number of queries, whatever the number of attempts, steps or
intervals.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import psycopg
from django.db import router
from django.utils import timezone

from logbook.models import Checkpoint, Interruption
from telemetry import goodput as gp
from telemetry import mfu as mf
from telemetry import run_cache
from telemetry.downsample import minmax_indices, split_budget
from telemetry.models import (
    AcceleratorType,
    Attempt,
    JobInterval,
    MetricPoint,
    MetricSeries,
    Run,
    StepStartChunk,
    ThroughputSum,
)
from telemetry.selectors import series as series_selectors

TOKENS_PER_S = "tokens_per_s"
STEP_TIME_S = "step_time_s"
CHART_MAX_POINTS = 3000
ROLLING_WINDOWS = 60
ROLLING_MIN_WIDTH_S = 60.0


@dataclass(frozen=True)
class Window:
    """A time window from query parameters; either end may be open."""

    start: datetime | None = None
    end: datetime | None = None

    def as_seconds(self) -> tuple[float, float] | None:
        if self.start is None and self.end is None:
            return None
        low = self.start.timestamp() if self.start else -math.inf
        high = self.end.timestamp() if self.end else math.inf
        return low, high


# --- MFU ------------------------------------------------------------------------------------


def accelerator_find(*, label: str) -> AcceleratorType | None:
    """The catalog entry a run's accelerator label names (by name or alias)."""
    if not label.strip():
        return None
    return next((a for a in AcceleratorType.objects.all() if a.matches(label)), None)


@dataclass
class MfuReport:
    run: Run
    inputs: mf.MfuInputs | None
    # Why MFU cannot be computed, in words the page shows; empty when it can.
    missing: list[str]
    tokens_per_step: int | None
    throughput_source: str  # "tokens_per_s", "step_time_s" or ""
    window: Window
    points: pd.DataFrame  # attempt, step, wall_time, tokens_per_s, step_time_s, mfu
    total_points: int
    mean: float
    per_attempt: pd.DataFrame  # attempt, steps, first_step, last_step, mean
    attempts: list[Attempt]
    interruptions: pd.DataFrame  # occurred_at, step, label, planned
    accelerator_source: str = ""
    restarts: pd.DataFrame = field(default_factory=pd.DataFrame)  # attempt, step, time


def _mfu_inputs(run: Run) -> tuple[mf.MfuInputs | None, list[str], str]:
    missing: list[str] = []
    accelerator = accelerator_find(label=run.accelerator_type)
    if not run.accelerator_type:
        missing.append("the run has no accelerator type")
    elif accelerator is None:
        missing.append(
            f"accelerator {run.accelerator_type!r} is not in the catalog (an admin can add it)"
        )
    if not run.accelerator_count:
        missing.append("the run has no accelerator count")
    flops = run.flops_per_token
    source = "job"
    if flops is None:
        source = "formula"
        shape = {
            "parameter_count": run.parameter_count,
            "n_layers": run.n_layers,
            "n_heads": run.n_heads,
            "head_dim": run.head_dim,
            "seq_len": run.seq_len,
        }
        absent = [name for name, value in shape.items() if not value]
        if absent:
            missing.append("the model shape lacks " + ", ".join(absent))
        else:
            flops = mf.flops_per_token(
                n_params=float(run.parameter_count or 0),
                n_layers=run.n_layers or 0,
                n_heads=run.n_heads or 0,
                head_dim=run.head_dim or 0,
                seq_len=run.seq_len or 0,
                causal=run.attention == Run.Attention.CAUSAL,
            )
    if missing or accelerator is None or flops is None:
        return None, missing, ""
    label = mf.label_for(
        job_reported_flops=run.flops_per_token is not None,
        counts_recomputation=run.counts_recomputation,
    )
    inputs = mf.MfuInputs(
        flops_per_token=float(flops),
        flops_source=source,
        n_accelerators=int(run.accelerator_count or 0),
        peak_flops=accelerator.peak_flops_bf16,
        accelerator=accelerator.name,
        label=label,
    )
    return inputs, [], accelerator.source


def _tokens_per_step(run: Run) -> int | None:
    if run.tokens_per_step:
        return int(run.tokens_per_step)
    # Jobs that predate the field put it in their free-form config (the demo does).
    value = (run.config or {}).get("tokens_per_step")
    return int(value) if isinstance(value, int | float) and value > 0 else None


def run_mfu(*, run: Run, window: Window | None = None) -> MfuReport:
    """Per-step MFU (or HFU) of every attempt, downsampled for charts, with its means.

    Over the whole run (the page's first view) it reads no point: the means come from the
    per-attempt sums PostgreSQL keeps (ThroughputSum) and the chart from the rollups. A time
    window reads the window's points, reduced to the same sums by the same maths."""
    window = window or Window()
    inputs, missing, accelerator_source = _mfu_inputs(run)
    tokens_per_step = _tokens_per_step(run)
    attempts = list(run.attempts.order_by("number"))
    interruptions = _interruption_marks(run)
    table = _throughput_table(run, window) if window.as_seconds() is not None else None
    if table is None:
        sums = _throughput_sums(run)
    else:
        sums = {
            int(number): mf.ThroughputSums.of(
                group["step"], group[TOKENS_PER_S], group[STEP_TIME_S]
            )
            for number, group in table.groupby("attempt", sort=True)
        }
    source = mf.throughput_source(list(sums.values()), tokens_per_step=tokens_per_step)
    if not source and not missing:
        missing.append(
            "no throughput reported: send tokens_per_s, or step_time_s with tokens_per_step"
        )
    # Each attempt on its own accelerator count when it has one (a cluster resized between
    # attempts: BLOOM-176B went from 48 to 24 nodes), else the run's.
    counts = {a.number: a.accelerator_count for a in attempts if a.accelerator_count}

    def scale(number: int) -> float:
        if inputs is None:
            return math.nan
        n_accelerators = counts.get(number, inputs.n_accelerators)
        return inputs.flops_per_token / (n_accelerators * inputs.peak_flops)

    weighted = any(one.timed_count for one in sums.values())

    def mean(numbers: list[int]) -> float:
        if inputs is None:
            return math.nan
        return mf.mean_from_sums(
            [sums[n] for n in numbers],
            [scale(n) for n in numbers],
            source=source,
            weighted=weighted,
            tokens_per_step=tokens_per_step,
        )

    per_attempt = pd.DataFrame(
        [
            {
                "attempt": number,
                "steps": one.steps,
                "first_step": one.first_step,
                "last_step": one.last_step,
                "mean": mean([number]),
            }
            for number, one in sorted(sums.items())
        ],
        columns=["attempt", "steps", "first_step", "last_step", "mean"],
    )
    if table is None:
        table = _chart_points(run, source)
    points = _with_mfu(table, source=source, tokens_per_step=tokens_per_step, scale=scale)
    return MfuReport(
        run=run,
        inputs=inputs,
        missing=missing,
        tokens_per_step=tokens_per_step,
        throughput_source=source,
        window=window,
        points=_downsample(points),
        total_points=sum(one.steps for one in sums.values()),
        mean=mean(sorted(sums)),
        per_attempt=per_attempt,
        attempts=attempts,
        interruptions=interruptions,
        accelerator_source=accelerator_source,
        restarts=restarts_frame(attempts),
    )


def _with_mfu(
    table: pd.DataFrame,
    *,
    source: str,
    tokens_per_step: int | None,
    scale: Callable[[int], float],
) -> pd.DataFrame:
    """The table with tokens_per_s the throughput `source` gives (NaN where it gives none)
    and each step's mfu (mfu_array's arithmetic, each attempt at its own scale)."""
    throughput = np.full(len(table), np.nan)
    if source == TOKENS_PER_S:
        throughput = table[TOKENS_PER_S].to_numpy(dtype=float)
    elif source == STEP_TIME_S and tokens_per_step:
        throughput = mf.tokens_per_s_from_step_time(
            table[STEP_TIME_S].to_numpy(dtype=float), tokens_per_step=tokens_per_step
        )
    table[TOKENS_PER_S] = throughput
    scales = {int(n): scale(int(n)) for n in pd.unique(table["attempt"])}
    table["mfu"] = throughput * table["attempt"].map(scales).to_numpy(dtype=float)
    return table


def _throughput_sums(run: Run) -> dict[int, mf.ThroughputSums]:
    """Every attempt's throughput sums, as PostgreSQL keeps them: one row per attempt."""
    rows = ThroughputSum.objects.using(router.db_for_read(ThroughputSum)).filter(
        attempt__run=run, first_step__isnull=False
    )
    return {
        row.attempt.number: mf.ThroughputSums(
            steps=row.reported_points + row.timed_points - row.both_points,
            first_step=int(row.first_step or 0),
            last_step=int(row.last_step or 0),
            reported_count=row.reported_finite_count,
            reported_sum=row.reported_finite_sum,
            timed_count=row.timed_finite_count,
            timed_positive_count=row.timed_positive_count,
            timed_positive_sum_s=row.timed_positive_sum_s,
            paired_weighted_sum=row.paired_weighted_sum,
            paired_weight_s=row.paired_weight_s,
        )
        for row in rows.select_related("attempt")
    }


def _chart_points(run: Run, source: str) -> pd.DataFrame:
    """The throughput metric's points the chart draws, from its rollups (every bucket's
    extremes: MFU is the throughput times a positive scale, or its inverse from step time,
    so the extremes stay extremes)."""
    if not source:
        return pd.DataFrame(columns=_TABLE_COLUMNS)
    per_attempt = series_selectors.series_for_run(run=run, name=source, max_points=CHART_MAX_POINTS)
    frame = pd.DataFrame(
        {
            "attempt": np.concatenate(
                [np.full(one.steps.size, one.attempt, dtype=np.int64) for one in per_attempt]
                or [np.zeros(0, dtype=np.int64)]
            ),
            "step": np.concatenate([one.steps for one in per_attempt] or [np.zeros(0, np.int64)]),
        }
    )
    values = np.concatenate([one.values for one in per_attempt] or [np.zeros(0)])
    for name in (TOKENS_PER_S, STEP_TIME_S):
        frame[name] = values if name == source else np.full(values.size, np.nan)
    times = np.concatenate(
        [one.wall_times for one in per_attempt] or [np.zeros(0, dtype="datetime64[us]")]
    )
    frame["wall_time"] = pd.to_datetime(times, utc=True)
    return frame[_TABLE_COLUMNS]


def restarts_frame(attempts: list[Attempt]) -> pd.DataFrame:
    """Where each attempt after the first began: attempt, step (resumed from), time."""
    return pd.DataFrame(
        [
            {"attempt": a.number, "step": a.resumed_from_step, "time": a.started_at}
            for a in attempts
            if a.number > 1
        ],
        columns=["attempt", "step", "time"],
    )


_TABLE_COLUMNS = ["attempt", "step", TOKENS_PER_S, STEP_TIME_S, "wall_time"]


def _throughput_table(run: Run, window: Window) -> pd.DataFrame:
    """One row per (attempt, step) with a tokens_per_s or step_time_s point in the window:
    attempt, step, tokens_per_s, step_time_s (NaN where absent), wall_time (the earlier of
    the two), ordered by attempt and step."""
    series = {
        pk: (number, name)
        for pk, number, name in MetricSeries.objects.filter(
            run=run, name__in=[TOKENS_PER_S, STEP_TIME_S]
        ).values_list("pk", "attempt__number", "name")
    }
    if not series:
        return pd.DataFrame(columns=_TABLE_COLUMNS)
    # A million steps per metric: each series' steps, values and epoch seconds as one
    # big-endian binary string each, merged per attempt with numpy.
    conditions, params = ["series_id = ANY(%s)"], [list(series)]
    if window.start is not None:
        conditions.append("wall_time >= %s")
        params.append(window.start)
    if window.end is not None:
        conditions.append("wall_time <= %s")
        params.append(window.end)
    sql = (
        "SELECT series_id, string_agg(int8send(step), ''), string_agg(float8send(value), ''), "
        "string_agg(float8send(coalesce(date_part('epoch', wall_time), 'NaN')), '') "
        f"FROM {MetricPoint._meta.db_table} WHERE {' AND '.join(conditions)} GROUP BY series_id"
    )
    by_attempt: dict[int, dict[str, tuple[Any, Any, Any]]] = {}
    with series_selectors.reading().cursor() as cursor:
        cursor.execute(sql, params)
        for series_id, steps, values, times in cursor.fetchall():
            number, name = series[series_id]
            by_attempt.setdefault(number, {})[name] = (
                np.frombuffer(bytes(steps), dtype=">i8").astype(np.int64),
                np.frombuffer(bytes(values), dtype=">f8").astype(np.float64),
                np.frombuffer(bytes(times), dtype=">f8").astype(np.float64),
            )
    parts = []
    for number in sorted(by_attempt):
        found = by_attempt[number]
        steps = np.unique(np.concatenate([found[name][0] for name in found]))
        columns: dict[str, Any] = {"attempt": np.full(steps.size, number, dtype=np.int64),
                                   "step": steps}  # fmt: skip
        epoch = np.full(steps.size, np.nan)
        for name in (TOKENS_PER_S, STEP_TIME_S):
            column = np.full(steps.size, np.nan)
            if name in found:
                at = np.searchsorted(steps, found[name][0])
                column[at] = found[name][1]
                epoch[at] = np.fmin(epoch[at], found[name][2])
            columns[name] = column
        columns["epoch"] = epoch
        parts.append(columns)
    if not parts:
        return pd.DataFrame(columns=_TABLE_COLUMNS)
    merged = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    epoch = merged.pop("epoch")
    known = np.isfinite(epoch)
    # Whole microseconds, as stored (float seconds are exact to well under a microsecond).
    micros = np.round(np.where(known, epoch, 0.0) * 1e6).astype(np.int64)
    table = pd.DataFrame(merged, columns=_TABLE_COLUMNS)
    table["wall_time"] = pd.to_datetime(micros, unit="us", utc=True)
    table.loc[~known, "wall_time"] = pd.NaT
    return table


def _downsample(table: pd.DataFrame) -> pd.DataFrame:
    """At most about CHART_MAX_POINTS rows, every attempt's dips and peaks kept."""
    if len(table) <= CHART_MAX_POINTS:
        return table
    groups = [group for _, group in table.groupby("attempt", sort=True)]
    budgets = split_budget([len(group) for group in groups], CHART_MAX_POINTS)
    kept = [
        group.iloc[minmax_indices(group["mfu"].to_numpy(dtype=float), budget)]
        for group, budget in zip(groups, budgets, strict=True)
        if budget
    ]
    return pd.concat(kept, ignore_index=True) if kept else table.iloc[:0]


def _interruption_marks(run: Run) -> pd.DataFrame:
    rows = list(
        Interruption.objects.filter(run=run)
        .order_by("occurred_at")
        .values_list("occurred_at", "recovered_at", "step", "root_cause__name", "planned")
    )
    return pd.DataFrame(rows, columns=["occurred_at", "recovered_at", "step", "label", "planned"])


# --- Goodput --------------------------------------------------------------------------------


@dataclass
class GoodputReport:
    run: Run
    result: gp.GoodputResult | None
    window: Window
    exclude_planned: bool
    exclusions: list[tuple[datetime, datetime]]
    attempts: list[Attempt]
    per_attempt: pd.DataFrame  # attempt, start, end, elapsed_s, productive_s, goodput
    rolling: pd.DataFrame  # start, end, goodput, productive_s, elapsed_s
    rolling_width_s: float
    step_source: str  # "recorded", "derived from step_time_s", "mixed" or "none"
    as_of: datetime | None
    notes: list[str] = field(default_factory=list)


def _epoch(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def as_datetime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


FloatArray = npt.NDArray[np.float64]


# timestamptz counts microseconds from 2000-01-01 UTC.
_PG_EPOCH_US = 946_684_800_000_000


def _step_starts_recorded(run: Run) -> dict[int, FloatArray]:
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
    connection = series_selectors.reading()
    connection.ensure_connection()
    # 16 MB of arrays: asked for in binary, not as hex text for PostgreSQL to write and
    # psycopg to decode (120-170 -> 50-70 ms). Django's cursors bind parameters on the client,
    # which cannot ask for binary results, so this one query takes a psycopg cursor of its own.
    with psycopg.Cursor(connection.connection) as cursor:
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


def _step_starts_derived(run: Run, numbers: list[int]) -> dict[int, FloatArray]:
    """A job that never sent step_times still reports step_time_s with a wall time (the end
    of the step): start = end - duration. Whole-second wall times make this approximate."""
    if not numbers:
        return {}
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
    with series_selectors.reading().cursor() as cursor:
        cursor.execute(sql, [run.pk, STEP_TIME_S, numbers])
        for number, steps, ends, values in cursor.fetchall():
            pairs = _pairs(bytes(steps), bytes(ends))
            pairs[:, 1] -= np.frombuffer(bytes(values), dtype=">f8")
            found[number] = pairs
    return found


def _pairs(steps: bytes, times: bytes) -> FloatArray:
    pairs = np.empty((len(steps) // 8, 2), dtype=np.float64)
    pairs[:, 0] = np.frombuffer(steps, dtype=">i8")
    pairs[:, 1] = np.frombuffer(times, dtype=">f8")
    return pairs


def goodput_inputs(*, run: Run, attempts: list[Attempt]) -> tuple[gp.GoodputInputs, str]:
    """The pure inputs for a run (seven queries at most), and where the step starts came
    from."""
    starts = {number: pairs for number, pairs in _step_starts_recorded(run).items() if len(pairs)}
    recorded = set(starts)
    unrecorded = [a.number for a in attempts if a.number not in recorded]
    derived_starts = _step_starts_derived(run, unrecorded)
    derived = {number for number, pairs in derived_starts.items() if len(pairs)}
    starts |= {number: derived_starts[number] for number in derived}
    source = "none"
    if recorded and derived:
        source = "mixed"
    elif recorded:
        source = "recorded"
    elif derived:
        source = "derived from step_time_s"

    intervals = [
        gp.Interval(kind, start.timestamp(), end.timestamp(), label)
        for kind, label, start, end in JobInterval.objects.filter(run=run)
        .exclude(kind__in=[JobInterval.Kind.CHECKPOINT_SAVE, JobInterval.Kind.CHECKPOINT_RESTORE])
        .values_list("kind", "label", "started_at", "ended_at")
    ]
    saves_by_interval = {
        step: (start.timestamp(), end.timestamp())
        for step, start, end in JobInterval.objects.filter(
            run=run, kind=JobInterval.Kind.CHECKPOINT_SAVE, step__isnull=False
        ).values_list("step", "started_at", "ended_at")
    }
    saves: list[gp.CheckpointSave] = []
    rows = list(
        Checkpoint.objects.filter(run=run, blocking_save_s__isnull=False).values_list(
            "step", "blocking_save_s", "saved_at"
        )
    )
    step_times = _step_times(
        starts,
        attempts,
        {s for step, _, saved_at in rows if not saved_at for s in (step, step + 1)},
    )
    for step, blocking_s, saved_at in rows:
        at = _epoch(saved_at) or step_times.get(step + 1) or step_times.get(step)
        if at is not None:
            saves.append(gp.CheckpointSave(step=step, blocking_s=blocking_s, at=at))
    known = {save.step for save in saves}
    for step, (start, end) in saves_by_interval.items():
        if step not in known:
            saves.append(gp.CheckpointSave(step=step, blocking_s=end - start, at=end))
    restores: list[gp.Restore] = []
    job_starts = {a.number: _epoch(a.started_at) for a in attempts}
    restored_attempts: set[int] = set()
    for number, restored_at, restore_s in Checkpoint.objects.filter(
        run=run, restores__restore_s__isnull=False
    ).values_list("restores__attempt__number", "restores__restored_at", "restores__restore_s"):
        at = _epoch(restored_at) or job_starts.get(number)
        if at is not None and restore_s:
            restores.append(gp.Restore(duration_s=restore_s, at=at))
            restored_attempts.add(number)
    for number, start, end in JobInterval.objects.filter(
        run=run, kind=JobInterval.Kind.CHECKPOINT_RESTORE
    ).values_list("attempt__number", "started_at", "ended_at"):
        if number not in restored_attempts:
            restores.append(gp.Restore(end.timestamp() - start.timestamp(), end.timestamp()))

    records = [
        gp.AttemptRecord(
            number=a.number,
            job_start=_epoch(a.started_at),
            job_end=_epoch(a.ended_at),
            completed=a.status == Attempt.Status.COMPLETED,
            step_starts=starts.get(a.number, ()),
        )
        for a in attempts
    ]
    as_of = None
    if attempts and attempts[-1].ended_at is None:
        # A running job's elapsed time ends at the latest data received, so a run that stopped
        # reporting is not charged for the days since (the library would use the query time).
        latest = [run.last_seen_at, *(a.started_at for a in attempts)]
        moments = [m.timestamp() for m in latest if m is not None]
        moments += [float(pairs[:, 1].max()) for pairs in starts.values()]
        moments += [i.end for i in intervals]
        as_of = max(moments) if moments else timezone.now().timestamp()
    inputs = gp.GoodputInputs(
        attempts=records, intervals=intervals, checkpoint_saves=saves, restores=restores,
        as_of=as_of,
    )  # fmt: skip
    return inputs, source


def _step_times(
    starts: dict[int, FloatArray], attempts: list[Attempt], wanted: set[int]
) -> dict[int, float]:
    """When each wanted step began; where attempts repeat a step, the latest attempt's."""
    found: dict[int, float] = {}
    if not wanted:
        return found
    keys = np.array(sorted(wanted), dtype=np.float64)
    order = [a.number for a in attempts if a.number in starts]
    order += [n for n in starts if n not in set(order)]
    for number in order:
        steps, times = gp._step_arrays(starts[number])  # (step, start) order, as sorted()
        for index in np.flatnonzero(np.isin(steps, keys)).tolist():
            found[int(steps[index])] = float(times[index])
    return found


def planned_windows(*, run: Run, attempts: list[Attempt]) -> list[tuple[datetime, datetime]]:
    """Planned-maintenance windows: a planned interruption until it was recovered, or until
    the next attempt started when recovery was not reported."""
    windows = []
    starts = sorted(a.started_at for a in attempts if a.started_at is not None)
    for occurred, recovered in Interruption.objects.filter(run=run, planned=True).values_list(
        "occurred_at", "recovered_at"
    ):
        end = recovered or next((s for s in starts if s > occurred), None)
        if end is not None and end > occurred:
            windows.append((occurred, end))
    return sorted(windows)


def run_goodput(
    *, run: Run, window: Window | None = None, exclude_planned: bool = False
) -> GoodputReport:
    """Goodput and every badput bucket for a run (optionally in a window, optionally without
    planned maintenance), per attempt, and over rolling windows."""
    window = window or Window()
    attempts = list(run.attempts.order_by("number"))
    inputs, step_source = goodput_inputs(run=run, attempts=attempts)
    exclusions = planned_windows(run=run, attempts=attempts) if exclude_planned else []
    excluded_s = [(a.timestamp(), b.timestamp()) for a, b in exclusions]
    ledger = gp.build_ledger(inputs)
    empty_rolling = pd.DataFrame(columns=["start", "end", "goodput", "productive_s", "elapsed_s"])
    report = GoodputReport(
        run=run,
        result=None,
        window=window,
        exclude_planned=exclude_planned,
        exclusions=exclusions,
        attempts=attempts,
        per_attempt=pd.DataFrame(
            columns=["attempt", "start", "end", "elapsed_s", "productive_s", "goodput"]
        ),
        rolling=empty_rolling,
        rolling_width_s=0.0,
        step_source=step_source,
        as_of=as_datetime(inputs.as_of) if inputs.as_of is not None else None,
    )
    if ledger is None:
        report.notes.append("No job start or step start has been reported for this run.")
        return report
    report.result = gp.summarise(ledger, window=window.as_seconds(), exclusions=excluded_s)
    # Per attempt: from its job start to the next one's (so its recovery is charged to it).
    started = [(a.number, a.started_at.timestamp()) for a in attempts if a.started_at is not None]
    bounds = [start for _, start in started]
    rows = []
    for index, start in enumerate(bounds):
        end = bounds[index + 1] if index + 1 < len(bounds) else ledger.job_end
        one = gp.summarise(ledger, window=(start, end), exclusions=excluded_s)
        number = started[index][0]
        rows.append(
            {
                "attempt": number,
                "start": as_datetime(one.window_start),
                "end": as_datetime(one.window_end),
                "elapsed_s": one.elapsed_s,
                "productive_s": one.productive_s,
                "goodput": one.goodput,
            }
        )
    if rows:
        report.per_attempt = pd.DataFrame(rows)
    low, high = ledger.job_start, ledger.job_end
    window_s = window.as_seconds()
    if window_s is not None:
        w_low, w_high = window_s
        low, high = max(low, w_low), min(high, w_high)
    if high > low:
        width = max(ROLLING_MIN_WIDTH_S, (high - low) / 12)
        clipped = ledger.clipped(low, high)
        series = gp.rolling_goodput(
            clipped, width_s=width, n_windows=ROLLING_WINDOWS, exclusions=excluded_s
        )
        report.rolling = pd.DataFrame(
            [
                {
                    "start": as_datetime(r.window_start),
                    "end": as_datetime(r.window_end),
                    "goodput": r.goodput,
                    "productive_s": r.productive_s,
                    "elapsed_s": r.elapsed_s,
                }
                for r in series
            ],
            columns=empty_rolling.columns,
        )
        report.rolling_width_s = width
    return report


# --- Cached, for the pages and the JSON ---------------------------------------------------------


def _catalog_version() -> str:
    """The accelerator catalog, which MFU reads, is not one run's data (admins edit it, for
    every run): its rows go in the MFU key. One query, of a few dozen rows."""
    rows = AcceleratorType.objects.order_by("pk").values_list(
        "name", "aliases", "peak_flops_bf16", "source"
    )
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()[:16]


def _window_key(window: Window) -> str:
    return f"{window.start.isoformat() if window.start else ''}/" + (
        window.end.isoformat() if window.end else ""
    )


def run_goodput_cached(
    *, run: Run, window: Window | None = None, exclude_planned: bool = False
) -> tuple[GoodputReport, str]:
    """run_goodput, computed once per version of the run's data; and the cache key, for what
    callers derive from it. The report's `attempts` is left empty (the pages do not use it)."""
    window = window or Window()
    version = run_cache.run_version_key(run=run)
    key = f"goodput:{version}:{_window_key(window)}:{int(exclude_planned)}"
    report = run_cache.cached(
        key,
        lambda: replace(
            run_goodput(run=run, window=window, exclude_planned=exclude_planned), attempts=[]
        ),
    )
    return replace(report, run=run), key


def run_mfu_cached(*, run: Run, window: Window | None = None) -> tuple[MfuReport, str]:
    """run_mfu, computed once per version of the run's data; and the cache key. The report's
    `attempts` is left empty: `restarts` has what the chart needs of them."""
    window = window or Window()
    version = run_cache.run_version_key(run=run)
    key = f"mfu:{version}:{_catalog_version()}:{_window_key(window)}"
    report = run_cache.cached(key, lambda: replace(run_mfu(run=run, window=window), attempts=[]))
    return replace(report, run=run), key
