"""Validation of a batch's events: each against its type's fields in `ingest.contract`,
then the checks across fields (an interval's end after its start, parallel lists as long as
each other).

Pure (no database).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.checks import MAX_STEP, Checker, ErrorList, FieldError, check_time, checks_for, describe
from ingest.contract import EVENT_TYPES, EVENTS


@dataclass(frozen=True, slots=True)
class EventIn:
    index: int
    type: str
    time: datetime
    fields: dict[str, Any]


EVENT_CHECKS: dict[str, dict[str, Checker]] = {
    event_type: checks_for(event.fields) for event_type, event in EVENTS.items()
}


def events_validate(items: list[Any], errors: ErrorList) -> list[EventIn]:
    events: list[EventIn] = []
    for index, item in enumerate(items):
        if errors.full():
            break
        if not isinstance(item, dict):
            errors.add("events", index, None, f"must be an object, got {describe(item)}")
            continue
        event_type = item.get("type")
        spec = EVENT_CHECKS.get(event_type) if isinstance(event_type, str) else None
        if spec is None:
            reason = (
                "is required"
                if event_type is None
                else f"unknown event type {describe(event_type)}; known: {', '.join(EVENT_TYPES)}"
            )
            errors.add("events", index, "type", reason)
            continue
        moment: datetime | None = None
        if "time" in item:
            try:
                moment = check_time(item["time"])
            except FieldError as exc:
                errors.add("events", index, "time", str(exc))
                continue
        elif not EVENTS[event_type].time_from:
            errors.add("events", index, "time", "is required")
            continue
        clean: dict[str, Any] = {}
        for key, value in item.items():
            if key in ("type", "time"):
                continue
            check = spec.get(key)
            if check is None:
                errors.add(
                    "events",
                    index,
                    str(key)[:60],
                    f"unknown field for {event_type}; allowed: type, time, {', '.join(spec)}",
                )
                continue
            if value is None:
                continue
            try:
                clean[key] = check(value)
            except FieldError as exc:
                errors.add("events", index, key, str(exc))
        required = EVENTS[event_type].required
        # Sent as null is not sent: a note whose title is null has no title.
        missing = [key for key in required if item.get(key) is None]
        for key in missing:
            errors.add("events", index, key, f"is required for {event_type}")
        if "start" in clean and "end" in clean and clean["end"] < clean["start"]:
            errors.add("events", index, "end", "must not be before start")
        if "first_step" in clean and "start_times" in clean:
            last_step = clean["first_step"] + len(clean["start_times"]) - 1
            if last_step > MAX_STEP:
                errors.add(
                    "events",
                    index,
                    "start_times",
                    f"would reach step {last_step}; steps end at {MAX_STEP}",
                )
        if (
            "last_step" in clean
            and "first_step" in clean
            and clean["last_step"] < clean["first_step"]
        ):
            errors.add("events", index, "last_step", "must not be before first_step")
        _parallel(EVENTS[event_type].parallel, clean, index, errors)
        if moment is None:
            if missing or any(key not in clean for key in required):
                continue
            moment = _time_from(clean[EVENTS[event_type].time_from])
        events.append(EventIn(index, event_type, moment, clean))
    return events


def _time_from(value: datetime | list[datetime]) -> datetime:
    """An event's default time: its own time field, or the first of its list of times."""
    return value[0] if isinstance(value, list) else value


def _parallel(keys: tuple[str, ...], clean: dict[str, Any], index: int, errors: ErrorList) -> None:
    """The event's parallel lists (columns of one table) must be as long as the first."""
    if not keys or keys[0] not in clean:
        return
    expected = len(clean[keys[0]])
    for key in keys[1:]:
        value = clean.get(key)
        columns = value.items() if isinstance(value, dict) else [(None, value)]
        for section, column in columns:
            if column is not None and len(column) != expected:
                where = key if section is None else f"{key}[{section!r}]"
                errors.add(
                    "events",
                    index,
                    where,
                    f"has {len(column)} items but {keys[0]} has {expected}; they must match",
                )
