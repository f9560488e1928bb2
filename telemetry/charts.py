"""Pure chart builders: DataFrames in, Plotly figures out. No database."""

from __future__ import annotations

import html
import json
import re
import string
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.safestring import SafeString

from telemetry.json_numbers import finite_or_null

if TYPE_CHECKING:
    pass

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
FloatArray = npt.NDArray[np.float64]


def chart_look(
    *,
    title: str,
    x_title: str = "",
    y_title: str = "",
    height: int = 320,
    legend_y: float = -0.3,
    margin_bottom: int = 40,
) -> dict[str, Any]:
    """The look every Chronicle chart shares, as a layout dict: small left-aligned title,
    white template, legend below the x axis title. `margin_bottom`: room for the x axis and
    the legend under it; a chart that needs more than its margins is drawn twice (Plotly's
    automargin), so a chart that knows what it needs says so."""
    return {
        "title": {"text": title, "x": 0.01, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 60, "r": 10, "t": 36, "b": margin_bottom},
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {"title": {"text": y_title}},
        "legend": {"orientation": "h", "y": legend_y, "yanchor": "top"},
        "template": "plotly_white",
        "hovermode": "closest",
    }


def chart_look_data(**look: Any) -> dict[str, Any]:
    """chart_look for a figure built as JSON data: the template as plotly.js takes it."""
    return {**chart_look(**look), "template": template_data("plotly_white")}


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


def plain(values: Any) -> list[Any]:
    """Values as JSON takes them, the way Plotly's encoder writes them: numbers as numbers,
    times as ISO strings (naive: UTC, as naive_utc gives them), None as None."""
    array = np.asarray(values)
    if array.dtype.kind == "M":
        text = np.datetime_as_string(array.astype("datetime64[us]"), unit="us")
        return [None if t == "NaT" else t for t in text.tolist()]
    if array.dtype.kind in "iufb":
        return array.tolist()
    return [_plain(value) for value in array.tolist()]


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, np.datetime64):
        return plain(np.array([value]))[0]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _path_x(value: Any) -> str:
    """An x value as an SVG path in a shape takes it: Plotly splits a path on spaces and on
    its command letters (T among them), so a date's parts are joined by an underscore."""
    if isinstance(value, str):
        return value.replace(" ", "_").replace("T", "_").removesuffix("+00:00").removesuffix("Z")
    return str(value)


def as_scatter(trace: dict[str, Any]) -> go.Scatter:
    """A trace built as JSON data as a Plotly Scatter, its lists as arrays (see as_objects)."""
    return go.Scatter(
        {key: as_objects(value) if isinstance(value, list) else value
         for key, value in trace.items() if key != "type"}
    )  # fmt: skip


# Consecutive folded attempts closer than this share of the chart's x span are joined, not
# broken: under a pixel apart at any chart width up to this many pixels, so the line looks
# the same, and Plotly draws (and styles) one SVG path per unbroken piece: a Llama-scale
# run's 459 folded attempts were 459 paths on each of eight charts, most of their drawing.
JOIN_WITHIN_PIXELS = 2000
# Over steps, also when the next attempt starts within this many times the line's own mean
# spacing between points of where the last one's points end: the line shows no gap that
# narrow (a downsampled Llama-scale run keeps a point every ~600 steps; its attempts resume
# at or before the step the last one reached). Over time, the space between attempts is
# their downtime: only the pixel rule applies.
JOIN_WITHIN_SPACINGS = 4


def folded_trace_data(lines: list[tuple[Any, Any, Any]], *, hovertemplate: str) -> dict[str, Any]:
    """One grey line through several attempts' (attempt, xs, ys), broken between attempts
    unless the next starts where the last one's line ends (JOIN_WITHIN_PIXELS,
    JOIN_WITHIN_SPACINGS), as JSON data."""
    xs: list[Any] = []
    ys: list[Any] = []
    text: list[Any] = []
    join_within = _join_within([_as_numbers(x) for _, x, _ in lines], lines)
    last_end: float | None = None
    for attempt, x, y in lines:
        at = _as_numbers(x)
        joined = (last_end is not None and at is not None and at.size > 0
                  and abs(at[0] - last_end) <= join_within)  # fmt: skip
        if xs and not joined:
            xs.append(None)
            ys.append(None)
            text.append(None)
        xs += plain(x)
        ys += plain(y)
        text += [f"attempt {attempt}"] * len(x)
        last_end = float(at[-1]) if at is not None and at.size else None
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines",
        "name": f"attempts {lines[0][0]} to {lines[-1][0]}",
        "line": {"color": FOLDED_COLOUR, "width": 1},
        "text": text,
        "hovertemplate": hovertemplate,
    }


