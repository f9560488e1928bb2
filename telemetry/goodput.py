"""Goodput and badput: pure maths, no database. Times are POSIX seconds (floats).

Follows the segment algorithm of Google's open-source ml-goodput-measurement (0.2.x,
`goodput.py::_get_current_productive_and_unproductive_time`) so the numbers can be compared
with Google's tooling:

* Each attempt's step starts form a segment. The next attempt resumes at step r (a restart is
  an attempt boundary, or a step number seen again). For consecutive steps s-1 -> s with
  delta = start(s) - start(s-1): if s <= r the interval is kept and productive, less the
  custom badput intervals (eval, SDC scan) lying fully inside it; if s > r it is wasted
  progress (the step is computed again after the restart).
* Program startup = the segment's first kept interval's excess over the typical step time of
  the rest of the segment. A one-interval segment has no startup.
* Infrastructure recovery = the next job start - the start of the last step before the
  restart: the unfinished step, the downtime and the relaunch.
* The last step counts (job end - its start) only when the job completed.
* Data loading: the first interval after each job start is synchronous badput; later ones
  overlap training (asynchronous) and are reported but not subtracted.
* Blocking checkpoint saves are badput and are also taken out of productive time (they happen
  inside step intervals). Restores, accelerator init and training prep are badput.
* OTHER = elapsed - productive - every other bucket (asynchronous data loading excepted).
* Goodput = productive / elapsed.

Windows and exclusions (planned maintenance) work on a ledger: every amount of time is a span
(start, end, bucket, amount). A window counts the part of each span that falls in it, pro
rata, and excluded wall time is removed from the spans and from the elapsed time alike. Over
the whole job with no exclusion the sums are exactly the library's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

PRODUCTIVE = "productive"
ACCELERATOR_INIT = "accelerator_init"
TRAINING_PREP = "training_prep"
PROGRAM_STARTUP = "program_startup"
DATA_LOADING_SYNC = "data_loading_sync"
DATA_LOADING_ASYNC = "data_loading_async"
CHECKPOINT_SAVE = "checkpoint_save"
CHECKPOINT_RESTORE = "checkpoint_restore"
WASTED_PROGRESS = "wasted_progress"
INFRASTRUCTURE_RECOVERY = "infrastructure_recovery"
OTHER = "other"
CUSTOM_PREFIX = "custom:"

# Display order of the badput buckets; custom ones go before OTHER.
BADPUT_BUCKETS = (
    ACCELERATOR_INIT,
    TRAINING_PREP,
    PROGRAM_STARTUP,
    DATA_LOADING_SYNC,
    CHECKPOINT_SAVE,
    CHECKPOINT_RESTORE,
    WASTED_PROGRESS,
    INFRASTRUCTURE_RECOVERY,
)
BUCKET_LABELS = {
    PRODUCTIVE: "Productive",
    ACCELERATOR_INIT: "Accelerator init",
    TRAINING_PREP: "Training prep",
    PROGRAM_STARTUP: "Program startup",
    DATA_LOADING_SYNC: "Data loading (sync)",
    DATA_LOADING_ASYNC: "Data loading (async, overlapped)",
    CHECKPOINT_SAVE: "Checkpoint save (blocking)",
    CHECKPOINT_RESTORE: "Checkpoint restore",
    WASTED_PROGRESS: "Wasted progress",
    INFRASTRUCTURE_RECOVERY: "Infrastructure recovery",
    OTHER: "Other",
}

# Interval kinds as ingest names them (telemetry.models.JobInterval.Kind values).
KIND_ACCELERATOR_INIT = "accelerator_init"
KIND_TRAINING_PREP = "training_prep"
KIND_DATA_LOADING = "data_loading"
KIND_CUSTOM = "custom"

MAD_FACTOR = 3.0
# Float noise allowed when comparing sums of seconds.
EPSILON_S = 1e-9


def bucket_label(bucket: str) -> str:
    if bucket.startswith(CUSTOM_PREFIX):
        return f"Custom: {bucket[len(CUSTOM_PREFIX) :]}"
    return BUCKET_LABELS.get(bucket, bucket)


# --- Inputs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptRecord:
    """One job launch: its start, its end (if known), whether it completed, and when each of
    its steps began as (step, start) pairs."""

    number: int
    job_start: float | None
    job_end: float | None = None
    completed: bool = False
    step_starts: Sequence[tuple[int, float]] = ()


@dataclass(frozen=True)
class Interval:
    """Wall time spent on one thing: kind is accelerator_init, training_prep, data_loading or
    custom (label says which: eval, sdc_scan...)."""

    kind: str
    start: float
    end: float
    label: str = ""


@dataclass(frozen=True)
class CheckpointSave:
    """A blocking save of the checkpoint at `step`, ending at `at`."""

    step: int
    blocking_s: float
    at: float


@dataclass(frozen=True)
class Restore:
    """An attempt's checkpoint restore, ending at `at`."""

    duration_s: float
    at: float


