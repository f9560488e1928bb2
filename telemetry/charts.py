"""Pure chart builders: DataFrames in, Plotly figures out. No database."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import plotly.graph_objects as go
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.safestring import SafeString

from telemetry.json_numbers import finite_or_null

if TYPE_CHECKING:
    from telemetry.selectors.series import AttemptSeries

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


def chart_look(
    *,
    title: str,
    x_title: str = "",
    y_title: str = "",
    height: int = 320,
    legend_y: float = -0.3,
) -> dict[str, Any]:
    """The look every Chronicle chart shares, as a layout dict: small left-aligned title,
    white template, legend below the x axis title."""
    return {
        "title": {"text": title, "x": 0.01, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 60, "r": 10, "t": 36, "b": 40},
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {"title": {"text": y_title}},
        "legend": {"orientation": "h", "y": legend_y, "yanchor": "top"},
        "template": "plotly_white",
        "hovermode": "closest",
    }


def chart_layout(figure: go.Figure, **look: Any) -> go.Figure:
    """`figure` with chart_look(**look) applied."""
    figure.update_layout(chart_look(**look))
    return figure


def attempt_colour(position: int) -> str:
    return ATTEMPT_COLOURS[position % len(ATTEMPT_COLOURS)]


# A run with more attempts than this draws the latest OWN_ATTEMPTS as lines of their own and
# folds the earlier ones into one grey line (hover names the attempt): hundreds of traces
# and legend entries took seconds to build and were unreadable.
MANY_ATTEMPTS = 12
OWN_ATTEMPTS = 8
FOLDED_COLOUR = "#9e9e9e"


def split_attempts(groups: list[Any]) -> tuple[list[Any], list[Any]]:
    """(earlier attempts folded into one trace, attempts drawn on their own)."""
    if len(groups) <= MANY_ATTEMPTS:
        return [], groups
    return groups[:-OWN_ATTEMPTS], groups[-OWN_ATTEMPTS:]


def as_objects(values: list[Any]) -> npt.NDArray[np.object_]:
    """A trace's list of values (None breaking the line) as a numpy array of the same Python
    objects: Plotly validates, copies and encodes a list element by element in Python (seconds
    for a run page of hundreds of attempts), an array at once. The JSON is the same."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def folded_trace(lines: list[tuple[Any, Any, Any]], *, hovertemplate: str) -> go.Scatter:
    """One grey line through several attempts' (attempt, xs, ys), broken between attempts."""
    xs: list[Any] = []
    ys: list[Any] = []
    text: list[Any] = []
    for attempt, x, y in lines:
        xs += [*x, None]
        ys += [*y, None]
        text += [f"attempt {attempt}"] * len(x) + [None]
    return go.Scatter(
        x=as_objects(xs),
        y=as_objects(ys),
        mode="lines",
        name=f"attempts {lines[0][0]} to {lines[-1][0]}",
        line={"color": FOLDED_COLOUR, "width": 1},
        text=as_objects(text),
        hovertemplate=hovertemplate,
    )


# Above this many marks of one kind, a chart draws them as one trace instead of a shape each:
# Plotly adds shapes one by one (quadratic in Python) and the browser redraws each, so a run
# with hundreds of restarts took minutes to build and seconds to draw.
MANY_MARKS = 40
# The y axis marks drawn as traces span: laid over the data's axis, from 0 to 1, hidden.
MARKS_AXIS = "y2"


