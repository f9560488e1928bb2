from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from ingest.api import IngestView

# --- prometheus ingest (issue 7) ---
from ingest.api_prometheus import PrometheusIngestView, PushgatewayIngestView

# --- end prometheus ingest (issue 7) ---
from logbook.api import FailureBreakdownApi, RunCheckpointsApi  # (helper 2)

# --- annotations api (issue 4) ---
from logbook.api_annotations import AnnotationDetailApi, AnnotationListApi

# --- end annotations api (issue 4) ---
from logbook.api_fleet import FleetHostsApi, HostQuarantineApi, SdcLedgerApi

# --- incidents api (issue 4) ---
from logbook.api_incidents import IncidentDetailApi, IncidentListApi

# --- end incidents api (issue 4) ---
from telemetry.api import RunListApi, SeriesApi

# --- efficiency (helper) ---
from telemetry.api_efficiency import RunGoodputApi, RunMfuApi

# --- end efficiency (helper) ---
from telemetry.views.auth import ThrottledLoginView

api_v1 = [
    path("ingest", IngestView.as_view(), name="ingest"),
    # --- prometheus ingest (issue 7) ---
    path("ingest/prometheus", PrometheusIngestView.as_view(), name="ingest-prometheus"),
    path(
        "ingest/prometheus/metrics/<path:grouping>",
        PushgatewayIngestView.as_view(),
        name="ingest-prometheus-push",
    ),
    # --- end prometheus ingest (issue 7) ---
    path("runs", RunListApi.as_view(), name="runs"),
    path("runs/<int:run_id>/series", SeriesApi.as_view(), name="run-series"),
    # --- efficiency (helper) ---
    path("runs/<int:run_id>/mfu", RunMfuApi.as_view(), name="run-mfu"),
    path("runs/<int:run_id>/goodput", RunGoodputApi.as_view(), name="run-goodput"),
    # --- end efficiency (helper) ---
    # --- logbook api (helper 2) ---
    path("failures", FailureBreakdownApi.as_view(), name="failures"),
    path("runs/<int:run_id>/checkpoints", RunCheckpointsApi.as_view(), name="run-checkpoints"),
    # --- end logbook api (helper 2) ---
    # --- sdc and fleet api (helper 3) ---
    path("sdc", SdcLedgerApi.as_view(), name="sdc"),
    path("fleet/hosts", FleetHostsApi.as_view(), name="fleet-hosts"),
    path(
        "fleet/hosts/<str:name>/quarantine",
        HostQuarantineApi.as_view(),
        name="host-quarantine",
    ),
    # --- end sdc and fleet api (helper 3) ---
    # --- annotations api (issue 4) ---
    path("annotations", AnnotationListApi.as_view(), name="annotations"),
    path("annotations/<int:pk>", AnnotationDetailApi.as_view(), name="annotation"),
    # --- end annotations api (issue 4) ---
    # --- incidents api (issue 4) ---
    path("incidents", IncidentListApi.as_view(), name="incidents"),
    path("incidents/<int:pk>", IncidentDetailApi.as_view(), name="incident"),
    # --- end incidents api (issue 4) ---
]

urlpatterns = [
    # One login for the whole site, so the admin's is throttled too.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include((api_v1, "api"))),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # --- mlflow (issue 7) ---
    path("mlflow/", include("ingest.mlflow_urls")),
    # --- end mlflow (issue 7) ---
    path("", include("ingest.urls")),
    path("", include("logbook.urls")),
    path("", include("telemetry.urls")),
]

handler404 = "config.errors.not_found"
handler500 = "config.errors.server_error"
