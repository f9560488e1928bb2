"""Young's and Daly's checkpoint intervals against the published cases, and the waste curve."""

from __future__ import annotations

import math

import pytest

from logbook.checkpoint_interval import (
    daly_first_order_interval,
    daly_interval,
    expected_waste_fraction,
    waste_curve,
    young_interval,
)

MIN = 60.0
HOUR = 3600.0


@pytest.mark.parametrize(
    ("mtbf_s", "published_min"),
    [(24 * HOUR, 117.0), (6 * HOUR, 57.0), (15 * MIN, 9.1)],
)
def test_daly_higher_order_reproduces_his_published_cases(mtbf_s, published_min):
    # Daly 2006, δ = 5 min: 117, 57 and 9.1 minutes, printed to that many digits.
    tau_min = daly_interval(5 * MIN, mtbf_s) / MIN

    digits = 1 if published_min < 10 else 0
    assert round(tau_min, digits) == published_min


def test_young_is_the_square_root_of_twice_cost_times_mtbf():
    # √(2 · 5 min · 1440 min) = √14400 = 120 min; √(2 · 5 · 360) = √3600 = 60 min.
    assert young_interval(5 * MIN, 24 * HOUR) == pytest.approx(120 * MIN)
    assert young_interval(5 * MIN, 6 * HOUR) == pytest.approx(60 * MIN)
    assert daly_first_order_interval(5 * MIN, 6 * HOUR) == pytest.approx(55 * MIN)


def test_daly_checkpoints_once_per_mtbf_when_saving_costs_two_mtbfs_or_more():
    assert daly_interval(2 * HOUR, 1 * HOUR) == 1 * HOUR
    assert daly_interval(3 * HOUR, 1 * HOUR) == 1 * HOUR
    # just under the threshold the formula applies and gives something else
    assert daly_interval(1.99 * HOUR, 1 * HOUR) != pytest.approx(1 * HOUR)


def test_llama3_like_run_checkpoints_about_every_19_minutes():
    # M = 54 days · 24 h / 419 ≈ 11,135 s (3.09 h), δ = 60 s: √(2 · 60 · 11,135) ≈ 1,156 s.
    mtbf_s = 54 * 24 * HOUR / 419

    assert round(young_interval(60, mtbf_s) / MIN) == 19
    assert round(daly_interval(60, mtbf_s) / MIN) == 19


def test_expected_waste_adds_saves_half_an_interval_and_the_restart():
    # δ/τ = 60/600 = 0.1; (τ/2 + R)/M = (300 + 900)/12,000 = 0.1
    assert expected_waste_fraction(600, 60, 12_000, 900) == pytest.approx(0.2)


def test_waste_curve_is_lowest_at_youngs_interval_and_contains_the_extra_points():
    # given
    delta, mtbf, restart = 60.0, 3.1 * HOUR, 600.0
    actual = 2 * HOUR

    # when
    curve = waste_curve(delta, mtbf, restart, extra=(actual,), points=200)

    # then δ/τ + τ/(2M) is minimal where τ² = 2δM, i.e. at √(2 · 60 · 11,160) ≈ 1,157 s
    best = float(curve.loc[curve["waste_fraction"].idxmin(), "interval_s"])
    assert best == pytest.approx(math.sqrt(2 * 60 * 11_160), rel=0.02)
    assert actual in set(curve["interval_s"])
    assert curve["interval_s"].is_monotonic_increasing


@pytest.mark.parametrize(("delta", "mtbf"), [(0, 100), (10, 0), (-1, 100), (math.inf, 1)])
def test_nonsense_inputs_are_refused(delta, mtbf):
    with pytest.raises(ValueError):
        daly_interval(delta, mtbf)


def test_the_advisor_chart_shows_both_marks_and_plain_tick_labels() -> None:
    from logbook.charts import log_ticks, waste_curve_figure

    # given the demo's numbers: Daly's 26.1 min within a minute of Young's 26.4 min
    young_s, daly_s, actual_s = 1583.6, 1563.9, 10049.3
    curve = waste_curve(29.7, 42268.3, 1565.8, extra=(daly_s, actual_s))
    figure = waste_curve_figure(curve, recommended_s=daly_s, actual_s=actual_s, young_s=young_s)

    # then Daly's star is drawn last (on top), ringed by Young's larger open diamond
    marks = [t for t in figure["data"] if t["mode"] == "markers"]
    assert [t["name"].split(":")[0] for t in marks] == ["actual", "Young", "Daly (recommended)"]
    young, daly = marks[1]["marker"], marks[2]["marker"]
    assert young["symbol"] == "diamond-open" and daly["symbol"] == "star"
    assert young["size"] > daly["size"]
    # and the log axis is labelled with whole 1-2-5 numbers, not "10 2 3 ... 100 2 3"
    axis = figure["layout"]["xaxis"]
    assert axis["type"] == "log"
    assert axis["ticktext"] == ["2", "5", "10", "20", "50", "100", "200", "500"]
    assert log_ticks(0.3, 7) == [0.2, 0.5, 1, 2, 5, 10]