@dataclass
class Marks:
    """Vertical lines and shaded bands across a chart, collected and drawn at once: as
    layout shapes when they are few, as one scatter trace per kind when they are many."""

    shapes: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    traces: list[go.Scatter] = field(default_factory=list)

    def lines(
        self, xs: list[Any], *, line: dict[str, Any], name: str, labels: list[str] | None = None
    ) -> None:
        if not xs:
            return
        if len(xs) <= MANY_MARKS:
            for index, x in enumerate(xs):
                self.shapes.append({"type": "line", "xref": "x", "yref": "y domain",
                                    "x0": x, "x1": x, "y0": 0, "y1": 1, "line": line})  # fmt: skip
                if labels is not None:
                    self.annotations.append(
                        # Staggered down in three rows, so labels of nearby marks do not
                        # print over each other.
                        {"x": x, "xref": "x", "y": 1 - 0.08 * (index % 3), "yref": "y domain",
                         "text": labels[index],
                         "showarrow": False, "xanchor": "right", "yanchor": "top",
                         "font": {"size": 10}}
                    )  # fmt: skip
            return
        text = labels or [None] * len(xs)
        self.traces.append(
            go.Scatter(
                x=as_objects([v for x in xs for v in (x, x, None)]),
                y=as_objects([v for _ in xs for v in (0, 1, None)]),
                yaxis=MARKS_AXIS,
                mode="lines",
                line=line,
                name=name,
                showlegend=False,
                text=as_objects([v for label in text for v in (label, label, None)]),
                hovertemplate="%{x}<br>%{text}<extra></extra>" if labels else "%{x}<extra></extra>",
            )
        )

    def bands(self, x0s: list[Any], x1s: list[Any], *, colour: str, name: str) -> None:
        if not x0s:
            return
        if len(x0s) <= MANY_MARKS:
            for x0, x1 in zip(x0s, x1s, strict=True):
                self.shapes.append(
                    {"type": "rect", "xref": "x", "yref": "y domain", "x0": x0, "x1": x1,
                     "y0": 0, "y1": 1, "fillcolor": colour, "opacity": 0.08,
                     "line": {"width": 0}, "layer": "below"}
                )  # fmt: skip
            return
        self.traces.append(
            go.Scatter(
                x=as_objects(
                    [v for x0, x1 in zip(x0s, x1s, strict=True) for v in (x0, x0, x1, x1, x0, None)]
                ),
                y=as_objects([v for _ in x0s for v in (0, 1, 1, 0, 0, None)]),
                yaxis=MARKS_AXIS,
                mode="lines",
                fill="toself",
                fillcolor=colour,
                opacity=0.08,
                line={"width": 0},
                name=name,
                showlegend=False,
                hoverinfo="skip",
            )
        )

    def draw(self, figure: go.Figure) -> None:
        for trace in self.traces:
            figure.add_trace(trace)
        layout: dict[str, Any] = {}
        if self.shapes:
            layout["shapes"] = self.shapes
        if self.annotations:
            layout["annotations"] = self.annotations
        if self.traces:
            layout["yaxis2"] = {"overlaying": "y", "range": [0, 1], "visible": False,
                                "fixedrange": True}  # fmt: skip
        if layout:
            figure.update_layout(**layout)


def attempts_frame(
    per_attempt: Sequence[AttemptSeries],
    axis: Axis,
    label: Callable[[int], Any] = lambda attempt: attempt,
) -> pd.DataFrame:
    """A metric's points as metric_figure takes them (columns attempt, x, value), the
    attempt column holding label(attempt number); on the time axis only timed points."""
    frame = pd.DataFrame(
        {
            "attempt": np.concatenate(
                [np.full(one.steps.size, label(one.attempt)) for one in per_attempt] or [[]]
            ),
            "x": np.concatenate(
                [one.steps if axis == "step" else one.wall_times for one in per_attempt] or [[]]
            ),
            "value": np.concatenate([one.values for one in per_attempt] or [[]]),
        }
    )
    return frame[frame["x"].notna()] if axis == "time" else frame


