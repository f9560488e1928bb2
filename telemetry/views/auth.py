"""Login with a failure throttle: repeated wrong passwords for one username from one address,
or from one address for any usernames, get 429 until the window passes; a username guessed
at from many addresses gets a slower, global backoff that never locks its user out.
The address is the client's: behind a trusted proxy (TRUSTED_PROXIES) the one its
X-Forwarded-For names, so clients sharing the proxy do not share a lock. Failures are logged
(never the password)."""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger("chronicle.auth")


@dataclass(frozen=True)
class _Keys:
    pair: str  # this username from this address: the lock
    username: str  # this username from anywhere: the slower global backoff
    address: str  # this address, any username: one guesser spraying many users

    @property
    def all(self) -> list[str]:
        return [self.pair, self.username, self.address]


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(cidrs: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def client_address(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, unless that is a trusted proxy, then the nearest
    address in X-Forwarded-For that is not one (read right to left: each proxy appends the
    address it received from, and only the entries our proxies appended can be believed)."""
    trusted = _networks(tuple(settings.TRUSTED_PROXIES))
    nearest = request.META.get("REMOTE_ADDR", "")
    hop = _address(nearest)
    if hop is None or not any(hop in network for network in trusted):
        return nearest
    for entry in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        hop = _address(entry)
        if hop is None:  # garbage (written by the client): the last hop we trust is all we know
            return nearest
        nearest = str(hop)
        if not any(hop in network for network in trusted):
            return nearest
    return nearest


def _keys(request: HttpRequest) -> _Keys:
    username = (request.POST.get("username") or "").strip().lower()[:150]
    # Hashed: a username may hold characters a cache key must not.
    user_hash = hashlib.sha256(username.encode("utf-8", "replace")).hexdigest()[:32]
    address = client_address(request)
    return _Keys(
        pair=f"login-failures:pair:{user_hash}:{address}",
        username=f"login-failures:user:{user_hash}",
        address=f"login-failures:addr:{address}",
    )


def _throttled(keys: _Keys) -> bool:
    try:
        failures = cache.get_many(keys.all)
    except Exception:  # cache down: do not lock everybody out
        return False
    pair = failures.get(keys.pair, 0)
    # The lock is on (username, address), so a guesser elsewhere cannot lock the user out.
    # Past the username's global allowance (guessing from many addresses), every address
    # that already failed for it gets no second try in the window: guessing slows to one
    # attempt per address, while the user on an address that has not failed still gets in.
    return (
        pair >= settings.LOGIN_MAX_FAILURES
        or failures.get(keys.address, 0) >= settings.LOGIN_MAX_FAILURES_PER_ADDRESS
        or (failures.get(keys.username, 0) >= settings.LOGIN_MAX_FAILURES_PER_USERNAME and pair > 0)
    )


def _count_failure(keys: _Keys) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_S
    for key in keys.all:
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
                client_address(request),
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
            client_address(self.request),
        )
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        try:
            cache.delete(_keys(self.request).pair)
        except Exception:
            logger.warning("login failures not reset: cache unavailable")
        return super().form_valid(form)
