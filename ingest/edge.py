"""What every token-authenticated ingest endpoint shares: the view's authentication,
permission and rate limit, and reading the raw body within the limits (size, encoding,
gzip bombs), so JSON batches, Prometheus text and what comes next refuse alike."""

from __future__ import annotations

import zlib
from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest import fair_share
from ingest.authentication import HasIngestToken, IngestTokenAuthentication
from ingest.models import IngestToken
from ingest.throttles import IngestTokenRateThrottle

# Decompressed bodies may be at most this many times the compressed size: a gzip bomb is
# refused after reading a bounded amount, never inflated in full.
MAX_GZIP_RATIO = 50


class BodyError(Exception):
    """A body the client must fix; `status` is the HTTP status to answer."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


class ProjectShareMixin:
    """Served within the token's project's share of the web tier (ingest.fair_share): past
    it, 429 before the body is read. After authentication, permissions and throttles."""

    _share_slot: fair_share.Slot | None = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if not isinstance(request.auth, IngestToken):
            return
        slot = fair_share.slot_take(project_id=request.auth.project_id)
        if slot is False:
            raise exceptions.Throttled(
                wait=fair_share.RETRY_AFTER_S,
                detail=f"This project already has {settings.INGEST_PROJECT_MAX_IN_FLIGHT} "
                "requests being served (INGEST_PROJECT_MAX_IN_FLIGHT, its share of the "
                f"server); retry after {fair_share.RETRY_AFTER_S} s. Nothing was stored.",
            )
        self._share_slot = slot or None

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        # Given back however the request ends, a 500 re-raised by DRF included.
        try:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        finally:
            if self._share_slot is not None:
                fair_share.slot_give_back(self._share_slot)
                self._share_slot = None


class IngestTokenView(ProjectShareMixin, APIView):
    """Ingest tokens only (they open nothing else), rate-limited per token, body read raw."""

    authentication_classes = [IngestTokenAuthentication]
    permission_classes = [HasIngestToken]
    parser_classes: list[type] = []
    throttle_classes = [IngestTokenRateThrottle]

    def permission_denied(
        self, request: Request, message: str | None = None, code: str | None = None
    ) -> None:
        if not request.successful_authenticator:
            # Say what is missing rather than DRF's generic "credentials were not provided".
            raise exceptions.NotAuthenticated(HasIngestToken.message)
        super().permission_denied(request, message=message, code=code)


def body_read(request: Request, *, content_types: tuple[str, ...], hint: str) -> bytes:
    """The request body, decompressed, within settings.INGEST_MAX_BODY_BYTES. An empty
    Content-Type is accepted only when `content_types` includes ""."""
    limit = settings.INGEST_MAX_BODY_BYTES
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type not in content_types:
        raise BodyError(415, f"Content-Type must be {hint}, got {content_type or 'nothing'!r}.")
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise BodyError(413, f"The body is {declared} bytes; the limit is {limit} bytes.")
    raw = request.body
    if len(raw) > limit:
        raise BodyError(413, f"The body is {len(raw)} bytes; the limit is {limit} bytes.")
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "identity").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise BodyError(415, f"Content-Encoding {encoding!r} is not supported; use gzip.")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    bound = min(limit, max(len(raw), 1) * MAX_GZIP_RATIO)
    try:
        body = inflater.decompress(raw, bound + 1)
    except zlib.error as exc:
        raise BodyError(400, f"The gzip body is corrupt: {exc}.") from exc
    if len(body) > bound or inflater.unconsumed_tail:
        raise BodyError(
            413,
            f"The decompressed body exceeds {bound} bytes (limit {limit} bytes, "
            f"and at most {MAX_GZIP_RATIO}x the compressed size).",
        )
    # Strict: a body cut short (no trailer, so no CRC check) or with bytes after its one
    # member (garbage, or a second member a proxy may have glued on) is refused, not read
    # as whatever part decompressed.
    if not inflater.eof:
        raise BodyError(400, "The gzip body is truncated: it ends before the gzip trailer.")
    if inflater.unused_data:
        raise BodyError(
            400,
            f"The gzip body has {len(inflater.unused_data)} bytes after its gzip member; "
            "send one gzip member and nothing after it.",
        )
    return body
