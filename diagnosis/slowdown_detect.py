"""Slowdown detection: where a run's throughput fell below its own recent baseline and stayed
there. Pure (numpy and `ruptures`, no ORM): the selectors hand in each attempt's throughput
points, `detect` answers the windows.

How:
- The attempts' points are laid end to end in attempt order, less the known intervals that
  are not slowdowns: each attempt's first `WARMUP_STEPS` steps (compilation, cache warm-up,
  the restore's first steps) and the steps of a blocking checkpoint save and the one after.
- A long series is averaged in consecutive blocks to at most `MAX_POINTS` points (a 54-day
  run has 777,600 steps; the detector's cost grows with the points, not with the steps).
- `ruptures`' PELT with a least-squares cost finds the change points; its penalty is
  `PENALTY_SIGMAS` times the series' own noise variance (estimated from point-to-point
  differences, robust to the level shifts themselves) times log(n), so a noisier run needs a
  bigger change before a segment is cut.
- Segments are walked in order against a baseline: the median of the latest segment that
  was not slow. A segment `MIN_DROP` or more below it, of at least `MIN_STEPS` steps, is slow;
  consecutive slow segments make one window. A faster or level segment becomes the baseline
  (a config change that speeds the run up raises the bar).

The thresholds are in diagnosis.slowdown_rules with the attribution rules that use them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import ruptures

from diagnosis import slowdown_rules as rules

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class AttemptThroughput:
    """One attempt's throughput points in step order. `values` grow with speed (tokens/s,
    MFU, or 1 / step time); `times` are epoch seconds, NaN where a point has none."""

    attempt: int
    steps: IntArray
    values: FloatArray
    times: FloatArray
    # Steps that are known not to be training at pace (a blocking checkpoint save).
    excluded_steps: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Window:
    """A slowdown: points [first, last] of the analysed series (indices into Analysed)."""

    first: int
    last: int
    baseline: float
    value: float
    # The baseline segment's points, for the attribution's before/after comparison.
    baseline_first: int
    baseline_last: int

    @property
    def drop_pct(self) -> float:
        return 100.0 * (1.0 - self.value / self.baseline) if self.baseline else 0.0


@dataclass(frozen=True)
class Analysed:
    """The points the detector read, end to end: what a Window's indices point into."""

    attempts: IntArray
    steps: IntArray
    values: FloatArray
    times: FloatArray
    # Seconds each point stands for (time since the attempt's previous point), NaN unknown.
    durations_s: FloatArray


def analysed(series: Sequence[AttemptThroughput], *, warmup_steps: int) -> Analysed:
    """The points detection reads: every attempt's finite, positive values less its warm-up
    and excluded steps, in attempt order."""
    parts: list[tuple[IntArray, IntArray, FloatArray, FloatArray, FloatArray]] = []
    for one in sorted(series, key=lambda s: s.attempt):
        steps = np.asarray(one.steps, dtype=np.int64)
        values = np.asarray(one.values, dtype=np.float64)
        times = np.asarray(one.times, dtype=np.float64)
        if not len(steps):
            continue
        durations = np.full(len(steps), np.nan)
        if len(steps) > 1:
            durations[1:] = np.diff(times)
        keep = np.isfinite(values) & (values > 0) & (steps >= steps.min() + warmup_steps)
        if one.excluded_steps:
            excluded = np.fromiter(one.excluded_steps, dtype=np.int64)
            keep &= ~np.isin(steps, excluded) & ~np.isin(steps - 1, excluded)
        parts.append(
            (
                np.full(int(keep.sum()), one.attempt, dtype=np.int64),
                steps[keep],
                values[keep],
                times[keep],
                durations[keep],
            )
        )
    if not parts:
        empty_i = np.zeros(0, dtype=np.int64)
        empty_f = np.zeros(0, dtype=np.float64)
        return Analysed(empty_i, empty_i, empty_f, empty_f, empty_f)
    return Analysed(*(np.concatenate([part[i] for part in parts]) for i in range(5)))  # type: ignore[arg-type]


def noise_sigma(values: FloatArray) -> float:
    """The series' point-to-point noise: the MAD of first differences, scaled to a standard
    deviation (a level shift is one large difference among many, so it barely moves it)."""
    if len(values) < 3:
        return 0.0
    diffs = np.diff(values)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return 1.4826 * mad / math.sqrt(2.0)


