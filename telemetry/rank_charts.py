"""Figures for per-rank timings, pure: the selectors' data in, a Plotly figure out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from telemetry.selectors.ranks import Heatmap, SpreadPoint

# No template by name: plotly validates one on every figure; the page adds the shared one
# (logbook.charts.as_payload).
_LAYOUT: dict[str, Any] = {
    "margin": {"l": 70, "r": 20, "t": 10, "b": 50},
    "hovermode": "closest",
}


def heatmap_figure(heatmap: Heatmap, *, section: str) -> go.Figure:
    """One Plotly heatmap: ranks down, time across, the slowest rank of each cell's group."""
    customdata = [
        [
            [rank if rank is not None else "", host or "?"]
            for rank, host in zip(ranks, hosts, strict=True)
        ]
        for ranks, hosts in zip(heatmap.ranks, heatmap.hosts, strict=True)
    ]
    figure = go.Figure(
        go.Heatmap(
            x=heatmap.times,
            y=heatmap.row_labels,
            z=heatmap.values_s,
            customdata=customdata,
            colorscale="Viridis",
            colorbar={"title": {"text": f"{section} (s)"}},
            hovertemplate=(
                "rank %{customdata[0]} on %{customdata[1]}<br>"
                f"{section}: %{{z:.4f}} s<br>%{{x}}<extra></extra>"
            ),
            hoverongaps=False,
        )
    )
    figure.update_layout(
        **_LAYOUT,
        height=600,
        yaxis={
            "title": {
                "text": "rank"
                if heatmap.ranks_per_row == 1
                else f"ranks ({heatmap.ranks_per_row} per row, slowest shown)"
            },
            "autorange": "reversed",
            "type": "category",
        },
        xaxis={"title": {"text": "time (UTC)"}},
    )
    return figure


def spread_figure(points: Sequence[SpreadPoint], *, section: str) -> go.Figure:
    """Per step: the median with a band from the fastest rank to p90, p99 and the slowest
    rank (named in the hover), one set of lines per attempt."""
    figure = go.Figure()
    attempts = sorted({point.attempt for point in points})
    for attempt in attempts:
        mine = [point for point in points if point.attempt == attempt]
        steps = [point.step for point in mine]
        name = f"attempt {attempt}"
        figure.add_trace(
            go.Scatter(x=steps, y=[p.min_s for p in mine], mode="lines", line={"width": 0},
                       showlegend=False, hoverinfo="skip", legendgroup=name)
        )  # fmt: skip
        figure.add_trace(
            go.Scatter(x=steps, y=[p.p90_s for p in mine], mode="lines", line={"width": 0},
                       fill="tonexty", fillcolor="rgba(31,119,180,0.2)", name=f"{name}: min to p90",
                       hoverinfo="skip", legendgroup=name)
        )  # fmt: skip
        figure.add_trace(
            go.Scatter(x=steps, y=[p.median_s for p in mine], mode="lines", name=f"{name}: median",
                       line={"color": "#1f77b4"}, legendgroup=name,
                       hovertemplate="step %{x}<br>median %{y:.4f} s<extra></extra>")
        )  # fmt: skip
        figure.add_trace(
            go.Scatter(x=steps, y=[p.p99_s for p in mine], mode="lines", name=f"{name}: p99",
                       line={"color": "#ff7f0e", "dash": "dot"}, legendgroup=name,
                       hovertemplate="step %{x}<br>p99 %{y:.4f} s<extra></extra>")
        )  # fmt: skip
        figure.add_trace(
            go.Scatter(
                x=steps,
                y=[p.max_s for p in mine],
                mode="lines",
                name=f"{name}: slowest rank",
                line={"color": "#d62728"},
                legendgroup=name,
                customdata=[[p.slowest_rank, p.slowest_host or "?"] for p in mine],
                hovertemplate=(
                    "step %{x}<br>max %{y:.4f} s: rank %{customdata[0]} on %{customdata[1]}"
                    "<extra></extra>"
                ),
            )
        )
    figure.update_layout(
        **_LAYOUT,
        height=360,
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": f"{section} (s)"}},
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


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
                x=[row["time"] for row in mine],
                y=[row["score"] for row in mine],
                mode="lines+markers",
                name=f"{run} #{attempt} rank {rank}",
                hovertemplate=f"{run} attempt {attempt} rank {rank}<br>"
                "relative score %{y:.3f}<br>%{x}<extra></extra>",
            )
        )
    figure.add_hline(y=threshold, line={"color": "#d62728", "dash": "dash"},
                     annotation_text=f"straggler threshold {threshold}")  # fmt: skip
    figure.update_layout(
        **_LAYOUT,
        height=320,
        yaxis={"title": {"text": "relative score"}, "range": [0, 1.05]},
        xaxis={"title": {"text": "time (UTC)"}},
    )
    return figure
