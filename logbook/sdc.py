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
    """records / (span_days / 7): suspicions per week over the observed span."""

    records: int
    span_start: datetime | None
    span_end: datetime | None
    span_days: float
    per_week: float | None

    FORMULA = "rate = records / (span days / 7)"

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
    per_week = records / (days / DAYS_PER_WEEK) if days > 0 else None
    return WeeklyRate(
        records=records,
        span_start=span_start,
        span_end=span_end,
        span_days=days,
        per_week=per_week,
    )


def week_start(moment: datetime) -> datetime:
    """Monday 00:00 of the moment's ISO week, in the moment's time zone."""
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


def weekly_counts(
    detected: Sequence[datetime], *, span_start: datetime | None, span_end: datetime | None
) -> pd.DataFrame:
    """Records per ISO week (columns week_start, count), with the empty weeks of the span
    present as zeros: a quiet week is data, not a gap in the chart."""
    moments = list(detected)
    first = span_start or (min(moments) if moments else None)
    last = span_end or (max(moments) if moments else None)
    if first is None or last is None:
        return pd.DataFrame({"week_start": [], "count": []})
    counts: dict[datetime, int] = {}
    week = week_start(min(first, *moments) if moments else first)
    end_week = week_start(max(last, *moments) if moments else last)
    while week <= end_week:
        counts[week] = 0
        week += timedelta(days=7)
    for moment in moments:
        counts[week_start(moment)] += 1
    return pd.DataFrame({"week_start": list(counts), "count": list(counts.values())})
