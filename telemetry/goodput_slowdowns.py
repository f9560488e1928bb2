"""Goodput's slowdown bucket: the time a run spent training below its own baseline pace
(diagnosis's slowdowns), moved out of productive time into a badput bucket per cause, so
productive + every badput bucket still add up to the elapsed time. Pure: the slowdowns come in
as plain (cause kind, start, end, lost seconds) tuples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from telemetry.goodput import OTHER, GoodputResult

SLOWDOWN_PREFIX = "slowdown:"


def slowdown_bucket(kind: str) -> str:
    return f"{SLOWDOWN_PREFIX}{kind}"


def share_inside(low: float, high: float, *, start: float, end: float) -> float:
    """The share of the span [low, high] inside [start, end] (an instant: 1 or 0)."""
    if high > low:
        return max(0.0, min(high, end) - max(low, start)) / (high - low)
    return 1.0 if start <= low <= end else 0.0


def lost_in_window(
    lost: Sequence[tuple[str, float, float, float]], *, start: float, end: float
) -> dict[str, float]:
    """Seconds each cause lost inside [start, end]: a slowdown's lost seconds times the share
    of its window inside (a slowdown loses its time evenly enough across its window)."""
    totals: dict[str, float] = {}
    for kind, low, high, seconds in lost:
        inside = share_inside(low, high, start=start, end=end)
        if inside > 0 and seconds > 0:
            totals[kind] = totals.get(kind, 0.0) + seconds * inside
    return totals


def with_slowdowns(
    result: GoodputResult, lost: Sequence[tuple[str, float, float, float]]
) -> GoodputResult:
    """`result` with the slowdowns' lost time in "slowdown:<kind>" buckets (before OTHER),
    taken from productive time, goodput recomputed. Never more than the productive time (a
    slowdown is time spent in productive steps)."""
    by_kind = lost_in_window(lost, start=result.window_start, end=result.window_end)
    total = sum(by_kind.values())
    if total <= 0:
        return result
    scale = min(1.0, result.productive_s / total) if total else 0.0
    productive = result.productive_s - total * scale
    badput = {name: value for name, value in result.badput_s.items() if name != OTHER}
    for kind in sorted(by_kind):
        badput[slowdown_bucket(kind)] = by_kind[kind] * scale
    badput[OTHER] = result.badput_s.get(OTHER, 0.0)
    goodput = productive / result.elapsed_s if result.elapsed_s > 0 else result.goodput
    if result.goodput != result.goodput:  # NaN stays NaN: not computable
        goodput = result.goodput
    return replace(result, productive_s=productive, badput_s=badput, goodput=goodput)


def slowdown_seconds(result: GoodputResult) -> float:
    return sum(v for k, v in result.badput_s.items() if k.startswith(SLOWDOWN_PREFIX))
