"""Pure chart builders for the SDC ledger and fleet health: DataFrames in, Plotly figures out.
No database."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import plotly.graph_objects as go

from logbook.charts import count_axis, layout, utc_text
from telemetry.charts import hover_template

BAR_COLOUR = "#2456a6"
OFFENDER_COLOUR = "#c0392b"
SDC_COLOUR = "#8e44ad"
STRAGGLER_COLOUR = "#e67e22"
MAX_HOSTS_CHARTED = 30


def _layout(figure: go.Figure, *, title: str, x_title: str, y_title: str) -> go.Figure:
    """The shared look without its template: validating "plotly_white" on every request cost
    more than the chart; charts.as_payload adds the template, built once, for the page."""
    look = layout(title=title, x_title=x_title, y_title=y_title, height=300, legend_y=-0.3)
    del look["template"]
    return figure.update_layout(look)


def weekly_sdc_figure(
    weekly: pd.DataFrame, *, per_week: float | None, span_end: datetime | None = None
) -> go.Figure:
    """SDC records per week of the observed span (bars, each seven days wide from the first
    data on, the last one cut where the observed span ends) and the mean rate over those
    weeks (a dashed line across them).

    weekly: columns week_start (datetime), count. span_end: the end of the observed span;
    a week past it is drawn only as far as it was observed (a run of three days drew a full
    week's bar, four of its days never seen)."""
    figure = go.Figure()
    week = pd.Timedelta(days=7)
    week_starts = pd.to_datetime(weekly["week_start"], utc=True)
    ends = week_starts + week
    if span_end is not None and len(ends):
        ends = ends.clip(upper=max(pd.Timestamp(span_end), week_starts.iloc[-1]))
    widths_ms = (ends - week_starts).dt.total_seconds() * 1000
    starts = utc_text(weekly["week_start"])  # naive UTC, as every time axis here
    figure.add_trace(
        go.Bar(
            x=starts,
            y=list(weekly["count"]),
            # Bars cover their week (from its start), so the first starts at the first data;
            # a sliver of a gap between them.
            width=[width * 0.98 for width in widths_ms],
            offset=0,
            customdata=[[days] for days in (widths_ms / 86_400_000).round(1)],
            name="records per week",
            marker={"color": SDC_COLOUR},
            hovertemplate="week from %{x|%Y-%m-%d %H:%M} (%{customdata[0]} d observed)<br>"
            "%{y} records<extra></extra>",
        )
    )
    if per_week is not None and not weekly.empty:
        figure.add_trace(
            go.Scatter(
                x=[starts[0], *utc_text(ends.iloc[-1:])],
                y=[per_week, per_week],
                mode="lines",
                name=f"mean rate {per_week:.3g}/week",
                line={"color": "#555", "dash": "dash", "width": 1.5},
                hovertemplate="%{y:.3g} records/week<extra></extra>",
            )
        )
    _layout(figure, title="SDC records per week", x_title="week from (UTC)", y_title="records")
    return figure.update_yaxes(count_axis(float(weekly["count"].max()) if len(weekly) else 0))


def incidents_per_host_figure(hosts: pd.DataFrame) -> go.Figure:
    """Incidents per host, interruptions, SDC records and straggler records stacked (what the
    fleet table's Incidents column counts), in the fleet's ranking (column rank, most suspect
    first; without it, most incidents in the offender window first), at most
    MAX_HOSTS_CHARTED.

    hosts: columns host, interruptions, sdc, in_window, repeat_offender, optionally
    stragglers and rank."""
    order = ["rank"] if "rank" in hosts else ["in_window", "host"]
    ascending = [True] if "rank" in hosts else [False, True]
    top = hosts.sort_values(order, ascending=ascending).head(MAX_HOSTS_CHARTED)
    labels = [
        f"{name} ⚠" if flag else name
        for name, flag in zip(top["host"], top["repeat_offender"], strict=True)
    ]
    figure = go.Figure()
    figure.add_trace(
        go.Bar(
            x=labels,
            y=list(top["interruptions"]),
            name="interruptions",
            marker={
                "color": [OFFENDER_COLOUR if f else BAR_COLOUR for f in top["repeat_offender"]]
            },
            hovertemplate="%{x}<br>%{y} interruptions<extra></extra>",
        )
    )
    figure.add_trace(
        go.Bar(
            x=labels,
            y=list(top["sdc"]),
            name="SDC records",
            marker={"color": SDC_COLOUR},
            hovertemplate="%{x}<br>%{y} SDC records<extra></extra>",
        )
    )
    stragglers = top["stragglers"] if "stragglers" in top else pd.Series(0, index=top.index)
    figure.add_trace(
        go.Bar(
            x=labels,
            y=list(stragglers),
            name="straggler records",
            marker={"color": STRAGGLER_COLOUR},
            hovertemplate="%{x}<br>%{y} straggler records<extra></extra>",
        )
    )
    figure.update_layout(barmode="stack")
    # No x axis title: the ticks are the hosts, turned when many, and a title under them
    # landed on the legend ("host" drawn over "interruptions").
    _layout(figure, title="Incidents per host (⚠ repeat offender)", x_title="", y_title="incidents")
    largest = (top["interruptions"] + top["sdc"] + stragglers).max() if len(top) else 0
    return figure.update_yaxes(count_axis(float(largest)))


def host_timeline_figure(incidents: pd.DataFrame) -> go.Figure:
    """One host's incidents over time, a marker row per kind.

    incidents: columns occurred_at, kind ("interruption", "sdc" or "straggler"), label, run."""
    figure = go.Figure()
    # Every kind an incident can be (logbook.selectors.offenders.Incident.kind): a straggler
    # record counts toward the host's incidents, so it is drawn with them.
    for kind, colour, symbol in (
        ("interruption", OFFENDER_COLOUR, "triangle-down"),
        ("sdc", SDC_COLOUR, "diamond"),
        ("straggler", STRAGGLER_COLOUR, "circle"),
    ):
        rows = incidents[incidents["kind"] == kind]
        if rows.empty:
            continue
        figure.add_trace(
            go.Scatter(
                x=utc_text(rows["occurred_at"]),
                y=[kind] * len(rows),
                mode="markers",
                name=kind,
                marker={"color": colour, "symbol": symbol, "size": 11},
                text=[
                    f"{label} ({run})"
                    for label, run in zip(rows["label"], rows["run"], strict=True)
                ],
                hovertemplate="%{x|%Y-%m-%d %H:%M}<br>%{text}<extra></extra>",
            )
        )
    # Naive UTC, as the markers' times (utc_text).
    moments = pd.to_datetime(incidents["occurred_at"], utc=True).dt.tz_localize(None)
    if len(moments) and moments.min() == moments.max():
        # One moment: Plotly would zoom its axis to sub-millisecond ticks around it.
        figure.update_xaxes(range=[moments.min() - pd.Timedelta(hours=1),
                                   moments.max() + pd.Timedelta(hours=1)])  # fmt: skip
    return _layout(figure, title="Incidents over time", x_title="time (UTC)", y_title="")


GPU_COLOURS = [
    "#2456a6",
    "#e67e22",
    "#27ae60",
    "#c0392b",
    "#8e44ad",
    "#16a085",
    "#7f8c8d",
    "#d4ac0d",
]


def host_gpu_figure(readings: pd.DataFrame, *, title: str, unit: str) -> go.Figure:
    """One DCGM field of a host's GPUs over time, a line per GPU (its index and PCI bus id
    in the legend, so "PCI 3b" in a kernel log finds its curve).

    readings: columns gpu (the line's name), at (UTC datetime), value; oldest first."""
    figure = go.Figure()
    for position, (gpu, rows) in enumerate(readings.groupby("gpu", sort=False)):
        figure.add_trace(
            go.Scatter(
                x=utc_text(rows["at"]),
                y=list(rows["value"]),
                mode="lines",
                name=str(gpu),
                line={"color": GPU_COLOURS[position % len(GPU_COLOURS)], "width": 1.5},
                hovertemplate=hover_template(
                    "$gpu<br>%{x|%Y-%m-%d %H:%M:%S}<br>%{y:.4g} $unit<extra></extra>",
                    gpu=gpu,
                    unit=unit,
                ),
            )
        )
    return _layout(figure, title=title, x_title="time (UTC)", y_title=unit)
