"""Sending a webhook without making Chronicle an SSRF channel.

An admin names the URL, but the request leaves from inside the network, so by default only
public addresses are reachable: loopback, private, link-local (the cloud metadata service at
169.254.169.254), multicast, reserved and unspecified addresses are refused, including their
IPv6 addresses that lead to an IPv4 one (IPv4-mapped ``[::ffff:127.0.0.1]``, IPv4-compatible,
NAT64, 6to4, Teredo), judged by the IPv4 address they lead to. ``WEBHOOK_ALLOWED_NETWORKS``
(CIDRs) opens chosen internal networks for internal receivers. A URL that parsers could read
as naming different hosts (a backslash, userinfo) is refused.

The host is resolved once, at send time, every resolved address is checked, and the
connection goes to the checked address: there is no second lookup a DNS rebinding could
answer differently. The request still carries the URL's host in ``Host`` and, over https, in
SNI and the certificate check. No proxies, no redirects (http.client follows none), and the
outcome says only the status code or one generic connection failure, never the receiver's
body or the kind of socket error (which made a port scanner of it).
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

CONNECT_FAILED = "Could not connect to the endpoint."
NOT_RESOLVED = "The endpoint's host name does not resolve."
NOT_PUBLIC = (
    "The endpoint's host resolves to an address that is not public (loopback, private, "
    "link-local, multicast or reserved); an internal receiver must be allowed in "
    "WEBHOOK_ALLOWED_NETWORKS."
)


class AddressRefused(Exception):
    """The URL cannot be sent to; the message says why, for the admin."""


@dataclass(frozen=True)
class PostResult:
    status_code: int | None
    error: str

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def allowed_networks(cidrs: Iterable[str]) -> list[IPNetwork]:
    """Parse the allow-list; a bad entry raises ValueError naming it."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"WEBHOOK_ALLOWED_NETWORKS: {cidr!r} is not a network") from exc
    return networks


# IPv6 prefixes that carry an IPv4 address in their last 32 bits and reach it: IPv4-mapped,
# IPv4-compatible (deprecated, still routed by some stacks) and NAT64's well-known prefix.
_LAST_32_BITS = [
    ipaddress.IPv6Network("::ffff:0:0/96"),
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
]
# NAT64's local-use prefix (RFC 8215): a /48 puts the IPv4 address in bits 48-63 and 72-87
# (RFC 6052, section 2.2).
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to (IPv4-mapped and -compatible, NAT64
    64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32 server and client),
    or [] for a plain IPv6 address."""
    value = int(address)
    if any(address in network for network in _LAST_32_BITS):
        return [ipaddress.IPv4Address(value & 0xFFFFFFFF)]
    if address in _NAT64_LOCAL:
        packed = address.packed
        return [ipaddress.IPv4Address(packed[6:8] + packed[9:11])]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def address_allowed(address: IPAddress, allowed: list[IPNetwork]) -> bool:
    if any(address in network for network in allowed):
        return True
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if embedded:
            # [::ffff:127.0.0.1], [64:ff9b::7f00:1], [2002:7f00:1::]... reach 127.0.0.1 (by
            # the stack, a NAT64 or a relay): judge what they lead to, by the same rules.
            return all(address_allowed(ipv4, allowed) for ipv4 in embedded)
    # is_global is False for loopback, private, link-local, shared (100.64/10), unspecified
    # and most documentation ranges. It is True of some ranges no public receiver sits in:
    # multicast, IETF-reserved IPv6 (::/8 outside the forms above, so IPv4-translated
    # ::ffff:0:a.b.c.d of RFC 2765 too; 5f00::/16...),
    # deprecated site-local fec0::/10 and the newer documentation prefix 3fff::/20, so
    # those are checked on their own.
    return (
        address.is_global
        and not address.is_multicast
        and not address.is_reserved
        and not (isinstance(address, ipaddress.IPv6Address) and address.is_site_local)
        and not any(address in network for network in _NOT_PUBLIC_EXTRA)
    )


# Non-public ranges Python's ipaddress does not know yet (RFC 9637 documentation).
_NOT_PUBLIC_EXTRA = [ipaddress.IPv6Network("3fff::/20")]


def resolve_checked(host: str, port: int, allowed: list[IPNetwork]) -> list[IPAddress]:
    """Every address `host` resolves to, all of them allowed, or AddressRefused.

    One refused address refuses the host: which one a client would use is not ours to pick."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise AddressRefused(NOT_RESOLVED) from exc
    # Scope ids (fe80::1%eth0) are dropped; such addresses are link-local and refused anyway.
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise AddressRefused(NOT_RESOLVED)
    if not all(address_allowed(address, allowed) for address in addresses):
        raise AddressRefused(NOT_PUBLIC)
    return list(dict.fromkeys(addresses))


