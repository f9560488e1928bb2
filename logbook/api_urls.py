"""The logbook's API, mounted under /api/v1/ in the "api" namespace by config/urls.py."""

from django.urls import path

from logbook.api import RunCheckpointsApi
from logbook.api_annotations import AnnotationDetailApi, AnnotationListApi
from logbook.api_fleet import FleetHostsApi, HostQuarantineApi, SdcLedgerApi
from logbook.api_fleet_levels import AtRiskApi, IncidentGroupsApi, TopologyApi, TopologyImportApi
from logbook.api_incidents import IncidentDetailApi, IncidentListApi
from logbook.api_triage import TriageAccuracyApi

urlpatterns = [
    path("runs/<int:run_id>/checkpoints", RunCheckpointsApi.as_view(), name="run-checkpoints"),
    path("sdc", SdcLedgerApi.as_view(), name="sdc"),
    path("fleet/hosts", FleetHostsApi.as_view(), name="fleet-hosts"),
    path("fleet/topology", TopologyApi.as_view(), name="fleet-topology"),
    path("fleet/topology/import", TopologyImportApi.as_view(), name="fleet-topology-import"),
    path("fleet/incident-groups", IncidentGroupsApi.as_view(), name="fleet-incident-groups"),
    path("fleet/at-risk", AtRiskApi.as_view(), name="fleet-at-risk"),
    path(
        "fleet/hosts/<path:name>/quarantine",
        HostQuarantineApi.as_view(),
        name="host-quarantine",
    ),
    path("annotations", AnnotationListApi.as_view(), name="annotations"),
    path("annotations/<int:pk>", AnnotationDetailApi.as_view(), name="annotation"),
    path("incidents", IncidentListApi.as_view(), name="incidents"),
    path("incidents/<int:pk>", IncidentDetailApi.as_view(), name="incident"),
    path("triage/accuracy", TriageAccuracyApi.as_view(), name="triage-accuracy"),
]
