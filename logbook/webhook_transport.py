"""Sending a webhook without making Chronicle an SSRF channel.

An admin names the URL, but the request leaves from inside the network, so by default only
public addresses are reachable: loopback, private, link-local (the cloud metadata service at
169.254.169.254), multicast, reserved and unspecified addresses are refused, including their
IPv4-mapped IPv6 spellings (``[::ffff:127.0.0.1]``). ``WEBHOOK_ALLOWED_NETWORKS`` (CIDRs)
opens chosen internal networks for internal receivers.

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


def address_allowed(address: IPAddress, allowed: list[IPNetwork]) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        # ::ffff:127.0.0.1 connects to 127.0.0.1: judge what it really is.
        address = address.ipv4_mapped
    if any(address in network for network in allowed):
        return True
    # is_global is False for loopback, private, link-local, shared (100.64/10), reserved,
    # unspecified and documentation ranges; multicast is checked on its own because some
    # multicast ranges count as global.
    return address.is_global and not address.is_multicast


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


def _target(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL, or ValueError."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
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
        raise AddressRefused("Webhooks are sent to http or https URLs only.") from exc
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
    except ValueError:
        return PostResult(None, "Webhooks are sent to http or https URLs only.")
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
