"""Fleet health's figures (no database): incidents per host, offenders first and in the
fleet's ranking, whole-number count axes, the weekly SDC rate, and a host's timeline."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from logbook import fleet_charts
from logbook.charts import count_axis


def test_incidents_per_host_figure_marks_offenders_first():
    frame = pd.DataFrame(
        {
            "host": ["a", "b"],
            "interruptions": [1, 3],
            "sdc": [0, 1],
            "in_window": [1, 4],
            "repeat_offender": [False, True],
        }
    )
    figure = fleet_charts.incidents_per_host_figure(frame)
    interruptions, records, stragglers = figure.data
    assert list(interruptions.x) == ["b ⚠", "a"]
    assert list(interruptions.y) == [3, 1] and list(records.y) == [1, 0]
    assert list(stragglers.y) == [0, 0]  # no stragglers column: none counted
    assert list(interruptions.marker.color) == [
        fleet_charts.OFFENDER_COLOUR,
        fleet_charts.BAR_COLOUR,
    ]
    # counts are ticked at whole numbers (4 at most here: every one)
    assert (figure.layout.yaxis.dtick, figure.layout.yaxis.tickformat) == (1, ",d")


@pytest.mark.parametrize(("largest", "dtick"), [(0, 1), (1, 1), (10, 1), (11, None), (500, None)])
def test_a_count_axis_ticks_whole_numbers(largest, dtick):
    axis = count_axis(largest)
    assert axis["tickformat"] == ",d" and axis.get("dtick") == dtick


def test_incidents_per_host_figure_follows_the_fleet_ranking():
    # given the selector ranked a (one incident naming it and its GPU) above b (two incidents
    # naming it among many hosts)
    frame = pd.DataFrame(
        {"host": ["a", "b"], "interruptions": [1, 2], "sdc": [0, 0], "in_window": [1, 2],
         "repeat_offender": [False, False], "rank": [0, 1]}
    )  # fmt: skip
    (interruptions, *_) = fleet_charts.incidents_per_host_figure(frame).data
    assert list(interruptions.x) == ["a", "b"]


def test_weekly_sdc_figure_draws_the_mean_rate():
    weekly = pd.DataFrame(
        {"week_start": [datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 9, tzinfo=UTC)],
         "count": [2, 1]}
    )  # fmt: skip
    bars, mean = fleet_charts.weekly_sdc_figure(weekly, per_week=1.5).data
    assert list(bars.y) == [2, 1]
    assert list(mean.y) == [1.5, 1.5]
    assert len(fleet_charts.weekly_sdc_figure(weekly, per_week=None).data) == 1


def test_the_last_sdc_week_is_drawn_only_as_far_as_it_was_observed():
    # given two weeks of records from Nov 2, observed until Nov 12 (3 days into the second)
    weekly = pd.DataFrame(
        {"week_start": [datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 9, tzinfo=UTC)],
         "count": [2, 1]}
    )  # fmt: skip
    figure = fleet_charts.weekly_sdc_figure(
        weekly, per_week=1.5, span_end=datetime(2026, 11, 12, tzinfo=UTC)
    )
    bars, mean = figure.data

    # then the first bar is a week wide, the second three days, and the mean line ends there
    day_ms = 86_400_000
    assert [round(width / day_ms / 0.98, 3) for width in bars.width] == [7, 3]
    assert [row[0] for row in bars.customdata] == [7, 3]
    assert [x[:16] for x in mean.x] == ["2026-11-02T00:00", "2026-11-12T00:00"]


def test_a_hosts_timeline_draws_its_stragglers_and_a_readable_axis_for_one_incident() -> None:
    at = datetime(2026, 11, 1, 10, 12, tzinfo=UTC)
    both = pd.DataFrame(
        {
            "occurred_at": [at, datetime(2026, 11, 1, 9, 50, tzinfo=UTC)],
            "kind": ["interruption", "straggler"],
            "label": ["Faulty GPU", "Straggler rank 219"],
            "run": ["demo", "demo"],
        }
    )
    # the straggler record, counted among the host's incidents, is drawn with them
    assert [t.name for t in fleet_charts.host_timeline_figure(both).data] == [
        "interruption",
        "straggler",
    ]
    # one incident alone gets an hour either side, not sub-millisecond ticks
    one = fleet_charts.host_timeline_figure(both.iloc[:1])
    low, high = (pd.Timestamp(v) for v in one.layout.xaxis.range)
    assert high - low == pd.Timedelta(hours=2)
