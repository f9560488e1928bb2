"""The site's one set of display filters, a builtin of every template (config/settings.py):

    {{ n|thousands }}       70,553,706,496        {{ x|thousands:1 }}  1,234.5
    {{ x|sig }}             6.4174 (5 significant digits; {{ x|sig:3 }} 6.42)
    {{ s|duration }}        9 s, 4.5 min, 31 h, 2.9 d
    {{ b|size }}            39.6 MB
    {{ f|percent }}         43.1%
    {{ t|when }}            2026-11-23 15:47 UTC, in the reader's display zone
    {{ t|when:"s" }}        with seconds; "cell": no zone label (the column header has it)

Each is an en dash for None (`when` is "", so `default` still applies). The maths is
telemetry/display.py."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

from telemetry import display

register = template.Library()


@register.filter
def thousands(value: float | int | None, digits: int = 0) -> str:
    return display.thousands(value, int(digits))


@register.filter
def sig(value: float | int | None, digits: int = 5) -> str:
    return display.significant(value, int(digits))


@register.filter
def duration(seconds: float | int | None) -> str:
    return display.duration(seconds)


@register.filter
def size(size_bytes: float | int | None) -> str:
    return display.size(size_bytes)


@register.filter
def percent(fraction: float | None, digits: int = 1) -> str:
    return display.percent(fraction, int(digits))


@register.filter
def when(value: datetime | None, flags: str = "") -> str:
    return display.moment(
        value,
        timezone.get_current_timezone(),
        seconds="s" in flags.split(),
        label="cell" not in flags.split(),
    )


@register.filter
def elapsed(start: datetime | None, end: datetime | None) -> str:
    """{{ a|elapsed:b }}: the duration from a to b as `duration` writes it (not timesince's
    "23 minutes", which drops seconds and reads differently from every other duration)."""
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        return display.DASH
    return display.duration((end - start).total_seconds())
