"""POST /api/v1/ingest: the one write endpoint training jobs call."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from ingest import services
from ingest.edge import BodyError, IngestTokenView, body_read
from ingest.schema import EVENT_TYPES, BatchError
from ingest.throttles import BACKLOG_RETRY_AFTER_S, backlog_is_full


class _MetricPointDoc(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    step = serializers.IntegerField(min_value=0)
    value = serializers.FloatField(help_text="A number; NaN and ±Infinity as literals or strings.")
    time = serializers.CharField(required=False, help_text="RFC 3339 or epoch seconds.")


class _SeriesDoc(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    steps = serializers.ListField(child=serializers.IntegerField(min_value=0))
    values = serializers.ListField(
        child=serializers.FloatField(), help_text="As long as steps; NaN and ±Infinity allowed."
    )
    times = serializers.ListField(
        child=serializers.FloatField(), required=False, help_text="Epoch seconds or RFC 3339."
    )


class _EventDoc(serializers.Serializer):
    type = serializers.ChoiceField(choices=EVENT_TYPES)
    time = serializers.CharField(help_text="RFC 3339 or epoch seconds.")


class IngestBatchDoc(serializers.Serializer):
    """Documentation of the body; validation is ingest.schema (faster, clearer errors)."""

    batch_id = serializers.CharField(max_length=128, help_text="Client-chosen idempotency key.")
    run = serializers.CharField(max_length=200, help_text="Run name, created on first sight.")
    run_info = serializers.DictField(required=False)
    attempt = serializers.IntegerField(min_value=1, required=False)
    rank = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, help_text="Sending process's rank."
    )
    host = serializers.CharField(max_length=200, required=False, help_text="Sending host.")
    metrics = _MetricPointDoc(many=True, required=False, help_text="Points, one object each.")
    series = _SeriesDoc(
        many=True,
        required=False,
        help_text="Points as columns, one object per metric: cheaper to send and to parse.",
    )
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


class IngestView(IngestTokenView):
    # The body is validated by ingest.schema: DRF parsers would reject the NaN literals
    # Python clients send, and parse the body twice.

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
            body = body_read(request, content_types=("application/json",), hint="application/json")
            acceptance = services.batch_submit(token=request.auth, body=body, write_now=True)
        except (BatchError, BodyError) as exc:
            payload: dict[str, object] = {"detail": exc.detail}
            if getattr(exc, "errors", None):
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
