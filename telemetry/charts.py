"""Pure chart builders: DataFrames in, Plotly figures out. No database."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go

ATTEMPT_COLOURS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
]

Axis = Literal["step", "time"]


def attempt_colour(position: int) -> str:
    return ATTEMPT_COLOURS[position % len(ATTEMPT_COLOURS)]


def metric_figure(
    points: pd.DataFrame,
    *,
    title: str,
    axis: Axis = "step",
    restarts: pd.DataFrame | None = None,
    interruptions: pd.DataFrame | None = None,
    downtime: pd.DataFrame | None = None,
) -> go.Figure:
    """One metric, a line per attempt, over steps or wall-clock time. SVG traces, not WebGL:
    series arrive downsampled to a few thousand points, and WebGL contexts are a scarce
    per-page resource (headless browsers and dashboards with many charts run out).

    points: columns attempt, x, value (x is the step or the wall time; non-finite values
        allowed, drawn as marked points).
    restarts: columns attempt, x: where an attempt resumed (dashed line).
    interruptions: columns x, label: where the job stopped (dotted line, hover marker).
    downtime: columns x0, x1: wall time between attempts (shaded).
    """
    figure = go.Figure()
    for index, (attempt, group) in enumerate(points.groupby("attempt", sort=True)):
        colour = attempt_colour(index)
        finite = np.isfinite(group["value"].to_numpy(dtype=float))
        if finite.any():
            figure.add_trace(
                go.Scatter(
                    x=group["x"][finite],
                    y=group["value"][finite],
                    mode="lines",
                    name=f"attempt {attempt}",
                    line={"color": colour, "width": 1.2},
                    hovertemplate="%{x}<br>%{y:.4g}<extra>attempt " + str(attempt) + "</extra>",
                )
            )
        if (~finite).any():
            bad = group[~finite]
            # Plot non-finite values where the curve was, labelled, so a NaN is seen, not hidden.
            anchor = group["value"][finite].iloc[-1] if finite.any() else 0.0
            figure.add_trace(
                go.Scatter(
                    x=bad["x"],
                    y=[anchor] * len(bad),
                    mode="markers",
                    name=f"attempt {attempt}: non-finite",
                    marker={"color": "#d62728", "symbol": "x", "size": 10},
                    text=[str(v) for v in bad["value"]],
                    hovertemplate="%{x}<br>%{text}<extra></extra>",
                )
            )
    if downtime is not None:
        for row in downtime.itertuples():
            figure.add_vrect(
                x0=row.x0, x1=row.x1, fillcolor="#d62728", opacity=0.08, line_width=0, layer="below"
            )
    if restarts is not None:
        for row in restarts.itertuples():
            figure.add_vline(
                x=row.x,
                line={"color": "#555", "dash": "dash", "width": 1},
                annotation_text=f"attempt {row.attempt}",
                annotation_position="top left",
                annotation_font_size=10,
            )
    if interruptions is not None and not interruptions.empty:
        for row in interruptions.itertuples():
            figure.add_vline(x=row.x, line={"color": "#d62728", "dash": "dot", "width": 1})
        # Labels as hover markers along the top: text annotations overlap when restarts
        # cluster, and a hover names each one exactly.
        values = points["value"].to_numpy(dtype=float)
        finite_values = values[np.isfinite(values)]
        top = float(finite_values.max()) if finite_values.size else 0.0
        figure.add_trace(
            go.Scatter(
                x=interruptions["x"],
                y=[top] * len(interruptions),
                mode="markers",
                name="interruptions",
                marker={"color": "#d62728", "symbol": "triangle-down", "size": 9},
                text=[str(label) for label in interruptions["label"]],
                hovertemplate="interrupted at %{x}<br>%{text}<extra></extra>",
            )
        )
    figure.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}},
        height=300,
        margin={"l": 50, "r": 10, "t": 36, "b": 36},
        xaxis_title="step" if axis == "step" else "wall-clock time (UTC)",
        # Explicit: an axis with no points would otherwise guess "linear" and misdraw the
        # date-valued marks.
        xaxis_type="linear" if axis == "step" else "date",
        legend={"orientation": "h", "y": -0.25},
        template="plotly_white",
        hovermode="closest",
    )
    return figure