def metric_figure(
    points: pd.DataFrame,
    *,
    title: str,
    axis: Axis = "step",
    restarts: pd.DataFrame | None = None,
    interruptions: pd.DataFrame | None = None,
    downtime: pd.DataFrame | None = None,
    notes: pd.DataFrame | None = None,
    y_title: str = "",
    attempt_name: Callable[[Any], str] = lambda attempt: f"attempt {attempt}",
    attempt_dash: Callable[[Any], str] = lambda attempt: "solid",
) -> go.Figure:
    """One metric, a line per attempt, over steps or wall-clock time. SVG traces, not WebGL:
    series arrive downsampled to a few thousand points, and WebGL contexts are a scarce
    per-page resource (headless browsers and dashboards with many charts run out).

    points: columns attempt, x, value (x is the step or the wall time; non-finite values
        allowed, drawn as marked points).
    restarts: columns attempt, x: where an attempt resumed (dashed line).
    interruptions: columns x, label: where the job stopped (dotted line, hover marker).
    downtime: columns x0, x1: wall time between attempts (shaded).
    notes: columns x0, x1 (None for a point), label, kind: annotations and logbook entries
        (a range is shaded, a point is a line; both have a hover marker at the bottom).
    attempt_name, attempt_dash: a line's name and dash from its attempt value (the compare
        page names lines "<run> · attempt N" and dashes each run's lines its own way).
    """
    figure = go.Figure()
    groups = list(points.groupby("attempt", sort=True))
    earlier, own = split_attempts(groups)
    if earlier:
        values = [group["value"].to_numpy(dtype=float) for _, group in earlier]
        finite = [np.isfinite(v) for v in values]
        figure.add_trace(
            folded_trace(
                [(a, g["x"][f], g["value"][f]) for (a, g), f in zip(earlier, finite, strict=True)],
                hovertemplate="%{x}<br>%{y:.4g}<extra>%{text}</extra>",
            )
        )
        bad = [(a, g[~f]) for (a, g), f in zip(earlier, finite, strict=True) if (~f).any()]
        if bad:
            anchor = values[0][finite[0]][-1] if finite[0].any() else 0.0
            figure.add_trace(
                go.Scatter(
                    x=[x for _, b in bad for x in b["x"]],
                    y=[anchor] * sum(len(b) for _, b in bad),
                    mode="markers",
                    name=f"attempts {earlier[0][0]} to {earlier[-1][0]}: non-finite",
                    marker={"color": "#d62728", "symbol": "x", "size": 10},
                    text=[f"{v} (attempt {a})" for a, b in bad for v in b["value"]],
                    hovertemplate="%{x}<br>%{text}<extra></extra>",
                )
            )
    for index, (attempt, group) in enumerate(own, start=len(earlier)):
        colour = attempt_colour(index)
        finite = np.isfinite(group["value"].to_numpy(dtype=float))
        if finite.any():
            figure.add_trace(
                go.Scatter(
                    x=group["x"][finite],
                    y=group["value"][finite],
                    mode="lines",
                    name=attempt_name(attempt),
                    line={"color": colour, "width": 1.2, "dash": attempt_dash(attempt)},
                    # The name is escaped with the figure's text, the template is not.
                    hovertemplate="%{x}<br>%{y:.4g}<extra>%{fullData.name}</extra>",
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
                    name=f"{attempt_name(attempt)}: non-finite",
                    marker={"color": "#d62728", "symbol": "x", "size": 10},
                    text=[str(v) for v in bad["value"]],
                    hovertemplate="%{x}<br>%{text}<extra></extra>",
                )
            )
    marks = Marks()
    if downtime is not None:
        marks.bands(list(downtime["x0"]), list(downtime["x1"]), colour="#d62728", name="downtime")
    if restarts is not None:
        marks.lines(
            list(restarts["x"]),
            line={"color": "#555", "dash": "dash", "width": 1},
            name="restarts",
            labels=[f"attempt {attempt}" for attempt in restarts["attempt"]],
        )
    if interruptions is not None and not interruptions.empty:
        marks.lines(
            list(interruptions["x"]),
            line={"color": "#d62728", "dash": "dot", "width": 1},
            name="interruption lines",
        )
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
    if notes is not None and not notes.empty:
        _add_notes(figure, marks, points, notes)
    marks.draw(figure)
    figure.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}},
        height=300,
        margin={"l": 50, "r": 10, "t": 36, "b": 36},
        xaxis_title="step" if axis == "step" else "wall-clock time (UTC)",
        # Explicit: an axis with no points would otherwise guess "linear" and misdraw the
        # date-valued marks.
        xaxis_type="linear" if axis == "step" else "date",
        # Steps are whole numbers: no "1.5k" or "2,500.5" ticks.
        xaxis_tickformat="d" if axis == "step" else None,
        yaxis_title=y_title,
        # The legend sits below the x axis title, with room for both.
        legend={"orientation": "h", "y": -0.3, "yanchor": "top"},
        template="plotly_white",
        # A crosshair: the hover lists every attempt's value at the step under the cursor.
        hovermode="x unified",
        xaxis_showspikes=True,
        xaxis_spikemode="across",
        xaxis_spikethickness=1,
    )
    return figure


# Units by a metric name's last path part, exact or by suffix: what jobs conventionally send.
_UNITS = {"loss": "", "lr": "learning rate", "learning_rate": "learning rate", "mfu": "MFU",
          "tokens_per_s": "tokens/s", "tokens_per_second": "tokens/s", "samples_per_s": "samples/s",
          "grad_norm": "L2 norm"}  # fmt: skip
_SUFFIX_UNITS = (("_s", "s"), ("_ms", "ms"), ("_bytes", "bytes"), ("_gb", "GB"),
                 ("_w", "W"), ("_c", "°C"), ("_pct", "%"), ("_percent", "%"))  # fmt: skip


