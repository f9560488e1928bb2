"""The annotation API, shaped like Grafana's (`/api/annotations`): times in epoch
milliseconds, `timeEnd` for a region, `tags`, `text`; plus `run`, `step` and `stepEnd`.
Session auth only (scripts log in; DRF enforces CSRF on writes), so ingest tokens are
refused. Other projects' runs and annotations are 404; viewers get 403 on writes."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import F, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from logbook.models import Annotation
from logbook.selectors import annotations as annotation_selectors
from logbook.selectors.annotations import MAX_BIGINT
from logbook.services import annotations as annotation_services
from logbook.services.annotations import (
    MAX_EPOCH_MS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    MIN_EPOCH_MS,
    datetime_to_epoch_ms,
    epoch_ms_to_datetime,
)
from telemetry.models import Project
from telemetry.query_time import optional_integer_parameter
from telemetry.selectors import User, run_get_for_user

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def _epoch_field(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=MIN_EPOCH_MS,
        max_value=MAX_EPOCH_MS,
        help_text=help_text,
    )


def _step_field(help_text: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_BIGINT, help_text=help_text
    )


class AnnotationPatchIn(serializers.Serializer):
    time = _epoch_field("Epoch milliseconds (an ISO 8601 string is accepted too).")
    timeEnd = _epoch_field("End of a time region, epoch milliseconds; null: a point.")
    step = _step_field("The step the mark is at.")
    stepEnd = _step_field("End of a step range; null: a point.")
    text = serializers.CharField(required=False, max_length=MAX_TEXT_CHARS, allow_blank=True)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=MAX_TAG_CHARS),
        required=False,
        max_length=MAX_TAGS,
    )


class AnnotationCreateIn(AnnotationPatchIn):
    run = serializers.IntegerField(min_value=1, help_text="The run whose charts carry the mark.")
    text = serializers.CharField(max_length=MAX_TEXT_CHARS)


class AnnotationOut(serializers.Serializer):
    id = serializers.IntegerField()
    run = serializers.IntegerField()
    project = serializers.CharField()
    time = serializers.IntegerField(allow_null=True, help_text="Epoch milliseconds.")
    timeEnd = serializers.IntegerField(
        allow_null=True, help_text="Equals time for a point (as in Grafana); null without time."
    )
    step = serializers.IntegerField(allow_null=True)
    stepEnd = serializers.IntegerField(
        allow_null=True, help_text="Equals step for a point; null without step."
    )
    text = serializers.CharField(allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField())
    userId = serializers.IntegerField(allow_null=True)
    login = serializers.CharField(allow_blank=True)
    created = serializers.IntegerField(help_text="Epoch milliseconds.")
    updated = serializers.IntegerField(help_text="Epoch milliseconds.")


class AnnotationAddedOut(serializers.Serializer):
    id = serializers.IntegerField()
    message = serializers.CharField()


class MessageOut(serializers.Serializer):
    message = serializers.CharField()


def annotation_out(annotation: Annotation) -> dict[str, Any]:
    time_ms = datetime_to_epoch_ms(annotation.time)
    time_end_ms = datetime_to_epoch_ms(annotation.time_end)
    user = annotation.created_by
    return {
        "id": annotation.pk,
        "run": annotation.run_id,
        "project": annotation.run.project.slug,
        "time": time_ms,
        "timeEnd": time_end_ms if time_end_ms is not None else time_ms,
        "step": annotation.step,
        "stepEnd": annotation.step_end if annotation.step_end is not None else annotation.step,
        "text": annotation.text,
        "tags": list(annotation.tags),
        "userId": user.pk if user else None,
        "login": user.get_username() if user else "",
        "created": datetime_to_epoch_ms(annotation.created_at),
        "updated": datetime_to_epoch_ms(annotation.updated_at),
    }


def _int_param(request: Request, name: str, *, low: int, high: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValidationError({name: "A whole number."}) from exc
    if not low <= value <= high:
        raise ValidationError({name: f"Between {low} and {high}."})
    return value


def _require_annotator(*, user: User, project: Project) -> None:
    # Before the body is read: a viewer hears "not allowed", whatever the body says.
    if not annotation_selectors.user_may_annotate(user=user, project=project):
        raise PermissionDenied("Only on-call engineers and admins may annotate this run.")


def _validation_error(exc: DjangoValidationError) -> ValidationError:
    if hasattr(exc, "error_dict"):
        return ValidationError(exc.message_dict)
    return ValidationError({"non_field_errors": exc.messages})


class AnnotationListApi(APIView):
    @extend_schema(
        operation_id="annotations_list",
        parameters=[
            optional_integer_parameter("run", "Only this run (404 if not "
                             "yours). Without it: every run of your projects."),
            optional_integer_parameter("from", "Epoch ms: marks ending at "
                             "or after this time (marks without a time are left out)."),
            optional_integer_parameter("to", "Epoch ms: marks starting at "
                             "or before this time (marks without a time are left out)."),
            OpenApiParameter("tags", OpenApiTypes.STR, many=True, description="Repeat for "
                             "several: marks having every tag named."),
            optional_integer_parameter("limit", f"At most this many "
                             f"(default {DEFAULT_LIMIT}, max {MAX_LIMIT}), newest first."),
        ],
        responses={200: AnnotationOut(many=True)},
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        marks = annotation_selectors.annotations_for_user(user=request.user)
        run_id = _int_param(request, "run", low=-MAX_BIGINT, high=MAX_BIGINT)
        if run_id is not None:
            if run_id < 1:
                raise ValidationError({"run": "A run id is positive."})
            marks = marks.filter(run=run_get_for_user(user=request.user, run_id=run_id))
        since = _int_param(request, "from", low=MIN_EPOCH_MS, high=MAX_EPOCH_MS)
        until = _int_param(request, "to", low=MIN_EPOCH_MS, high=MAX_EPOCH_MS)
        if since is not None:
            start = epoch_ms_to_datetime(since)
            marks = marks.filter(Q(time_end__gte=start) | Q(time_end__isnull=True, time__gte=start))
        if until is not None:
            marks = marks.filter(time__lte=epoch_ms_to_datetime(until))
        for tag in request.query_params.getlist("tags"):
            if "\x00" in tag:
                raise ValidationError({"tags": "A tag cannot contain NUL."})
            marks = marks.filter(tags__contains=[tag])
        limit = _int_param(request, "limit", low=1, high=MAX_LIMIT) or DEFAULT_LIMIT
        marks = marks.order_by(F("time").desc(nulls_last=True), "-step", "-pk")[:limit]
        return Response([annotation_out(mark) for mark in marks])

    @extend_schema(
        operation_id="annotation_create",
        request=AnnotationCreateIn,
        responses={200: AnnotationAddedOut},
    )
    def post(self, request: Request) -> Response:
        data = request.data
        run_id = data.get("run") if isinstance(data, dict) else None
        if isinstance(run_id, bool) or not isinstance(run_id, int):
            raise ValidationError({"run": "The run's id (a whole number) is required."})
        if not 0 < run_id <= MAX_BIGINT:
            raise ValidationError({"run": "A run id is a positive 64-bit integer."})
        run = run_get_for_user(user=request.user, run_id=run_id)
        _require_annotator(user=request.user, project=run.project)
        try:
            values = annotation_services.annotation_input_parse(data, partial=False)
            annotation = annotation_services.annotation_create(run=run, user=request.user, **values)
        except DjangoValidationError as exc:
            raise _validation_error(exc) from exc
        return Response({"id": annotation.pk, "message": "Annotation added"})


class AnnotationDetailApi(APIView):
    @extend_schema(operation_id="annotation_get", responses={200: AnnotationOut})
    def get(self, request: Request, pk: int) -> Response:
        annotation = annotation_selectors.annotation_get_for_user(
            user=request.user, annotation_id=pk
        )
        return Response(annotation_out(annotation))

    @extend_schema(
        operation_id="annotation_patch",
        request=AnnotationPatchIn,
        responses={200: AnnotationAddedOut},
    )
    def patch(self, request: Request, pk: int) -> Response:
        annotation = annotation_selectors.annotation_get_for_user(
            user=request.user, annotation_id=pk
        )
        _require_annotator(user=request.user, project=annotation.run.project)
        try:
            values = annotation_services.annotation_input_parse(request.data, partial=True)
            annotation_services.annotation_update(
                annotation=annotation, user=request.user, **values
            )
        except DjangoValidationError as exc:
            raise _validation_error(exc) from exc
        return Response({"id": annotation.pk, "message": "Annotation patched"})

    @extend_schema(operation_id="annotation_delete", responses={200: MessageOut})
    def delete(self, request: Request, pk: int) -> Response:
        annotation = annotation_selectors.annotation_get_for_user(
            user=request.user, annotation_id=pk
        )
        _require_annotator(user=request.user, project=annotation.run.project)
        annotation_services.annotation_delete(annotation=annotation, user=request.user)
        return Response({"message": "Annotation deleted"})
