"""Validation of a batch's metric points, in both forms: rows (one object per point, the
`metrics` section) and columns (one object per metric, the `series` section).

Pure (no database). At 1,000 points per batch this is most of the validator's work, so the
common shapes pass through bulk checks and only a batch with a problem goes point by point,
for the exact error (section, index, field and position).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

from ingest.checks import (
    MAX_FUTURE_SKEW,
    MAX_STEP,
    Checker,
    ErrorList,
    FieldError,
    check_metric_name,
    check_step,
    check_time,
    check_value,
    describe,
)
from ingest.contract import METRIC_FIELDS

# One point: (name, step, value, time). A plain tuple, not a NamedTuple or a dataclass: one
# is built per point, and a tuple subclass costs a Python-level __new__ each (about five
# times what zip takes to build the plain tuple).
MetricIn = tuple[str, int, float, datetime | None]


_METRIC_KEYS = frozenset(METRIC_FIELDS)
# 0001-01-01T00:00:00Z in epoch seconds: the earliest time a datetime (and check_time) holds.
_EPOCH_MIN = -62135596800.0
# Exact types only: a bool is an int to isinstance, and never a step, value or time here.
_INTS = frozenset({int})
_FLOATS = frozenset({float})
_NUMBERS = frozenset({int, float})


class BatchTimes:
    """Epoch seconds to datetimes for one batch: the future limit is read once, and a time
    shared by the batch's metrics at one step is converted once (the common case: a job
    logs several metrics per step with one timestamp)."""

    def __init__(self) -> None:
        self.limit = (datetime.now(UTC) + MAX_FUTURE_SKEW).timestamp()
        self.seen: dict[float, datetime] = {}

    def epoch(self, raw: float) -> datetime | None:
        """The datetime, or None when `raw` needs the full check (and its error message)."""
        moment = self.seen.get(raw)
        if moment is None:
            if not (_EPOCH_MIN < raw <= self.limit):  # NaN fails too
                return None
            moment = self.seen[raw] = datetime.fromtimestamp(raw, tz=UTC)
        return moment

    def column(self, raw: list[Any]) -> list[datetime] | None:
        """A whole column of epoch seconds as datetimes, or None when any item needs the
        full check. Each distinct time is checked and converted once (a batch's series
        share their steps' times), the rest is lookups in C."""
        if not _NUMBERS.issuperset(map(type, raw)):
            return None
        seen = self.seen
        for moment in set(raw).difference(seen):
            if not (_EPOCH_MIN < moment <= self.limit):  # NaN fails too
                return None
            seen[moment] = datetime.fromtimestamp(moment, tz=UTC)
        return list(map(seen.__getitem__, raw))


def metric_rows_validate(items: list[Any], errors: ErrorList, times: BatchTimes) -> list[MetricIn]:
    """The row form: one object per point. The loop checks the common shapes inline (exact
    types, known names, epoch times) and hands anything else to `metric_row_checked`, which
    gives the precise error: at 1,000 points per batch this is most of ingest's CPU."""
    metrics: list[MetricIn] = []
    append = metrics.append
    names: set[str] = set()
    epoch = times.epoch
    for index, item in enumerate(items):
        if type(item) is dict and len(item) <= 4:
            name = item.get("name")
            step = item.get("step")
            value = item.get("value")
            raw_time = item.get("time")
            try:
                known = name in names
            except TypeError:  # unhashable (a list, an object): the full checks name it
                known = False
            if (
                known
                and type(step) is int
                and 0 <= step <= MAX_STEP
                and (type(value) is float or (type(value) is int and -(2**53) <= value <= 2**53))
                and (len(item) == 3 or "time" in item)
            ):
                if raw_time is None:
                    append((name, step, float(value), None))
                    continue
                if type(raw_time) is float or type(raw_time) is int:
                    moment = epoch(raw_time)
                    if moment is not None:
                        append((name, step, float(value), moment))
                        continue
        if errors.full():
            break
        metric = metric_row_checked(item, index, errors)
        if metric is not None:
            names.add(metric[0])
            append(metric)
    return metrics


def metric_row_checked(item: Any, index: int, errors: ErrorList) -> MetricIn | None:
    """One point through every check; records the first problem in `errors`."""
    if not isinstance(item, dict):
        errors.add("metrics", index, None, f"must be an object, got {describe(item)}")
        return None
    try:
        name = check_metric_name(item.get("name"))
    except FieldError as exc:
        errors.add("metrics", index, "name", str(exc) if "name" in item else "is required")
        return None
    try:
        step = check_step(item.get("step"))
    except FieldError as exc:
        errors.add("metrics", index, "step", str(exc) if "step" in item else "is required")
        return None
    if "value" not in item:
        errors.add("metrics", index, "value", "is required")
        return None
    try:
        value = check_value(item["value"])
    except FieldError as exc:
        errors.add("metrics", index, "value", str(exc))
        return None
    raw_time = item.get("time")
    moment = None
    if raw_time is not None:
        try:
            moment = check_time(raw_time)
        except FieldError as exc:
            errors.add("metrics", index, "time", str(exc))
            return None
    if len(item) > 3 and not _METRIC_KEYS.issuperset(item):
        extra = sorted(set(item) - _METRIC_KEYS)[0][:60]
        errors.add("metrics", index, extra, "unknown field; allowed: name, step, value, time")
        return None
    return (name, step, value, moment)


_SERIES_KEYS = ("name", "steps", "values", "times")


def metric_series_validate(
    items: list[Any], errors: ErrorList, times: BatchTimes
) -> list[MetricIn]:
    """The column form: {"name", "steps": [...], "values": [...], "times": [...]} per metric.
    Parsing it is several times cheaper than one object per point, and one bad item is
    named by its series and position, e.g. series[2].values[17]."""
    metrics: list[MetricIn] = []
    for index, item in enumerate(items):
        if errors.full():
            break
        if not isinstance(item, dict):
            errors.add("series", index, None, f"must be an object, got {describe(item)}")
            continue
        extra = [key for key in item if key not in _SERIES_KEYS]
        if extra:
            errors.add(
                "series",
                index,
                str(extra[0])[:60],
                "unknown field; allowed: name, steps, values, times",
            )
            continue
        try:
            name = check_metric_name(item.get("name"))
        except FieldError as exc:
            errors.add("series", index, "name", str(exc) if "name" in item else "is required")
            continue
        columns = _series_columns(item, index, errors)
        if columns is None:
            continue
        steps, values, raw_times = columns
        clean_steps = _column(steps, check_step, steps_bulk, index, "steps", errors)
        clean_values = _column(values, check_value, values_bulk, index, "values", errors)
        moments: Iterable[datetime | None] = repeat(None)
        if raw_times is not None:
            column: Sequence[datetime | None] | None = times.column(raw_times)
            if column is None:
                column = _times_checked(raw_times, times, index, errors)
            if column is None:
                continue
            moments = column
        if clean_steps is None or clean_values is None:
            continue
        # Not strict: moments may be repeat(None); the columns' lengths were checked above.
        metrics += zip(repeat(name, len(steps)), clean_steps, clean_values, moments, strict=False)
    return metrics


def _times_checked(
    raw: list[Any], times: BatchTimes, index: int, errors: ErrorList
) -> list[datetime | None] | None:
    """The times column item by item: RFC 3339 strings, or the first bad item named."""
    moments: list[datetime | None] = []
    epoch = times.epoch
    for position, item in enumerate(raw):
        moment = epoch(item) if type(item) is float or type(item) is int else None
        if moment is None:
            try:
                moment = check_time(item)
            except FieldError as exc:
                errors.add("series", index, f"times[{position}]", str(exc))
                return None
        moments.append(moment)
    return moments


def _series_columns(
    item: dict[str, Any], index: int, errors: ErrorList
) -> tuple[list[Any], list[Any], list[Any] | None] | None:
    steps, values, raw_times = item.get("steps"), item.get("values"), item.get("times")
    for key, column in (("steps", steps), ("values", values)):
        if not isinstance(column, list):
            reason = f"must be a list, got {describe(column)}"
            errors.add("series", index, key, reason if key in item else "is required")
            return None
    if raw_times is not None and not isinstance(raw_times, list):
        errors.add("series", index, "times", f"must be a list, got {describe(raw_times)}")
        return None
    assert isinstance(steps, list) and isinstance(values, list)
    for key, column in (("values", values), ("times", raw_times)):
        if column is not None and len(column) != len(steps):
            errors.add(
                "series",
                index,
                key,
                f"has {len(column)} items but steps has {len(steps)}; they must match",
            )
            return None
    return steps, values, raw_times


def steps_bulk(raw: list[Any]) -> list[int] | None:
    """The steps column as sent when every item is a plain int in range (checked over the
    whole list at once), else None: check_step then finds the bad item."""
    if not _INTS.issuperset(map(type, raw)):
        return None
    if raw and (min(raw) < 0 or max(raw) > MAX_STEP):
        return None
    return raw


def values_bulk(raw: list[Any]) -> list[float] | None:
    """The values column as floats when every item is a plain float or int (as check_value
    converts it), else None: check_value then finds the bad item (or the int too large
    for a float)."""
    kinds = set(map(type, raw))
    if kinds <= _FLOATS:
        return raw
    if kinds <= _NUMBERS:
        try:
            return list(map(float, raw))
        except OverflowError:
            return None
    return None


def _column(
    raw: list[Any],
    check: Checker,
    bulk: Callable[[list[Any]], list[Any] | None],
    index: int,
    key: str,
    errors: ErrorList,
) -> list[Any] | None:
    """The checked column, or None after naming its first bad item. A column that `bulk`
    accepts whole (plain ints for steps, numbers for values) passes without a call per item."""
    clean = bulk(raw)
    if clean is not None:
        return clean
    clean = []
    for position, item in enumerate(raw):
        try:
            clean.append(check(item))
        except FieldError as exc:
            errors.add("series", index, f"{key}[{position}]", str(exc))
            return None
    return clean
