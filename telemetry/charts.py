"""Pure chart builders: DataFrames in, Plotly figures out. No database."""

from __future__ import annotations

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


def metric_figure(
    points: pd.DataFrame,
    *,
    title: str,
    restarts: pd.DataFrame | None = None,
    interruptions: pd.DataFrame | None = None,
) -> go.Figure:
    """One metric over steps, a line per attempt.

    points: columns attempt, step, value (non-finite values allowed).
    restarts: columns attempt, step: where an attempt resumed (dashed line).
    interruptions: columns step, label: where the job stopped (red dotted line).
    """
    figure = go.Figure()
    for index, (attempt, group) in enumerate(points.groupby("attempt", sort=True)):
        colour = ATTEMPT_COLOURS[index % len(ATTEMPT_COLOURS)]
        finite = np.isfinite(group["value"].to_numpy(dtype=float))
        if finite.any():
            figure.add_trace(
                go.Scattergl(
                    x=group["step"][finite],
                    y=group["value"][finite],
                    mode="lines",
                    name=f"attempt {attempt}",
                    line={"color": colour, "width": 1.2},
                    hovertemplate="step %{x}<br>%{y:.4g}<extra>attempt "
                    + str(attempt)
                    + "</extra>",
                )
            )
        if (~finite).any():
            bad = group[~finite]
            # Plot non-finite values where the curve was, labelled, so a NaN is seen, not hidden.
            anchor = group["value"][finite].iloc[-1] if finite.any() else 0.0
            figure.add_trace(
                go.Scatter(
                    x=bad["step"],
                    y=[anchor] * len(bad),
                    mode="markers",
                    name=f"attempt {attempt}: non-finite",
                    marker={"color": "#d62728", "symbol": "x", "size": 10},
                    text=[str(v) for v in bad["value"]],
                    hovertemplate="step %{x}<br>%{text}<extra></extra>",
                )
            )
    if restarts is not None:
        for row in restarts.itertuples():
            figure.add_vline(
                x=row.step,
                line={"color": "#555", "dash": "dash", "width": 1},
                annotation_text=f"attempt {row.attempt}",
                annotation_position="top left",
                annotation_font_size=10,
            )
    if interruptions is not None and not interruptions.empty:
        for row in interruptions.itertuples():
            figure.add_vline(x=row.step, line={"color": "#d62728", "dash": "dot", "width": 1})
        # Labels as hover markers along the top: text annotations overlap when restarts
        # cluster, and a hover names each one exactly.
        values = points["value"].to_numpy(dtype=float)
        finite = values[np.isfinite(values)]
        top = float(finite.max()) if finite.size else 0.0
        figure.add_trace(
            go.Scatter(
                x=interruptions["step"],
                y=[top] * len(interruptions),
                mode="markers",
                name="interruptions",
                marker={"color": "#d62728", "symbol": "triangle-down", "size": 9},
                text=[str(label) for label in interruptions["label"]],
                hovertemplate="interrupted at step %{x}<br>%{text}<extra></extra>",
            )
        )
    figure.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}},
        height=300,
        margin={"l": 50, "r": 10, "t": 36, "b": 36},
        xaxis_title="step",
        legend={"orientation": "h", "y": -0.25},
        template="plotly_white",
        hovermode="closest",
    )
    return figure
