"""Login with a failure throttle: repeated wrong passwords for one username or from one
address get 429 until the window passes. Failures are logged (never the password)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger("chronicle.auth")


def _keys(request: HttpRequest) -> list[str]:
    username = (request.POST.get("username") or "").strip().lower()[:150]
    address = request.META.get("REMOTE_ADDR", "")
    return [f"login-failures:user:{username}", f"login-failures:addr:{address}"]


def _throttled(keys: list[str]) -> bool:
    user_key, address_key = keys
    try:
        failures = cache.get_many(keys)
    except Exception:  # cache down: do not lock everybody out
        return False
    # An address is shared by everyone behind the same NAT: it gets a larger allowance.
    return (
        failures.get(user_key, 0) >= settings.LOGIN_MAX_FAILURES
        or failures.get(address_key, 0) >= settings.LOGIN_MAX_FAILURES_PER_ADDRESS
    )


def _count_failure(keys: list[str]) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_S
    for key in keys:
        try:
            if not cache.add(key, 1, window):
                cache.incr(key)
        except Exception:
            logger.warning("login failure not counted: cache unavailable")


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        keys = _keys(request)
        if _throttled(keys):
            logger.warning(
                "login throttled for %r from %s",
                request.POST.get("username", "")[:150],
                request.META.get("REMOTE_ADDR"),
            )
            response = self.render_to_response(
                self.get_context_data(throttled=True, form=self.get_form_class()(request))
            )
            response.status_code = 429
            response["Retry-After"] = str(settings.LOGIN_FAILURE_WINDOW_S)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        _count_failure(_keys(self.request))
        logger.warning(
            "failed login for %r from %s",
            self.request.POST.get("username", "")[:150],
            self.request.META.get("REMOTE_ADDR"),
        )
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        username_key = _keys(self.request)[0]
        try:
            cache.delete(username_key)
        except Exception:
            logger.warning("login failures not reset: cache unavailable")
        return super().form_valid(form)
