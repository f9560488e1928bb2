"""POST /api/v1/ingest: the one write endpoint training jobs call."""

from __future__ import annotations

import zlib

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest import services
from ingest.authentication import HasIngestToken, IngestTokenAuthentication
from ingest.schema import EVENT_TYPES, BatchError
from ingest.throttles import BACKLOG_RETRY_AFTER_S, IngestTokenRateThrottle, backlog_is_full

# Decompressed bodies may be at most this many times the compressed size: a gzip bomb is
# refused after reading a bounded amount, never inflated in full.
MAX_GZIP_RATIO = 50


class _MetricPointDoc(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    step = serializers.IntegerField(min_value=0)
    value = serializers.FloatField(help_text="A number; NaN and ±Infinity as literals or strings.")
    time = serializers.CharField(required=False, help_text="RFC 3339 or epoch seconds.")


class _EventDoc(serializers.Serializer):
    type = serializers.ChoiceField(choices=EVENT_TYPES)
    time = serializers.CharField(help_text="RFC 3339 or epoch seconds.")


class IngestBatchDoc(serializers.Serializer):
    """Documentation of the body; validation is ingest.schema (faster, clearer errors)."""

    batch_id = serializers.CharField(max_length=128, help_text="Client-chosen idempotency key.")
    run = serializers.CharField(max_length=200, help_text="Run name, created on first sight.")
    run_info = serializers.DictField(required=False)
    attempt = serializers.IntegerField(min_value=1, required=False)
    metrics = _MetricPointDoc(many=True, required=False)
    events = _EventDoc(many=True, required=False)


class IngestAcceptedDoc(serializers.Serializer):
    batch_id = serializers.CharField()
    run = serializers.CharField()
    duplicate = serializers.BooleanField()
    status = serializers.CharField()
    accepted = serializers.DictField(child=serializers.IntegerField())


class IngestErrorDoc(serializers.Serializer):
    detail = serializers.CharField()
    errors = serializers.ListField(child=serializers.DictField(), required=False)


class IngestView(APIView):
    authentication_classes = [IngestTokenAuthentication]
    permission_classes = [HasIngestToken]
    # The body is read raw and validated by ingest.schema: DRF parsers would reject the NaN
    # literals Python clients send, and parse the body twice.
    parser_classes: list[type] = []
    throttle_classes = [IngestTokenRateThrottle]

    def permission_denied(
        self, request: Request, message: str | None = None, code: str | None = None
    ) -> None:
        if not request.successful_authenticator:
            # Say what is missing rather than DRF's generic "credentials were not provided".
            raise exceptions.NotAuthenticated(HasIngestToken.message)
        super().permission_denied(request, message=message, code=code)

    @extend_schema(
        operation_id="ingest_batch",
        request=IngestBatchDoc,
        responses={
            202: IngestAcceptedDoc,
            200: OpenApiResponse(IngestAcceptedDoc, description="Duplicate batch_id, same body."),
            400: IngestErrorDoc,
            401: IngestErrorDoc,
            409: OpenApiResponse(IngestErrorDoc, description="batch_id reused, different body."),
            413: IngestErrorDoc,
            415: IngestErrorDoc,
            429: OpenApiResponse(
                IngestErrorDoc, description="Rate limit or backlog; see Retry-After."
            ),
            503: OpenApiResponse(IngestErrorDoc, description="Database unavailable; retry."),
        },
        examples=[
            OpenApiExample(
                "A batch",
                value={
                    "batch_id": "job-42-rank0-000017",
                    "run": "llama-70b-pretrain",
                    "attempt": 3,
                    "metrics": [{"name": "loss", "step": 120, "value": 2.31, "time": 1763719200}],
                    "events": [{"type": "checkpoint_saved", "time": 1763719200, "step": 120}],
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        if backlog_is_full():
            return Response(
                {
                    "detail": "The ingest backlog is above its high-water mark; retry after "
                    f"{BACKLOG_RETRY_AFTER_S} s. Nothing was stored.",
                },
                status=status.HTTP_429_TOO_MANY_REQUESTS,
                headers={"Retry-After": str(BACKLOG_RETRY_AFTER_S)},
            )
        try:
            body = _read_body(request)
            acceptance = services.batch_submit(token=request.auth, body=body)
        except BatchError as exc:
            payload: dict[str, object] = {"detail": exc.detail}
            if exc.errors:
                payload["errors"] = exc.errors
            return Response(payload, status=exc.status)
        batch = acceptance.batch
        if acceptance.conflict:
            return Response(
                {
                    "detail": f"batch_id {batch.batch_id!r} was already accepted with a different "
                    "body; a batch_id names one body forever. Use a new batch_id.",
                },
                status=status.HTTP_409_CONFLICT,
            )
        return Response(
            {
                "batch_id": batch.batch_id,
                "run": batch.run_name,
                "duplicate": acceptance.duplicate,
                "status": batch.status,
                "accepted": {"metrics": batch.metric_count, "events": batch.event_count},
            },
            status=status.HTTP_200_OK if acceptance.duplicate else status.HTTP_202_ACCEPTED,
        )


def _read_body(request: Request) -> bytes:
    limit = settings.INGEST_MAX_BODY_BYTES
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type != "application/json":
        raise BatchError(
            415,
            f"Content-Type must be application/json, got {content_type or 'nothing'!r}.",
        )
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise BatchError(413, f"The body is {declared} bytes; the limit is {limit} bytes.")
    raw = request.body
    if len(raw) > limit:
        raise BatchError(413, f"The body is {len(raw)} bytes; the limit is {limit} bytes.")
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "identity").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise BatchError(415, f"Content-Encoding {encoding!r} is not supported; use gzip.")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    bound = min(limit, max(len(raw), 1) * MAX_GZIP_RATIO)
    try:
        body = inflater.decompress(raw, bound + 1)
    except zlib.error as exc:
        raise BatchError(400, f"The gzip body is corrupt: {exc}.") from exc
    if len(body) > bound or inflater.unconsumed_tail:
        raise BatchError(
            413,
            f"The decompressed body exceeds {bound} bytes (limit {limit} bytes, "
            f"and at most {MAX_GZIP_RATIO}x the compressed size).",
        )
    return body
