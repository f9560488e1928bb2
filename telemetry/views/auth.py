"""Login with a failure throttle in three parts, none of which can lock a user with the right
password out of every address:

- the lock, per (username, address): LOGIN_MAX_FAILURES wrong passwords for one username from
  one address, and that pair gets 429 until the window passes (django-axes' "username and
  address" lockout);
- a progressive slowdown per address, any username: past LOGIN_ADDRESS_SLOWDOWN_AFTER
  failures, the address's next attempt waits 1, 2, 4... seconds after its last failure, at
  most LOGIN_ADDRESS_DELAY_MAX_S; never a lock, so the users behind one office NAT a guesser
  shares get in at worst that much later (a lock per address locked them all out);
- a slower, global backoff per username guessed at from many addresses, which stops only the
  addresses that already failed for it.

A browser that signed in before holds a device cookie for its username (OWASP's "device
cookies"): its attempts for that username count on a lock of their own, and neither the
address's slowdown nor the username's backoff applies to them, so a guesser cannot slow down
a user on a browser they used before. The address is the client's: behind a trusted proxy
(TRUSTED_PROXIES, config.proxies) the one its X-Forwarded-For names. Failures are logged
(never the password)."""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core import signing
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from config.proxies import client_address

logger = logging.getLogger("chronicle.auth")

DEVICE_COOKIE = "chronicle_login_device"
_DEVICE_SALT = "chronicle.login-device"
_DEVICE_MAX_AGE_S = 30 * 86_400


@dataclass(frozen=True)
class _Keys:
    pair: str  # this username from this address (or this device): the lock
    username: str  # this username from anywhere: the slower global backoff
    address: str  # this address, any username: failures counted for the slowdown
    address_last: str  # when this address last failed (epoch seconds)
    device: bool  # a device cookie for this username came with the request

    @property
    def counted(self) -> list[str]:
        return [self.pair] if self.device else [self.pair, self.username, self.address]


def _now_s() -> float:
    return time.time()


def _user_hash(request: HttpRequest) -> str:
    username = (request.POST.get("username") or "").strip().lower()[:150]
    # Hashed: a username may hold characters a cache key must not.
    return hashlib.sha256(username.encode("utf-8", "replace")).hexdigest()[:32]


def _device(request: HttpRequest, user_hash: str) -> str | None:
    """The id of the request's device cookie if it was given for this username."""
    try:
        value = signing.loads(
            request.COOKIES.get(DEVICE_COOKIE, ""), salt=_DEVICE_SALT, max_age=_DEVICE_MAX_AGE_S
        )
    except signing.BadSignature:
        return None
    if not isinstance(value, dict) or value.get("u") != user_hash:
        return None
    device = value.get("d")
    return device if isinstance(device, str) and device.isalnum() else None


def _keys(request: HttpRequest) -> _Keys:
    user_hash = _user_hash(request)
    address = client_address(request)
    device = _device(request, user_hash)
    return _Keys(
        pair=f"login-failures:device:{device}"
        if device
        else f"login-failures:pair:{user_hash}:{address}",
        username=f"login-failures:user:{user_hash}",
        address=f"login-failures:addr:{address}",
        address_last=f"login-failures:addr-last:{address}",
        device=device is not None,
    )


def address_delay_s(failures: int) -> float:
    """How long after its last failure an address with `failures` in the window waits for
    its next attempt: none up to LOGIN_ADDRESS_SLOWDOWN_AFTER, then doubling from 1 s, at most
    LOGIN_ADDRESS_DELAY_MAX_S."""
    excess = failures - settings.LOGIN_ADDRESS_SLOWDOWN_AFTER
    if excess < 0:
        return 0.0
    return float(min(settings.LOGIN_ADDRESS_DELAY_MAX_S, 2 ** min(excess, 30)))


def _wait_s(keys: _Keys) -> int:
    """Seconds before this attempt may be checked; 0 now."""
    try:
        failures = cache.get_many([keys.pair, keys.username, keys.address, keys.address_last])
    except Exception:  # cache down: do not lock everybody out
        return 0
    pair = failures.get(keys.pair, 0)
    if pair >= settings.LOGIN_MAX_FAILURES:
        return settings.LOGIN_FAILURE_WINDOW_S
    if keys.device:
        return 0
    # Past the username's global allowance (guessing from many addresses), every address
    # that already failed for it gets no second try in the window: guessing slows to one
    # attempt per address, while the user on an address that has not failed still gets in.
    if failures.get(keys.username, 0) >= settings.LOGIN_MAX_FAILURES_PER_USERNAME and pair > 0:
        return settings.LOGIN_FAILURE_WINDOW_S
    delay_s = address_delay_s(failures.get(keys.address, 0))
    remaining_s = failures.get(keys.address_last, 0.0) + delay_s - _now_s()
    return math.ceil(remaining_s) if delay_s and remaining_s > 0 else 0


def _count_failure(keys: _Keys) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_S
    try:
        for key in keys.counted:
            if not cache.add(key, 1, window):
                cache.incr(key)
        if not keys.device:
            cache.set(keys.address_last, _now_s(), window)
    except Exception:
        logger.warning("login failure not counted: cache unavailable")


class ThrottledLoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        if settings.SSO_ENABLED:
            # The sign-on link above the local form (which stays: break-glass accounts).
            context["sso_name"] = settings.OIDC_PROVIDER_NAME
            context["sso_failed"] = self.request.GET.get("sso") == "failed"
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait_s = _wait_s(_keys(request))
        if wait_s:
            logger.warning(
                "login throttled for %r from %s for %s s",
                request.POST.get("username", "")[:150],
                client_address(request),
                wait_s,
            )
            response = self.render_to_response(
                self.get_context_data(
                    throttled=True, wait_s=wait_s, form=self.get_form_class()(request)
                )
            )
            response.status_code = 429
            response["Retry-After"] = str(wait_s)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        _count_failure(_keys(self.request))
        logger.warning(
            "failed login for %r from %s",
            self.request.POST.get("username", "")[:150],
            client_address(self.request),
        )
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        keys = _keys(self.request)
        try:
            cache.delete(keys.pair)
        except Exception:
            logger.warning("login failures not reset: cache unavailable")
        response = super().form_valid(form)
        if not keys.device:
            response.set_cookie(
                DEVICE_COOKIE,
                signing.dumps(
                    {"u": _user_hash(self.request), "d": secrets.token_hex(16)}, salt=_DEVICE_SALT
                ),
                max_age=_DEVICE_MAX_AGE_S,
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response