def _join_within(positions: list[Any], lines: list[tuple[Any, Any, Any]]) -> float:
    """How far apart (in x units) the end of one folded attempt and the start of the next
    may be and still be drawn joined."""
    known = [p for p in positions if p is not None and p.size]
    if not known:
        return 0.0
    span = float(max(p.max() for p in known) - min(p.min() for p in known))
    within = span / JOIN_WITHIN_PIXELS
    if np.asarray(lines[0][1]).dtype.kind != "M":
        extent = sum(float(p.max() - p.min()) for p in known)
        gaps = sum(p.size - 1 for p in known)
        if gaps:
            within = max(within, JOIN_WITHIN_SPACINGS * extent / gaps)
    return within


def _as_numbers(values: Any) -> npt.NDArray[np.float64] | None:
    """Steps, or times as nanoseconds: where points sit along the x axis (None: neither)."""
    array = np.asarray(values)
    if array.dtype.kind == "M":
        return array.astype("datetime64[ns]").astype(np.int64).astype(np.float64)
    if array.dtype.kind in "iuf":
        return array.astype(np.float64)
    return None


# Above this many marks of one kind, a chart draws them as one trace instead of a shape each:
# Plotly adds shapes one by one (quadratic in Python) and the browser redraws each, so a run
# with hundreds of restarts took minutes to build and seconds to draw.
MANY_MARKS = 40
MANY_MARKS_OPACITY = 0.12
# The y axis marks drawn as traces span: laid over the data's axis, from 0 to 1, hidden.
MARKS_AXIS = "y2"


@cache
def template_data(name: str) -> dict[str, Any]:
    """A Plotly template as the JSON of a figure carries it (plotly.js knows no names)."""
    return cast(dict[str, Any], pio.templates[name].to_plotly_json())


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


def hover_template(template: str, /, **names: object) -> str:
    """A Plotly hovertemplate (or texttemplate): `template` is chart code's own (its markup
    and %{...} variables are meant), and each `$name` in it is replaced by names[name] as
    plain text. The one way a chart puts a name (a run's, a section's, a host's, a root
    cause's) into a template, since figure_text_escape leaves templates alone: &, < and >
    escaped as in every other text of a figure, and % as the entity &#37;, so a name that
    holds `%{x}` is shown, not read as a variable. Plotly decodes both back for display.
    tests/telemetry/test_chart_hover.py checks no template is built any other way."""
    return string.Template(template).substitute(
        {key: hover_text(value) for key, value in names.items()}
    )


def hover_text(value: object) -> str:
    """A value as plain text inside a hovertemplate (see hover_template)."""
    return html.escape(str(value), quote=False).replace("%", "&#37;")


