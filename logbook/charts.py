"""Pure chart builders for the failure breakdown and the checkpoint pages: DataFrames in,
Plotly figures out as plain dicts ({"data": [...], "layout": {...}}, what plotly.js takes).
No database.

Plain dicts rather than plotly.graph_objects: validating a go.Figure costs far more than
drawing it (a 3,000-point save-cost chart took ~35 ms through go.Scatter and to_json, ~5 ms
as lists), and every chart's "plotly_white" template was re-validated per request."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from telemetry.charts import ATTEMPT_COLOURS, chart_look, hover_template, plain, plotly_white
from telemetry.downsample import minmax_indices

Figure = dict[str, Any]

# The attempt palette after one red for the first group.
GROUP_COLOURS = ["#d62728", *ATTEMPT_COLOURS]


# Under the checkpoint charts: the x axis, its title and a legend row (96 px as drawn).
CHECKPOINT_CHARTS_BOTTOM_PX = 100


def layout(**look: Any) -> dict[str, Any]:
    """telemetry.charts.chart_look with the white template built once (plotly validates a
    template given by name on every figure: 10-30 ms a chart)."""
    return {**chart_look(**look), "template": plotly_white()}


def utc_text(moments: pd.Series) -> list[str | None]:
    """Aware datetimes as naive UTC ISO strings, as every date axis here holds them
    (telemetry.charts.naive_utc): plotly.js shows a string's hours as written, but it shows
    milliseconds since the epoch in the browser's zone, under an axis that says UTC (a reader
    in India saw saves 5.5 h late). NaT becomes null."""
    values = pd.to_datetime(moments, utc=True).dt.tz_localize(None)
    # datetime64[us] whatever the column's resolution (pandas 3 makes us or s columns).
    return plain(values.to_numpy(dtype="datetime64[us]"))


def finite(values: pd.Series) -> list[float | None]:
    """Numbers for JSON: NaN and infinities as null (JSON has neither)."""
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    return [v if math.isfinite(v) else None for v in numbers.tolist()]


def count_axis(largest: float) -> dict[str, Any]:
    """An axis of counts, ticked at whole numbers: left to itself, Plotly ticked a chart whose
    largest count is 1 at 0, 0.2, 0.4, ... interruptions."""
    axis: dict[str, Any] = {"tickformat": ",d", "rangemode": "tozero"}
    if largest <= 10:
        axis["dtick"] = 1
    return axis


# Wide enough for "100.0%" in Plotly's 12 px bar text.
BAR_LABEL_ROOM_PX = 56


def breakdown_figure(rows: pd.DataFrame) -> Figure:
    """Interruptions per component, one horizontal bar trace per group (so the legend names
    the groups), largest component on top.

    rows: columns component, group, count, percent."""
    # Plotly draws the first category at the bottom of a horizontal bar chart.
    order = list(rows.sort_values(["count", "component"], ascending=[True, False])["component"])
    data = []
    for index, (group, part) in enumerate(rows.groupby("group", sort=False)):
        data.append(
            {
                "type": "bar",
                "x": [int(c) for c in part["count"]],
                "y": [str(c) for c in part["component"]],
                "orientation": "h",
                "name": str(group),
                "marker": {"color": GROUP_COLOURS[index % len(GROUP_COLOURS)]},
                "text": [f"{p:.1f}%" for p in part["percent"]],
                "textposition": "outside",
                "cliponaxis": False,  # the longest bar's label would be cut at the plot edge
                "hovertemplate": hover_template(
                    "%{y}<br>%{x} interruptions (%{text})<extra>$group</extra>", group=group
                ),
            }
        )
    figure_layout = layout(
        title="Unexpected interruptions by component",
        x_title="unexpected interruptions",
        height=max(320, 26 * len(rows)),
    )
    figure_layout["yaxis"].update(categoryorder="array", categoryarray=order)
    figure_layout["xaxis"].update(count_axis(float(rows["count"].max()) if len(rows) else 0))
    # Room right of the longest bar for its label ("100.0%"): drawn outside the plot area,
    # it was cut at the figure's edge with the shared 10 px margin ("16.7" and half a "%").
    figure_layout["margin"] = {**figure_layout["margin"], "r": BAR_LABEL_ROOM_PX}
    return {"data": data, "layout": figure_layout}


# Points a save-cost line keeps, each bucket's fastest and slowest save (telemetry.downsample):
# a Llama-scale run's 3,102 saves are 5 a pixel of the chart's width, and each marker is an
# SVG node Plotly styles one by one (6,204 of them were most of the page's drawing).
SAVE_COST_MAX_POINTS = 1000


def save_cost_figure(checkpoints: pd.DataFrame) -> Figure:
    """Blocking and asynchronous save time of each checkpoint over wall time (past
    SAVE_COST_MAX_POINTS saves, each bucket's fastest and slowest).

    checkpoints: columns saved_at, step, blocking_save_s, async_save_s."""
    frame = checkpoints.dropna(subset=["saved_at"]).sort_values("saved_at")
    data = []
    for column, label, colour in (
        ("blocking_save_s", "blocking save (s)", "#d62728"),
        ("async_save_s", "async upload (s)", "#1f77b4"),
    ):
        part = frame.dropna(subset=[column])
        part = part.iloc[minmax_indices(part[column].to_numpy(float), SAVE_COST_MAX_POINTS)]
        data.append(
            {
                "type": "scatter",
                "x": utc_text(part["saved_at"]),
                "y": finite(part[column]),
                "mode": "lines+markers",
                "name": label,
                "line": {"color": colour, "width": 1.2},
                "marker": {"size": 5},
                "customdata": [int(s) for s in part["step"]],
                "hovertemplate": hover_template(
                    "step %{customdata}<br>%{x}<br>%{y:,.3~f} s<extra>$label</extra>",
                    label=label,
                ),
            }
        )
    figure_layout = layout(
        title="Checkpoint save cost over time",
        x_title="saved at (UTC)",
        y_title="seconds",
        margin_bottom=CHECKPOINT_CHARTS_BOTTOM_PX,
    )
    figure_layout["xaxis"]["type"] = "date"
    figure_layout["yaxis"]["rangemode"] = "tozero"
    return {"data": data, "layout": figure_layout}


def log_ticks(low: float, high: float) -> list[float]:
    """The 1-2-5 values (..., 0.5, 1, 2, 5, 10, 20, ...) from the last at or below `low` to
    the first at or above `high` (both > 0): a log axis's labels, each a plain number."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    values = [
        round(digit * 10.0**exponent, 12)
        for exponent in range(first, last + 1)
        for digit in (1, 2, 5)
    ]
    start = max(value for value in values if value <= low)
    end = min(value for value in values if value >= high)
    return [value for value in values if start <= value <= end]


