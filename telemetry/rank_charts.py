"""Figures for per-rank timings, pure: the selectors' data in, a Plotly figure out (plain
dicts for the run's heat map and spread, which are large)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from telemetry.charts import hover_template, naive_utc
from telemetry.selectors.ranks import Heatmap, SpreadPoint

Figure = dict[str, Any]

# No template by name: plotly validates one on every figure; the page adds the shared one
# (telemetry.charts.as_payload).
_LAYOUT: dict[str, Any] = {
    "margin": {"l": 70, "r": 20, "t": 10, "b": 50},
    "hovermode": "closest",
}


def heatmap_figure(heatmap: Heatmap, *, section: str) -> Figure:
    """One Plotly heatmap: ranks down, time across, the slowest rank of each cell's group.
    A plain dict: validating 55,000 cells through go.Heatmap took 19 s."""
    customdata = [
        [
            [rank if rank is not None else "", host or "?"]
            for rank, host in zip(ranks, hosts, strict=True)
        ]
        for ranks, hosts in zip(heatmap.ranks, heatmap.hosts, strict=True)
    ]
    trace = {
        "type": "heatmap",
        # Naive UTC text, as every date axis here: plotly.js shows epoch milliseconds in the
        # browser's zone, under an axis that says UTC.
        "x": [naive_utc(start).isoformat(sep=" ") for start in heatmap.times],
        "y": heatmap.row_labels,
        "z": heatmap.values_s,
        "customdata": customdata,
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": f"{section} (s)"}},
        "hovertemplate": hover_template(
            "rank %{customdata[0]} on %{customdata[1]}<br>$section: %{z:.4f} s<br>%{x}"
            "<extra></extra>",
            section=section,
        ),
        "hoverongaps": False,
    }
    rows = (
        "rank"
        if heatmap.ranks_per_row == 1
        else f"ranks ({heatmap.ranks_per_row} per row, slowest shown)"
    )
    return {
        "data": [trace],
        "layout": {
            **_LAYOUT,
            "height": 600,
            "yaxis": {"title": {"text": rows}, "autorange": "reversed", "type": "category"},
            "xaxis": {"title": {"text": "time (UTC)"}, "type": "date"},
        },
    }


def _spread_line(kind: str, steps: list[int], *, legend: bool) -> dict[str, Any]:
    """One attempt's line of one kind; its legend entry, the kind's, shown once."""
    return {"type": "scatter", "x": steps, "mode": "lines", "name": kind, "legendgroup": kind,
            "showlegend": legend}  # fmt: skip


def spread_figure(points: Sequence[SpreadPoint], *, section: str) -> Figure:
    """Per step: the median with a band from the fastest rank to p90, p99 and the slowest
    rank (named in the hover), one set of lines per attempt. The legend has one entry per
    kind of line, for every attempt (their colours are the same): one per attempt and kind
    was 32 entries for 8 attempts, and pushed the axis title into them."""
    data: list[dict[str, Any]] = []
    for index, attempt in enumerate(sorted({point.attempt for point in points})):
        mine = [point for point in points if point.attempt == attempt]
        steps = [point.step for point in mine]
        first = index == 0

        at = "attempt $attempt · step %{x}<br>"
        band, median, p99, slowest = (
            _spread_line(kind, steps, legend=first)
            for kind in ("fastest to p90", "median", "p99", "slowest rank")
        )
        data += [
            {**band, "y": [p.min_s for p in mine], "line": {"width": 0}, "showlegend": False,
             "hoverinfo": "skip"},
            {**band, "y": [p.p90_s for p in mine], "line": {"width": 0}, "fill": "tonexty",
             "fillcolor": "rgba(31,119,180,0.2)", "hoverinfo": "skip"},
            {**median, "y": [p.median_s for p in mine], "line": {"color": "#1f77b4"},
             "hovertemplate": hover_template(at + "median %{y:.4f} s<extra></extra>",
                                             attempt=attempt)},
            {**p99, "y": [p.p99_s for p in mine], "line": {"color": "#ff7f0e", "dash": "dot"},
             "hovertemplate": hover_template(at + "p99 %{y:.4f} s<extra></extra>",
                                             attempt=attempt)},
            {**slowest, "y": [p.max_s for p in mine], "line": {"color": "#d62728"},
             "customdata": [[p.slowest_rank, p.slowest_host or "?"] for p in mine],
             "hovertemplate": hover_template(at + "max %{y:.4f} s: rank %{customdata[0]} on"
                                             " %{customdata[1]}<extra></extra>", attempt=attempt)},
        ]  # fmt: skip
    return {
        "data": data,
        "layout": {
            **_LAYOUT,
            "height": 360,
            "margin": {**_LAYOUT["margin"], "b": 90},
            "xaxis": {"title": {"text": "step"}, "tickformat": "d"},
            "yaxis": {"title": {"text": f"{section} (s)"}},
            # Below the axis title, with room for both.
            "legend": {"orientation": "h", "y": -0.3, "yanchor": "top"},
        },
    }


def host_scores_figure(rows: Sequence[dict], *, threshold: float) -> go.Figure:
    """A line per (run, attempt, rank) that ran on the host: its relative score over time,
    with the straggler threshold drawn."""
    figure = go.Figure()
    groups: dict[tuple[str, int, int], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["run"], row["attempt"], row["rank"]), []).append(row)
    for (run, attempt, rank), mine in groups.items():
        figure.add_trace(
            go.Scatter(
                x=[naive_utc(row["time"]) for row in mine],
                y=[row["score"] for row in mine],
                mode="lines+markers",
                name=f"{run} #{attempt} rank {rank}",
                hovertemplate=hover_template(
                    "$run attempt $attempt rank $rank<br>relative score %{y:.3f}<br>%{x}"
                    "<extra></extra>",
                    run=run,
                    attempt=attempt,
                    rank=rank,
                ),
            )
        )
    figure.add_hline(y=threshold, line={"color": "#d62728", "dash": "dash"},
                     annotation_text=f"straggler threshold {threshold}")  # fmt: skip
    figure.update_layout(
        **_LAYOUT,
        height=320,
        yaxis={"title": {"text": "relative score"}, "range": [0, 1.05]},
        xaxis={"title": {"text": "time (UTC)"}, "type": "date"},
    )
    return figure
