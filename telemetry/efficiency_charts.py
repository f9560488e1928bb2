"""Pure chart builders for the MFU and goodput pages: DataFrames in, Plotly figures out."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from telemetry.charts import ATTEMPT_COLOURS, Marks, chart_layout, folded_trace, split_attempts
from telemetry.goodput import bucket_label

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


def _layout(figure: go.Figure, *, title: str, x_title: str, y_title: str) -> go.Figure:
    return chart_layout(
        figure, title=title, x_title=x_title, y_title=y_title, height=340, legend_y=-0.25
    )


def mfu_figure(
    points: pd.DataFrame,
    *,
    axis: str,
    label: str = "MFU",
    restarts: pd.DataFrame | None = None,
    interruptions: pd.DataFrame | None = None,
) -> go.Figure:
    """MFU (percent) over steps (axis="step") or wall time (axis="time"), a line per attempt.

    points: columns attempt, step, wall_time, mfu (a fraction).
    restarts: columns attempt, step, time: where each attempt began (dashed line).
    interruptions: columns step, occurred_at, label (red dotted line and a hover marker).
    """
    x_column = "step" if axis == "step" else "wall_time"
    figure = go.Figure()
    earlier, own = split_attempts(list(points.groupby("attempt", sort=True)))
    if earlier:
        lines = []
        for attempt, group in earlier:
            values = group["mfu"].to_numpy(dtype=float) * 100
            finite = np.isfinite(values)
            lines.append((attempt, group[x_column][finite], values[finite]))
        figure.add_trace(
            folded_trace(
                lines, hovertemplate=f"%{{x}}<br>{label} %{{y:.2f}}%<extra>%{{text}}</extra>"
            )
        )
    for index, (attempt, group) in enumerate(own, start=len(earlier)):
        values = group["mfu"].to_numpy(dtype=float) * 100
        finite = np.isfinite(values)
        if not finite.any():
            continue
        figure.add_trace(
            go.Scatter(
                x=group[x_column][finite],
                y=values[finite],
                mode="lines",
                name=f"attempt {attempt}",
                line={"color": ATTEMPT_COLOURS[index % len(ATTEMPT_COLOURS)], "width": 1.2},
                hovertemplate=f"%{{x}}<br>{label} %{{y:.2f}}%<extra>attempt {attempt}</extra>",
            )
        )
    marks = Marks()
    restart_column = "step" if axis == "step" else "time"
    if restarts is not None:
        shown = restarts.dropna(subset=[restart_column])
        marks.lines(
            [_x(value) for value in shown[restart_column]],
            line={"color": "#555", "dash": "dash", "width": 1},
            name="restarts",
            labels=[f"attempt {attempt}" for attempt in shown["attempt"]],
        )
    mark_column = "step" if axis == "step" else "occurred_at"
    if interruptions is not None and not interruptions.empty:
        found = interruptions.dropna(subset=[mark_column])
        marks.lines(
            [_x(value) for value in found[mark_column]],
            line={"color": "#d62728", "dash": "dot", "width": 1},
            name="interruption lines",
        )
        values = points["mfu"].to_numpy(dtype=float) * 100
        finite = values[np.isfinite(values)]
        top = float(finite.max()) if finite.size else 0.0
        if not found.empty:
            figure.add_trace(
                go.Scatter(
                    x=found[mark_column],
                    y=[top] * len(found),
                    mode="markers",
                    name="interruptions",
                    marker={"color": "#d62728", "symbol": "triangle-down", "size": 9},
                    text=[str(text) for text in found["label"]],
                    hovertemplate="interrupted at %{x}<br>%{text}<extra></extra>",
                )
            )
    marks.draw(figure)
    title = f"{label} over {'steps' if axis == 'step' else 'wall time'}"
    return _layout(
        figure,
        title=title,
        x_title="step" if axis == "step" else "time (UTC)",
        y_title=f"{label} (%)",
    )


def _x(value: object) -> object:
    # Marks are placed by plain numbers, or epoch milliseconds, which Plotly reads on a date
    # axis (an aware "+00:00" string is misread by plotly.js).
    if isinstance(value, datetime | np.datetime64):  # pd.Timestamp is a datetime
        return pd.Timestamp(value).timestamp() * 1000
    return value


def buckets_figure(buckets: pd.DataFrame, *, title: str = "Where the time went") -> go.Figure:
    """A horizontal stacked bar of productive time and every badput bucket (one trace each).

    buckets: columns bucket, seconds (productive first, then badput in display order)."""
    total = float(buckets["seconds"].sum())
    figure = go.Figure()
    badput_index = 0
    for row in buckets.itertuples():
        if row.bucket == "productive":
            colour = PRODUCTIVE_COLOUR
        else:
            colour = BADPUT_COLOURS[badput_index % len(BADPUT_COLOURS)]
            badput_index += 1
        share = 100 * row.seconds / total if total > 0 else 0.0
        figure.add_trace(
            go.Bar(
                x=[row.seconds],
                y=["elapsed"],
                orientation="h",
                name=bucket_label(str(row.bucket)),
                marker={"color": colour},
                customdata=[[share]],
                hovertemplate="%{x:.1f} s (%{customdata[0]:.2f}%)<extra>"
                + bucket_label(str(row.bucket))
                + "</extra>",
            )
        )
    figure.update_layout(barmode="stack")
    _layout(figure, title=title, x_title="seconds", y_title="")
    figure.update_layout(height=340, legend={"orientation": "h", "y": -0.45})
    return figure


def goodput_over_time_figure(rolling: pd.DataFrame, *, width_s: float) -> go.Figure:
    """Goodput (percent) of rolling windows, plotted at each window's end.

    rolling: columns end, goodput (a fraction)."""
    figure = go.Figure()
    values = rolling["goodput"].to_numpy(dtype=float) * 100
    finite = np.isfinite(values)
    figure.add_trace(
        go.Scatter(
            x=rolling["end"][finite],
            y=values[finite],
            mode="lines+markers",
            name="goodput",
            line={"color": PRODUCTIVE_COLOUR, "width": 1.5},
            marker={"size": 4},
            hovertemplate="window ending %{x}<br>goodput %{y:.1f}%<extra></extra>",
        )
    )
    figure.update_yaxes(range=[0, 100])
    hours = width_s / 3600
    width = f"{hours:.1f} h" if hours >= 1 else f"{width_s / 60:.0f} min"
    return _layout(
        figure,
        title=f"Goodput over time (rolling {width} windows)",
        x_title="time (UTC)",
        y_title="goodput (%)",
    )