def figure_text_escape(value: Any, key: str = "") -> Any:
    """A copy of a Plotly figure (as JSON data) with &, < and > escaped in every string."""
    if isinstance(value, str):
        return value if key in _CODE_MARKUP_KEYS else html.escape(value, quote=False)
    if isinstance(value, dict):
        return {k: figure_text_escape(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # Numbers, None and (outside templates) strings, most of a figure's values, are taken
        # without a call each (tens of thousands on a run page).
        plain_text = key not in _CODE_MARKUP_KEYS
        if plain_text and not _MARKUP.search("".join(i for i in value if type(i) is str)):
            # Nothing to escape in the list's strings (the time axis's 70,000 ISO times on a
            # Llama-scale run page): taken as they are, not one html.escape call each.
            return [
                item if type(item) in _SCALARS or type(item) is str
                else figure_text_escape(item, key)
                for item in value
            ]  # fmt: skip
        return [
            item
            if type(item) in _SCALARS
            else html.escape(item, quote=False)
            if plain_text and type(item) is str
            else figure_text_escape(item, key)
            for item in value
        ]
    return value


_SCALARS = frozenset({int, float, bool, type(None)})
_MARKUP = re.compile("[&<>]")


# The entry of #charts-data that holds the traces several charts share (charts.js puts them
# back in each chart before drawing it).
SHARED_TRACES_ID = "charts-shared"


def _shareable(figure: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(where, position, item) of the figure's marks charts may share: its traces drawn on
    MARKS_AXIS (the ticks) and its layout's path shapes (many restarts or ranges)."""
    found = [
        ("data", position, trace)
        for position, trace in enumerate(figure.get("data", []))
        if trace.get("yaxis") == MARKS_AXIS
    ]
    found += [
        ("shapes", position, shape)
        for position, shape in enumerate(figure.get("layout", {}).get("shapes", []))
        if shape.get("type") == "path"
    ]
    return found


def shared_marks(payload: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The payload with each marks trace or path shape that two or more charts hold,
    identical, kept once: in a last entry {"id": SHARED_TRACES_ID, "traces": [...]} (traces
    and shapes alike), each chart's copy replaced by {"shared": its index}. A Llama-scale run
    page's eight charts each carried the same 466 restarts, interruptions and logbook
    entries: 1.2 of its 1.5 MB."""
    found = [_shareable(entry.get("figure", {})) for entry in payload]
    counts: dict[str, int] = {}
    keyed = []
    for items in found:
        row = []
        for where, position, item in items:
            key = json.dumps(item, sort_keys=True, cls=DjangoJSONEncoder)
            counts[key] = counts.get(key, 0) + 1
            row.append((where, position, item, key))
        keyed.append(row)
    if not any(count > 1 for count in counts.values()):
        return payload
    index: dict[str, int] = {}
    shared: list[dict[str, Any]] = []
    result = []
    for entry, row in zip(payload, keyed, strict=True):
        if not row:
            result.append(entry)
            continue
        figure = entry["figure"]
        data = list(figure.get("data", []))
        shapes = list(figure.get("layout", {}).get("shapes", []))
        for where, position, item, key in row:
            if counts[key] < 2:
                continue
            if key not in index:
                index[key] = len(shared)
                shared.append(item)
            (data if where == "data" else shapes)[position] = {"shared": index[key]}
        layout = {**figure["layout"], "shapes": shapes} if shapes else figure.get("layout", {})
        result.append({**entry, "figure": {**figure, "data": data, "layout": layout}})
    return [*result, {"id": SHARED_TRACES_ID, "traces": shared}]


@cache
def plotly_white() -> dict[str, Any]:
    """The "plotly_white" template as plotly.js reads it, built once per process."""
    return json.loads(go.Figure(layout={"template": "plotly_white"}).to_json())["layout"][
        "template"
    ]


def as_payload(figure: go.Figure | dict[str, Any]) -> dict[str, Any]:
    """A figure for the page's json_script. A figure built without our template (see
    logbook.fleet_charts, rank_charts) gets the shared one here, so it is not validated on every
    request."""
    if isinstance(figure, dict):
        if "template" not in figure.get("layout", {}):
            figure = {**figure, "layout": {**figure.get("layout", {}), "template": plotly_white()}}
        return figure
    body = json.loads(figure.to_json())
    body.setdefault("layout", {})["template"] = plotly_white()
    return body


def charts_script(payload: list[dict[str, Any]], element_id: str = "charts-data") -> SafeString:
    """The page's charts as Django's json_script(payload, element_id) writes them, minus
    its cost: json_script escapes with str.translate, ~25 ms on a 400 kB chart payload;
    three str.replace calls do the same escaping in a few. Every figure's text is escaped
    for Plotly's markup first (figure_text_escape); marks traces several charts share are
    written once (shared_marks). A page drawing charts cached apart adds them under the id
    "charts-data-more" (static/js/charts.js reads both)."""
    payload = shared_marks(
        [
            {**entry, "figure": figure_text_escape(entry["figure"])} if "figure" in entry else entry
            for entry in payload
        ]
    )
    try:
        text = json.dumps(payload, separators=(",", ":"), allow_nan=False, cls=DjangoJSONEncoder)
    except ValueError:  # a NaN slipped through: null it rather than write invalid JSON
        text = json.dumps(finite_or_null(payload), separators=(",", ":"), cls=DjangoJSONEncoder)
    for raw, escaped in _SCRIPT_ESCAPES:
        text = text.replace(raw, escaped)
    return SafeString(f'<script id="{element_id}" type="application/json">{text}</script>')
