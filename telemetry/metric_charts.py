"""A metric's chart: a line per attempt over steps or wall-clock time, with the run's marks
(downtime, restarts, interruptions, notes), as the JSON data of a Plotly figure. Pure:
DataFrames in, plain dicts out; the look and the embedding every chart shares are in
telemetry.charts."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import plotly.graph_objects as go

from telemetry.charts import (
    MANY_MARKS,
    MANY_MARKS_OPACITY,
    MARKS_AXIS,
    Axis,
    FloatArray,
    _path_x,
    _plain,
    as_scatter,
    attempt_colour,
    folded_trace_data,
    hover_template,
    plain,
    split_attempts,
    template_data,
)

if TYPE_CHECKING:
    from telemetry.selectors.series import AttemptSeries


@dataclass
class Marks:
    """Vertical lines and shaded bands across a chart, collected and drawn at once: as a
    layout shape each when they are few, as one path shape per kind when they are many, and
    their hover ticks as one trace per kind (kept as JSON data, for figures built as data and
    Plotly figures alike)."""

    shapes: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    traces: list[dict[str, Any]] = field(default_factory=list)

    def lines(
        self,
        xs: list[Any],
        *,
        line: dict[str, Any],
        name: str,
        labels: list[str] | None = None,
        ticked: bool = False,
    ) -> None:
        """With `ticked` (the marks also have pins: ticks along an edge, each named on
        hover), many marks are left to their ticks: hundreds of full-height lines were a
        uniform wall over the data that said nothing the ticks do not."""
        if not xs or (ticked and len(xs) > MANY_MARKS):
            return
        xs = [_plain(x) for x in xs]
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
        # One SVG path for them all, drawn under the data: as a scatter trace (466 segments
        # between gaps, with hover points) each kind cost ~30 ms of a Llama-scale chart's
        # ~210 ms to draw, and a run page draws eight; as a path shape, ~2 ms. Their hover
        # goes with them (the restarts': the attempts' own lines name each attempt). Drawn
        # at full strength, 466 restarts made a Llama-scale chart a wall of dashes; solid
        # and faint, they stay readable as where restarts cluster.
        self.shapes.append(
            {
                "type": "path",
                "xref": "x",
                "yref": "y domain",
                "path": "".join(f"M{x},0L{x},1" for x in map(_path_x, xs)),
                "line": {**line, "dash": "solid"},
                "opacity": MANY_MARKS_OPACITY,
                "layer": "below",
            }
        )

    def bands(self, x0s: list[Any], x1s: list[Any], *, colour: str, name: str) -> None:
        if not x0s:
            return
        x0s, x1s = [_plain(x) for x in x0s], [_plain(x) for x in x1s]
        if len(x0s) <= MANY_MARKS:
            for x0, x1 in zip(x0s, x1s, strict=True):
                self.shapes.append(
                    {"type": "rect", "xref": "x", "yref": "y domain", "x0": x0, "x1": x1,
                     "y0": 0, "y1": 1, "fillcolor": colour, "opacity": 0.08,
                     "line": {"width": 0}, "layer": "below"}
                )  # fmt: skip
            return
        # One path of closed rectangles, for the reason `lines` gives.
        self.shapes.append(
            {
                "type": "path",
                "xref": "x",
                "yref": "y domain",
                "path": "".join(
                    f"M{a},0L{a},1L{b},1L{b},0Z"
                    for a, b in zip(map(_path_x, x0s), map(_path_x, x1s), strict=True)
                ),
                "fillcolor": colour,
                "opacity": 0.08,
                "line": {"width": 0},
                "layer": "below",
            }
        )

    def pins(
        self,
        xs: list[Any],
        labels: list[str],
        *,
        at: float,
        top: bool,
        colour: str,
        symbol: str,
        name: str,
        hovertemplate: str,
    ) -> list[dict[str, Any]]:
        """Hover markers naming each mark, at the data's top or bottom (`at`): a marker each
        when they are few, returned as the data trace to add; when many, short thick ticks
        along the chart's top or bottom edge, drawn as one path shape, and named on hover by
        a trace that draws nothing (mode "none": Plotly still finds its points under the
        cursor), kept with the marks' traces. Each SVG marker is a node styled one by one,
        and so is each piece of a line broken by gaps: 466 ticks drawn as a trace were 466
        paths, twice a chart, most of a Llama-scale run page's drawing."""
        if not xs:
            return []
        xs = [_plain(x) for x in xs]
        if len(xs) <= MANY_MARKS:
            return [
                {
                    "type": "scatter",
                    "x": xs,
                    "y": [at] * len(xs),
                    "mode": "markers",
                    "name": name,
                    "marker": {"color": colour, "symbol": symbol, "size": 9},
                    "text": labels,
                    "hovertemplate": hovertemplate,
                }
            ]
        y0, y1 = (0.93, 1.0) if top else (0.0, 0.07)
        self.shapes.append(
            {
                "type": "path",
                "xref": "x",
                "yref": "y domain",
                "path": "".join(f"M{x},{y0}L{x},{y1}" for x in map(_path_x, xs)),
                "line": {"color": colour, "width": 3},
            }
        )
        self.traces.append(
            {
                "type": "scatter",
                "x": xs,
                "y": [(y0 + y1) / 2] * len(xs),
                "yaxis": MARKS_AXIS,
                "mode": "none",
                "name": name,
                "showlegend": False,
                "text": labels,
                "hovertemplate": hovertemplate,
            }
        )
        return []

    def layout(self) -> dict[str, Any]:
        layout: dict[str, Any] = {}
        if self.shapes:
            layout["shapes"] = self.shapes
        if self.annotations:
            layout["annotations"] = self.annotations
        if self.traces:
            layout["yaxis2"] = {"overlaying": "y", "range": [0, 1], "visible": False,
                                "fixedrange": True}  # fmt: skip
        return layout

    def draw(self, figure: go.Figure) -> None:
        for trace in self.traces:
            figure.add_trace(as_scatter(trace))
        if layout := self.layout():
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


