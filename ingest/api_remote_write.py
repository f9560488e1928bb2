"""POST /api/v1/ingest/remote-write: Prometheus remote-write 1.0 from a Prometheus (or Grafana
Alloy, vmagent, an OpenTelemetry collector) that scrapes the fleet's dcgm-exporters.

    remote_write:
      - url: https://chronicle.example/api/v1/ingest/remote-write
        authorization:
          credentials: chr_...            # an ingest token
        write_relabel_configs:
          - source_labels: [__name__]
            regex: "DCGM_.*"
            action: keep

Answers as Prometheus expects: 2xx once the readings are stored (all of a request's, in one
transaction when it holds several scrapes of a GPU, so a retry never doubles a part); 4xx
for a request it must not resend (Prometheus drops it); 5xx or 429 when it should retry.
"""

from __future__ import annotations

import re
from contextlib import nullcontext

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from ingest.edge import IngestTokenView
from ingest.remote_write import (
    CONTENT_TYPE,
    RemoteWriteError,
    body_decompress,
    write_request_parse,
)
from logbook.services.gpu_health import dcgm_push_record

_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


class RemoteWriteAcceptedDoc(serializers.Serializer):
    series = serializers.IntegerField()
    samples = serializers.IntegerField(help_text="Samples in the request.")
    stored_samples = serializers.IntegerField(help_text="DCGM readings stored.")
    skipped_samples = serializers.IntegerField(
        help_text="Samples of series Chronicle does not keep (not a DCGM health field)."
    )
    dropped = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="DCGM samples not stored, by reason (a series naming no host or GPU...).",
    )
    devices = serializers.IntegerField()
    events = serializers.IntegerField()
    interruptions = serializers.ListField(child=serializers.IntegerField())


class RemoteWriteErrorDoc(serializers.Serializer):
    detail = serializers.CharField()


class RemoteWriteIngestView(IngestTokenView):
    @extend_schema(
        operation_id="ingest_remote_write",
        request={CONTENT_TYPE: OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter(
                "host_label",
                str,
                description="Label naming the host, tried before Hostname, hostname, instance.",
            ),
            OpenApiParameter(
                "uuid_label",
                str,
                description="Label naming the GPU's UUID, tried before UUID, uuid, gpu_uuid.",
            ),
        ],
        responses={
            200: RemoteWriteAcceptedDoc,
            400: RemoteWriteErrorDoc,
            401: RemoteWriteErrorDoc,
            413: RemoteWriteErrorDoc,
            415: RemoteWriteErrorDoc,
            429: OpenApiResponse(RemoteWriteErrorDoc, description="Rate limit; see Retry-After."),
        },
    )
    def post(self, request: Request) -> Response:
        received_at = timezone.now()
        try:
            body = _body(request)
            parsed = write_request_parse(
                body,
                host_labels=_label_names(request, "host_label"),
                uuid_labels=_label_names(request, "uuid_label"),
                now=received_at,
            )
        except RemoteWriteError as exc:
            return Response({"detail": exc.detail}, status=exc.status)
        project = request.auth.project
        outcomes = []
        # Several rounds (a GPU scraped more than once in the request) are stored together:
        # a failure half-way stores nothing, and Prometheus's retry sends the whole request.
        with transaction.atomic() if len(parsed.rounds) > 1 else nullcontext():
            for gpus in parsed.rounds:
                outcomes.append(
                    dcgm_push_record(project=project, gpus=gpus, received_at=received_at)
                )
        return Response(
            {
                "series": parsed.series,
                "samples": parsed.samples,
                "stored_samples": sum(outcome.samples for outcome in outcomes),
                "skipped_samples": parsed.skipped_samples,
                "dropped": parsed.dropped,
                "devices": len({gpu.uuid for gpus in parsed.rounds for gpu in gpus}),
                "events": sum(len(outcome.events) for outcome in outcomes),
                "interruptions": [i.pk for outcome in outcomes for i in outcome.interruptions],
            },
            status=status.HTTP_200_OK,
        )


def _body(request: Request) -> bytes:
    limit = settings.INGEST_MAX_BODY_BYTES
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type != CONTENT_TYPE:
        raise RemoteWriteError(
            415, f"Content-Type must be {CONTENT_TYPE} (remote-write 1.0), got "
            f"{content_type or 'nothing'!r}."
        )  # fmt: skip
    encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding != "snappy":
        raise RemoteWriteError(
            415, f"Content-Encoding must be snappy (remote-write 1.0), got {encoding or 'none'!r}."
        )
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise RemoteWriteError(413, f"The body is {declared} bytes; the limit is {limit} bytes.")
    raw = request.body
    if len(raw) > limit:
        raise RemoteWriteError(413, f"The body is {len(raw)} bytes; the limit is {limit} bytes.")
    return body_decompress(raw, limit=limit)


def _label_names(request: Request, parameter: str) -> tuple[str, ...]:
    names = tuple(request.query_params.getlist(parameter))
    for name in names:
        if not _LABEL_NAME.fullmatch(name):
            raise RemoteWriteError(
                400, f"{parameter} must be a Prometheus label name ([A-Za-z_][A-Za-z0-9_]*), "
                f"got {name[:100]!r}."
            )  # fmt: skip
    return names
