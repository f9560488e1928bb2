"""JSON behind the SDC ledger and fleet pages, and the quarantine write (session auth; DRF
enforces CSRF for session-authenticated writes)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from logbook.models import SdcReplay
from logbook.selectors import fleet as fleet_selectors
from logbook.selectors import offenders
from logbook.selectors import sdc as sdc_selectors
from logbook.selectors.filters import FilterError
from logbook.selectors.sdc import HardwareFilters
from logbook.serializers import FleetHostsOut, HostQuarantineOut, OffenderRuleOut, SdcLedgerOut
from logbook.services import quarantine as quarantine_services
from telemetry import run_cache
from telemetry.models import Host, Membership
from telemetry.paging import PAGE_PARAMETERS, RUN_FILTER_PARAMETER, paginate
from telemetry.query_time import optional_integer_parameter
from telemetry.selectors import user_has_role

_FILTER_PARAMETERS = [
    RUN_FILTER_PARAMETER,
    OpenApiParameter("since", OpenApiTypes.STR, description="From this date or datetime (UTC)."),
    OpenApiParameter("until", OpenApiTypes.STR, description="Before this datetime, or through "
                     "the end of this date (UTC)."),
    OpenApiParameter("site", OpenApiTypes.STR, description="Hardware at this site."),
    OpenApiParameter("cluster", OpenApiTypes.STR, description="Hardware in <site>/<cluster>."),
]  # fmt: skip


# Hosts belong to a project; a user of several projects that name the same machine says
# whose record (the first project by slug otherwise).
_PROJECT_PARAMETER = OpenApiParameter(
    "project", OpenApiTypes.STR, description="Slug of the project whose record of the host."
)


def _filters(request: Request) -> HardwareFilters:
    try:
        return sdc_selectors.filters_parse(user=request.user, params=request.query_params)
    except FilterError as exc:
        raise ValidationError(exc.errors) from exc


class SdcLedgerApi(APIView):
    @extend_schema(
        operation_id="sdc_ledger",
        parameters=[
            *_FILTER_PARAMETERS,
            OpenApiParameter("verdict", OpenApiTypes.STR, enum=SdcReplay.Verdict.values),
        ],
        responses={200: SdcLedgerOut},
    )
    def get(self, request: Request) -> Response:
        filters = _filters(request)
        ledger = sdc_selectors.sdc_ledger(user=request.user, filters=filters)
        weekly = [
            {"week_start": week, "count": count}
            for week, count in zip(ledger.weekly["week_start"], ledger.weekly["count"], strict=True)
        ]
        body = {"filters": filters, "ledger": ledger, "weekly": weekly}
        return Response(SdcLedgerOut(body).data)


class FleetHostsApi(APIView):
    @extend_schema(
        operation_id="fleet_hosts",
        parameters=[
            *_FILTER_PARAMETERS,
            optional_integer_parameter("k", "Incidents that make a repeat "
                             f"offender ({offenders.REPEAT_OFFENDER_K} by default)."),
            optional_integer_parameter("window_days", "Offender window in "
                             f"days ({offenders.REPEAT_OFFENDER_WINDOW_DAYS} by default)."),
            *PAGE_PARAMETERS,
        ],
        description=(
            "Hosts and devices with an incident in the window or in quarantine, most incidents "
            "in the offender window first, a page at a time: page N holds rows N of both "
            "lists. hosts_count and devices_count count the whole lists; next and previous "
            "are the URLs of the neighbouring pages, null at either end."
        ),
        responses={200: FleetHostsOut},
    )  # fmt: skip
    def get(self, request: Request) -> Response:
        filters = _filters(request)
        try:
            rule = offenders.offender_rule_parse(params=request.query_params, filters=filters)
        except FilterError as exc:
            raise ValidationError(exc.errors) from exc
        # Built once per state of the fleet's data, filters and offender rule, and kept while
        # the sliding window holds the same incidents (as the fleet page): at Llama scale
        # reading and serializing 2,000 hosts' rows cost ~30 ms a request. The host is in the
        # key: the paging links are absolute URLs.
        key = fleet_selectors.fleet_health_key(user=request.user, filters=filters, rule=rule)
        where = f"{request.get_host()}:{run_cache.query_key(request)}"
        found = run_cache.cached(
            f"fleet-hosts-api:v2:{key}:{where}",
            lambda: self._body(request, filters, rule),
            fresh=lambda found: offenders.still_holds(found["holds_until"], at=rule.window_end),
        )
        # The rule as of now: its window's ends move with the clock, the rows do not.
        return Response({**found["body"], "rule": OffenderRuleOut(rule).data})

    @staticmethod
    def _body(
        request: Request, filters: HardwareFilters, rule: offenders.OffenderRule
    ) -> dict[str, Any]:
        fleet = fleet_selectors.fleet_health(user=request.user, filters=filters, rule=rule)
        # One page number for both lists: page over the longer one and cut both alike.
        longest = max(len(fleet.hosts), len(fleet.devices))
        rows, paging = paginate(range(longest), request)
        cut = slice(rows[0], rows[-1] + 1) if rows else slice(0, 0)
        body = {
            "filters": filters,
            "rule": rule,
            "hosts_count": len(fleet.hosts),
            "devices_count": len(fleet.devices),
            "next": paging["next"],
            "previous": paging["previous"],
            "hosts": fleet.hosts[cut],
            "devices": fleet.devices[cut],
        }
        # A plain dict: DRF's ReturnDict keeps its serializer, which the cache need not hold.
        return {"body": dict(FleetHostsOut(body).data), "holds_until": fleet.holds_until}


class HostQuarantineApi(APIView):
    """Quarantine (POST, with a reason) or release (DELETE) a host. On-call engineers and
    admins of the host's project only; a host of no project of the user's is a 404 (another
    project's record of the same machine included)."""

    def _host(self, request: Request, name: str) -> Host:
        host = fleet_selectors.host_get_for_user(
            user=request.user, name=name, project=request.query_params.get("project")
        )
        if not user_has_role(
            user=request.user, at_least=Membership.Role.ONCALL, project_id=host.project_id
        ):
            raise PermissionDenied("Only on-call engineers and admins may quarantine hardware.")
        return host

    @extend_schema(
        operation_id="host_quarantine",
        parameters=[_PROJECT_PARAMETER],
        request=inline_serializer("QuarantineIn", {"reason": serializers.CharField()}),
        responses={200: HostQuarantineOut},
    )
    def post(self, request: Request, name: str) -> Response:
        host = self._host(request, name)
        reason = request.data.get("reason", "") if hasattr(request.data, "get") else ""
        try:
            quarantine_services.host_quarantine(host=host, user=request.user, reason=str(reason))
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from exc
        return Response(HostQuarantineOut(host).data)

    @extend_schema(
        operation_id="host_release",
        parameters=[_PROJECT_PARAMETER],
        responses={200: HostQuarantineOut},
    )
    def delete(self, request: Request, name: str) -> Response:
        host = self._host(request, name)
        quarantine_services.host_release(host=host, user=request.user)
        return Response(HostQuarantineOut(host).data)
