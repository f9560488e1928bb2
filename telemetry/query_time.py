"""Times typed into filters and forms: an ISO 8601 date or datetime (in the active zone when it
names no offset: UTC for the API, the reader's display zone on pages, telemetry.middleware),
returned in UTC and within the years the data can mean. One parser for every page
and API, so an odd offset or a year 420 gets a 400, never a database error."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.utils import OpenApiParameter

YEARS = (1970, 2200)


class BadTime(ValueError):
    pass


def storable_text(value: str) -> bool:
    """Whether PostgreSQL text can hold `value`: no NUL byte, no lone surrogate. A filter
    value that cannot be stored cannot match anything either, and compared with a column it
    would fail in the database instead of in the filter's own error."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_time(text: str, *, end_of_day: bool = False) -> datetime:
    """The moment `text` names; a bare date is its midnight (the next one with end_of_day,
    so "until 2026-11-12" includes that day). Raises BadTime saying what is wrong."""
    text = text.strip()
    zone = timezone.get_current_timezone()
    try:
        day: date | None = parse_date(text)
        moment = None if day is not None else parse_datetime(text.replace(" ", "T"))
    except ValueError as exc:  # well formed but impossible, like month 13
        raise BadTime(f"{text[:40]!r} is not a valid date or time") from exc
    if day is not None:
        try:
            moment = datetime.combine(day + timedelta(days=int(end_of_day)), time(), zone)
        except OverflowError as exc:
            raise BadTime(f"{text[:40]!r} is out of range") from exc
    if moment is None:
        raise BadTime(f"cannot read {text[:40]!r} as an ISO 8601 date or time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    try:
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise BadTime(f"{text[:40]!r} is out of range") from exc
    if not YEARS[0] <= moment.year <= YEARS[1]:
        raise BadTime(f"{text[:40]!r} is outside the years {YEARS[0]}-{YEARS[1]}")
    return moment


# What the time filters of the API accept, as OpenAPI says it: an ISO 8601 datetime or date,
# or nothing (an empty value, as an HTML form sends it, means no bound).
TIME_FILTER_SCHEMA = {
    "type": "string",
    "anyOf": [{"format": "date-time"}, {"format": "date"}, {"maxLength": 0}],
}


def time_filter_parameter(name: str, description: str) -> OpenApiParameter:
    """A query parameter read by parse_time, documented as it is read."""
    return OpenApiParameter(name, TIME_FILTER_SCHEMA, description=f"{description} Empty: no bound.")


TIME_WINDOW_PARAMETERS = [
    time_filter_parameter("start", "Window start (ISO 8601, UTC if naive)."),
    time_filter_parameter(
        "end", "Window end, exclusive (ISO 8601; a bare date means through that day)."
    ),
]


# A whole-number query parameter that may also be sent empty (an HTML form's "all" choice):
# empty (or blank: values are trimmed) means no filter, so the schema says "digits, or nothing".
OPTIONAL_INTEGER = {"type": "string", "pattern": "^\\s*-?[0-9]{0,19}\\s*$"}


def optional_integer_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OPTIONAL_INTEGER, description=f"{description} Empty: any.")