NOT_HTTP = "Webhooks are sent to http or https URLs only."
AMBIGUOUS = (
    "The URL holds a backslash, a user name or password (user@host), a space or a control "
    "character: URL parsers disagree on which host such a URL names."
)


def _target(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL, or ValueError saying why.

    A URL that parsers could read differently is refused outright: in
    http://127.0.0.1:8299\\@example.com, Python's urlsplit sees the host example.com and a
    browser or curl sees 127.0.0.1, so what we checked may not be where it goes."""
    authority = re.split(r"[/?#]", url.partition("://")[2], maxsplit=1)[0]
    if "\\" in url or "@" in authority or any(ch.isspace() or not ch.isprintable() for ch in url):
        raise ValueError(AMBIGUOUS)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(NOT_HTTP)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port, path


def url_check(url: str, allowed: list[IPNetwork]) -> None:
    """Refuse (AddressRefused) a URL whose host resolves to an address not allowed; for
    validation on save. A name that does not resolve yet is accepted (the receiver's DNS
    may come later): sending checks again anyway, since DNS may change."""
    try:
        _, host, port, _ = _target(url)
    except ValueError as exc:
        raise AddressRefused(str(exc) if str(exc) == AMBIGUOUS else NOT_HTTP) from exc
    try:
        resolve_checked(host, port, allowed)
    except AddressRefused as exc:
        if str(exc) != NOT_RESOLVED:
            raise


def _connection(
    scheme: str, host: str, port: int, address: IPAddress, timeout_s: float
) -> http.client.HTTPConnection:
    """A connection to `host` that connects to the vetted `address` and nothing else."""
    connection: http.client.HTTPConnection
    if scheme == "https":
        connection = http.client.HTTPSConnection(
            host, port, timeout=timeout_s, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout_s)

    def connect_vetted(
        _address: tuple[str, int], timeout: float | None = None, source_address: object = None
    ) -> socket.socket:
        # http.client would resolve `host` again here; go to the checked address instead.
        # HTTPSConnection still wraps with server_hostname=host (SNI and certificate).
        return socket.create_connection((str(address), port), timeout=timeout)

    connection._create_connection = connect_vetted  # type: ignore[attr-defined]
    return connection


def post_json(
    *, url: str, body: bytes, headers: dict[str, str], allowed: list[IPNetwork], timeout_s: float
) -> PostResult:
    """POST `body` to `url` through a checked address; never raises."""
    try:
        scheme, host, port, path = _target(url)
    except ValueError as exc:
        return PostResult(None, str(exc) if str(exc) == AMBIGUOUS else NOT_HTTP)
    try:
        addresses = resolve_checked(host, port, allowed)
    except AddressRefused as exc:
        return PostResult(None, str(exc))
    for address in addresses:
        connection = _connection(scheme, host, port, address, timeout_s)
        try:
            connection.request("POST", path, body=body, headers=headers)
            # The status only: the receiver's body stays unread and unshown.
            return PostResult(connection.getresponse().status, "")
        except (OSError, http.client.HTTPException, ValueError):
            continue  # the next address, or the one generic failure below
        finally:
            connection.close()
    return PostResult(None, CONNECT_FAILED)
