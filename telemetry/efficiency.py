"""Reads behind the MFU and goodput pages: load a run's inputs, build the pure inputs of
telemetry.mfu and telemetry.goodput, and return what the pages and the JSON show.

Checkpoints, restores and interruptions are logbook's; they are reached through the reverse
relations logbook declares (by name, without importing logbook), as telemetry.selectors does,
so telemetry stays at the bottom of the dependency order. Every function costs a fixed number
of queries, whatever the number of attempts, steps or intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pandas as pd
from django.utils import timezone

from telemetry import goodput as gp
from telemetry import mfu as mf
from telemetry.downsample import minmax_indices, split_budget
from telemetry.models import AcceleratorType, Attempt, JobInterval, MetricPoint, Run, StepStart

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
    """Per-step MFU (or HFU) of every attempt, downsampled for charts, with its means."""
    window = window or Window()
    inputs, missing, accelerator_source = _mfu_inputs(run)
    tokens_per_step = _tokens_per_step(run)
    attempts = list(run.attempts.order_by("number"))
    interruptions = _interruption_marks(run)
    points = MetricPoint.objects.filter(
        series__run=run, series__name__in=[TOKENS_PER_S, STEP_TIME_S]
    )
    if window.start is not None:
        points = points.filter(wall_time__gte=window.start)
    if window.end is not None:
        points = points.filter(wall_time__lte=window.end)
    rows = list(
        points.values_list("series__attempt__number", "series__name", "step", "value", "wall_time")
    )
    frame = pd.DataFrame(rows, columns=["attempt", "name", "step", "value", "wall_time"])
    frame["value"] = frame["value"].astype(float)  # NULL (SQLite's NaN) becomes NaN
    table = pd.DataFrame(columns=["attempt", "step", "wall_time", TOKENS_PER_S, STEP_TIME_S])
    if not frame.empty:
        # One row per (attempt, step) that has a point; unstack keeps NaN values (a pivot
        # table would drop them, or with dropna=False invent every attempt x step pair).
        wide = frame.set_index(["attempt", "step", "name"])["value"].unstack("name")
        times = frame.groupby(["attempt", "step"])["wall_time"].min()
        wide = wide.reindex(columns=[TOKENS_PER_S, STEP_TIME_S])
        wide["wall_time"] = times
        table = wide.reset_index().sort_values(["attempt", "step"], ignore_index=True)
    source = ""
    throughput = np.full(len(table), np.nan)
    if len(table):
        reported = table[TOKENS_PER_S].to_numpy(dtype=float)
        step_time = table[STEP_TIME_S].to_numpy(dtype=float)
        if np.isfinite(reported).any():
            source, throughput = TOKENS_PER_S, reported
        elif tokens_per_step and np.isfinite(step_time).any():
            source = STEP_TIME_S
            throughput = mf.tokens_per_s_from_step_time(step_time, tokens_per_step=tokens_per_step)
    if not source and not missing:
        missing.append(
            "no throughput reported: send tokens_per_s, or step_time_s with tokens_per_step"
        )
    table[TOKENS_PER_S] = throughput
    if inputs is not None:
        table["mfu"] = mf.mfu_array(
            throughput,
            flops_per_token=inputs.flops_per_token,
            n_accelerators=inputs.n_accelerators,
            peak_flops=inputs.peak_flops,
        )
    else:
        table["mfu"] = np.nan
    weights = table[STEP_TIME_S].to_numpy(dtype=float) if len(table) else None
    if weights is not None and not np.isfinite(weights).any():
        weights = None
    mean = mf.mean_utilisation(table["mfu"].to_numpy(dtype=float), weights)
    per_attempt = pd.DataFrame(
        [
            {
                "attempt": int(number),
                "steps": len(group),
                "first_step": int(group["step"].min()),
                "last_step": int(group["step"].max()),
                "mean": mf.mean_utilisation(
                    group["mfu"].to_numpy(dtype=float),
                    group[STEP_TIME_S].to_numpy(dtype=float) if weights is not None else None,
                ),
            }
            for number, group in table.groupby("attempt", sort=True)
        ],
        columns=["attempt", "steps", "first_step", "last_step", "mean"],
    )
    return MfuReport(
        run=run,
        inputs=inputs,
        missing=missing,
        tokens_per_step=tokens_per_step,
        throughput_source=source,
        window=window,
        points=_downsample(table),
        total_points=len(table),
        mean=mean,
        per_attempt=per_attempt,
        attempts=attempts,
        interruptions=interruptions,
        accelerator_source=accelerator_source,
    )


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
        run.interruptions.order_by("occurred_at").values_list(  # type: ignore[attr-defined]
            "occurred_at", "recovered_at", "step", "root_cause__name", "planned"
        )
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


def goodput_inputs(*, run: Run, attempts: list[Attempt]) -> tuple[gp.GoodputInputs, str]:
    """The pure inputs for a run (six queries at most), and where the step starts came from."""
    starts: dict[int, list[tuple[int, float]]] = {a.number: [] for a in attempts}
    for number, step, started_at in StepStart.objects.filter(attempt__run=run).values_list(
        "attempt__number", "step", "started_at"
    ):
        starts.setdefault(number, []).append((step, started_at.timestamp()))
    recorded = {number for number, values in starts.items() if values}
    derived: set[int] = set()
    if len(recorded) < len(attempts):
        # A job that never sent step_times still reports step_time_s with a wall time (the end
        # of the step): start = end - duration. Whole-second wall times make this approximate.
        for number, step, value, wall_time in MetricPoint.objects.filter(
            series__run=run, series__name=STEP_TIME_S, wall_time__isnull=False
        ).values_list("series__attempt__number", "step", "value", "wall_time"):
            if number in recorded or value is None or not math.isfinite(value):
                continue
            starts.setdefault(number, []).append((step, wall_time.timestamp() - value))
            derived.add(number)
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
    step_times = {step: moment for values in starts.values() for step, moment in sorted(values)}
    for step, blocking_s, saved_at in run.checkpoints.filter(  # type: ignore[attr-defined]
        blocking_save_s__isnull=False
    ).values_list("step", "blocking_save_s", "saved_at"):
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
    for number, restored_at, restore_s in run.checkpoints.filter(  # type: ignore[attr-defined]
        restores__restore_s__isnull=False
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
            step_starts=sorted(starts.get(a.number, [])),
        )
        for a in attempts
    ]
    as_of = None
    if attempts and attempts[-1].ended_at is None:
        # A running job's elapsed time ends at the latest data received, so a run that stopped
        # reporting is not charged for the days since (the library would use the query time).
        latest = [run.last_seen_at, *(a.started_at for a in attempts)]
        moments = [m.timestamp() for m in latest if m is not None]
        moments += [t for values in starts.values() for _, t in values]
        moments += [i.end for i in intervals]
        as_of = max(moments) if moments else timezone.now().timestamp()
    inputs = gp.GoodputInputs(
        attempts=records, intervals=intervals, checkpoint_saves=saves, restores=restores,
        as_of=as_of,
    )  # fmt: skip
    return inputs, source


def planned_windows(*, run: Run, attempts: list[Attempt]) -> list[tuple[datetime, datetime]]:
    """Planned-maintenance windows: a planned interruption until it was recovered, or until
    the next attempt started when recovery was not reported."""
    windows = []
    starts = sorted(a.started_at for a in attempts if a.started_at is not None)
    for occurred, recovered in run.interruptions.filter(  # type: ignore[attr-defined]
        planned=True
    ).values_list("occurred_at", "recovered_at"):
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
    bounds = [a.started_at.timestamp() for a in attempts if a.started_at is not None]
    rows = []
    for index, start in enumerate(bounds):
        end = bounds[index + 1] if index + 1 < len(bounds) else ledger.job_end
        one = gp.summarise(ledger, window=(start, end), exclusions=excluded_s)
        number = [a.number for a in attempts if a.started_at is not None][index]
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
    if window.as_seconds() is not None:
        w_low, w_high = window.as_seconds()  # type: ignore[misc]
        low, high = max(low, w_low), min(high, w_high)
    if high > low:
        width = max(ROLLING_MIN_WIDTH_S, (high - low) / 12)
        clipped = gp.Ledger(
            job_start=low, job_end=high, starts=ledger.starts, ends=ledger.ends,
            buckets=ledger.buckets, amounts=ledger.amounts,
        )  # fmt: skip
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
