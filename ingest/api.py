"""POST /api/v1/ingest: the one write endpoint training jobs call."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from ingest import services
from ingest.contract import (
    BATCH_FIELDS,
    BATCH_REQUIRED,
    EVENTS,
    METRIC_FIELDS,
    METRIC_REQUIRED,
    RUN_INFO,
    TIME,
    Event,
    Field,
)
from ingest.edge import BodyError, IngestTokenView, body_read
from ingest.schema import BatchError, RateLimited
from ingest.throttles import BACKLOG_RETRY_AFTER_S, backlog_is_full

# Host names and device UUIDs are one URL path segment each (ingest.checks.check_url_name).
URL_NAME_PATTERN = r"^[^\s/]+$"

# Documentation only, built from ingest.contract: validation is ingest.schema (faster, and
# with clearer errors), from the same contract.


@extend_schema_field({"oneOf": [{"type": "string", "format": "date-time"}, {"type": "number"}]})
class _TimeDoc(serializers.Field):
    """RFC 3339 or epoch seconds."""


def _doc_field(spec: Field, *, required: bool) -> serializers.Field:
    # The validator reads an optional field sent as null as not sent (ingest.schema), so
    # the schema says such fields are nullable.
    options: dict[str, Any] = {"required": required, "allow_null": not required}
    if spec.help:
        options["help_text"] = spec.help
    match spec.kind:
        case "integer":
            return serializers.IntegerField(
                min_value=spec.minimum, max_value=spec.maximum, **options
            )
        case "number":
            return serializers.FloatField(**options)
        case "non_negative":
            return serializers.FloatField(min_value=0, **options)
        case "boolean":
            return serializers.BooleanField(**options)
        case "text":
            return serializers.CharField(max_length=spec.max_length, allow_blank=True, **options)
        case "name" | "key":
            return serializers.CharField(max_length=spec.max_length, **options)
        case "url_name":
            return serializers.RegexField(URL_NAME_PATTERN, max_length=spec.max_length, **options)
        case "names" | "url_names":
            child: serializers.Field = serializers.CharField(max_length=spec.max_length)
            if spec.kind == "url_names":
                child = serializers.RegexField(URL_NAME_PATTERN, max_length=spec.max_length)
            return serializers.ListField(child=child, max_length=spec.max_items, **options)
        case "time":
            return _TimeDoc(**{"help_text": TIME.help, **options})
        case "times":
            return serializers.ListField(
                child=_TimeDoc(), min_length=1, max_length=spec.max_items, **options
            )
        case "choice":
            return serializers.ChoiceField(choices=spec.choices, **options)
        case "object":
            return serializers.DictField(**options)
        case "integers":
            child = serializers.IntegerField(min_value=spec.minimum, max_value=spec.maximum)
            return serializers.ListField(
                child=child, min_length=1, max_length=spec.max_items, **options
            )
        case "timings":
            return serializers.DictField(
                child=serializers.ListField(child=serializers.FloatField(min_value=0)), **options
            )
        case "placement":
            level = serializers.CharField(max_length=spec.max_length, allow_null=True)
            return serializers.DictField(child=serializers.DictField(child=level), **options)
    raise AssertionError(f"no documentation for {spec.kind}")


def _doc_serializer(
    name: str, fields: dict[str, Field], required: tuple[str, ...] = (), **extra: Any
) -> type[serializers.Serializer]:
    declared = {key: _doc_field(spec, required=key in required) for key, spec in fields.items()}
    return type(name, (serializers.Serializer,), {**declared, **extra})


def _event_doc(event_type: str, event: Event) -> type[serializers.Serializer]:
    head = {
        "type": serializers.ChoiceField(choices=[event_type], help_text=event.help),
        "time": _doc_field(TIME, required=not event.time_from),
    }
    camel = "".join(part.title() for part in event_type.split("_"))
    return _doc_serializer(f"IngestEvent{camel}", event.fields, event.required, **head)


_SeriesDoc = _doc_serializer(
    "IngestSeries",
    {"name": METRIC_FIELDS["name"]},
    ("name",),
    steps=serializers.ListField(child=_doc_field(METRIC_FIELDS["step"], required=True)),
    values=serializers.ListField(
        child=serializers.FloatField(), help_text="As long as steps; NaN and ±Infinity allowed."
    ),
    times=serializers.ListField(
        child=_TimeDoc(), required=False, allow_null=True, help_text="Epoch seconds or RFC 3339."
    ),
)

IngestBatchDoc = _doc_serializer(
    "IngestBatch",
    BATCH_FIELDS,
    BATCH_REQUIRED,
    # run_info sent as null is read as not sent (ingest.schema); the lists must be lists.
    run_info=_doc_serializer("IngestRunInfo", RUN_INFO)(required=False, allow_null=True),
    metrics=_doc_serializer("IngestMetricPoint", METRIC_FIELDS, METRIC_REQUIRED)(
        many=True, required=False, help_text="Points, one object each."
    ),
    series=_SeriesDoc(
        many=True,
        required=False,
        help_text="Points as columns, one object per metric: cheaper to send and to parse.",
    ),
    events=PolymorphicProxySerializer(
        component_name="IngestEvent",
        serializers={key: _event_doc(key, event) for key, event in EVENTS.items()},
        resource_type_field_name="type",
        many=True,
        required=False,
    ),
)


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
    """The body is validated by ingest.schema: DRF parsers would reject the NaN literals
    Python clients send, and parse the body twice.

    Not DRF's per-token throttle (INGEST_RATE_LIMIT, kept by the Prometheus and MLflow
    pushes): a batch takes its request and its points from the token's and the project's
    buckets (ingest.rate_limit), which already hold every token to a request rate, and the
    throttle's history list in Redis cost ~0.5 ms of CPU a batch on top (half of the
    endpoint's whole cost around the batch itself)."""

    throttle_classes: list[type] = []

    @extend_schema(
        operation_id="ingest_batch",
        request={"application/json": IngestBatchDoc},
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
            acceptance = services.batch_submit(
                token=request.auth, body=body, write_now=True, rate_limited=True
            )
        except (BatchError, BodyError) as exc:
            payload: dict[str, object] = {"detail": exc.detail}
            if getattr(exc, "errors", None):
                payload["errors"] = exc.errors
            headers = (
                {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, RateLimited) else None
            )
            return Response(payload, status=exc.status, headers=headers)
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
