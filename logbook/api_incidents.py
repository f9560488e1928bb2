"""JSON for the triage queue and one incident, and the incident edit for scripts (session
auth; DRF enforces CSRF for session-authenticated writes). A PATCH names the version it
started from and is answered 409, with the current state, if someone changed it since."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from logbook.models import Interruption
from logbook.selectors import incidents as selectors
from logbook.selectors.filters import FilterError
from logbook.serializers import (
    IncidentConflictOut,
    IncidentDetailOut,
    IncidentListOut,
    IncidentUpdatedOut,
)
from logbook.services import triage
from telemetry.models import Membership
from telemetry.paging import RUN_FILTER_PARAMETER
from telemetry.selectors import user_has_role

_FILTER_PARAMETERS = [
    RUN_FILTER_PARAMETER,
    OpenApiParameter("status", OpenApiTypes.STR, description="Comma-separated statuses, or "
                     "'all' (default: open,triaged)."),
    OpenApiParameter("category", OpenApiTypes.STR, description="Root-cause slug."),
    OpenApiParameter("host", OpenApiTypes.STR, description="Incidents involving this host."),
]  # fmt: skip


class IncidentListApi(APIView):
    @extend_schema(
        operation_id="incidents_list",
        parameters=_FILTER_PARAMETERS,
        responses={200: IncidentListOut},
    )
    def get(self, request: Request) -> Response:
        try:
            filters = selectors.filters_parse(user=request.user, params=request.query_params)
        except FilterError as exc:
            raise ValidationError(exc.errors) from exc
        queue = selectors.incident_queue(user=request.user, filters=filters)
        return Response(IncidentListOut({"filters": filters, "queue": queue}).data)


class IncidentDetailApi(APIView):
    class PatchInput(serializers.Serializer):
        version = serializers.IntegerField(min_value=1)
        root_cause = serializers.CharField(required=False, max_length=64)
        component = serializers.CharField(
            required=False, allow_blank=True, max_length=triage.COMPONENT_MAX_LENGTH
        )
        hosts = serializers.ListField(
            child=serializers.CharField(max_length=255), required=False, max_length=10_000
        )
        devices = serializers.ListField(
            child=serializers.CharField(max_length=128), required=False, max_length=100_000
        )
        severity = serializers.ChoiceField(choices=Interruption.Severity.choices, required=False)
        manual_intervention = serializers.BooleanField(required=False)
        lost_steps = serializers.IntegerField(
            min_value=0, max_value=triage.LOST_STEPS_MAX, required=False, allow_null=True
        )
        notes = serializers.CharField(
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            max_length=triage.NOTES_MAX_LENGTH,
        )
        status = serializers.ChoiceField(choices=Interruption.Status.choices, required=False)

    @extend_schema(operation_id="incident_get", responses={200: IncidentDetailOut})
    def get(self, request: Request, pk: int) -> Response:
        incident = selectors.incident_get_for_user(user=request.user, pk=pk)
        history = selectors.incident_history(incident=incident)
        can_edit = user_has_role(
            user=request.user, at_least=Membership.Role.ONCALL, project_id=incident.run.project_id
        )
        body = {"incident": incident, "can_edit": can_edit, "history": history}
        return Response(IncidentDetailOut(body).data)

    @extend_schema(
        operation_id="incident_update",
        request=PatchInput,
        responses={200: IncidentUpdatedOut, 409: IncidentConflictOut},
    )
    def patch(self, request: Request, pk: int) -> Response:
        incident = selectors.incident_get_for_user(user=request.user, pk=pk)
        if not user_has_role(
            user=request.user, at_least=Membership.Role.ONCALL, project_id=incident.run.project_id
        ):
            raise PermissionDenied("Only on-call engineers and admins may triage.")
        if not isinstance(request.data, dict):
            raise ValidationError({"detail": "Send a JSON object."})
        serializer = self.PatchInput(data=request.data)
        unknown = sorted(set(request.data) - set(serializer.fields))
        if unknown:
            # Refused rather than ignored: a script must not believe it changed `planned`.
            raise ValidationError({name: "This field cannot be edited." for name in unknown})
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        version, status = data.pop("version"), data.pop("status", None)
        try:
            # Fields and status in one go: both or neither (each still its own audit event).
            with transaction.atomic():
                if data:
                    incident = triage.incident_update(
                        interruption=incident, user=request.user, version=version, changes=data
                    )
                    version = incident.version
                if status is not None and status != incident.status:
                    incident = triage.incident_transition(
                        interruption=incident, user=request.user, version=version, status=status
                    )
        except triage.StaleEdit as stale:
            current = selectors.incident_get_for_user(user=request.user, pk=pk)
            conflict = {
                "detail": f"{stale} Nothing was saved; re-read the incident and apply your "
                f"change to version {current.version}.",
                "current": current,
                "their_changes": stale.their_changes,
            }
            return Response(IncidentConflictOut(conflict).data, status=409)
        except DjangoValidationError as exc:
            raise ValidationError(
                exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
            ) from exc
        incident = selectors.incident_get_for_user(user=request.user, pk=pk)
        return Response(IncidentUpdatedOut({"incident": incident}).data)