def _groups(points: pd.DataFrame) -> list[tuple[Any, npt.NDArray[Any], FloatArray]]:
    """(attempt, xs, values) per attempt in attempt order, as numpy slices: pandas' groupby
    and indexing cost milliseconds a group, and a Llama 3 scale run has hundreds."""
    attempts = points["attempt"].to_numpy()
    order = np.argsort(attempts, kind="stable")
    attempts = attempts[order]
    xs = points["x"].to_numpy()[order]
    values = points["value"].to_numpy(dtype=float)[order]
    firsts = np.flatnonzero(np.r_[True, attempts[1:] != attempts[:-1]]) if attempts.size else []
    bounds = [*list(firsts), attempts.size]
    return [
        (attempts[start].item(), xs[start:end], values[start:end])
        for start, end in itertools.pairwise(bounds)
    ]


def _non_finite(
    x: Any, values: FloatArray, anchor: float, *, name: str, text: list[str]
) -> dict[str, Any]:
    # Plot non-finite values where the curve was, labelled, so a NaN is seen, not hidden.
    return {
        "type": "scatter",
        "x": plain(x),
        "y": [anchor] * len(values),
        "mode": "markers",
        "name": name,
        "marker": {"color": "#d62728", "symbol": "x", "size": 10},
        "text": text,
        "hovertemplate": "%{x}<br>%{text}<extra></extra>",
    }


def metric_figure_data(
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
    attempt_line: Callable[[Any], dict[str, str]] | None = None,
    value_hover: str = "%{y:.4g}",
) -> dict[str, Any]:
    """One metric, a line per attempt, over steps or wall-clock time, as the JSON data of a
    Plotly figure ({"data", "layout"}), built from plain lists: a run page draws eight of
    these over hundreds of attempts, and Plotly's objects (validation, deep copies, its
    encoder) cost seconds there. SVG traces, not WebGL: series arrive downsampled to a few
    thousand points, and WebGL contexts are a scarce per-page resource.

    points: columns attempt, x, value (x is the step or the wall time; non-finite values
        allowed, drawn as marked points).
    restarts: columns attempt, x: where an attempt resumed (dashed line).
    interruptions: columns x, label: where the job stopped (dotted line, hover marker).
    downtime: columns x0, x1: wall time between attempts (shaded).
    notes: columns x0, x1 (None for a point), label, kind: annotations and logbook entries
        (a range is shaded, a point is a line; both have a hover marker at the bottom).
    attempt_name, attempt_dash: a line's name and dash from its attempt value.
    attempt_line: a line's colour and dash from its attempt value, instead of a colour per
        line and attempt_dash (the compare page: "<run> · attempt N", one hue per run).
    value_hover: how a hover shows a value (the MFU page: "MFU %{y:.2f}%").
    """
    earlier, own = split_attempts(_groups(points))
    hover = f"%{{x}}<br>{value_hover}"
    data = _folded_traces(earlier, hover=hover)
    for index, (attempt, xs, values) in enumerate(own, start=len(earlier)):
        line = {
            "color": attempt_colour(index),
            "width": 1.2,
            "dash": attempt_dash(attempt),
            **(attempt_line(attempt) if attempt_line else {}),
        }
        data += _attempt_traces(xs, values, name=attempt_name(attempt), line=line, hover=hover)
    all_values = points["value"].to_numpy(dtype=float)
    finite_values = all_values[np.isfinite(all_values)]
    marks = Marks()
    data += _marks_traces(
        marks,
        restarts=restarts,
        interruptions=interruptions,
        downtime=downtime,
        notes=notes,
        top=float(finite_values.max()) if finite_values.size else 0.0,
        bottom=float(finite_values.min()) if finite_values.size else 0.0,
    )
    layout = _metric_layout(marks, title=title, axis=axis, y_title=y_title)
    if finite_values.size:
        flat = flat_value_range(float(finite_values.min()), float(finite_values.max()))
        if flat is not None:
            layout["yaxis"]["range"] = flat
    return {"data": data, "layout": layout}


