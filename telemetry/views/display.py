"""The topbar's "Times" switch: UTC, or the zone the browser reports (sent by
static/js/display.js in `browser_zone`). A cookie, so it holds before login too."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from telemetry import display

COOKIE_AGE_S = 365 * 24 * 3600


@require_POST
def time_zone_set(request: HttpRequest) -> HttpResponse:
    choice = request.POST.get("zone", "utc")
    zone = display.zone_from_cookie(request.POST.get("browser_zone", ""))
    value = display.zone_name(zone) if choice == "browser" else "UTC"
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = "/"
    response = HttpResponseRedirect(target)
    # Not HttpOnly: display.js refreshes the zone when the browser's changes (travel).
    response.set_cookie(display.TZ_COOKIE, value, max_age=COOKIE_AGE_S, samesite="Lax")
    return response
