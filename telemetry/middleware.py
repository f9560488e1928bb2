"""The display time zone: every page (not the API, which speaks UTC and epoch milliseconds)
renders and reads times in the zone the reader chose with the topbar's "Times" switch, kept in
the `chronicle_tz` cookie. Django's `date` filter, form fields and telemetry.query_time all
follow the activated zone, so one switch changes every page and form."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from telemetry import display

# Machine interfaces keep UTC whatever a browser's cookie says.
_UTC_PREFIXES = ("/api/", "/mlflow/")


class DisplayTimeZoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(_UTC_PREFIXES):
            return self.get_response(request)
        timezone.activate(display.zone_from_cookie(request.COOKIES.get(display.TZ_COOKIE)))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
