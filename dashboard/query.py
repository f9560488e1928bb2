"""Query parameters of the MFU and goodput pages and their JSON: parsed once, for both."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from django.http import QueryDict

from telemetry.display import field_problem
from telemetry.query_time import BadTime, parse_time


@dataclass(frozen=True)
class Window:
    """A time window from query parameters; either end may be open."""

    start: datetime | None = None
    end: datetime | None = None

    def as_seconds(self) -> tuple[float, float] | None:
        if self.start is None and self.end is None:
            return None
        low = self.start.timestamp() if self.start else -math.inf
        high = self.end.timestamp() if self.end else math.inf
        return low, high


def window_key(window: Window) -> str:
    """The window as part of a cache key."""
    return f"{window.start.isoformat() if window.start else ''}/" + (
        window.end.isoformat() if window.end else ""
    )


class BadQuery(ValueError):
    """A query parameter the user must fix: `name` and what is wrong with it. str() is the
    API's "name: message"; in_page_words() the page's (display.field_problem)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message

    def in_page_words(self) -> str:
        return field_problem(self.name, self.message)


def window_from_query(params: QueryDict) -> Window:
    """`start` and `end` as ISO 8601 times (UTC when no offset is given). An end given as a
    bare day includes that day (its window ends at the next midnight)."""
    values = {}
    for name in ("start", "end"):
        raw = params.get(name, "").strip()
        if not raw:
            values[name] = None
            continue
        try:
            values[name] = parse_time(raw, end_of_day=name == "end")
        except BadTime as exc:
            raise BadQuery(name, str(exc)) from exc
    if values["start"] and values["end"] and values["end"] <= values["start"]:
        raise BadQuery("end", "must be after start")
    return Window(start=values["start"], end=values["end"])


def axis_from_query(params: QueryDict) -> str:
    axis = params.get("axis", "step") or "step"
    if axis not in ("step", "time"):
        raise BadQuery("axis", f"must be step or time, got {axis[:20]!r}")
    return axis


def exclude_planned_from_query(params: QueryDict) -> bool:
    return params.get("exclude_planned", "") in ("1", "true", "yes", "on")
