"""REDIS_URL in the spellings each client reads.

TCP: `redis://host:port/db`, read as is by redis-py (Django's cache) and Celery. A Unix
socket (the demo's embedded Redis): redis-py reads `unix:///path?db=N`, Celery (kombu)
`redis+socket:///path?virtual_host=N` and ignores a `db`; either spelling is accepted here
and given to each client in its own.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

SOCKET_SCHEMES = ("unix", "redis+socket")


def redis_db(url: str) -> int:
    """The database number a URL names (0 when it names none)."""
    parts = urlsplit(url)
    if parts.scheme in SOCKET_SCHEMES:
        query = parse_qs(parts.query)
        return int((query.get("db") or query.get("virtual_host") or ["0"])[0])
    return int(parts.path.strip("/") or 0)


def redis_url_with_db(url: str, db: int) -> str:
    """`url` naming database `db` instead, in the same spelling."""
    parts = urlsplit(url)
    if parts.scheme in SOCKET_SCHEMES:
        query = {
            key: values[-1]
            for key, values in parse_qs(parts.query).items()
            if key not in ("db", "virtual_host")
        }
        key = "db" if parts.scheme == "unix" else "virtual_host"
        # Built by hand: urlunsplit drops the empty host's "//" (unix:/path).
        return f"{parts.scheme}://{parts.path}?{urlencode({**query, key: db})}"
    return urlunsplit(parts._replace(path=f"/{db}"))


def redis_cache_url(url: str) -> str:
    """redis-py's spelling (Django's RedisCache, and any redis-py client)."""
    parts = urlsplit(url)
    if parts.scheme in SOCKET_SCHEMES:
        return f"unix://{parts.path}?db={redis_db(url)}"
    return url


def celery_broker_url(url: str) -> str:
    """kombu's spelling: on a socket the database travels as `virtual_host`."""
    parts = urlsplit(url)
    if parts.scheme in SOCKET_SCHEMES:
        return f"redis+socket://{parts.path}?virtual_host={redis_db(url)}"
    return url
