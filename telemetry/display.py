"""How every page writes numbers, durations, sizes and times: one set of pure functions behind
the site-wide template filters (telemetry/templatetags/display.py), so "70553706496" on one
page cannot be "487,746,748,416" on the next. No ORM here; tested in tests/telemetry/
test_display.py.

Times: pages show them in one display zone, UTC unless the reader chose their browser's zone
(the `chronicle_tz` cookie, read by telemetry.middleware), always with the zone's name."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DASH = "\u2013"  # an en dash: "no value"
TZ_COOKIE = "chronicle_tz"


def thousands(value: float | int | None, digits: int = 0) -> str:
    """A number with comma thousands separators and `digits` decimals: 70,553,706,496."""
    if value is None or isinstance(value, bool):
        return DASH
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    if digits == 0:
        return f"{round(number):,}"
    return f"{number:,.{digits}f}"


def significant(value: float | int | None, digits: int = 5) -> str:
    """A number to `digits` significant digits (6.417400000000001 -> 6.4174), separators in
    the integer part, no exponent from a millionth to a trillion: 2.0312, 0.0012346,
    1,234,568 (whole numbers keep every digit)."""
    if value is None or isinstance(value, bool):
        return DASH
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    if number == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(number)))
    if magnitude >= 12 or magnitude < -6:
        return f"{number:.{digits}g}"
    decimals = max(digits - 1 - magnitude, 0)
    text = f"{round(number, decimals):,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


# Each unit with the most it may show before the next one reads better.
_DURATION_UNITS = (("s", 1.0, 120.0), ("min", 60.0, 120 * 60.0), ("h", 3600.0, 48 * 3600.0))


def duration_unit(seconds: float) -> tuple[str, float]:
    """The unit that fits a duration and its size in seconds: ("s", 1), ("min", 60), ("h",
    3600) or ("d", 86400). Up to two minutes in seconds, up to two hours in minutes, up to
    two days in hours, then days."""
    value = abs(seconds)
    for unit, size, below in _DURATION_UNITS:
        if value < below:
            return unit, size
    return "d", 86400.0


def duration(seconds: float | int | None) -> str:
    """A duration in the unit that fits (duration_unit): 9 s, 4.5 min, 31 h, 2.9 d (253,610
    s)."""
    if seconds is None or isinstance(seconds, bool):
        return DASH
    value = float(seconds)
    if not math.isfinite(value):
        return str(value)
    unit, size = duration_unit(value)
    return f"{'-' if value < 0 else ''}{_short(abs(value) / size)} {unit}"


def _short(value: float) -> str:
    """One decimal at most, never an exponent: 9, 4.5, 31.7, 253, 0.25."""
    if value >= 100 or value == 0:
        return f"{round(value):,}"
    if value >= 1:
        return f"{value:.1f}".removesuffix(".0")
    return significant(value, 2)


def number(value: float | int | None) -> str:
    """A computed figure as the pages show it: whole numbers with separators, others with
    three significant digits (one decimal from 100 up): 1,024, 0.0123, 3.14, 1,234.5."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return DASH if value is None else str(value)
    if isinstance(value, int) or float(value).is_integer():
        return thousands(value)
    if abs(value) >= 100:
        return thousands(value, 1)
    return significant(value, 3)


# Seconds in each time unit a computed figure may carry (logbook's Derived.unit).
TIME_UNITS_S = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "days": 86400.0}


_BYTE_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB")


def size(size_bytes: float | int | None) -> str:
    """A size in decimal units with three significant digits: 39.6 MB, 1.2 TB, 512 B."""
    if size_bytes is None or isinstance(size_bytes, bool):
        return DASH
    value = float(size_bytes)
    if not math.isfinite(value) or value < 0:
        return str(value)
    index = 0
    while value >= 999.5 and index < len(_BYTE_UNITS) - 1:
        value /= 1000.0
        index += 1
    return f"{_short(value) if index else round(value)} {_BYTE_UNITS[index]}"


def percent(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.4312 -> 43.1%."""
    if fraction is None or isinstance(fraction, bool):
        return DASH
    return f"{float(fraction) * 100:,.{digits}f}%"


def zone_from_cookie(raw: str | None) -> tzinfo:
    """The display zone a `chronicle_tz` cookie names: UTC unless it names a real IANA zone
    (the browser's, written by static/js/display.js), so a bad cookie is never an error."""
    if not raw or raw.upper() == "UTC" or len(raw) > 64:
        return UTC
    try:
        return ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def zone_name(zone: tzinfo) -> str:
    """The label a page shows for its zone: "UTC" or the IANA name ("Europe/Paris")."""
    return "UTC" if zone is UTC else str(getattr(zone, "key", zone))


def moment(
    value: datetime | None, zone: tzinfo, *, seconds: bool = False, label: bool = True
) -> str:
    """A moment in the display zone, labelled with the zone's abbreviation unless the column
    header says it: "2026-11-23 15:47 UTC", "2026-11-23 16:47:08 CET"."""
    if not isinstance(value, datetime):
        return ""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    local = value.astimezone(zone)
    text = local.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")
    if not label:
        return text
    return f"{text} {'UTC' if zone is UTC else local.strftime('%Z')}"


# What the pages' filter bars call each query parameter. A page names the field its reader
# sees ("To: must be after From"); the API names the parameter ("end: must be after start").
FIELD_LABELS = {
    "start": "From",
    "since": "From",
    "end": "To",
    "until": "To",
    "run": "Run",
    "site": "Site",
    "cluster": "Cluster",
    "k": "K (incidents)",
    "window_days": "Window (days)",
    "verdict": "Verdict",
    "host": "Host",
    "status": "Status",
    "category": "Category",
    "accelerators": "Project to accelerators",
    "axis": "Axis",
    "section": "Section",
}
_AFTER_PARAMETER = re.compile(r"\bafter (" + "|".join(FIELD_LABELS) + r")\b")


def field_problem(name: str, message: str) -> str:
    """A query parameter's problem in a page's words: "until", "must be after since" reads
    "To: must be after From"."""
    words = _AFTER_PARAMETER.sub(lambda found: f"after {FIELD_LABELS[found.group(1)]}", message)
    return f"{FIELD_LABELS.get(name, name)}: {words}"
