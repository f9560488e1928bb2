"""Site-wide error handlers: JSON under /api/ (clients parse it), HTML elsewhere.

"The database is unavailable" (503 + Retry-After) is said only when it is true: the server
could not be reached or the connection was lost (`is_database_unreachable`). Any other
database error (a statement timeout, a deadlock, a bad query) is a bug or an overload of
ours: a logged 500 with a generic body, never a 503 that tells clients to wait it out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.utils.html import escape
from django.views import defaults

RETRY_AFTER_S = 5
CLIENT_DISCONNECTED = "The request body ended before its Content-Length; nothing was stored."
UNAVAILABLE = "The database is unavailable; retry later. Nothing was stored."
# SQLSTATEs that mean the server cannot serve this connection: class 08 (connection
# exception), the server shutting down or starting up, and no connection slot left.
_UNREACHABLE_SQLSTATES = {"57P01", "57P02", "57P03", "53300"}


def is_database_unreachable(exc: BaseException) -> bool:
    """Whether `exc` is the database being out of reach, not an error in what we asked it.
    psycopg reports a failed connect or a dropped connection as an OperationalError with no
    SQLSTATE (the server never answered); a closed connection surfaces as InterfaceError."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _UNREACHABLE_SQLSTATES


class DatabaseUnavailableMiddleware:
    """Pages answer 503 + Retry-After when the database cannot be reached (the API's own
    handlers answer JSON; see config.api); any other error goes on to the 500 handler."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_unreachable(exception):
            return None
        if _is_api(request):
            response: HttpResponse = JsonResponse({"detail": UNAVAILABLE}, status=503)
        else:
            response = HttpResponse(
                "<!doctype html><title>Database unavailable</title>"
                "<h1>The database is unavailable</h1><p>Retry in a moment.</p>",
                status=503,
            )
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response


class ClientDisconnectedMiddleware:
    """A client that resets or stops sending mid-upload (the body shorter than its
    Content-Length) makes reading the body raise UnreadablePostError: that is the client's
    doing, answered 400 (to nobody, usually) and logged as a warning, not a 500 with a
    traceback that pages whoever watches the errors. Django's CSRF check already reads such
    a body as a 403; this covers the views that read it themselves (ingest, /mlflow, the
    logbook import)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, UnreadablePostError):
            return None
        logger.warning(
            "client disconnected mid-upload: %s %s (%s)", request.method, request.path, exception
        )
        detail = CLIENT_DISCONNECTED
        if _is_api(request) or request.path.startswith("/mlflow/"):
            return JsonResponse({"detail": detail}, status=400)
        return HttpResponse(detail, status=400, content_type="text/plain")


logger = logging.getLogger("chronicle.errors")


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": f"No such resource: {request.path}"}, status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A 400 that says what was wrong: the messages of BadRequest are ours (they name the
    field), never a value echoed unescaped."""
    detail = str(exception) or "Bad request."
    if _is_api(request):
        return JsonResponse({"detail": detail}, status=400)
    return HttpResponse(
        f"<!doctype html><title>Bad request</title><h1>Bad request</h1><p>{escape(detail)}</p>",
        status=400,
    )


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Internal error; it has been logged."}, status=500)
    return defaults.server_error(request)
