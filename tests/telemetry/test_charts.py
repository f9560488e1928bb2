"""Chart builders are pure: DataFrames in, figures out."""

from __future__ import annotations

import math

import pandas as pd

from telemetry.charts import metric_figure


def test_a_line_per_attempt_and_non_finite_values_marked():
    points = pd.DataFrame(
        {
            "attempt": [1, 1, 1, 2, 2],
            "x": [0, 1, 2, 1, 2],
            "value": [3.0, math.nan, 2.5, 2.9, 2.4],
        }
    )

    figure = metric_figure(points, title="loss")

    names = [trace.name for trace in figure.data]
    assert names == ["attempt 1", "attempt 1: non-finite", "attempt 2"]
    assert list(figure.data[0].x) == [0, 2]
    assert list(figure.data[1].x) == [1]


def test_restarts_and_interruptions_are_marked():
    points = pd.DataFrame({"attempt": [1, 2], "x": [5, 3], "value": [1.0, 4.0]})
    restarts = pd.DataFrame({"attempt": [2], "x": [3]})
    interruptions = pd.DataFrame({"x": [5], "label": ["Faulty GPU"]})

    figure = metric_figure(points, title="loss", restarts=restarts, interruptions=interruptions)

    lines = [(shape.x0, shape.line.dash) for shape in figure.layout.shapes]
    assert (3, "dash") in lines and (5, "dot") in lines
    marker = next(trace for trace in figure.data if trace.name == "interruptions")
    assert list(marker.text) == ["Faulty GPU"] and list(marker.y) == [4.0]


def test_time_axis_shades_downtime_between_attempts():
    start = pd.Timestamp("2026-11-01T00:00:00")
    points = pd.DataFrame(
        {
            "attempt": [1, 1, 2],
            "x": [start, start + pd.Timedelta(minutes=1), start + pd.Timedelta(minutes=30)],
            "value": [3.0, 2.9, 2.8],
        }
    )
    downtime = pd.DataFrame(
        {"x0": [start + pd.Timedelta(minutes=2)], "x1": [start + pd.Timedelta(minutes=29)]}
    )

    figure = metric_figure(points, title="loss", axis="time", downtime=downtime)

    shaded = [shape for shape in figure.layout.shapes if shape.type == "rect"]
    assert len(shaded) == 1
    assert pd.Timestamp(shaded[0].x0) == start + pd.Timedelta(minutes=2)
    assert figure.layout.xaxis.title.text == "wall-clock time (UTC)"
