"""Who sent a request, when a proxy sits in front: the proxies named in TRUSTED_PROXIES are
believed about the client (X-Forwarded-For) and the scheme (X-Forwarded-Proto); nobody else
is, since a client can write any header. Empty by default: a proxy on the same host as
gunicorn must be named (TRUSTED_PROXIES=127.0.0.1/32), or any local process could choose the
address the login throttle charges."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse

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


def _trusted(hop: IPAddress | None) -> bool:
    trusted = _networks(tuple(settings.TRUSTED_PROXIES))
    return hop is not None and any(hop in network for network in trusted)


def from_trusted_proxy(request: HttpRequest) -> bool:
    """Whether the request's peer (REMOTE_ADDR) is one of TRUSTED_PROXIES."""
    return _trusted(_address(request.META.get("REMOTE_ADDR", "")))


def client_address(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, unless that is a trusted proxy, then the nearest
    address in X-Forwarded-For that is not one (read right to left: each proxy appends the
    address it received from, and only the entries our proxies appended can be believed)."""
    nearest = request.META.get("REMOTE_ADDR", "")
    if not _trusted(_address(nearest)):
        return nearest
    for entry in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        hop = _address(entry)
        if hop is None:  # garbage (written by the client): the last hop we trust is all we know
            return nearest
        nearest = str(hop)
        if not _trusted(hop):
            return nearest
    return nearest


class ForwardedProtoMiddleware:
    """Drops the scheme header Django's SECURE_PROXY_SSL_HEADER reads (BEHIND_TLS_PROXY=1)
    unless a trusted proxy sent the request: from anyone else an `X-Forwarded-Proto: https`
    would pass plain HTTP for TLS (request.is_secure(), the https redirect, CSRF's origin
    check). First in MIDDLEWARE, before SecurityMiddleware reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
        if header and header[0] in request.META and not from_trusted_proxy(request):
            del request.META[header[0]]
        return self.get_response(request)
