"""The API's exception handler: every failure answers JSON with a 4xx/5xx that says why."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from config.errors import RETRY_AFTER_S, UNAVAILABLE, is_database_unreachable


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {"detail": f"The request body is too large; the limit is {limit} bytes."}, status=413
        )
    if is_database_unreachable(exc):
        # Tell clients to come back rather than lose the batch.
        return Response(
            {"detail": UNAVAILABLE}, status=503, headers={"Retry-After": str(RETRY_AFTER_S)}
        )
    # Any other database error is not an answer DRF knows: it propagates, Django logs it
    # (django.request) and config.errors.server_error answers a generic 500.
    return drf_exception_handler(exc, context)
