"""Reads behind the goodput page and its JSON: load a run's attempts, step starts and job
intervals (telemetry) and its checkpoints, restores and interruptions (the logbook), build the
pure inputs of telemetry.goodput, and return the report, cached under the run's data version.
Every function costs a fixed number of queries, whatever the number of attempts, steps or
intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import pandas as pd
from django.utils import timezone

from dashboard.query import Window, window_key
from dashboard.selectors.mfu import STEP_TIME_S
from diagnosis.selectors import slowdowns as slowdown_selectors
from logbook.models import Checkpoint, Interruption
from telemetry import goodput as gp
from telemetry import goodput_ledger, run_cache
from telemetry.goodput_slowdowns import with_slowdowns
from telemetry.models import (
    Attempt,
    JobInterval,
    Run,
)
from telemetry.selectors import packed

ROLLING_WINDOWS = 60
ROLLING_MIN_WIDTH_S = 60.0


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


def _step_starts_derived(run: Run, numbers: list[int]) -> dict[int, FloatArray]:
    """A job that never sent step_times still reports step_time_s with a wall time (the end
    of the step): start = end - duration. Whole-second wall times make this approximate."""
    if not numbers:
        return {}
    found = {}
    ends = packed.step_ends_with_durations(run=run, metric=STEP_TIME_S, numbers=numbers)
    for number, (pairs, durations) in ends.items():
        pairs[:, 1] -= durations
        found[number] = pairs
    return found


def goodput_inputs(*, run: Run, attempts: list[Attempt]) -> tuple[gp.GoodputInputs, str]:
    """The pure inputs for a run (seven queries at most), and where the step starts came
    from."""
    starts = {
        number: pairs
        for number, pairs in packed.step_starts_recorded(run=run).items()
        if len(pairs)
    }
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
        steps, times = goodput_ledger._step_arrays(
            starts[number]
        )  # (step, start) order, as sorted()
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
    # Time in productive steps run below the baseline pace is badput too (diagnosis's
    # slowdowns, by cause), so the buckets still add up to the elapsed time.
    slowed = slowdown_selectors.lost_windows(run=run)
    report.result = with_slowdowns(
        gp.summarise(ledger, window=window.as_seconds(), exclusions=excluded_s), slowed
    )
    # Per attempt: from its job start to the next one's (so its recovery is charged to it).
    started = [(a.number, a.started_at.timestamp()) for a in attempts if a.started_at is not None]
    bounds = [start for _, start in started]
    rows = []
    for index, start in enumerate(bounds):
        end = bounds[index + 1] if index + 1 < len(bounds) else ledger.job_end
        one = with_slowdowns(
            gp.summarise(ledger, window=(start, end), exclusions=excluded_s), slowed
        )
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


# --- Cached, for the page and the JSON -----------------------------------------------------


def run_goodput_cached(
    *, run: Run, window: Window | None = None, exclude_planned: bool = False
) -> tuple[GoodputReport, str]:
    """run_goodput, computed once per version of the run's data; and the cache key, for what
    callers derive from it. The report's `attempts` is left empty (the pages do not use it)."""
    window = window or Window()
    version = run_cache.run_version_key(run=run)
    key = f"goodput:{version}:{window_key(window)}:{int(exclude_planned)}"
    report = run_cache.cached(
        key,
        lambda: replace(
            run_goodput(run=run, window=window, exclude_planned=exclude_planned), attempts=[]
        ),
    )
    return replace(report, run=run), key
