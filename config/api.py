"""The API's exception handler: every failure answers JSON with a 4xx/5xx that says why."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import OperationalError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

RETRY_AFTER_S = 5


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {"detail": f"The request body is too large; the limit is {limit} bytes."}, status=413
        )
    if isinstance(exc, OperationalError):
        # The database is unreachable: tell clients to come back rather than lose the batch.
        return Response(
            {"detail": "The database is unavailable; retry later. Nothing was stored."},
            status=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return drf_exception_handler(exc, context)
