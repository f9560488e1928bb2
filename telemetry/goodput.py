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

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from telemetry.goodput_inputs import (
    ACCELERATOR_INIT,
    BADPUT_BUCKETS,
    BUCKET_LABELS,
    CHECKPOINT_RESTORE,
    CHECKPOINT_SAVE,
    CUSTOM_PREFIX,
    DATA_LOADING_ASYNC,
    DATA_LOADING_SYNC,
    EPSILON_S,
    INFRASTRUCTURE_RECOVERY,
    INTERRUPTION_BUCKETS,
    KIND_ACCELERATOR_INIT,
    KIND_CUSTOM,
    KIND_DATA_LOADING,
    KIND_TRAINING_PREP,
    MAD_FACTOR,
    OTHER,
    PRODUCTIVE,
    PROGRAM_STARTUP,
    TRAINING_PREP,
    WASTED_PROGRESS,
    AttemptRecord,
    CheckpointSave,
    GoodputInputs,
    Interval,
    Restore,
    bucket_label,
)
from telemetry.goodput_ledger import (
    NO_STEP_DATA,
    STEP_BUCKETS,
    FloatArray,
    Ledger,
    Segment,
    Spans,
    build_ledger,
    typical_step_time,
)

# The vocabulary, inputs and ledger live in telemetry.goodput_inputs and
# telemetry.goodput_ledger; this module, which sums the ledger, is where callers import them.
__all__ = [
    "ACCELERATOR_INIT", "BADPUT_BUCKETS", "BUCKET_LABELS", "CHECKPOINT_RESTORE",
    "CHECKPOINT_SAVE", "CUSTOM_PREFIX", "DATA_LOADING_ASYNC", "DATA_LOADING_SYNC", "EPSILON_S",
    "INFRASTRUCTURE_RECOVERY", "INTERRUPTION_BUCKETS", "KIND_ACCELERATOR_INIT", "KIND_CUSTOM",
    "KIND_DATA_LOADING", "KIND_TRAINING_PREP", "MAD_FACTOR", "NO_STEP_DATA", "OTHER",
    "PRODUCTIVE", "PROGRAM_STARTUP", "STEP_BUCKETS", "TRAINING_PREP", "WASTED_PROGRESS",
    "AttemptRecord", "CheckpointSave", "FloatArray", "GoodputInputs", "GoodputResult",
    "Interval", "Ledger", "Restore", "Segment", "Spans", "bucket_label", "build_ledger",
    "goodput", "merge_windows", "rolling_goodput", "summarise", "typical_step_time",
]  # fmt: skip

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
    not_reported: frozenset[str] = frozenset()  # buckets with no input (see Ledger)
    not_computable: str = ""  # the reason goodput is NaN although time elapsed

    def reported(self, bucket: str) -> bool:
        return bucket not in self.not_reported

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

    # Only the spans that can reach the window (in ledger order): the others add zeros, so
    # the sums are the same, and rolling or per-attempt windows stay linear.
    every = ledger.spans()
    codes, counted = every.in_window(low, high, merged)

    # bincount adds each bucket's amounts one after the other, in ledger order.
    sums = np.bincount(codes, weights=counted, minlength=len(every.names)).astype(np.float64)
    totals: dict[str, float] = dict(zip(every.names, sums.tolist(), strict=True))

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
        goodput=productive / elapsed if elapsed > 0 and not ledger.not_computable else math.nan,
        disruptions=ledger.disruptions,
        segments=list(ledger.segments),
        warnings=warnings,
        not_reported=frozenset(ledger.not_reported),
        not_computable=ledger.not_computable,
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
