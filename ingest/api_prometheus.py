"""POST /api/v1/ingest/prometheus: dcgm-exporter's Prometheus text, pushed by a curl loop or
by a Pushgateway client (PUT/POST .../prometheus/metrics/job/<job>{/<label>/<value>}).

    while sleep 30; do
      curl -sf localhost:9400/metrics | curl -sf --data-binary @- \\
        -H 'Content-Type: text/plain' -H "Authorization: Bearer $CHRONICLE_TOKEN" \\
        "https://chronicle.example/api/v1/ingest/prometheus?host=$(hostname)"
    done

Readings are written at once (no queue): a push is a few hundred rows, and its health
events must be compared in order with the previous push of the same GPU.
"""

from __future__ import annotations

import zlib

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.api import MAX_GZIP_RATIO
from ingest.authentication import HasIngestToken, IngestTokenAuthentication
from ingest.prometheus import (
    ExpositionError,
    exposition_parse,
    grouping_path_parse,
    path_host,
)
from ingest.throttles import IngestTokenRateThrottle
from logbook.gpu_health import dcgm_push_record
from telemetry.dcgm import HEALTH_COUNTERS_OFF_BY_DEFAULT

TEXT_TYPES = ("text/plain", "application/openmetrics-text")


class _EventDoc(serializers.Serializer):
    kind = serializers.CharField()
    device = serializers.CharField()
    host = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    message = serializers.CharField()


class PrometheusAcceptedDoc(serializers.Serializer):
    devices = serializers.IntegerField()
    samples = serializers.IntegerField()
    skipped_samples = serializers.IntegerField(
        help_text="Samples of metrics Chronicle does not keep (not a DCGM health field)."
    )
    events = _EventDoc(many=True)
    interruptions = serializers.ListField(child=serializers.IntegerField())
    missing_health_counters = serializers.ListField(
        child=serializers.CharField(),
        help_text="Health counters dcgm-exporter disables by default that this push lacked; "
        "enable them with docs/dcgm-counters.csv.",
    )


class PrometheusErrorDoc(serializers.Serializer):
    detail = serializers.CharField()


_RESPONSES = {
    200: PrometheusAcceptedDoc,
    400: PrometheusErrorDoc,
    401: PrometheusErrorDoc,
    413: PrometheusErrorDoc,
    415: PrometheusErrorDoc,
    429: OpenApiResponse(PrometheusErrorDoc, description="Rate limit; see Retry-After."),
}


class PrometheusIngestView(APIView):
    authentication_classes = [IngestTokenAuthentication]
    permission_classes = [HasIngestToken]
    # The body is text, read raw.
    parser_classes: list[type] = []
    throttle_classes = [IngestTokenRateThrottle]

    def permission_denied(
        self, request: Request, message: str | None = None, code: str | None = None
    ) -> None:
        if not request.successful_authenticator:
            raise exceptions.NotAuthenticated(HasIngestToken.message)
        super().permission_denied(request, message=message, code=code)

    @extend_schema(
        operation_id="ingest_prometheus",
        request={"text/plain": OpenApiTypes.STR},
        parameters=[
            OpenApiParameter(
                "host",
                str,
                description="Host of samples without a Hostname/hostname label "
                "(dcgm-exporter --no-hostname).",
            )
        ],
        responses=_RESPONSES,
    )
    def post(self, request: Request) -> Response:
        return _ingest(request, grouping=None)


class PushgatewayIngestView(PrometheusIngestView):
    """The same at the path prometheus_client.push_to_gateway builds from a gateway URL of
    .../api/v1/ingest/prometheus; a `hostname` (or `host`) grouping label names the host of
    samples without one. PUT (replace a group, in Pushgateway) is a POST here: Chronicle
    keeps history."""

    @extend_schema(
        operation_id="ingest_prometheus_pushgateway",
        request={"text/plain": OpenApiTypes.STR},
        responses=_RESPONSES,
    )
    def post(self, request: Request, grouping: str = "") -> Response:  # type: ignore[override]
        return _ingest(request, grouping=grouping)

    @extend_schema(
        operation_id="ingest_prometheus_pushgateway_put",
        request={"text/plain": OpenApiTypes.STR},
        responses=_RESPONSES,
    )
    def put(self, request: Request, grouping: str = "") -> Response:
        return _ingest(request, grouping=grouping)


def _ingest(request: Request, *, grouping: str | None) -> Response:
    received_at = timezone.now()
    try:
        default_host = request.query_params.get("host", "")
        if grouping is not None:
            default_host = path_host(grouping_path_parse(grouping)) or default_host
        text = _read_text(request)
        exposition = exposition_parse(text=text, default_host=default_host)
    except ExpositionError as exc:
        return Response({"detail": exc.detail}, status=exc.status)
    outcome = dcgm_push_record(
        project=request.auth.project, gpus=exposition.gpus, received_at=received_at
    )
    sent: set[str] = set().union(*(gpu.fields_sent for gpu in exposition.gpus))
    missing = [name for name in HEALTH_COUNTERS_OFF_BY_DEFAULT if name not in sent]
    return Response(
        {
            "devices": outcome.devices,
            "samples": outcome.samples,
            "skipped_samples": sum(exposition.skipped.values()),
            "events": [
                {
                    "kind": event.kind,
                    "device": event.device.uuid,
                    "host": event.host.name if event.host else "",
                    "occurred_at": event.occurred_at,
                    "message": event.message,
                }
                for event in outcome.events
            ],
            "interruptions": [interruption.pk for interruption in outcome.interruptions],
            "missing_health_counters": missing if exposition.gpus else [],
        },
        status=status.HTTP_200_OK,
    )


def _read_text(request: Request) -> str:
    limit = settings.INGEST_MAX_BODY_BYTES
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type and content_type not in TEXT_TYPES:
        raise ExpositionError(
            415,
            f"Content-Type must be text/plain (Prometheus text format), got {content_type!r}; "
            "with curl, add -H 'Content-Type: text/plain'.",
        )
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise ExpositionError(413, f"The body is {declared} bytes; the limit is {limit} bytes.")
    raw = request.body
    if len(raw) > limit:
        raise ExpositionError(413, f"The body is {len(raw)} bytes; the limit is {limit} bytes.")
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "identity").strip().lower()
    if encoding not in ("", "identity"):
        if encoding != "gzip":
            raise ExpositionError(
                415, f"Content-Encoding {encoding!r} is not supported; use gzip or none."
            )
        raw = _gunzip(raw, limit=limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(
            400, f"The body is not UTF-8 (byte {exc.start}); the text format is UTF-8."
        ) from exc


def _gunzip(raw: bytes, *, limit: int) -> bytes:
    # Bounded like the JSON ingest: a gzip bomb is refused after a bounded read.
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    bound = min(limit, max(len(raw), 1) * MAX_GZIP_RATIO)
    try:
        body = inflater.decompress(raw, bound + 1)
    except zlib.error as exc:
        raise ExpositionError(400, f"The gzip body is corrupt: {exc}.") from exc
    if len(body) > bound or inflater.unconsumed_tail:
        raise ExpositionError(
            413,
            f"The decompressed body exceeds {bound} bytes (limit {limit} bytes, "
            f"and at most {MAX_GZIP_RATIO}x the compressed size).",
        )
    return body
