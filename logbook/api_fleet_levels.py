"""The fleet across racks, pods and sites: its topology (read, and imported from CSV by
project admins), the incident groups, and the at-risk list. Session auth; each filterable by
`project` (a slug of the user's; any other is a 404)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from logbook.models import IncidentGroup
from logbook.selectors import at_risk as risk_selectors
from logbook.selectors import incident_groups as group_selectors
from logbook.selectors.filters import FilterError
from telemetry.selectors import project_get_for_admin
from telemetry.selectors.topology import projects_filtered, topology_for_projects
from telemetry.services.topology import host_placements_set
from telemetry.topology_csv import CsvProblem, placements_parse

PROJECT_PARAMETER = OpenApiParameter(
    "project", OpenApiTypes.STR, description="Only this project's (its slug)."
)


class _HostPlaceOut(serializers.Serializer):
    project = serializers.CharField()
    host = serializers.CharField()
    rack = serializers.CharField(allow_null=True)
    pod = serializers.CharField(allow_null=True)
    cluster = serializers.CharField(allow_null=True)
    site = serializers.CharField(allow_null=True)


class _GroupOut(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField()
    level = serializers.ChoiceField(choices=IncidentGroup.Level.values)
    name = serializers.CharField(help_text="The shared component, e.g. 'rack r07'.")
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField()
    incidents = serializers.ListField(child=serializers.IntegerField())
    hosts = serializers.ListField(child=serializers.CharField())
    suggested_component = serializers.CharField()


class _SignalOut(serializers.Serializer):
    kind = serializers.CharField(help_text="ecc_rate, row_remap_pending, xid_92, ...")
    detail = serializers.CharField()
    since = serializers.DateTimeField()


class _FollowedOut(serializers.Serializer):
    incident = serializers.IntegerField()
    run = serializers.IntegerField()
    number = serializers.IntegerField()
    occurred_at = serializers.DateTimeField()
    device = serializers.CharField()
    signals = serializers.ListField(child=serializers.CharField())


class _AtRiskOut(serializers.Serializer):
    project = serializers.CharField()
    host = serializers.CharField(allow_null=True)
    device = serializers.CharField()
    score = serializers.FloatField()
    signals = _SignalOut(many=True)
    action = serializers.CharField()
    followed = _FollowedOut(many=True, help_text="Past incidents the same signals came before.")


class TopologyApi(APIView):
    @extend_schema(
        operation_id="fleet_topology",
        parameters=[PROJECT_PARAMETER],
        description="Every host of the user's projects and where it sits; null for a level "
        "nobody has said (docs/ingest.md, 'Topology').",
        responses={200: inline_serializer("TopologyOut", {"hosts": _HostPlaceOut(many=True)})},
    )
    def get(self, request: Request) -> Response:
        projects = projects_filtered(user=request.user, slug=request.query_params.get("project"))
        return Response(
            {"hosts": [one.as_dict() for one in topology_for_projects(projects=projects)]}
        )


class CsvParser(BaseParser):
    media_type = "text/csv"

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> bytes:
        return stream.read() if stream is not None else b""


class TopologyImportApi(APIView):
    """A project admin's CSV of host,rack,pod,cluster,site (a header row first): each row
    places its host; an empty cell leaves that level as it was, unless replace=true."""

    parser_classes = [CsvParser, MultiPartParser]

    @extend_schema(
        operation_id="fleet_topology_import",
        parameters=[
            OpenApiParameter("project", OpenApiTypes.STR, required=True),
            OpenApiParameter("replace", OpenApiTypes.BOOL, description="Empty cells clear."),
        ],
        request={"text/csv": OpenApiTypes.STR},
        responses={200: inline_serializer("TopologyImportOut", {
            "hosts": serializers.IntegerField(), "changed": serializers.IntegerField(),
            "clusters_without_site": serializers.ListField(child=serializers.CharField()),
        })},
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        project = project_get_for_admin(
            user=request.user, slug=request.query_params.get("project", "")
        )
        text = csv_text(request)
        try:
            placements = placements_parse(text)
        except CsvProblem as exc:
            raise ValidationError({"csv": exc.problems}) from exc
        replace = request.query_params.get("replace", "").lower() in ("1", "true", "yes")
        outcome = host_placements_set(project=project, placements=placements, replace=replace)
        return Response(
            {
                "hosts": len(placements),
                "changed": outcome.changed,
                "clusters_without_site": outcome.clusters_without_site,
            }
        )


def csv_text(request: Request) -> str:
    """The CSV of a text body or of a multipart upload's `file`."""
    upload = request.FILES.get("file") if hasattr(request, "FILES") else None
    raw: Any = upload.read() if upload is not None else request.data
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValidationError({"csv": ["is not UTF-8 text"]}) from exc
    if not isinstance(raw, str):
        raise ValidationError({"csv": ["send the CSV as a text/csv body or a `file` upload"]})
    return raw


class IncidentGroupsApi(APIView):
    @extend_schema(
        operation_id="fleet_incident_groups",
        parameters=[
            PROJECT_PARAMETER,
            OpenApiParameter("level", OpenApiTypes.STR, enum=IncidentGroup.Level.values),
            OpenApiParameter("since", OpenApiTypes.STR, description="From this date or datetime."),
        ],
        description="Incidents that hit several hosts of one rack, pod, cluster or site within "
        "minutes, grouped as one failure of the part they share; newest first.",
        responses={200: inline_serializer("IncidentGroupsOut", {"groups": _GroupOut(many=True)})},
    )
    def get(self, request: Request) -> Response:
        projects = projects_filtered(user=request.user, slug=request.query_params.get("project"))
        try:
            level, since = group_selectors.group_filters_parse(request.query_params)
        except FilterError as exc:
            raise ValidationError(exc.errors) from exc
        groups = group_selectors.incident_groups_for_projects(
            projects=projects, level=level, since=since
        )
        return Response({"groups": [one.as_dict() for one in groups]})


class AtRiskApi(APIView):
    @extend_schema(
        operation_id="fleet_at_risk",
        parameters=[PROJECT_PARAMETER],
        description="GPUs whose DCGM readings show precursors of failure over the last day "
        "(rates, not single readings), highest score first, with the incidents that followed "
        "the same signals elsewhere in the project and the action to take (docs/at-risk.md).",
        responses={200: inline_serializer("AtRiskOut", {"devices": _AtRiskOut(many=True)})},
    )
    def get(self, request: Request) -> Response:
        projects = projects_filtered(user=request.user, slug=request.query_params.get("project"))
        devices = risk_selectors.at_risk_cached(projects=projects, now=timezone.now())
        return Response({"devices": devices})
