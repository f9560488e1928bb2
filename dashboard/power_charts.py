"""Pure chart builders for the run page's power and heat and its throughput by hour of day:
DataFrames in, Plotly figures out. No database."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from logbook.charts import finite, layout, utc_text

POWER_COLOUR = "#2456a6"
HEAT_COLOUR = "#c0392b"
HOUR_COLOUR = "#27ae60"


def _look(figure: go.Figure, *, title: str, x_title: str, y_title: str) -> go.Figure:
    # Without the template: charts.as_payload adds the one built once for the page.
    look = layout(title=title, x_title=x_title, y_title=y_title, height=300, legend_y=-0.3)
    del look["template"]
    return figure.update_layout(look)


def power_heat_figure(points: pd.DataFrame) -> go.Figure:
    """The run's GPUs' summed power (W) and hottest temperature (°C), each on an axis of its
    own (power left); a reading no GPU sent (an exporter without the power field) is left
    out, and the other takes the left axis.

    points: columns at (UTC datetime), power_w, temp_max_c; oldest first."""
    times = utc_text(points["at"])
    # (column, legend, colour, axis title, hover) of each trace
    traces = [
        ("power_w", "summed GPU power (W)", POWER_COLOUR, "W",
         "%{x|%Y-%m-%d %H:%M}<br>%{y:,.0f} W<extra></extra>"),
        ("temp_max_c", "hottest GPU (°C)", HEAT_COLOUR, "°C",
         "%{x|%Y-%m-%d %H:%M}<br>%{y:.1f} °C<extra></extra>"),
    ]  # fmt: skip
    traces = [one for one in traces if points[one[0]].notna().any()]
    figure = go.Figure(
        [
            # Markers too: a short run has one or two buckets, which a line alone hides.
            go.Scatter(x=times, y=finite(points[column]), mode="lines+markers", name=name,
                       yaxis="y" if position == 0 else "y2",
                       line={"color": colour, "width": 1.5}, hovertemplate=hover)
            for position, (column, name, colour, _, hover) in enumerate(traces)
        ]
    )  # fmt: skip
    titles = [one[3] for one in traces]
    # The legend even for one trace: it says which reading the chart holds.
    figure.update_layout(showlegend=True)
    _look(figure, title="Power and heat", x_title="time (UTC)", y_title=titles[0] if titles else "")
    moments = pd.to_datetime(points["at"], utc=True).dt.tz_localize(None)
    if len(moments) and moments.min() == moments.max():
        # One bucket: Plotly would zoom its axis to sub-millisecond ticks around it.
        figure.update_xaxes(range=[moments.min() - pd.Timedelta(minutes=30),
                                   moments.max() + pd.Timedelta(minutes=30)])  # fmt: skip
    if len(titles) > 1:
        figure.update_layout(
            yaxis2={"title": {"text": titles[1]}, "overlaying": "y", "side": "right",
                    "showgrid": False},
            margin={"r": 60},  # room for the right axis
        )  # fmt: skip
    return figure


def hour_of_day_figure(hours: pd.DataFrame, *, label: str) -> go.Figure:
    """The throughput metric's mean (or pace) per UTC hour of day, `label` naming it.

    hours: columns hour (0-23), value, points (dashboard.diurnal.by_hour_of_day)."""
    hover = "%{x}:00 UTC<br>%{y:.5g}<br>%{customdata[0]:,} points<extra></extra>"
    # Points, not bars: a bar starts at zero, and the swing is a few percent of the whole.
    means = go.Scatter(x=list(hours["hour"]), y=finite(hours["value"]), name=label,
                       mode="lines+markers", customdata=[[int(n)] for n in hours["points"]],
                       line={"color": HOUR_COLOUR, "width": 1.5}, hovertemplate=hover)  # fmt: skip
    figure = go.Figure(means)
    _look(figure, title="Throughput by hour of day (UTC)", x_title="hour of day (UTC)",
          y_title=label)  # fmt: skip
    return figure.update_xaxes(dtick=1, range=[-0.5, 23.5])