def _blocks(n: int, max_points: int) -> int:
    return max(1, math.ceil(n / max_points))


def change_points(values: FloatArray, *, min_size: int) -> list[int]:
    """Segment ends (exclusive indices, the last one len(values)) found by PELT."""
    n = len(values)
    if n < 2 * min_size:
        return [n]
    sigma = noise_sigma(values)
    # A perfectly flat series has no noise to scale by: any level change is a change point.
    variance = max(sigma * sigma, 1e-12)
    penalty = rules.PENALTY_SIGMAS * variance * math.log(n)
    algo = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(values)
    return [int(b) for b in algo.predict(pen=penalty)]


def detect(series: Sequence[AttemptThroughput]) -> tuple[Analysed, list[Window]]:
    """The run's slowdown windows, oldest first, and the points they index."""
    points = analysed(series, warmup_steps=rules.WARMUP_STEPS)
    n = len(points.values)
    if n == 0:
        return points, []
    # Normalised by the run's median, so the noise estimate and the penalty are unitless.
    scale = float(np.median(points.values))
    width = _blocks(n, rules.MAX_POINTS)
    blocks = n // width
    if blocks == 0:
        return points, []
    reduced = points.values[: blocks * width].reshape(blocks, width).mean(axis=1) / scale
    min_size = max(2, math.ceil(rules.MIN_STEPS / width))
    ends = change_points(reduced, min_size=min_size)
    # Segment boundaries in the full series' indices; the remainder joins the last block.
    bounds: list[tuple[int, int]] = []
    start = 0
    for end in ends:
        last = n - 1 if end >= blocks else end * width - 1
        bounds.append((start, last))
        start = last + 1
    return points, _windows(points, bounds)


def _windows(points: Analysed, bounds: list[tuple[int, int]]) -> list[Window]:
    windows: list[Window] = []
    baseline: tuple[int, int, float] | None = None  # first, last, level
    slow: tuple[int, int] | None = None

    def close() -> None:
        nonlocal slow
        if slow is not None and baseline is not None:
            # A segment is at least min_size points: a short dip comes with pace-keeping
            # points around it, trimmed off here before its length is judged again.
            first, last = slow
            pace = points.values < baseline[2] * (1.0 - rules.MIN_DROP / 2)
            while first < last and not pace[first]:
                first += 1
            while last > first and not pace[last]:
                last -= 1
            value = float(np.median(points.values[first : last + 1]))
            if _long_enough(points, first, last) and 1.0 - value / baseline[2] >= rules.MIN_DROP:
                windows.append(Window(first, last, baseline[2], value, baseline[0], baseline[1]))
        slow = None

    for first, last in bounds:
        level = float(np.median(points.values[first : last + 1]))
        if baseline is None:
            baseline = (first, last, level)
            continue
        drop = 1.0 - level / baseline[2]
        if drop >= rules.MIN_DROP and _long_enough(points, first, last):
            slow = (slow[0], last) if slow is not None else (first, last)
            continue
        close()
        baseline = (first, last, level)
    close()
    return windows


def _long_enough(points: Analysed, first: int, last: int) -> bool:
    """At least MIN_STEPS steps (points, across a restart: step numbers repeat)."""
    if int(points.attempts[first]) != int(points.attempts[last]):
        return last - first + 1 >= rules.MIN_STEPS
    return int(points.steps[last] - points.steps[first]) + 1 >= rules.MIN_STEPS


def lost_seconds(points: Analysed, window: Window) -> float:
    """Wall seconds the window lost against its baseline: each point's duration times the
    share of pace it lacked (1 - value / baseline), never negative. Points without a
    duration (the attempt's first, or no wall times) count as the window's median one."""
    values = points.values[window.first : window.last + 1]
    durations = points.durations_s[window.first : window.last + 1]
    known = durations[np.isfinite(durations) & (durations > 0)]
    if not len(known):
        return 0.0
    filled = np.where(np.isfinite(durations) & (durations > 0), durations, float(np.median(known)))
    shortfall = np.clip(1.0 - values / window.baseline, 0.0, None)
    return float(np.sum(filled * shortfall))
