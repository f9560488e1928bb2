"""Reads behind the MFU page and its JSON: load a run's throughput (its sums as PostgreSQL
keeps them, the points in a window, the chart's rollups) and its accelerators, build the pure
inputs of telemetry.mfu, and return what the page shows, cached under the run's data version.
Every function costs a fixed number of queries, whatever the number of attempts or steps.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from django.db import router

from dashboard.query import Window, window_key
from logbook.models import Interruption
from telemetry import mfu as mf
from telemetry import run_cache
from telemetry.downsample import minmax_indices, split_budget
from telemetry.models import (
    AcceleratorType,
    Attempt,
    MetricSeries,
    Run,
    ThroughputSum,
)
from telemetry.selectors import packed
from telemetry.selectors import series as series_selectors

TOKENS_PER_S = "tokens_per_s"
STEP_TIME_S = "step_time_s"
CHART_MAX_POINTS = 3000


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
    # A million steps per metric, read packed, merged per attempt with numpy.
    by_attempt: dict[int, dict[str, tuple[Any, Any, Any]]] = {}
    points = packed.series_points_packed(
        series_ids=list(series), start=window.start, end=window.end
    )
    for series_id, arrays in points.items():
        number, name = series[series_id]
        by_attempt.setdefault(number, {})[name] = arrays
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


# --- Cached, for the page and the JSON -----------------------------------------------------


def _catalog_version() -> str:
    """The accelerator catalog, which MFU reads, is not one run's data (admins edit it, for
    every run): its rows go in the MFU key. One query, of a few dozen rows."""
    rows = AcceleratorType.objects.order_by("pk").values_list(
        "name", "aliases", "peak_flops_bf16", "source"
    )
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()[:16]


def run_mfu_cached(*, run: Run, window: Window | None = None) -> tuple[MfuReport, str]:
    """run_mfu, computed once per version of the run's data; and the cache key. The report's
    `attempts` is left empty: `restarts` has what the chart needs of them."""
    window = window or Window()
    version = run_cache.run_version_key(run=run)
    key = f"mfu:{version}:{_catalog_version()}:{window_key(window)}"
    report = run_cache.cached(key, lambda: replace(run_mfu(run=run, window=window), attempts=[]))
    return replace(report, run=run), key
