"""log-batch's metric check (ingest.mlflow_checks.check_metrics): the column-at-a-time path
accepts exactly what the per-metric check accepts, gives the same values, and leaves every
refusal to `check_metric`'s own message."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest import mlflow_checks
from ingest.mlflow_checks import MetricColumns, MetricValue, check_metric, check_metrics

TS_MS = 1_763_719_200_000


def _one_at_a_time(items: list) -> list[MetricValue] | str:
    try:
        return [check_metric(item) for item in items]
    except mlflow_checks.MlflowError as exc:
        return exc.message


def _columns(items: list) -> list[MetricValue] | str:
    try:
        return list(check_metrics(items))
    except mlflow_checks.MlflowError as exc:
        return exc.message


def _same(a: list[MetricValue] | str, b: list[MetricValue] | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    # NaN is not equal to itself: compare the values' reprs
    return [(m.key, repr(m.value), m.timestamp_ms, m.step) for m in a] == [
        (m.key, repr(m.value), m.timestamp_ms, m.step) for m in b
    ]


def test_a_common_batch_is_checked_as_columns_with_the_values_of_the_row_check():
    items = [
        {"key": f"m{i % 10}", "value": i / 7 if i % 3 else i, "timestamp": TS_MS + i, "step": i}
        for i in range(1000)
    ]
    columns = check_metrics(items)
    assert isinstance(columns, MetricColumns)
    assert len(columns) == 1000
    assert _same(list(columns), _one_at_a_time(items))
    # ints are stored as doubles
    assert all(type(value) is float for value in columns.values)


@pytest.mark.parametrize(
    "bad",
    [
        {"key": "loss", "value": True, "timestamp": TS_MS, "step": 1},
        {"key": "loss", "value": None, "timestamp": TS_MS, "step": 1},
        {"key": "loss", "value": "abc", "timestamp": TS_MS, "step": 1},
        {"key": "loss", "value": 10**400, "timestamp": TS_MS, "step": 1},
        {"key": "loss", "value": 1.0, "timestamp": -1, "step": 1},
        {"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": -1},
        {"key": "loss", "value": 1.0, "timestamp": 2**63, "step": 1},
        {"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": 2**63},
        {"key": "loss", "value": 1.0, "timestamp": None, "step": 1},
        {"key": "", "value": 1.0, "timestamp": TS_MS, "step": 1},
        {"key": "/loss", "value": 1.0, "timestamp": TS_MS, "step": 1},
        {"key": "a/../b", "value": 1.0, "timestamp": TS_MS, "step": 1},
        {"key": "lo$s", "value": 1.0, "timestamp": TS_MS, "step": 1},
        {"key": "x" * 201, "value": 1.0, "timestamp": TS_MS, "step": 1},
        {"key": 7, "value": 1.0, "timestamp": TS_MS, "step": 1},
        ["loss", 1.0, TS_MS, 1],
    ],
)
def test_a_bad_metric_anywhere_is_refused_with_the_row_checks_message(bad):
    items = [{"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": 0}, bad]
    expected = _one_at_a_time(items)
    assert isinstance(expected, str)
    assert _columns(items) == expected


@pytest.mark.parametrize(
    "odd",
    [
        {"key": "loss", "value": 1.5, "timestamp": TS_MS},  # no step: 0
        {"key": "loss", "value": 1.5, "timestamp": TS_MS, "step": None},
        {"key": "loss", "value": "NaN", "timestamp": TS_MS, "step": 3},
        {"key": "loss", "value": "-Infinity", "timestamp": str(TS_MS), "step": "3"},
        {"key": "loss", "value": 3.0, "timestamp": float(TS_MS), "step": 3.0},
        {"key": "loss", "value": int(sys.float_info.max), "timestamp": TS_MS, "step": 1},
        {"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": 1, "extra": "ignored"},
    ],
)
def test_shapes_the_columns_do_not_take_pass_as_the_row_check_reads_them(odd):
    items = [{"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": 0}, odd]
    expected = _one_at_a_time(items)
    assert not isinstance(expected, str)
    assert _same(_columns(items), expected)


def test_no_metrics_is_an_empty_batch():
    assert len(check_metrics([])) == 0
    assert not check_metrics([])


_scalars = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.sampled_from(["NaN", "1.5", "x", ""]),
)
_metric = st.fixed_dictionaries(
    {"key": st.sampled_from(["loss", "lr", "a/b", "", "/x", "a/../b", "ok key:1"])},
    optional={"value": _scalars, "timestamp": _scalars, "step": _scalars},
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_metric, _metric.map(lambda m: {**m, "value": 1.0})), max_size=6))
def test_columns_and_rows_agree_on_any_batch(items):
    assert _same(_columns(items), _one_at_a_time(items))


# --- log-batch's usual request decoded to its types (metrics_only_batch) ----------------------


def _body(items: list, **fields) -> bytes:
    return json.dumps({"run_id": "r1", "metrics": items, **fields}).encode()


def test_the_usual_request_is_decoded_to_the_columns_the_general_path_checks():
    items = [
        {"key": f"m{i % 10}", "value": i / 7 if i % 3 else i, "timestamp": TS_MS + i, "step": i}
        for i in range(1000)
    ]
    decoded = mlflow_checks.metrics_only_batch(_body(items))
    assert decoded is not None
    run_id, columns = decoded
    assert run_id == "r1"
    assert _same(list(columns), _one_at_a_time(items))
    assert all(type(value) is float for value in columns.values)
    # no step is step 0, as MLflow reads it
    assert list(mlflow_checks.metrics_only_batch(_body([{"key": "a", "value": 1.0,
        "timestamp": TS_MS}]))[1]) == [MetricValue("a", 1.0, TS_MS, 0)]  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        _body([{"key": "loss", "value": 1.0, "timestamp": TS_MS}], params=[]),  # other fields
        _body([{"key": "loss", "value": 1.0, "timestamp": TS_MS}], tags=[{"key": "a"}]),
        _body([{"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": 1, "extra": 1}]),
        _body([{"key": "loss", "value": "NaN", "timestamp": TS_MS}]),  # proto JSON's NaN
        _body([{"key": "loss", "value": float("nan"), "timestamp": TS_MS}]),  # a bare NaN
        b'{"run_id":"r1","metrics":[{"key":"loss","value":1e999,"timestamp":1}]}',
        _body([{"key": "loss", "value": 10**400, "timestamp": TS_MS}]),
        _body([{"key": "loss", "value": 1.0, "timestamp": str(TS_MS)}]),
        _body([{"key": "loss", "value": 1.0, "timestamp": float(TS_MS)}]),
        _body([{"key": "loss", "value": 1.0, "timestamp": 2**63}]),
        _body([{"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": -1}]),
        _body([{"key": "lo$s", "value": 1.0, "timestamp": TS_MS}]),
        _body([{"key": "loss", "value": True, "timestamp": TS_MS}]),
        _body([]),
        _body([{"key": "loss", "value": 1.0, "timestamp": TS_MS}] * 1001),
        json.dumps({"run_id": "", "metrics": [{"key": "a", "value": 1, "timestamp": 1}]}).encode(),
        json.dumps({"metrics": [{"key": "a", "value": 1, "timestamp": 1}]}).encode(),
        b'{"run_id":"r1","metrics":[{"key":"a","value":1,"timestamp":1}]} trailing',
        b"[1]",
        b"",
    ],
)
def test_any_other_body_is_left_to_the_general_path(body):
    assert mlflow_checks.metrics_only_batch(body) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_metric, _metric.map(lambda m: {**m, "value": 1.0})), max_size=6))
def test_what_the_decode_takes_the_general_path_reads_the_same(items):
    decoded = mlflow_checks.metrics_only_batch(_body(items))
    if decoded is not None:
        assert decoded[0] == "r1"
        assert _same(list(decoded[1]), _columns(items))