def waste_curve_figure(
    curve: pd.DataFrame,
    *,
    recommended_s: float | None,
    actual_s: float | None,
    young_s: float | None = None,
) -> Figure:
    """Expected waste (percent of wall time) over candidate intervals (minutes, log axis),
    with Daly's recommendation, Young's interval and the run's actual interval marked.

    curve: columns interval_s, waste_fraction (from checkpoint_interval.waste_curve)."""
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "x": finite(curve["interval_s"] / 60.0),
            "y": finite(curve["waste_fraction"] * 100.0),
            "mode": "lines",
            "name": "expected waste",
            "line": {"color": "#555", "width": 1.5},
            "hovertemplate": "τ = %{x:.1f} min<br>waste %{y:.2f}%<extra></extra>",
        }
    ]
    # Drawn in this order, each over the ones before: Young's interval is often within a
    # minute of Daly's, so Young's is an open diamond wide enough to ring Daly's star, and
    # the star (the recommendation) is drawn last, on top.
    marks = (
        (actual_s, "actual", "#d62728", "x", 12),
        (young_s, "Young", "#9467bd", "diamond-open", 20),
        (recommended_s, "Daly (recommended)", "#2ca02c", "star", 13),
    )
    for interval_s, label, colour, symbol, size in marks:
        if not interval_s:
            continue
        # The advisor puts these exact intervals on the curve (waste_curve's `extra`), so the
        # nearest point is the interval itself and the marker sits on the line.
        nearest = (curve["interval_s"] - interval_s).abs().idxmin()
        data.append(
            {
                "type": "scatter",
                "x": [interval_s / 60.0],
                "y": [float(curve.loc[nearest, "waste_fraction"]) * 100.0],
                "mode": "markers",
                "name": f"{label}: {interval_s / 60.0:.1f} min",
                "marker": {
                    "color": colour,
                    "size": size,
                    "symbol": symbol,
                    "line": {"color": colour, "width": 2},
                },
                "hovertemplate": hover_template(
                    "$label τ = %{x:.1f} min<br>waste %{y:.2f}%<extra></extra>", label=label
                ),
            }
        )
    figure_layout = layout(
        title="Expected waste over candidate intervals",
        x_title="interval between checkpoints τ (min)",
        y_title="expected waste (% of wall time)",
        margin_bottom=CHECKPOINT_CHARTS_BOTTOM_PX,
    )
    figure_layout["xaxis"]["type"] = "log"
    # Whole numbers at 1-2-5 steps: Plotly's own log ticks read "10 2 3 ... 100 2 3".
    minutes = curve["interval_s"].to_numpy(dtype=float) / 60.0
    minutes = minutes[np.isfinite(minutes) & (minutes > 0)]
    if minutes.size:
        ticks = log_ticks(float(minutes.min()), float(minutes.max()))
        figure_layout["xaxis"]["tickvals"] = ticks
        figure_layout["xaxis"]["ticktext"] = [f"{tick:g}" for tick in ticks]
    figure_layout["yaxis"]["rangemode"] = "tozero"
    return {"data": data, "layout": figure_layout}
