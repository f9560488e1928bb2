"""The diagnosis read API (session auth, like the dashboard's): a run's slowdowns with their
ranked causes, and on-call's decision on one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.models import Slowdown
from diagnosis.selectors import slowdowns as slowdown_selectors
from diagnosis.services import slowdowns as slowdown_services
from telemetry import selectors
from telemetry.models import Membership


class SlowdownCauseOut(serializers.Serializer):
    kind = serializers.CharField()
    detail = serializers.CharField()
    hosts = serializers.ListField(child=serializers.CharField())
    ranks = serializers.ListField(child=serializers.IntegerField())
    devices = serializers.ListField(child=serializers.CharField())
    config_keys = serializers.ListField(child=serializers.CharField())
    confidence = serializers.FloatField()
    evidence = serializers.ListField(child=serializers.CharField())


class SlowdownOut(serializers.Serializer):
    id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    start_step = serializers.IntegerField()
    end_step = serializers.IntegerField()
    start_time = serializers.DateTimeField(allow_null=True)
    end_time = serializers.DateTimeField(allow_null=True)
    metric = serializers.CharField()
    baseline = serializers.FloatField()
    value = serializers.FloatField()
    drop_pct = serializers.FloatField()
    gpu_hours_lost = serializers.FloatField(allow_null=True)
    causes = SlowdownCauseOut(many=True, help_text="Most likely first.")


class SlowdownsOut(serializers.Serializer):
    slowdowns = SlowdownOut(many=True)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def slowdown_payload(slowdown: Slowdown) -> dict[str, Any]:
    return {
        "id": slowdown.pk,
        "attempt": slowdown.attempt.number,
        "start_step": slowdown.start_step,
        "end_step": slowdown.end_step,
        "start_time": _time(slowdown.start_time),
        "end_time": _time(slowdown.end_time),
        "metric": slowdown.metric,
        "baseline": slowdown.baseline,
        "value": slowdown.value,
        "drop_pct": slowdown.drop_pct,
        "gpu_hours_lost": slowdown.gpu_hours_lost,
        "causes": [
            {
                "kind": cause.kind,
                "detail": cause.detail,
                "hosts": list(cause.hosts),
                "ranks": list(cause.ranks),
                "devices": list(cause.devices),
                "config_keys": list(cause.config_keys),
                "confidence": cause.confidence,
                "evidence": list(cause.evidence),
            }
            for cause in slowdown.causes.all()
        ],
    }


class RunSlowdownsApi(APIView):
    @extend_schema(operation_id="run_slowdowns", responses={200: SlowdownsOut})
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get_for_user(user=request.user, run_id=run_id)
        slowdowns = slowdown_selectors.run_slowdowns(run=run)
        return Response({"slowdowns": [slowdown_payload(one) for one in slowdowns]})


class SlowdownDecisionIn(serializers.Serializer):
    status = serializers.ChoiceField(choices=Slowdown.Status.choices)
    cause_kind = serializers.ChoiceField(choices=Slowdown.Kind.choices, required=False)
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class SlowdownDecideApi(APIView):
    """On-call confirms a slowdown (optionally correcting its cause) or dismisses it."""

    @extend_schema(
        operation_id="slowdown_decide", request=SlowdownDecisionIn, responses={200: SlowdownOut}
    )
    def post(self, request: Request, slowdown_id: int) -> Response:
        slowdown = slowdown_selectors.slowdown_get_for_user(
            user=request.user, slowdown_id=slowdown_id
        )
        if slowdown is None:
            raise Http404("No such slowdown.")
        if not selectors.user_has_role(
            user=request.user, at_least=Membership.Role.ONCALL, project_id=slowdown.run.project_id
        ):
            raise PermissionDenied("Only on-call or admins of the project decide slowdowns.")
        decision = SlowdownDecisionIn(data=request.data)
        if not decision.is_valid():
            raise ValidationError(decision.errors)
        data = decision.validated_data
        slowdown_services.slowdown_decide(
            slowdown=slowdown,
            user=request.user,
            status=data["status"],
            cause_kind=data.get("cause_kind", ""),
            note=data.get("note", ""),
        )
        fresh = slowdown_selectors.slowdown_get_for_user(user=request.user, slowdown_id=slowdown_id)
        assert fresh is not None
        return Response(slowdown_payload(fresh))
