"""Where a run's annotations and logbook entries sit on its charts (telemetry.charts draws
them as notes from the plain frame built here)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from telemetry.charts import Axis, naive_utc

LABEL_CHARS = 120


def _label(text: str) -> str:
    """One line, short (escaped for Plotly's markup, like all figure text, by
    telemetry.charts.charts_script)."""
    line = " ".join(text.split())
    if len(line) > LABEL_CHARS:
        line = line[: LABEL_CHARS - 1] + "…"
    return line


def chart_marks(annotations: Iterable[Any], entries: Iterable[Any], axis: Axis) -> pd.DataFrame:
    """Where annotations and logbook entries sit on a run's charts.

    annotations: objects with time, time_end, step, step_end, text, tags (Annotation rows).
    entries: objects with occurred_at, step, step_end, title, kind (LogbookEntry rows).
    axis: "step" places marks by step (those without a step are left out); "time" by wall
        time (naive UTC Timestamps; annotations without a time are left out; an entry is a
        point at its occurred_at).
    Returns columns x0, x1 (None for a point), label, kind
    ("annotation" or "logbook"), ordered by x0.
    """
    rows: list[tuple[Any, Any, str, str]] = []
    for mark in annotations:
        tags = f" [{', '.join(mark.tags)}]" if mark.tags else ""
        label = _label(f"{mark.text}{tags}")
        if axis == "step":
            if mark.step is not None:
                rows.append((mark.step, mark.step_end, label, "annotation"))
        elif mark.time is not None:
            rows.append((naive_utc(mark.time), naive_utc(mark.time_end), label, "annotation"))
    for entry in entries:
        kind = entry.get_kind_display() if hasattr(entry, "get_kind_display") else entry.kind
        label = _label(f"{kind}: {entry.title}")
        if axis == "step":
            if entry.step is not None:
                rows.append((entry.step, entry.step_end, label, "logbook"))
        elif entry.occurred_at is not None:
            rows.append((naive_utc(entry.occurred_at), None, label, "logbook"))
    rows.sort(key=lambda row: (row[0], row[3]))
    # Object columns: a missing end stays None (not NaN/NaT), so callers test `x1 is None`.
    return pd.DataFrame(
        {
            name: pd.Series([row[index] for row in rows], dtype=object)
            for index, name in enumerate(("x0", "x1", "label", "kind"))
        }
    )


def slowdown_marks(slowdowns: Iterable[Any], axis: Axis) -> pd.DataFrame:
    """Where a run's slowdowns sit on its charts (shaded ranges, kind "slowdown"), in
    chart_marks' columns. slowdowns: objects with start_step, end_step, start_time, end_time,
    drop_pct and cause_kind (diagnosis.models.Slowdown rows)."""
    rows = []
    for one in slowdowns:
        label = _label(f"slowdown: \u2212{one.drop_pct:.1f}% ({one.get_cause_kind_display()})")
        if axis == "step":
            rows.append((one.start_step, one.end_step, label, "slowdown"))
        elif one.start_time is not None and one.end_time is not None:
            rows.append((naive_utc(one.start_time), naive_utc(one.end_time), label, "slowdown"))
    return pd.DataFrame(
        {
            name: pd.Series([row[index] for row in rows], dtype=object)
            for index, name in enumerate(("x0", "x1", "label", "kind"))
        }
    )


# Earlier attempts of a compared run: its hue mixed with white up to this much (the earliest),
# and dashed, so a run reads as one colour and its latest attempt as the strongest line.
EARLIEST_SHADE = 0.5
_EARLIER_DASHES = ["dash", "dot", "dashdot"]


def shade(colour: str, towards_white: float) -> str:
    """A "#rrggbb" colour mixed with white: 0 leaves it, 1 is white."""
    channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    mixed = [round(c + (255 - c) * towards_white) for c in channels]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def run_attempt_lines(hue: str, attempts: Iterable[int]) -> dict[int, dict[str, str]]:
    """Each attempt's line of one compared run: the run's hue for its latest attempt (solid),
    lighter and dashed for each earlier one, the earliest lightest."""
    ordered = sorted(set(attempts))
    lines: dict[int, dict[str, str]] = {}
    for rank, attempt in enumerate(reversed(ordered)):
        towards_white = EARLIEST_SHADE * rank / max(len(ordered) - 1, 1)
        dash = "solid" if rank == 0 else _EARLIER_DASHES[(rank - 1) % len(_EARLIER_DASHES)]
        lines[attempt] = {"color": shade(hue, towards_white), "dash": dash}
    return lines
