"""DATABASE_URL read into Django's DATABASES entry, multi-host URLs included.

libpq takes several servers in one URL, `postgres://user@db1:5432,db2:5432/chronicle?
target_session_attrs=read-write`, tries them in order and keeps the first that accepts
writes: after a failover a new connection finds the promoted standby by itself
(docs/operations.md, "Failover"). dj-database-url refuses the comma in the host part, so
such a URL is split here into Django's HOST and PORT as libpq's comma-separated lists
(Django hands both to psycopg as they are). The URL's query parameters are libpq's
connection parameters (target_session_attrs, sslmode...): they go into OPTIONS, where a
single-host URL's go as well.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import dj_database_url

POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql")


class DatabaseUrlError(ValueError):
    """Not a URL Chronicle can connect with; the message says why."""


def parse(url: str, *, conn_max_age: int) -> dict[str, Any]:
    """Django's settings for the database `url` names (ENGINE, NAME, USER, PASSWORD, HOST,
    PORT, OPTIONS, CONN_MAX_AGE...)."""
    parts = urllib.parse.urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2]
    if "," not in hosts:
        try:
            return dict(dj_database_url.parse(url, conn_max_age=conn_max_age))
        except ValueError as exc:
            raise DatabaseUrlError(str(exc)) from exc
    if parts.scheme not in POSTGRES_SCHEMES:
        raise DatabaseUrlError(
            f"several hosts are PostgreSQL's (libpq's) syntax, not {parts.scheme}"
        )
    names, ports = [], []
    for host in hosts.split(","):
        name, port = _host_port(host)
        names.append(name)
        ports.append(port)
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    user, _, password = userinfo.partition(":")
    options = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": urllib.parse.unquote(parts.path.lstrip("/")),
        "USER": urllib.parse.unquote(user),
        "PASSWORD": urllib.parse.unquote(password),
        "HOST": ",".join(names),
        # libpq pairs the lists by position; an empty entry means the default port.
        "PORT": ",".join(ports),
        "OPTIONS": options,
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": False,
        "DISABLE_SERVER_SIDE_CURSORS": False,
    }


def _host_port(host: str) -> tuple[str, str]:
    """`db1:5432`, `db1`, `[::1]:5432` or a percent-encoded socket directory."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        name, _, port = host.partition(":")
    if not name:
        raise DatabaseUrlError(f"an empty host in the host list: {host!r}")
    if port and not port.isdigit():
        raise DatabaseUrlError(f"port {port!r} of {name} is not a number")
    return urllib.parse.unquote(name), port