def flat_value_range(bottom: float, top: float) -> list[float] | None:
    """The y range for a metric that holds one value (a steady 4M tokens/s): 5% either side
    of it, or ±1 around zero; None when the values vary. Plotly's own range for a flat line
    is ±1 unit, which labels a steady 4M tokens/s "3.9999995M … 4.000001M". The same pad as
    static/js/charts.js's yRange, which refits the linked run-page charts (and their log
    axis) in the browser; this one serves the charts drawn as sent, such as the incident
    page's."""
    if top - bottom > 1e-9 * max(1.0, abs(top)):
        return None
    pad = 0.05 * abs(top) or 1.0
    return [top - pad, top + pad]


def _folded_traces(
    earlier: list[tuple[Any, npt.NDArray[Any], FloatArray]], *, hover: str
) -> list[dict[str, Any]]:
    """The attempts past the last OWN_ATTEMPTS as one grey line, and their non-finite values
    as one set of marked points."""
    if not earlier:
        return []
    finite = [np.isfinite(values) for _, _, values in earlier]
    data = [
        folded_trace_data(
            [(a, x[f], v[f]) for (a, x, v), f in zip(earlier, finite, strict=True)],
            hovertemplate=hover_template(hover + "<extra>%{text}</extra>"),
        )
    ]
    bad = [(a, x[~f], v[~f]) for (a, x, v), f in zip(earlier, finite, strict=True) if (~f).any()]
    if bad:
        first_values = earlier[0][2][finite[0]]
        anchor = float(first_values[-1]) if first_values.size else 0.0
        data.append(
            _non_finite(
                np.concatenate([x for _, x, _ in bad]),
                np.concatenate([v for _, _, v in bad]),
                anchor,
                name=f"attempts {earlier[0][0]} to {earlier[-1][0]}: non-finite",
                text=[f"{v} (attempt {a})" for a, _, values in bad for v in values.tolist()],
            )
        )
    return data


def _attempt_traces(
    xs: npt.NDArray[Any], values: FloatArray, *, name: str, line: dict[str, Any], hover: str
) -> list[dict[str, Any]]:
    """One attempt's line through its finite values, and its non-finite values as marked
    points (at the last finite value's height)."""
    data = []
    finite = np.isfinite(values)
    lone = int(finite.sum()) == 1
    if finite.any():
        data.append(
            {
                "type": "scatter",
                "x": plain(xs[finite]),
                "y": values[finite].tolist(),
                # A lone value draws no line: marked (whole, at the axis's edge too), or its
                # chart looks empty.
                "mode": "lines+markers" if lone else "lines",
                "cliponaxis": not lone,
                "name": name,
                "line": line,
                # The name is escaped with the figure's text, the template is not.
                "hovertemplate": hover_template(hover + "<extra>%{fullData.name}</extra>"),
            }
        )
    if (~finite).any():
        anchor = float(values[finite][-1]) if finite.any() else 0.0
        data.append(
            _non_finite(
                xs[~finite],
                values[~finite],
                anchor,
                name=f"{name}: non-finite",
                text=[str(v) for v in values[~finite].tolist()],
            )
        )
    return data


