"""The column form's bulk checks (a whole list at once) accept exactly what the per-item
checks accept, return the same clean values, and leave the error to the per-item check:
a bad item at position i of series j is named series[j].<column>[i] with its check's reason."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.checks import MAX_STEP, FieldError, check_step, check_time, check_value
from ingest.metric_schema import BatchTimes, steps_bulk, values_bulk
from ingest.schema import BatchError, validate_batch

LIMITS = {"max_metrics": 20_000, "max_events": 1_000}

odd_items = st.sampled_from(
    [True, False, None, "3", "NaN", "2026-11-21T10:00:00Z", [1], {}, 1e400, -1e400]
)
step_items = st.one_of(
    st.integers(min_value=0, max_value=MAX_STEP),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True),
    odd_items,
)
value_items = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**1100), max_value=2**1100),
    odd_items,
)
time_items = st.one_of(
    st.floats(min_value=0, max_value=1.9e9),
    st.integers(min_value=0, max_value=1_900_000_000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    odd_items,
)


def _per_item(check: Callable[[Any], Any], raw: list[Any]) -> list[Any] | None:
    try:
        return [check(item) for item in raw]
    except FieldError:
        return None


def _same(left: list[Any] | None, right: list[Any] | None) -> bool:
    # NaN != NaN: compare reprs (and types: 2 and 2.0 are not the same value to store).
    def shown(values: list[Any] | None) -> Any:
        return None if values is None else [(type(v), repr(v)) for v in values]

    return shown(left) == shown(right)


@settings(max_examples=400, deadline=None)
@given(st.lists(step_items, max_size=12))
def test_steps_bulk_passes_only_what_check_step_passes(raw: list[Any]) -> None:
    bulk = steps_bulk(raw)
    if bulk is not None:
        assert _same(bulk, _per_item(check_step, raw))
    elif all(type(item) is int for item in raw):
        # refused whole only when an item is out of range
        assert _per_item(check_step, raw) is None


@settings(max_examples=400, deadline=None)
@given(st.lists(value_items, max_size=12))
def test_values_bulk_converts_exactly_like_check_value(raw: list[Any]) -> None:
    bulk = values_bulk(raw)
    if bulk is not None:
        assert _same(bulk, _per_item(check_value, raw))
    elif all(type(item) in (int, float) for item in raw):
        # plain numbers are refused whole only when an int is too large for a float
        assert _per_item(check_value, raw) is None


@settings(max_examples=400, deadline=None)
@given(st.lists(time_items, max_size=12))
def test_times_column_converts_exactly_like_check_time(raw: list[Any]) -> None:
    # (None is always allowed: the items are then checked one by one, as before)
    column = BatchTimes().column(raw)
    if column is not None:
        assert column == _per_item(check_time, raw)


def test_the_bulk_checks_pass_a_good_column_as_sent() -> None:
    # given plain columns, as orjson parses them
    steps, values = list(range(100)), [0.5 * i for i in range(100)]
    # then they are used as they are, without a copy
    assert steps_bulk(steps) is steps
    assert values_bulk(values) is values
    assert values_bulk([1, 2.5]) == [1.0, 2.5]
    assert steps_bulk([]) == [] and values_bulk([]) == []


def test_the_times_column_converts_each_distinct_time_once() -> None:
    # given two series sharing their steps' times
    times = BatchTimes()
    first = times.column([1_763_719_200, 1_763_719_204.5])
    second = times.column([1_763_719_200.0, 1_763_719_204.5])
    # then both hold the same datetime objects, converted once
    assert first is not None and second is not None
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert len(times.seen) == 2


BAD = {
    "steps": [-1, MAX_STEP + 1, True, 1.5, "3", None, [1]],
    "values": [True, None, "abc", [1], {}, 2**1100],
    "times": [math.nan, math.inf, -1e20, 1e12, True, "x", "2026-11-21T10:00:00", [1]],
}
CHECKS: dict[str, Callable[[Any], Any]] = {
    "steps": check_step,
    "values": check_value,
    "times": check_time,
}


@settings(max_examples=300, deadline=None)
@given(
    series_count=st.integers(1, 4),
    length=st.integers(1, 30),
    data=st.data(),
)
def test_a_bad_item_at_point_i_of_series_j_is_named_with_its_checks_reason(
    series_count: int, length: int, data: Any
) -> None:
    # given good column-form series, and one bad item at point i of series j
    base = 1_763_719_200.0
    series = [
        {
            "name": f"m{number}",
            "steps": list(range(length)),
            "values": [0.25 * step for step in range(length)],
            "times": [base + 4 * step for step in range(length)],
        }
        for number in range(series_count)
    ]
    j = data.draw(st.integers(0, series_count - 1), label="j")
    i = data.draw(st.integers(0, length - 1), label="i")
    column = data.draw(st.sampled_from(sorted(BAD)), label="column")
    bad = data.draw(st.sampled_from(BAD[column]), label="bad")
    series[j][column][i] = bad
    with pytest.raises(FieldError) as reason:
        CHECKS[column](bad)
    # when validated
    with pytest.raises(BatchError) as refused:
        validate_batch({"batch_id": "b", "run": "r", "series": series}, **LIMITS)
    # then exactly that item is named, with its check's reason
    assert refused.value.status == 400
    assert [e["message"] for e in refused.value.errors] == [
        f"series[{j}].{column}[{i}]: {reason.value}"
    ]
    assert refused.value.errors[0]["index"] == j
