"""Straggler scores, as nvidia-resiliency-ext (NVRx) defines them, and the straggler rule.

NVRx times named sections on every rank and, per report window, takes each rank's median
section time. Its two scores are ratios in (0, 1]:

- relative score = the fastest rank's time / this rank's time (0.5: twice as slow as the
  fastest rank in the same window);
- individual score = this rank's own best time so far / its time now (0.5: twice as slow as
  it used to be), which also catches a whole job slowing down together.

A rank is a straggler when a score stays below a threshold (NVRx's examples use 0.7 and
0.75) for `windows` consecutive report windows. Pure: no ORM, no Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def relative_scores(times_s: Mapping[int, float]) -> dict[int, float]:
    """Per rank: the window's fastest time over the rank's. Ranks with no positive time are
    left out (a zero time has no ratio)."""
    best = fastest_time(times_s)
    if best is None:
        return {}
    return {rank: best / t for rank, t in times_s.items() if t > 0 and np.isfinite(t)}


def fastest_time(times_s: Mapping[int, float]) -> float | None:
    """The window's fastest positive, finite time (relative scores' numerator), or None."""
    return min((t for t in times_s.values() if t > 0 and np.isfinite(t)), default=None)


def individual_scores(
    times_s: Mapping[int, float], best_s: Mapping[int, float]
) -> dict[int, float]:
    """Per rank: its best time so far (`best_s`, which should include this window) over its
    time now. A rank without history scores 1."""
    scores = {}
    for rank, t in times_s.items():
        if not (t > 0 and np.isfinite(t)):
            continue
        best = min(best_s.get(rank, t), t)
        scores[rank] = best / t
    return scores


def stragglers(
    windows: Sequence[Mapping[int, float]], *, threshold: float, windows_needed: int
) -> dict[int, float]:
    """Ranks whose score is below `threshold` in each of the last `windows_needed` windows
    (oldest first), with their lowest score over those windows. A rank missing from any of
    them is not counted: a gap breaks the streak."""
    if windows_needed < 1 or len(windows) < windows_needed:
        return {}
    recent = windows[-windows_needed:]
    candidates = set(recent[0])
    for window in recent[1:]:
        candidates &= set(window)
    return {
        rank: min(window[rank] for window in recent)
        for rank in sorted(candidates)
        if all(window[rank] < threshold for window in recent)
    }


def streak_start(scores: Sequence[float | None], *, threshold: float) -> int:
    """Index (in `scores`, one rank's scores per window, oldest first; None where it has no
    time) where its trailing run of windows below `threshold` begins; len(scores) when the
    last window is not below it. A missing window ends the run, as in `stragglers`."""
    start = len(scores)
    while start > 0:
        score = scores[start - 1]
        if score is None or not score < threshold:
            break
        start -= 1
    return start


def percentiles(values: np.ndarray) -> tuple[float, float, float, float, float]:
    """(min, median, p90, p99, max) with linear interpolation (numpy's default)."""
    low, median, p90, p99, high = np.percentile(values, [0, 50, 90, 99, 100])
    return float(low), float(median), float(p90), float(p99), float(high)
