"""Goodput's slowdown bucket: time lost below the baseline pace moves out of productive time
into a bucket per cause, and the buckets still add up to the elapsed time."""

from __future__ import annotations

import math

import pytest

from telemetry import goodput as gp
from telemetry.goodput_slowdowns import lost_in_window, slowdown_seconds, with_slowdowns


def _result(productive: float = 800.0, elapsed: float = 1000.0) -> gp.GoodputResult:
    return gp.GoodputResult(
        window_start=0.0,
        window_end=elapsed,
        elapsed_s=elapsed,
        excluded_s=0.0,
        productive_s=productive,
        badput_s={gp.CHECKPOINT_SAVE: 50.0, gp.WASTED_PROGRESS: 100.0, gp.OTHER: 50.0},
        data_loading_async_s=0.0,
        goodput=productive / elapsed,
        disruptions=1,
        segments=[],
        warnings=[],
    )


def test_slowdown_seconds_leave_productive_time_and_the_buckets_add_up():
    result = with_slowdowns(
        _result(), [("thermal", 100.0, 300.0, 40.0), ("config_change", 500.0, 600.0, 10.0)]
    )
    assert result.productive_s == pytest.approx(750.0)
    assert result.badput_s["slowdown:thermal"] == pytest.approx(40.0)
    assert result.badput_s["slowdown:config_change"] == pytest.approx(10.0)
    assert list(result.badput_s)[-1] == gp.OTHER
    assert result.productive_s + sum(result.badput_s.values()) == pytest.approx(result.elapsed_s)
    assert result.goodput == pytest.approx(0.75)
    assert slowdown_seconds(result) == pytest.approx(50.0)
    assert gp.bucket_label("slowdown:config_change") == "Slowdown: config change"


def test_a_window_counts_the_share_of_each_slowdown_inside_it():
    lost = [("straggler", 100.0, 300.0, 40.0)]
    assert lost_in_window(lost, start=200.0, end=1000.0) == {"straggler": pytest.approx(20.0)}
    assert lost_in_window(lost, start=400.0, end=1000.0) == {}


def test_never_more_than_the_productive_time_and_nan_stays_nan():
    result = with_slowdowns(_result(productive=30.0), [("section", 0.0, 1000.0, 90.0)])
    assert result.productive_s == pytest.approx(0.0)
    assert result.badput_s["slowdown:section"] == pytest.approx(30.0)
    blank = with_slowdowns(
        gp.GoodputResult(**{**_result().__dict__, "goodput": math.nan}), [("section", 0, 1, 1.0)]
    )
    assert math.isnan(blank.goodput)


def test_no_slowdown_changes_nothing():
    result = _result()
    assert with_slowdowns(result, []) is result