def metric_unit_title(name: str) -> str:
    """A y axis title for a metric: its unit where the name tells it ("step_time_s" -> "s"),
    else nothing (a guess would mislead)."""
    last = name.rsplit("/", 1)[-1].lower()
    if last in _UNITS:
        return _UNITS[last]
    for suffix, unit in _SUFFIX_UNITS:
        if last.endswith(suffix):
            return unit
    return ""


NOTE_COLOURS = {"annotation": "#1f6feb", "logbook": "#2e7d32"}


def _add_notes(figure: go.Figure, marks: Marks, points: pd.DataFrame, notes: pd.DataFrame) -> None:
    for kind, group in notes.groupby("kind", sort=True):
        colour = NOTE_COLOURS.get(str(kind), "#1f6feb")
        ranged = [x1 is not None and not pd.isna(x1) for x1 in group["x1"]]
        spans = group[ranged]
        marks.bands(list(spans["x0"]), list(spans["x1"]), colour=colour, name=f"{kind} ranges")
        marks.lines(
            list(group[[not r for r in ranged]]["x0"]),
            line={"color": colour, "dash": "dashdot", "width": 1},
            name=f"{kind} lines",
        )
    values = points["value"].to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    bottom = float(finite.min()) if finite.size else 0.0
    for kind, group in notes.groupby("kind", sort=True):
        figure.add_trace(
            go.Scatter(
                x=group["x0"],
                y=[bottom] * len(group),
                mode="markers",
                name="annotations" if kind == "annotation" else "logbook entries",
                marker={
                    "color": NOTE_COLOURS.get(str(kind), "#1f6feb"),
                    "symbol": "triangle-up",
                    "size": 9,
                },
                # Escaped with the rest of the figure's text by charts_script.
                text=list(group["label"]),
                hovertemplate="%{x}<br>%{text}<extra></extra>",
            )
        )


def naive_utc(moment: datetime | None) -> pd.Timestamp | None:
    """Plotly's date axis wants naive UTC: an aware "+00:00" value is misread by plotly.js."""
    if moment is None:
        return None
    return pd.Timestamp(moment.astimezone(UTC).replace(tzinfo=None))


_SCRIPT_ESCAPES = (("&", "\\u0026"), ("<", "\\u003C"), (">", "\\u003E"))

# Plotly renders a subset of HTML (<a href>, <b>, <br>, ...) in every text it draws: titles,
# trace names, hover text, tick labels (category values), annotations. Metric, host and
# root-cause names are user input, so every string of a figure is escaped, once, here, except
# the templates the chart code writes itself (their markup is ours; the %{...} values they
# pull in are escaped like the rest). Plotly decodes the entities back for display.
_CODE_MARKUP_KEYS = frozenset({"hovertemplate", "texttemplate"})


def figure_text_escape(value: Any, key: str = "") -> Any:
    """A copy of a Plotly figure (as JSON data) with &, < and > escaped in every string."""
    if isinstance(value, str):
        return value if key in _CODE_MARKUP_KEYS else html.escape(value, quote=False)
    if isinstance(value, dict):
        return {k: figure_text_escape(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # Numbers pass as they are without a call each: a heat map is 55,000 of them.
        return [
            item if item is None or type(item) in _PLAIN else figure_text_escape(item, key)
            for item in value
        ]
    return value


_PLAIN = (int, float, bool)


def charts_script(payload: list[dict[str, Any]]) -> SafeString:
    """The page's charts as Django's json_script(payload, "charts-data") writes them, minus
    its cost: json_script escapes with str.translate, ~25 ms on a 400 kB chart payload;
    three str.replace calls do the same escaping in a few. Every figure's text is escaped
    for Plotly's markup first (figure_text_escape)."""
    payload = [
        {**entry, "figure": figure_text_escape(entry["figure"])} if "figure" in entry else entry
        for entry in payload
    ]
    try:
        text = json.dumps(payload, separators=(",", ":"), allow_nan=False, cls=DjangoJSONEncoder)
    except ValueError:  # a NaN slipped through: null it rather than write invalid JSON
        text = json.dumps(finite_or_null(payload), separators=(",", ":"), cls=DjangoJSONEncoder)
    for raw, escaped in _SCRIPT_ESCAPES:
        text = text.replace(raw, escaped)
    return SafeString(f'<script id="charts-data" type="application/json">{text}</script>')