@dataclass(frozen=True)
class GoodputInputs:
    attempts: Sequence[AttemptRecord]
    intervals: Sequence[Interval] = ()
    checkpoint_saves: Sequence[CheckpointSave] = ()
    restores: Sequence[Restore] = ()
    # Where elapsed time ends when the last attempt has not ended (the query time).
    as_of: float | None = None


# --- Typical step time ------------------------------------------------------------------------


def typical_step_time(step_times_s: npt.ArrayLike) -> float:
    """Mean of the step times at or below median + 3·MAD (the robust "ideal" step time of
    ml-goodput-measurement's compute_ideal_step_time): slow outliers such as a checkpoint
    stall do not pull it up. NaN for no steps."""
    times = np.asarray(step_times_s, dtype=np.float64)
    times = times[np.isfinite(times)]
    if times.size == 0:
        return math.nan
    median = float(np.median(times))
    mad = float(np.median(np.abs(times - median)))
    return float(times[times <= median + MAD_FACTOR * mad].mean())


# --- The ledger -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """What the algorithm found in one attempt's steps (shown beside the numbers)."""

    attempt: int
    first_step: int
    last_step: int
    resume_step: int  # r: steps after it were computed again (or never finished)
    kept_intervals: int
    wasted_intervals: int
    first_step_s: float
    typical_step_s: float
    program_startup_s: float


@dataclass
class Ledger:
    """Every amount of time the algorithm assigned, as spans, plus the job's time bounds."""

    job_start: float
    job_end: float
    segments: list[Segment] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    buckets: list[str] = field(default_factory=list)
    amounts: list[float] = field(default_factory=list)
    disruptions: int = 0

    def add(self, bucket: str, start: float, end: float, amount: float) -> None:
        if amount == 0:
            return
        self.starts.append(start)
        self.ends.append(max(start, end))
        self.buckets.append(bucket)
        self.amounts.append(amount)


def build_ledger(inputs: GoodputInputs) -> Ledger | None:
    """Assign the job's time to buckets. None when there is no job time at all."""
    attempts = sorted(inputs.attempts, key=lambda a: a.number)
    starts = [a.job_start for a in attempts if a.job_start is not None]
    first_steps = [min(t for _, t in a.step_starts) for a in attempts if a.step_starts]
    if not starts and not first_steps:
        return None
    job_start = min(starts) if starts else min(first_steps)
    last = attempts[-1]
    if last.job_end is not None:
        job_end = last.job_end
    elif inputs.as_of is not None:
        job_end = inputs.as_of
    else:
        job_end = max([job_start, *[t for a in attempts for _, t in a.step_starts]])
    ledger = Ledger(job_start=job_start, job_end=job_end)

    customs = sorted((i for i in inputs.intervals if i.kind == KIND_CUSTOM), key=lambda i: i.start)
    stepped = [a for a in attempts if a.step_starts]
    for index, attempt in enumerate(stepped):
        steps = sorted(attempt.step_starts)
        following = stepped[index + 1] if index + 1 < len(stepped) else None
        if following is None:
            resume = steps[-1][0]
        else:
            resume = min(following.step_starts)[0]
            ledger.disruptions += 1
        _segment(ledger, attempt.number, steps, resume, customs)
        last_step_start = steps[-1][1]
        if following is not None:
            restart = following.job_start
            if restart is None:
                restart = min(t for _, t in following.step_starts)
            if restart > last_step_start:
                ledger.add(
                    INFRASTRUCTURE_RECOVERY, last_step_start, restart, restart - last_step_start
                )
        elif attempt is last and attempt.completed and attempt.job_end is not None:
            # The final step finished only if the job says it completed.
            tail = max(0.0, attempt.job_end - last_step_start)
            ledger.add(PRODUCTIVE, last_step_start, attempt.job_end, tail)

    _intervals(ledger, inputs.intervals, sorted(starts))
    seen_steps: set[int] = set()
    for save in inputs.checkpoint_saves:
        # One save per step counts (ml-goodput-measurement averages hosts per step).
        if save.step in seen_steps or save.blocking_s <= 0:
            continue
        seen_steps.add(save.step)
        begin = save.at - save.blocking_s
        ledger.add(CHECKPOINT_SAVE, begin, save.at, save.blocking_s)
        # Saves stall the step they happen in, so that step's productive time is shorter.
        ledger.add(PRODUCTIVE, begin, save.at, -save.blocking_s)
    for restore in inputs.restores:
        if restore.duration_s > 0:
            ledger.add(
                CHECKPOINT_RESTORE, restore.at - restore.duration_s, restore.at, restore.duration_s
            )
    return ledger


