"""Pure chart builders for the failure breakdown and the checkpoint pages: DataFrames in,
Plotly figures out. No database."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from telemetry.charts import chart_layout

GROUP_COLOURS = [
    "#d62728",
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
]


def _layout(figure: go.Figure, *, title: str, height: int = 320) -> go.Figure:
    return chart_layout(figure, title=title, height=height)


def breakdown_figure(rows: pd.DataFrame) -> go.Figure:
    """Interruptions per component, one horizontal bar trace per group (so the legend names
    the groups), largest component on top.

    rows: columns component, group, count, percent."""
    figure = go.Figure()
    # Plotly draws the first category at the bottom of a horizontal bar chart.
    order = list(rows.sort_values(["count", "component"], ascending=[True, False])["component"])
    for index, (group, part) in enumerate(rows.groupby("group", sort=False)):
        figure.add_trace(
            go.Bar(
                x=part["count"],
                y=part["component"],
                orientation="h",
                name=str(group),
                marker={"color": GROUP_COLOURS[index % len(GROUP_COLOURS)]},
                text=[f"{p:.1f}%" for p in part["percent"]],
                textposition="outside",
                cliponaxis=False,  # the longest bar's label would be cut at the plot edge
                hovertemplate="%{y}<br>%{x} interruptions (%{text})<extra>"
                + str(group)
                + "</extra>",
            )
        )
    figure.update_yaxes(categoryorder="array", categoryarray=order)
    figure.update_xaxes(title_text="unexpected interruptions")
    return _layout(
        figure, title="Unexpected interruptions by component", height=max(320, 26 * len(rows))
    )


def save_cost_figure(checkpoints: pd.DataFrame) -> go.Figure:
    """Blocking and asynchronous save time of each checkpoint over wall time.

    checkpoints: columns saved_at, step, blocking_save_s, async_save_s."""
    frame = checkpoints.dropna(subset=["saved_at"]).sort_values("saved_at")
    figure = go.Figure()
    for column, label, colour in (
        ("blocking_save_s", "blocking save (s)", "#d62728"),
        ("async_save_s", "async upload (s)", "#1f77b4"),
    ):
        part = frame.dropna(subset=[column])
        figure.add_trace(
            go.Scatter(
                x=part["saved_at"],
                y=part[column],
                mode="lines+markers",
                name=label,
                line={"color": colour, "width": 1.2},
                marker={"size": 5},
                text=[f"step {s}" for s in part["step"]],
                hovertemplate="%{text}<br>%{x}<br>%{y:.1f} s<extra>" + label + "</extra>",
            )
        )
    figure.update_xaxes(title_text="saved at (UTC)")
    figure.update_yaxes(title_text="seconds", rangemode="tozero")
    return _layout(figure, title="Checkpoint save cost over time")


def waste_curve_figure(
    curve: pd.DataFrame,
    *,
    recommended_s: float | None,
    actual_s: float | None,
    young_s: float | None = None,
) -> go.Figure:
    """Expected waste (percent of wall time) over candidate intervals (minutes, log axis),
    with Daly's recommendation, Young's interval and the run's actual interval marked.

    curve: columns interval_s, waste_fraction (from checkpoint_interval.waste_curve)."""
    minutes = curve["interval_s"] / 60.0
    percent = curve["waste_fraction"] * 100.0
    figure = go.Figure(
        go.Scatter(
            x=minutes,
            y=percent,
            mode="lines",
            name="expected waste",
            line={"color": "#555", "width": 1.5},
            hovertemplate="τ = %{x:.1f} min<br>waste %{y:.2f}%<extra></extra>",
        )
    )
    marks = (
        (recommended_s, "Daly (recommended)", "#2ca02c", "star"),
        (young_s, "Young", "#9467bd", "diamond"),
        (actual_s, "actual", "#d62728", "x"),
    )
    for interval_s, label, colour, symbol in marks:
        if not interval_s:
            continue
        # The advisor puts these exact intervals on the curve (waste_curve's `extra`), so the
        # nearest point is the interval itself and the marker sits on the line.
        nearest = (curve["interval_s"] - interval_s).abs().idxmin()
        figure.add_trace(
            go.Scatter(
                x=[interval_s / 60.0],
                y=[float(curve.loc[nearest, "waste_fraction"]) * 100.0],
                mode="markers",
                name=f"{label}: {interval_s / 60.0:.1f} min",
                marker={"color": colour, "size": 12, "symbol": symbol},
                hovertemplate=label + " τ = %{x:.1f} min<br>waste %{y:.2f}%<extra></extra>",
            )
        )
    figure.update_xaxes(title_text="interval between checkpoints τ (min)", type="log")
    figure.update_yaxes(title_text="expected waste (% of wall time)", rangemode="tozero")
    return _layout(figure, title="Expected waste over candidate intervals")
