"""Pure chart builders for the MFU and goodput pages: DataFrames in, Plotly figures out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from telemetry import display
from telemetry.charts import chart_look, chart_look_data, hover_template, plain
from telemetry.goodput import bucket_label
from telemetry.metric_charts import metric_figure_data

PRODUCTIVE_COLOUR = "#2e7d32"
BADPUT_COLOURS = [
    "#d62728",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#1f77b4",
    "#7f7f7f",
]


def mfu_figure_data(
    points: pd.DataFrame,
    *,
    axis: str,
    label: str = "MFU",
    restarts: pd.DataFrame | None = None,
    interruptions: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """MFU (percent) over steps (axis="step") or wall time (axis="time"), a line per attempt
    with finite values (metric_figure_data's lines, folds and marks), as JSON data.

    points: columns attempt, step, wall_time, mfu (a fraction).
    restarts: columns attempt, step, time: where each attempt began (dashed line).
    interruptions: columns step, occurred_at, label (red dotted line and a hover marker).
    """
    values = points["mfu"].to_numpy(dtype=float) * 100
    finite = np.isfinite(values)
    if axis == "step":
        xs = points["step"].to_numpy()
    else:  # naive UTC, as Plotly's date axis wants it
        xs = pd.to_datetime(points["wall_time"], utc=True).dt.tz_localize(None).to_numpy()
    frame = pd.DataFrame(
        {"attempt": points["attempt"].to_numpy()[finite], "x": xs[finite], "value": values[finite]}
    )
    restart_column = "step" if axis == "step" else "time"
    mark_column = "step" if axis == "step" else "occurred_at"
    shown = restarts.dropna(subset=[restart_column]) if restarts is not None else None
    found = interruptions.dropna(subset=[mark_column]) if interruptions is not None else None
    figure = metric_figure_data(
        frame,
        title=f"{label} over {'steps' if axis == 'step' else 'wall time'}",
        axis="step" if axis == "step" else "time",
        restarts=None
        if shown is None
        else pd.DataFrame(
            {"attempt": list(shown["attempt"]), "x": [_x(v) for v in shown[restart_column]]}
        ),
        interruptions=None
        if found is None
        else pd.DataFrame(
            {"x": [_x(v) for v in found[mark_column]], "label": [str(v) for v in found["label"]]}
        ),
        y_title=f"{label} (%)",
        value_hover=f"{label} %{{y:.2f}}%",
    )
    look = chart_look(
        title=figure["layout"]["title"]["text"],
        x_title="step" if axis == "step" else "time (UTC)",
        y_title=f"{label} (%)",
        height=340,
        legend_y=-0.25,
        # The x axis, its title and the legend's row (92 px as drawn): one draw, not two.
        margin_bottom=96,
    )
    layout = figure["layout"]
    for key in ("title", "height", "margin", "legend", "hovermode"):
        layout[key] = look[key]
    layout["xaxis"]["title"] = look["xaxis"]["title"]
    return figure


def _x(value: object) -> object:
    # Marks are placed by plain numbers, or at naive UTC times as the run page's are
    # (charts.naive_utc): plotly.js shows epoch milliseconds in the browser's zone, which put
    # the marks hours away from the data for a reader outside UTC, and it misreads "+00:00".
    if isinstance(value, datetime | np.datetime64):  # pd.Timestamp is a datetime
        moment = pd.Timestamp(value)
        return moment.tz_convert(UTC).tz_localize(None) if moment.tzinfo is not None else moment
    return value


def buckets_figure_data(
    buckets: pd.DataFrame, *, title: str = "Where the time went"
) -> dict[str, Any]:
    """A horizontal stacked bar of productive time and every badput bucket (one trace each),
    as JSON data.

    buckets: columns bucket, seconds (productive first, then badput in display order). The
    axis is in the unit that fits the elapsed time (display.duration_unit): a three-day run
    read "250k seconds"."""
    total = float(buckets["seconds"].sum())
    unit, size = display.duration_unit(total)
    data = []
    badput_index = 0
    for row in buckets.itertuples():
        if row.bucket == "productive":
            colour = PRODUCTIVE_COLOUR
        else:
            colour = BADPUT_COLOURS[badput_index % len(BADPUT_COLOURS)]
            badput_index += 1
        share = 100 * row.seconds / total if total > 0 else 0.0
        label = bucket_label(str(row.bucket))
        data.append(
            {
                "type": "bar",
                "x": [float(row.seconds) / size],
                "y": ["elapsed"],
                "orientation": "h",
                "name": label,
                "marker": {"color": colour},
                "customdata": [[share]],
                "hovertemplate": hover_template(
                    "%{x:.3~f} $unit (%{customdata[0]:.2f}%)<extra>$label</extra>",
                    unit=unit,
                    label=label,
                ),
            }
        )
    layout = chart_look_data(
        title=title, x_title=f"time ({unit})", y_title="", height=340, legend_y=-0.25
    )
    layout["barmode"] = "stack"
    layout["legend"] = {**layout["legend"], "orientation": "h", "y": -0.45}
    return {"data": data, "layout": layout}


def goodput_over_time_figure_data(rolling: pd.DataFrame, *, width_s: float) -> dict[str, Any]:
    """Goodput (percent) of rolling windows, plotted at each window's end, as JSON data.

    rolling: columns end, goodput (a fraction)."""
    values = rolling["goodput"].to_numpy(dtype=float) * 100
    finite = np.isfinite(values)
    # Naive UTC, as Plotly's date axis wants it.
    ends = pd.to_datetime(rolling["end"], utc=True).dt.tz_localize(None).to_numpy()
    hours = width_s / 3600
    width = f"{hours:.1f} h" if hours >= 1 else f"{width_s / 60:.0f} min"
    layout = chart_look_data(
        title=f"Goodput over time (rolling {width} windows)",
        x_title="time (UTC)",
        y_title="goodput (%)",
        height=340,
        legend_y=-0.25,
        # The x axis, its title and the legend's row (92 px as drawn): one draw, not two.
        margin_bottom=96,
    )
    layout["yaxis"]["range"] = [0, 100]
    trace = {
        "type": "scatter",
        "x": plain(ends[finite]),
        "y": values[finite].tolist(),
        "mode": "lines+markers",
        "name": "goodput",
        "line": {"color": PRODUCTIVE_COLOUR, "width": 1.5},
        "marker": {"size": 4},
        "hovertemplate": "window ending %{x}<br>goodput %{y:.1f}%<extra></extra>",
    }
    return {"data": [trace], "layout": layout}