def _segment(
    ledger: Ledger,
    attempt: int,
    steps: list[tuple[int, float]],
    resume: int,
    customs: list[Interval],
) -> None:
    kept: list[tuple[float, float, float]] = []  # (start, end, adjusted duration)
    wasted = 0
    for (previous, begin), (step, end) in itertools.pairwise(steps):
        if step != previous + 1:
            continue  # a gap in the step numbers: nothing known about what happened there
        delta = end - begin
        if step <= resume:
            inside = [c for c in customs if begin <= c.start and c.end <= end]
            for custom in inside:
                ledger.add(
                    CUSTOM_PREFIX + (custom.label or "custom"),
                    custom.start,
                    custom.end,
                    custom.end - custom.start,
                )
            adjusted = max(0.0, delta - sum(c.end - c.start for c in inside))
            kept.append((begin, end, adjusted))
        else:
            wasted += 1
            ledger.add(WASTED_PROGRESS, begin, end, delta)
    startup = 0.0
    typical = math.nan
    if len(kept) >= 2:
        typical = typical_step_time([k[2] for k in kept[1:]])
        startup = max(0.0, kept[0][2] - typical)
    for position, (begin, end, adjusted) in enumerate(kept):
        if position == 0 and startup > 0:
            ledger.add(PROGRAM_STARTUP, begin, end, startup)
            adjusted -= startup
        ledger.add(PRODUCTIVE, begin, end, adjusted)
    ledger.segments.append(
        Segment(
            attempt=attempt,
            first_step=steps[0][0],
            last_step=steps[-1][0],
            resume_step=resume,
            kept_intervals=len(kept),
            wasted_intervals=wasted,
            first_step_s=kept[0][2] if kept else math.nan,
            typical_step_s=typical,
            program_startup_s=startup,
        )
    )


def _intervals(ledger: Ledger, intervals: Sequence[Interval], job_starts: list[float]) -> None:
    sync_taken: set[int] = set()
    for interval in sorted(intervals, key=lambda i: i.start):
        duration = interval.end - interval.start
        if duration <= 0:
            continue
        if interval.kind == KIND_ACCELERATOR_INIT:
            ledger.add(ACCELERATOR_INIT, interval.start, interval.end, duration)
        elif interval.kind == KIND_TRAINING_PREP:
            ledger.add(TRAINING_PREP, interval.start, interval.end, duration)
        elif interval.kind == KIND_DATA_LOADING:
            # The first load after each job start blocks training; later ones overlap it.
            launch = int(np.searchsorted(job_starts, interval.start, side="right"))
            bucket = DATA_LOADING_ASYNC if launch in sync_taken else DATA_LOADING_SYNC
            sync_taken.add(launch)
            ledger.add(bucket, interval.start, interval.end, duration)
        # Custom intervals count only inside kept step intervals (see _segment); checkpoint
        # save/restore intervals arrive as CheckpointSave/Restore.


# --- Summaries --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoodputResult:
    window_start: float
    window_end: float
    elapsed_s: float
    excluded_s: float
    productive_s: float
    badput_s: dict[str, float]  # every bucket but productive and async loading, OTHER last
    data_loading_async_s: float
    goodput: float  # fraction; NaN when nothing elapsed
    disruptions: int
    segments: list[Segment]
    warnings: list[str]

    @property
    def goodput_pct(self) -> float:
        return 100.0 * self.goodput


