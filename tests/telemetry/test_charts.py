"""Chart builders are pure: DataFrames in, figures out."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from telemetry.metric_charts import flat_value_range, metric_figure


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


def test_an_attempt_with_one_value_is_marked_not_an_empty_chart():
    points = pd.DataFrame({"attempt": [1, 2, 2], "x": [499, 500, 501], "value": [2.5, 2.4, 2.3]})

    figure = metric_figure(points, title="eval/loss")

    modes = {trace.name: trace.mode for trace in figure.data}
    assert modes == {"attempt 1": "lines+markers", "attempt 2": "lines"}
    assert not figure.data[0].cliponaxis  # drawn whole at the edge of the axis


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


def test_many_downtimes_on_the_time_axis_are_one_path_plotly_can_read():
    from telemetry.charts import MANY_MARKS

    start = pd.Timestamp("2026-11-01T00:00:00")
    n = MANY_MARKS + 10
    points = pd.DataFrame(
        {"attempt": [1, 2], "x": [start, start + pd.Timedelta(hours=n)], "value": [3.0, 2.0]}
    )
    downtime = pd.DataFrame(
        {
            "x0": [start + pd.Timedelta(hours=h, minutes=10) for h in range(n)],
            "x1": [start + pd.Timedelta(hours=h, minutes=40) for h in range(n)],
        }
    )

    figure = metric_figure(points, title="loss", axis="time", downtime=downtime)

    [bands] = figure.layout.shapes
    assert bands.type == "path" and bands.fillcolor == "#d62728"
    # Plotly splits a path on spaces and on command letters (T is one): dates use "_"
    first = "M2026-11-01_00:10:00,0L2026-11-01_00:10:00,1"
    assert bands.path.startswith(first + "L2026-11-01_00:40:00,1L2026-11-01_00:40:00,0Z")
    assert bands.path.count("Z") == n and "T" not in bands.path and " " not in bands.path


def test_many_attempts_and_marks_are_drawn_as_a_few_traces():
    from telemetry.charts import MANY_MARKS, OWN_ATTEMPTS

    # given a run of 100 attempts of 3 points each, a restart and an interruption per attempt
    n = 100
    points = pd.DataFrame(
        {
            "attempt": [a for a in range(1, n + 1) for _ in range(3)],
            "x": [10 * a + i for a in range(1, n + 1) for i in range(3)],
            "value": [1.0 + i for _ in range(n) for i in range(3)],
        }
    )
    restarts = pd.DataFrame({"attempt": range(2, n + 1), "x": [10 * a for a in range(2, n + 1)]})
    interruptions = pd.DataFrame({"x": [10 * a + 2 for a in range(1, n)], "label": ["GPU"] * 99})
    assert n - 1 > MANY_MARKS

    figure = metric_figure(points, title="loss", restarts=restarts, interruptions=interruptions)

    # then the latest attempts have their own lines, the earlier ones share one grey line
    names = [trace.name for trace in figure.data]
    assert names[0] == f"attempts 1 to {n - OWN_ATTEMPTS}"
    assert names[1 : 1 + OWN_ATTEMPTS] == [
        f"attempt {a}" for a in range(n - OWN_ATTEMPTS + 1, n + 1)
    ]
    folded = figure.data[0]
    assert list(folded.x[:4]) == [10, 11, 12, None]  # broken between attempts
    assert folded.text[0] == "attempt 1"
    # and the restarts are one path shape, under the data, not a shape each; the many
    # interruptions are left to their named ticks (no full-height line each)
    restart_lines = figure.layout.shapes[0]
    assert restart_lines.type == "path" and restart_lines.layer == "below"
    assert restart_lines.path.startswith("M20,0L20,1M30,0L30,1")
    assert restart_lines.path.count("M") == n - 1 and restart_lines.line.dash == "solid"
    assert not any(t.name in ("restarts", "interruption lines") for t in figure.data)
    assert figure.layout.yaxis2.overlaying == "y" and figure.layout.yaxis2.visible is False
    # and the interruptions are ticks along the top, drawn as one path, each named on hover
    # by a trace that draws nothing
    pins = next(t for t in figure.data if t.name == "interruptions")
    assert pins.mode == "none" and pins.yaxis == "y2"
    assert list(pins.x[:2]) == [12, 22] and set(pins.y) == {(0.93 + 1.0) / 2}
    assert list(pins.text[:2]) == ["GPU", "GPU"]
    [ticks] = [s for s in figure.layout.shapes if s.path.startswith("M12,")]
    assert ticks.path.startswith("M12,0.93L12,1.0M22,0.93L22,1.0") and ticks.line.width == 3
    assert ticks.path.count("M") == 99


def test_arrays_of_objects_encode_as_the_lists_they_hold():
    # given a folded line's values as Plotly took them before (lists, None breaking the line),
    # with numpy steps, datetimes and labels
    from datetime import UTC, datetime

    import numpy as np
    import plotly.graph_objects as go

    from telemetry.charts import as_objects

    columns = {
        "x": [np.int64(3), np.int64(4), None, datetime(2026, 9, 1, tzinfo=UTC), None],
        "y": [1.5, float("nan"), None, 2.0, None],
        "text": ["attempt 1", "attempt 1", None, "attempt 2", None],
    }

    # when the same values go in as arrays of objects
    as_lists = go.Figure(go.Scatter(**columns)).to_json()
    as_arrays = go.Figure(go.Scatter(**{k: as_objects(v) for k, v in columns.items()})).to_json()

    # then the figure's JSON is the same, byte for byte
    assert as_arrays == as_lists


def test_folded_attempts_are_joined_only_where_the_line_shows_no_gap():
    from telemetry.charts import folded_trace_data

    # given three attempts drawn a point every 100 steps (downsampled), the second resuming
    # 50 steps before the first ended and the third 5,000 steps after the second ended
    first = (1, np.arange(0, 1001, 100), np.ones(11))
    second = (2, np.arange(950, 2051, 100), np.ones(12))
    third = (3, np.arange(7050, 8051, 100), np.ones(11))

    # when they are folded into one line
    trace = folded_trace_data([first, second, third], hovertemplate="")

    # then the resume is drawn joined (one SVG path) and the missing steps stay a gap
    assert trace["x"].count(None) == 1
    assert trace["x"][trace["x"].index(None) - 1 : trace["x"].index(None) + 2] == [2050, None, 7050]
    assert trace["text"][10:12] == ["attempt 1", "attempt 2"]

    # and over time, attempts an hour apart on a day's chart stay apart (downtime)
    hour = np.timedelta64(3600, "s")
    start = np.datetime64("2026-09-01T00:00:00")
    timed = [(1, start + np.arange(0, 6) * hour, np.ones(6)),
             (2, start + np.arange(6, 24) * hour, np.ones(18))]  # fmt: skip
    assert folded_trace_data(timed, hovertemplate="")["x"].count(None) == 1


def test_a_steady_metric_gets_a_readable_range_and_a_varying_one_plotlys():
    steady = pd.DataFrame({"attempt": [1, 1, 2], "x": [0, 1, 2], "value": [4.0e6] * 3})
    varying = pd.DataFrame({"attempt": [1, 1], "x": [0, 1], "value": [3.0, 2.5]})

    assert list(metric_figure(steady, title="tokens_per_s").layout.yaxis.range) == [3.8e6, 4.2e6]
    assert metric_figure(varying, title="loss").layout.yaxis.range is None


def test_flat_value_range():
    assert flat_value_range(0.0, 0.0) == [-1.0, 1.0]
    assert flat_value_range(-2.0, -2.0) == [-2.1, -1.9]
    assert flat_value_range(1.0, 1.0 + 1e-12) is not None  # float noise is still flat
    assert flat_value_range(1.0, 1.001) is None
