"""Pure maths of the SDC ledger: when two attempts' values of one step differ, and how often
suspicions come up. No ORM: the selectors and services feed it plain values."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

DAYS_PER_WEEK = 7.0
SECONDS_PER_DAY = 86_400.0


def values_differ(first: float | None, second: float | None, *, tolerance: float) -> bool:
    """Whether two attempts' values of one deterministic metric at one step disagree.

    None (a NULL value) is NaN. NaN against NaN is identical: a deterministic replay
    reproduces the NaN too. NaN against a number differs. Otherwise the values differ when
    |first - second| > tolerance (0: bit-identical). Equal infinities are identical."""
    a = math.nan if first is None else float(first)
    b = math.nan if second is None else float(second)
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    if a_nan or b_nan:
        return a_nan != b_nan
    if a == b:  # before subtracting: inf - inf is NaN
        return False
    return abs(a - b) > tolerance


@dataclass(frozen=True)
class ConfigChange:
    """A change of what the job computes, made when `attempt` started: the attempts before
    it and the ones from it on train differently, so their repeated steps may differ
    without any corruption."""

    attempt: int
    reason: str


def config_change_between(
    changes: Iterable[ConfigChange], first: int, second: int
) -> ConfigChange | None:
    """The first config change that separates attempts `first` and `second` (a change made
    at attempt n lies between n - 1 and n), or None when they ran the same config."""
    low, high = sorted((first, second))
    between = [one for one in changes if low < one.attempt <= high]
    return min(between, key=lambda one: one.attempt) if between else None


def steps_by_metric(points: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """(name, step) pairs grouped by name, as sdc_divergence_check takes them."""
    grouped: dict[str, list[int]] = {}
    for name, step in points:
        grouped.setdefault(name, []).append(step)
    return grouped


def divergence_source_key(*, metric: str, step: int, attempt_a: int, attempt_b: int) -> str:
    """The same key whichever of the two attempts is checked first, so a pair opens one
    record however the batches arrive."""
    low, high = sorted((attempt_a, attempt_b))
    return f"divergence:{metric}:{step}:{low}:{high}"


@dataclass(frozen=True)
class WeeklyRate:
    """records / max(span_days / 7, 1): suspicions per week over the observed span. A span
    shorter than a week counts as one observed week: 8 records in 2.9 days are 8 that week,
    not an extrapolated 19.1 a week."""

    records: int
    span_start: datetime | None
    span_end: datetime | None
    span_days: float
    per_week: float | None

    FORMULA = "rate = records / max(span days / 7, 1)"

    @property
    def weeks(self) -> float:
        return self.span_days / DAYS_PER_WEEK


def weekly_rate(
    *, records: int, span_start: datetime | None, span_end: datetime | None
) -> WeeklyRate:
    """Records per week over [span_start, span_end]; undefined (None) for an empty or
    unknown span, rather than a division by zero or an invented week."""
    if span_start is None or span_end is None or span_end <= span_start:
        days = 0.0
    else:
        days = (span_end - span_start).total_seconds() / SECONDS_PER_DAY
    per_week = records / max(days / DAYS_PER_WEEK, 1.0) if days > 0 else None
    return WeeklyRate(
        records=records,
        span_start=span_start,
        span_end=span_end,
        span_days=days,
        per_week=per_week,
    )


def weekly_counts(
    detected: Sequence[datetime], *, span_start: datetime | None, span_end: datetime | None
) -> pd.DataFrame:
    """Records per week of the observed span (columns week_start, count): seven-day bins
    from the span's start (the first data, not the Monday before it) up to its end, the
    empty ones present as zeros: a quiet week is data, not a gap in the chart."""
    moments = list(detected)
    first = min(span_start or moments[0], *moments) if moments else span_start
    last = max(span_end or moments[0], *moments) if moments else span_end
    if first is None or last is None:
        return pd.DataFrame({"week_start": [], "count": []})
    week = timedelta(days=DAYS_PER_WEEK)
    bins = max(math.ceil((last - first) / week), 1)
    counts = [0] * bins
    for moment in moments:
        # A record at the span's very end belongs to the last week, not a new empty one.
        counts[min(int((moment - first) / week), bins - 1)] += 1
    starts = [first + index * week for index in range(bins)]
    return pd.DataFrame({"week_start": starts, "count": counts})
