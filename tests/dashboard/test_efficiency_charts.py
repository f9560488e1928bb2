"""The goodput and MFU figures, built without a database (telemetry.efficiency_charts): a
trace per badput bucket with its share, time read in days for long runs, attempts without
finite MFU left out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)


def test_buckets_figure_has_a_trace_per_bucket_with_shares():
    import pandas as pd
    import plotly.graph_objects as go

    from telemetry.efficiency_charts import buckets_figure_data

    frame = pd.DataFrame(
        [("productive", 30.0), ("wasted_progress", 6.0), ("custom:eval", 4.0)],
        columns=["bucket", "seconds"],
    )

    figure = go.Figure(buckets_figure_data(frame))

    assert [t.name for t in figure.data] == ["Productive", "Wasted progress", "Custom: eval"]
    assert figure.data[1].customdata[0][0] == pytest.approx(15.0)  # 6 of 40 s
    assert figure.layout.barmode == "stack"
    assert figure.layout.xaxis.title.text == "time (s)"

    # a three-day run's buckets read in days, not hundreds of thousands of seconds
    days = go.Figure(
        buckets_figure_data(frame.assign(seconds=frame["seconds"] * 6_480))
    )  # 259,200 s
    assert days.layout.xaxis.title.text == "time (d)"
    assert sum(t.x[0] for t in days.data) == pytest.approx(3.0)


def test_mfu_figure_skips_attempts_without_finite_values():
    import pandas as pd
    import plotly.graph_objects as go

    from telemetry.efficiency_charts import mfu_figure_data

    points = pd.DataFrame(
        {"attempt": [1, 1, 2], "step": [0, 1, 0], "wall_time": [T0, T0, T0],
         "mfu": [0.4, 0.5, float("nan")]}
    )  # fmt: skip

    figure = go.Figure(mfu_figure_data(points, axis="step"))

    assert [t.name for t in figure.data] == ["attempt 1"]
    assert list(figure.data[0].y) == pytest.approx([40.0, 50.0])
