"""JSON behind the SDC ledger and fleet pages, and the quarantine write (session auth; DRF
enforces CSRF for session-authenticated writes)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from logbook import services as logbook_services
from logbook.models import SdcReplay
from logbook.paging import PAGE_PARAMETERS, paginate
from logbook.selectors import fleet as fleet_selectors
from logbook.selectors import sdc as sdc_selectors
from logbook.selectors.filters import FilterError
from logbook.selectors.sdc import HardwareFilters
from telemetry.models import Device, Host, Membership
from telemetry.selectors import json_number, user_has_role

_FILTER_PARAMETERS = [
    OpenApiParameter("run", OpenApiTypes.INT, description="Only this run (404 if not yours)."),
    OpenApiParameter("since", OpenApiTypes.STR, description="From this date or datetime (UTC)."),
    OpenApiParameter("until", OpenApiTypes.STR, description="Before this datetime, or through "
                     "the end of this date (UTC)."),
    OpenApiParameter("site", OpenApiTypes.STR, description="Hardware at this site."),
    OpenApiParameter("cluster", OpenApiTypes.STR, description="Hardware in <site>/<cluster>."),
]  # fmt: skip


def _filters(request: Request) -> HardwareFilters:
    try:
        return sdc_selectors.filters_parse(user=request.user, params=request.query_params)
    except FilterError as exc:
        raise ValidationError(exc.errors) from exc


def _when(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _number(value: float | None) -> float | str | None:
    return None if value is None else json_number(value)


class SdcLedgerApi(APIView):
    @extend_schema(
        operation_id="sdc_ledger",
        parameters=[
            *_FILTER_PARAMETERS,
            OpenApiParameter("verdict", OpenApiTypes.STR, enum=SdcReplay.Verdict.values),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        filters = _filters(request)
        ledger = sdc_selectors.sdc_ledger(user=request.user, filters=filters)
        rate = ledger.rate
        return Response(
            {
                "filters": filters.as_query(),
                "total": ledger.total,
                "truncated": ledger.truncated,
                "by_verdict": ledger.by_verdict,
                "weekly_rate": {
                    "formula": rate.FORMULA,
                    "records": rate.records,
                    "span_start": _when(rate.span_start),
                    "span_end": _when(rate.span_end),
                    "span_source": ledger.span_source,
                    "span_days": rate.span_days,
                    "weeks": rate.weeks,
                    "per_week": rate.per_week,
                },
                "weekly": [
                    {"week_start": _when(week), "count": int(count)}
                    for week, count in zip(
                        ledger.weekly["week_start"], ledger.weekly["count"], strict=True
                    )
                ],
                "records": [_record(record) for record in ledger.records],
            }
        )


def _record(record: SdcReplay) -> dict[str, Any]:
    difference = None
    if record.observed_value is not None and record.expected_value is not None:
        difference = abs(record.observed_value - record.expected_value)
    return {
        "id": record.pk,
        "run": {"id": record.run_id, "name": record.run.name, "project": record.run.project.slug},
        "attempt": record.attempt.number if record.attempt else None,
        "compared_attempt": record.compared_attempt.number if record.compared_attempt else None,
        "step": record.step,
        "detected_at": _when(record.detected_at),
        "detection": record.detection,
        "metric_name": record.metric_name,
        "observed_value": _number(record.observed_value),
        "expected_value": _number(record.expected_value),
        "difference": _number(difference),
        "tolerance": record.run.sdc_tolerance,
        "device": record.device.uuid if record.device else None,
        "host": record.host.name if record.host else None,
        "hosts": sorted(host.name for host in record.hosts.all()),
        "replay_hardware": record.replay_hardware,
        "replay_result": record.replay_result,
        "verdict": record.verdict,
        "action": record.action,
        "message": record.message,
    }


def _quarantine(row: Host | Device) -> dict[str, Any] | None:
    if row.quarantined_at is None:
        return None
    return {
        "quarantined_at": _when(row.quarantined_at),
        "reason": row.quarantine_reason,
        "by": row.quarantined_by.get_username() if row.quarantined_by else None,
    }


def _health(one: fleet_selectors.HardwareHealth) -> dict[str, Any]:
    return {
        "name": one.name,
        "host": one.host.name if one.host else None,
        "place": one.place or None,
        "interruptions": one.interruptions,
        "sdc": one.sdc,
        "incidents": len(one.incidents),
        "in_window": one.in_window,
        "repeat_offender": one.repeat_offender,
        "last_incident_at": _when(one.last_incident_at),
        "quarantine": _quarantine(one.row),
        "history": [
            {
                "kind": incident.kind,
                "id": incident.pk,
                "occurred_at": _when(incident.occurred_at),
                "run": {
                    "id": incident.run_id,
                    "name": incident.run_name,
                    "project": incident.project,
                },
                "label": incident.label,
                "status": incident.status,
                "step": incident.step,
                "via": incident.via,
            }
            for incident in one.incidents
        ],
    }


class FleetHostsApi(APIView):
    @extend_schema(
        operation_id="fleet_hosts",
        parameters=[
            *_FILTER_PARAMETERS,
            OpenApiParameter("k", OpenApiTypes.INT, description="Incidents that make a repeat "
                             f"offender ({fleet_selectors.REPEAT_OFFENDER_K} by default)."),
            OpenApiParameter("window_days", OpenApiTypes.INT, description="Offender window in "
                             f"days ({fleet_selectors.REPEAT_OFFENDER_WINDOW_DAYS} by default)."),
            *PAGE_PARAMETERS,
        ],
        description=(
            "Hosts and devices with an incident in the window or in quarantine, most incidents "
            "in the offender window first, a page at a time: page N holds rows N of both "
            "lists. Body: filters, rule, hosts_count and devices_count (whole lists), next and "
            "previous (URLs of the neighbouring pages, null at either end), hosts and devices "
            "(this page; each with its incident history)."
        ),
        responses={200: OpenApiTypes.OBJECT},
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        filters = _filters(request)
        try:
            rule = fleet_selectors.offender_rule_parse(params=request.query_params, filters=filters)
        except FilterError as exc:
            raise ValidationError(exc.errors) from exc
        fleet = fleet_selectors.fleet_health(user=request.user, filters=filters, rule=rule)
        # One page number for both lists: page over the longer one and cut both alike.
        longest = max(len(fleet.hosts), len(fleet.devices))
        rows, paging = paginate(range(longest), request)
        cut = slice(rows[0], rows[-1] + 1) if rows else slice(0, 0)
        return Response(
            {
                "filters": filters.as_query(),
                "rule": {
                    "formula": rule.FORMULA,
                    "k": rule.k,
                    "window_days": rule.window_days,
                    "window_start": _when(rule.window_start),
                    "window_end": _when(rule.window_end),
                },
                "hosts_count": len(fleet.hosts),
                "devices_count": len(fleet.devices),
                "next": paging["next"],
                "previous": paging["previous"],
                "hosts": [_health(one) for one in fleet.hosts[cut]],
                "devices": [_health(one) for one in fleet.devices[cut]],
            }
        )


class HostQuarantineApi(APIView):
    """Quarantine (POST, with a reason) or release (DELETE) a host. On-call engineers and
    admins only; a host that never touched one of the user's runs is a 404."""

    def _host(self, request: Request, name: str) -> Host:
        host = fleet_selectors.host_get_for_user(user=request.user, name=name)
        if not user_has_role(user=request.user, at_least=Membership.Role.ONCALL):
            raise PermissionDenied("Only on-call engineers and admins may quarantine hardware.")
        return host

    @extend_schema(
        operation_id="host_quarantine",
        request=inline_serializer("QuarantineIn", {"reason": serializers.CharField()}),
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, name: str) -> Response:
        host = self._host(request, name)
        reason = request.data.get("reason", "") if hasattr(request.data, "get") else ""
        try:
            logbook_services.host_quarantine(host=host, user=request.user, reason=str(reason))
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from exc
        return Response({"host": host.name, "quarantine": _quarantine(host)})

    @extend_schema(operation_id="host_release", responses={200: OpenApiTypes.OBJECT})
    def delete(self, request: Request, name: str) -> Response:
        host = self._host(request, name)
        logbook_services.host_release(host=host, user=request.user)
        return Response({"host": host.name, "quarantine": None})
