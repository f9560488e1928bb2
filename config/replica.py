"""Page reads from a PostgreSQL streaming read replica (DATABASE_REPLICA_URL).

A page or API GET tolerates the replica's replay lag (normally well under a second), so its
queries go to the replica and leave the primary to ingest. Everything else stays on the
primary: writes, every read of a request that may write (POST, PUT, PATCH, DELETE), reads
inside a transaction, Celery tasks, management commands, and the GETs of a browser that has
just written something (for READ_YOUR_WRITES_S, so the page a form redirects to shows what
was saved, not the replica's copy from a moment before).

Without DATABASE_REPLICA_URL there is no "replica" alias and nothing here changes a thing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.http import HttpRequest, HttpResponse

REPLICA = "replica"
# The cookie a write leaves behind; its value is ignored (forging it only sends that
# browser's reads to the primary, which is always correct).
READ_PRIMARY_COOKIE = "chronicle_read_primary"
READ_YOUR_WRITES_S = 5
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_reads_may_lag: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "reads_may_lag", default=False
)


class ReplicaRouter:
    """Routes reads to the replica only inside a request the middleware marked as
    lag-tolerant, and never inside a transaction on the primary."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if (
            _reads_may_lag.get()
            and REPLICA in connections.settings
            and not connections["default"].in_atomic_block
        ):
            return REPLICA
        return None

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        # Same data on both: an object read from the replica may point at one from the
        # primary.
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db != REPLICA


class ReplicaReadsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        lag_ok = request.method in SAFE_METHODS and READ_PRIMARY_COOKIE not in request.COOKIES
        token = _reads_may_lag.set(lag_ok)
        try:
            response = self.get_response(request)
        finally:
            _reads_may_lag.reset(token)
        if request.method not in SAFE_METHODS and REPLICA in connections.settings:
            response.set_cookie(
                READ_PRIMARY_COOKIE, "1", max_age=READ_YOUR_WRITES_S, httponly=True,
                samesite="Lax", secure=request.is_secure(),
            )  # fmt: skip
        return response