def merge_windows(windows: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(w for w in windows if w[1] > w[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _visible(
    starts: FloatArray,
    ends: FloatArray,
    low: float,
    high: float,
    exclusions: list[tuple[float, float]],
) -> FloatArray:
    """Seconds of each [start, end) inside [low, high) and outside every exclusion."""
    lo = np.maximum(starts, low)
    hi = np.minimum(ends, high)
    seen = np.clip(hi - lo, 0.0, None)
    for ex_start, ex_end in exclusions:
        seen -= np.clip(np.minimum(hi, ex_end) - np.maximum(lo, ex_start), 0.0, None)
    return np.clip(seen, 0.0, None)


def summarise(
    ledger: Ledger,
    *,
    window: tuple[float, float] | None = None,
    exclusions: Sequence[tuple[float, float]] = (),
) -> GoodputResult:
    """Productive time, each badput bucket and goodput over the job, or over `window`
    (clipped to the job), with `exclusions` (planned maintenance) removed from all of it."""
    low, high = ledger.job_start, ledger.job_end
    if window is not None:
        low, high = max(low, window[0]), min(high, window[1])
    high = max(low, high)
    merged = merge_windows(exclusions)
    excluded = sum(max(0.0, min(high, end) - max(low, start)) for start, end in merged)
    elapsed = (high - low) - excluded

    starts = np.asarray(ledger.starts, dtype=np.float64)
    ends = np.asarray(ledger.ends, dtype=np.float64)
    amounts = np.asarray(ledger.amounts, dtype=np.float64)
    lengths = ends - starts
    spans = lengths > 0
    weight = np.zeros_like(amounts)
    if spans.any():
        weight[spans] = _visible(starts[spans], ends[spans], low, high, merged) / lengths[spans]
    # Instantaneous amounts count whole if they fall in the window and outside exclusions.
    points = ~spans
    if points.any():
        inside = (starts[points] >= low) & (starts[points] < high)
        for ex_start, ex_end in merged:
            inside &= ~((starts[points] >= ex_start) & (starts[points] < ex_end))
        weight[points] = inside.astype(np.float64)
    counted = amounts * weight

    totals: dict[str, float] = {}
    for bucket, value in zip(ledger.buckets, counted.tolist(), strict=True):
        totals[bucket] = totals.get(bucket, 0.0) + value

    warnings: list[str] = []
    productive = totals.pop(PRODUCTIVE, 0.0)
    if productive < -EPSILON_S or productive > elapsed + EPSILON_S:
        warnings.append(
            f"productive time {productive:.3f} s is outside [0, elapsed {elapsed:.3f} s]: "
            "the events contradict each other (blocking saves longer than the steps?)"
        )
        productive = min(max(productive, 0.0), max(elapsed, 0.0))
    async_loading = totals.pop(DATA_LOADING_ASYNC, 0.0)
    customs = sorted(b for b in totals if b.startswith(CUSTOM_PREFIX))
    badput: dict[str, float] = {}
    for bucket in [*BADPUT_BUCKETS, *customs]:
        value = totals.get(bucket, 0.0)
        # As ml-goodput-measurement does: a bucket outside (0, elapsed) is discarded.
        badput[bucket] = value if -EPSILON_S <= value <= elapsed + EPSILON_S else 0.0
    badput[OTHER] = max(0.0, elapsed - productive - sum(badput.values()))
    return GoodputResult(
        window_start=low,
        window_end=high,
        elapsed_s=elapsed,
        excluded_s=excluded,
        productive_s=productive,
        badput_s=badput,
        data_loading_async_s=async_loading,
        goodput=productive / elapsed if elapsed > 0 else math.nan,
        disruptions=ledger.disruptions,
        segments=list(ledger.segments),
        warnings=warnings,
    )


def goodput(
    inputs: GoodputInputs,
    *,
    window: tuple[float, float] | None = None,
    exclusions: Sequence[tuple[float, float]] = (),
) -> GoodputResult | None:
    """The whole computation: None when the inputs hold no job time."""
    ledger = build_ledger(inputs)
    if ledger is None:
        return None
    return summarise(ledger, window=window, exclusions=exclusions)


def rolling_goodput(
    ledger: Ledger,
    *,
    width_s: float,
    n_windows: int = 60,
    exclusions: Sequence[tuple[float, float]] = (),
) -> list[GoodputResult]:
    """Goodput over sliding windows of `width_s` ending at `n_windows` evenly spaced times
    across the job (windows shorter at the start, where the job had not run `width_s` yet)."""
    if width_s <= 0 or n_windows < 1 or ledger.job_end <= ledger.job_start:
        return []
    ends = np.linspace(ledger.job_start, ledger.job_end, n_windows + 1)[1:]
    return [
        summarise(ledger, window=(float(end) - width_s, float(end)), exclusions=exclusions)
        for end in ends
    ]
