"""The row form's fast path and the column form validate exactly like the per-point checks:
same values, same errors, same positions."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.checks import ErrorList
from ingest.metric_schema import metric_row_checked
from ingest.schema import BatchError, parse_json, validate_batch

LIMITS = {"max_metrics": 20_000, "max_events": 1_000}

names = st.sampled_from(["loss", "lr", "grad_norm", "", " ", "bad\x01name", 7, None])
steps = st.one_of(
    st.integers(min_value=0, max_value=2**63 - 1),
    st.sampled_from([-1, 2**63, True, 1.5, "3", None]),
)
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.sampled_from(["NaN", "-Infinity", "inf", "abc", True, None, [1]]),
)
times = st.one_of(
    st.none(),
    st.floats(min_value=0, max_value=1.9e9),
    st.integers(min_value=0, max_value=1_900_000_000),
    st.sampled_from(
        [math.nan, -1e20, 1e12, True, "2026-11-21T10:00:00Z", "2026-11-21T10:00:00", "x"]
    ),
)


@st.composite
def metric_items(draw: Any) -> Any:
    item: dict[str, Any] = {}
    for key, strategy in (("name", names), ("step", steps), ("value", values), ("time", times)):
        if draw(st.integers(0, 9)) > 0:  # now and then a key is missing
            item[key] = draw(strategy)
    if draw(st.integers(0, 19)) == 0:
        item["extra"] = 1
    return item if draw(st.integers(0, 29)) else "not an object"


def _slow(items: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    errors = ErrorList()
    kept = []
    for index, item in enumerate(items):
        if errors.full():
            break
        metric = metric_row_checked(item, index, errors)
        if metric is not None:
            kept.append(metric)
    return kept, errors.items


def _validated(doc: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    try:
        return validate_batch(doc, **LIMITS).metrics, []
    except BatchError as exc:
        return [], exc.errors


def _same(left: list[Any], right: list[Any]) -> bool:
    # NaN != NaN, so compare the tuples' reprs.
    return [repr(m) for m in left] == [repr(m) for m in right]


@settings(max_examples=300, deadline=None)
@given(st.lists(metric_items(), max_size=30))
def test_the_row_fast_path_accepts_and_refuses_exactly_like_the_full_checks(items: Any) -> None:
    # given a batch of points of every shape, good and bad
    doc = {"batch_id": "b", "run": "r", "metrics": items}
    # when validated
    metrics, errors = _validated(doc)
    # then the points and the errors are those of checking each point in full
    expected, expected_errors = _slow(items)
    assert errors == expected_errors
    if not errors:
        assert _same(metrics, expected)


def _columns(points: list[tuple[str, int, Any, Any]]) -> list[dict[str, Any]]:
    by_name: dict[str, dict[str, list[Any]]] = {}
    for name, step, value, moment in points:
        column = by_name.setdefault(name, {"steps": [], "values": [], "times": []})
        column["steps"].append(step)
        column["values"].append(value)
        column["times"].append(moment)
    return [{"name": name, **columns} for name, columns in by_name.items()]


good_points = st.lists(
    st.tuples(
        st.sampled_from(["loss", "lr", "tokens_per_s"]),
        st.integers(min_value=0, max_value=2**63 - 1),
        st.one_of(st.floats(), st.integers(-(2**40), 2**40), st.sampled_from(["NaN", "-inf"])),
        st.one_of(st.floats(min_value=0, max_value=1.7e9), st.just("2026-11-21T10:00:00+02:00")),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(good_points)
def test_the_column_form_stores_what_the_row_form_stores(points: Any) -> None:
    # given the same points as rows and as columns (grouped by name)
    rows = [{"name": n, "step": s, "value": v, "time": t} for n, s, v, t in points]
    columns = _columns(points)
    # when both are validated
    as_rows = validate_batch({"batch_id": "b", "run": "r", "metrics": rows}, **LIMITS)
    as_columns = validate_batch({"batch_id": "b", "run": "r", "series": columns}, **LIMITS)
    # then they carry the same points (grouped by name in the column form)
    assert sorted(map(repr, as_rows.metrics)) == sorted(map(repr, as_columns.metrics))


@pytest.mark.parametrize(
    ("series", "where", "reason"),
    [
        ({"name": "loss", "steps": [1, -2], "values": [1.0, 2.0]}, "series[0].steps[1]", ">= 0"),
        ({"name": "loss", "steps": [1, 2], "values": [1.0, "x"]}, "series[0].values[1]", "number"),
        ({"name": "loss", "steps": [1, 2], "values": [1.0]}, "series[0].values", "must match"),
        ({"name": "loss", "steps": [1], "values": [1.0], "times": ["x"]}, "series[0].times[0]", ""),
        ({"name": "loss", "values": [1.0]}, "series[0].steps", "is required"),
        ({"name": "", "steps": [1], "values": [1.0]}, "series[0].name", "empty"),
        ({"name": "a", "steps": [1], "values": [1.0], "unit": "s"}, "series[0].unit", "unknown"),
    ],
)
def test_a_bad_column_item_is_named_by_its_series_and_position(
    series: dict[str, Any], where: str, reason: str
) -> None:
    # given a column-form batch with one bad item after a good series
    good = {"name": "lr", "steps": [0], "values": [0.1]}
    doc = {"batch_id": "b", "run": "r", "series": [series, good]}
    # when validated, then the error says which series and which position
    with pytest.raises(BatchError) as refused:
        validate_batch(doc, **LIMITS)
    assert refused.value.status == 400
    assert refused.value.errors[0]["message"].startswith(f"{where}: ")
    assert reason in refused.value.errors[0]["message"]


def test_the_point_limit_counts_both_forms_together() -> None:
    # given 6 points as rows and 6 as columns, against a limit of 10
    rows = [{"name": "loss", "step": i, "value": 1.0} for i in range(6)]
    columns = [{"name": "lr", "steps": list(range(6)), "values": [0.1] * 6}]
    body = orjson.dumps({"batch_id": "b", "run": "r", "metrics": rows, "series": columns})
    # when validated, then the batch is refused as too large, with the total
    with pytest.raises(BatchError) as refused:
        validate_batch(parse_json(body), max_metrics=10, max_events=10)
    assert refused.value.status == 413
    assert "12 metric points" in refused.value.detail
