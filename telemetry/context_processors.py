"""What every template knows about the display setting: the zone's label for column headers
and form labels, and whether it is the reader's browser zone (for the topbar switch)."""

from __future__ import annotations

from datetime import UTC

from django.http import HttpRequest
from django.utils import timezone

from telemetry import display


def display_settings(request: HttpRequest) -> dict[str, object]:
    return display_context()


def display_context() -> dict[str, object]:
    """The display setting as every template knows it, read from the zone the request
    activated (telemetry.middleware): also for pieces rendered without the request
    (telemetry.run_cache.render_piece)."""
    zone = timezone.get_current_timezone()
    return {"tz_label": display.zone_name(zone), "tz_is_utc": zone is UTC}