def _marks_traces(
    marks: Marks,
    *,
    restarts: pd.DataFrame | None,
    interruptions: pd.DataFrame | None,
    downtime: pd.DataFrame | None,
    notes: pd.DataFrame | None,
    top: float,
    bottom: float,
) -> list[dict[str, Any]]:
    """Downtime, restarts, interruptions and notes: drawn on `marks` (shapes, or one trace per
    kind past MANY_MARKS), with the hover markers returned as traces (interruptions along the
    top of the values, notes along the bottom)."""
    data: list[dict[str, Any]] = []
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
            ticked=True,
        )
        # Labels as hover markers along the top: text annotations overlap when restarts
        # cluster, and a hover names each one exactly.
        data += marks.pins(
            plain(interruptions["x"].to_numpy()),
            [str(label) for label in interruptions["label"]],
            at=top,
            top=True,
            colour="#d62728",
            symbol="triangle-down",
            name="interruptions",
            hovertemplate="interrupted at %{x}<br>%{text}<extra></extra>",
        )
    if notes is not None and not notes.empty:
        data += _notes(marks, notes, bottom)
    return data + marks.traces


def _metric_layout(marks: Marks, *, title: str, axis: Axis, y_title: str) -> dict[str, Any]:
    xaxis: dict[str, Any] = {
        "title": {"text": "step" if axis == "step" else "wall-clock time (UTC)"},
        # Explicit: an axis with no points would otherwise guess "linear" and misdraw the
        # date-valued marks.
        "type": "linear" if axis == "step" else "date",
        "showspikes": True,
        "spikemode": "across",
        "spikethickness": 1,
    }
    if axis == "step":
        xaxis["tickformat"] = "d"  # steps are whole numbers: no "1.5k" or "2,500.5" ticks
    return {
        "title": {"text": title, "x": 0.01, "font": {"size": 14}},
        "height": 300,
        # Room for the axes' labels and titles as drawn: where they need more than the
        # margin, Plotly's automargin draws the whole chart a second time (measured on the
        # Llama-scale run page: they needed 52-69 px left, 51 below over steps, 66 over time).
        "margin": {"l": 72, "r": 10, "t": 36, "b": 54 if axis == "step" else 68},
        "xaxis": xaxis,
        "yaxis": {"title": {"text": y_title}},
        # The legend sits below the x axis title, with room for both.
        "legend": {"orientation": "h", "y": -0.3, "yanchor": "top"},
        "template": template_data("plotly_white"),
        # A crosshair: the hover lists every attempt's value at the step under the cursor.
        "hovermode": "x unified",
        **marks.layout(),
    }


def metric_figure(points: pd.DataFrame, **options: Any) -> go.Figure:
    """metric_figure_data as a Plotly figure (same arguments)."""
    return go.Figure(metric_figure_data(points, **options))


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


NOTE_COLOURS = {"annotation": "#1f6feb", "logbook": "#2e7d32", "slowdown": "#e67e22"}
NOTE_NAMES = {"annotation": "annotations", "logbook": "logbook entries", "slowdown": "slowdowns"}


def _notes(marks: Marks, notes: pd.DataFrame, bottom: float) -> list[dict[str, Any]]:
    """Marks for annotations, logbook entries and slowdowns, and their hover markers at
    `bottom`."""
    for kind, group in notes.groupby("kind", sort=True):
        colour = NOTE_COLOURS.get(str(kind), "#1f6feb")
        ranged = [x1 is not None and not pd.isna(x1) for x1 in group["x1"]]
        spans = group[ranged]
        marks.bands(list(spans["x0"]), list(spans["x1"]), colour=colour, name=f"{kind} ranges")
        marks.lines(
            list(group[[not r for r in ranged]]["x0"]),
            line={"color": colour, "dash": "dashdot", "width": 1},
            name=f"{kind} lines",
            ticked=True,
        )
    return [
        trace
        for kind, group in notes.groupby("kind", sort=True)
        for trace in marks.pins(
            list(group["x0"]),
            # Escaped with the rest of the figure's text by charts_script.
            list(group["label"]),
            at=bottom,
            top=False,
            colour=NOTE_COLOURS.get(str(kind), "#1f6feb"),
            symbol="triangle-up",
            name=NOTE_NAMES.get(str(kind), "logbook entries"),
            hovertemplate="%{x}<br>%{text}<extra></extra>",
        )
    ]
