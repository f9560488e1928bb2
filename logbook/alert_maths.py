"""Whether a metric alert rule's condition holds on a run's recent points. Pure.

A rule says: a metric is below (or above) a limit, or is not finite (NaN, ±Inf: a diverged
loss), for at least `for_s` seconds. The limit is a value, or a fraction of the metric's own
median over the last `baseline_s` seconds ("tokens_per_s below 90% of its 1-hour median"):
the run's own recent baseline, not a global constant (DOMAIN.md §9). The median barely moves
while a slowdown is shorter than half the baseline window, so the limit stays put while the
slowdown lasts.

The condition holds from the first point of the trailing run of breaching points (`since`)
to the latest point; it fires when that span reaches `for_s`. Times are the points' own wall
times, so a batch that arrives late is judged by when the job measured it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

BELOW, ABOVE, NOT_FINITE = "below", "above", "not_finite"
VALUE, MEDIAN_FRACTION = "value", "median_fraction"
# A median needs this many finite points, spread over at least twice the rule's duration
# (else the breach itself would be most of the baseline).
MIN_BASELINE_POINTS = 10
# The latest point older than this (or than the rule's duration, if longer) says nothing
# about now: the run stopped sending the metric, which is not this rule's business.
STALE_AFTER = timedelta(minutes=2)


@dataclass(frozen=True)
class RuleSpec:
    comparison: str  # BELOW, ABOVE or NOT_FINITE
    threshold_kind: str  # VALUE or MEDIAN_FRACTION
    threshold: float
    for_s: float
    baseline_s: float = 3600.0


@dataclass(frozen=True)
class Breach:
    since: datetime  # the first point of the breach
    last_at: datetime  # the latest point
    value: float  # the latest value
    limit: float | None  # the value compared against (None for NOT_FINITE)
    baseline: float | None  # the median the limit is a fraction of


def limit_of(
    points: Sequence[tuple[datetime, float]], spec: RuleSpec
) -> tuple[float, float | None] | None:
    """The limit and the median it came from (None for a plain value), or None when the
    baseline is too thin to judge. `points` in time order."""
    if spec.threshold_kind == VALUE:
        return spec.threshold, None
    last_at = points[-1][0]
    window = [
        (at, value)
        for at, value in points
        if at >= last_at - timedelta(seconds=spec.baseline_s) and math.isfinite(value)
    ]
    if len(window) < MIN_BASELINE_POINTS:
        return None
    if (window[-1][0] - window[0][0]).total_seconds() < 2 * spec.for_s:
        return None
    median = statistics.median(value for _, value in window)
    return spec.threshold * median, median


def breach(
    points: Sequence[tuple[datetime, float]], spec: RuleSpec, *, now: datetime
) -> Breach | None:
    """The breach the rule fires on, or None. `points`: (wall time, value), any order."""
    ordered = sorted((at, value) for at, value in points if at <= now)
    if not ordered:
        return None
    last_at, last_value = ordered[-1]
    if now - last_at > max(STALE_AFTER, timedelta(seconds=spec.for_s)):
        return None
    limit: float | None = None
    baseline: float | None = None
    if spec.comparison != NOT_FINITE:
        found = limit_of(ordered, spec)
        if found is None:
            return None
        limit, baseline = found

    def breaching(value: float) -> bool:
        if spec.comparison == NOT_FINITE:
            return not math.isfinite(value)
        assert limit is not None
        if not math.isfinite(value):
            return False  # a NaN is its own rule's business (NOT_FINITE)
        return value < limit if spec.comparison == BELOW else value > limit

    if not breaching(last_value):
        return None
    since = last_at
    for at, value in reversed(ordered):
        if not breaching(value):
            break
        since = at
    if (last_at - since).total_seconds() < spec.for_s:
        return None
    return Breach(since=since, last_at=last_at, value=last_value, limit=limit, baseline=baseline)


def describe(spec: RuleSpec, metric: str) -> str:
    """The rule in words: 'tokens_per_s below 90% of its 1-hour median for 2 min'."""
    duration = _duration(spec.for_s)
    if spec.comparison == NOT_FINITE:
        return f"{metric} is NaN or infinite for {duration}"
    if spec.threshold_kind == VALUE:
        return f"{metric} {spec.comparison} {spec.threshold:g} for {duration}"
    return (
        f"{metric} {spec.comparison} {spec.threshold * 100:g}% of its "
        f"{_duration(spec.baseline_s, long=True)} median for {duration}"
    )


def _duration(seconds: float, *, long: bool = False) -> str:
    if seconds % 3600 == 0 and seconds >= 3600:
        hours = int(seconds // 3600)
        return f"{hours}-hour" if long else f"{hours} h"
    if seconds % 60 == 0 and seconds >= 60:
        minutes = int(seconds // 60)
        return f"{minutes}-minute" if long else f"{minutes} min"
    return f"{seconds:g}-second" if long else f"{seconds:g} s"
