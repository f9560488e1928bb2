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

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.edge import BodyError, IngestTokenView, body_read
from ingest.prometheus import (
    ExpositionError,
    exposition_parse,
    grouping_path_parse,
    path_host,
    placement_of,
)
from logbook.services.gpu_health import dcgm_push_record
from telemetry.dcgm import HEALTH_COUNTERS_OFF_BY_DEFAULT
from telemetry.services.device_health import PlacementRefused
from telemetry.services.topology import host_placements_set

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
    422: OpenApiResponse(
        PrometheusErrorDoc,
        description="More GPUs to place (new or moved) than one push may place.",
    ),
    429: OpenApiResponse(PrometheusErrorDoc, description="Rate limit; see Retry-After."),
}


class PrometheusIngestView(IngestTokenView):
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


class PushgatewayIngestView(IngestTokenView):
    """The same at the path prometheus_client.push_to_gateway builds from a gateway URL of
    .../api/v1/ingest/prometheus; a `hostname` (or `host`) grouping label names the host of
    samples without one. PUT (replace a group, in Pushgateway) is a POST here: Chronicle
    keeps history."""

    @extend_schema(
        operation_id="ingest_prometheus_pushgateway",
        request={"text/plain": OpenApiTypes.STR},
        responses=_RESPONSES,
    )
    def post(self, request: Request, grouping: str = "") -> Response:
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
        path_placement: dict[str, str] = {}
        if grouping is not None:
            grouping_labels = grouping_path_parse(grouping)
            default_host = path_host(grouping_labels) or default_host
            path_placement = placement_of(grouping_labels)
        text = _read_text(request)
        exposition = exposition_parse(text=text, default_host=default_host)
    except ExpositionError as exc:
        return Response({"detail": exc.detail}, status=exc.status)
    try:
        outcome = dcgm_push_record(
            project=request.auth.project, gpus=exposition.gpus, received_at=received_at
        )
    except PlacementRefused as exc:
        return Response(
            {
                "detail": f"This push names {exc.unplaced} GPUs Chronicle has not placed yet "
                f"(new, or moved to another host or index); one push places at most "
                f"{exc.limit} (DCGM_MAX_PLACEMENTS_PER_PUSH). Nothing was stored. Split the "
                "push (one per host is the exporter's way); once placed, a GPU costs a push "
                "no more than a reading.",
            },
            status=status.HTTP_422_UNPROCESSABLE_ENTITY,
        )
    placements = {
        gpu.host: path_placement | gpu.placement
        for gpu in exposition.gpus
        if gpu.placement or path_placement
    }
    if placements:
        # One read when nothing moved (every push of a labelled fleet): see the service.
        host_placements_set(project=request.auth.project, placements=placements)
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
    try:
        raw = body_read(
            request,
            content_types=("", *TEXT_TYPES),
            hint="text/plain (Prometheus text format); with curl, add -H 'Content-Type: "
            "text/plain'",
        )
    except BodyError as exc:
        raise ExpositionError(exc.status, exc.detail) from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(
            400, f"The body is not UTF-8 (byte {exc.start}); the text format is UTF-8."
        ) from exc
