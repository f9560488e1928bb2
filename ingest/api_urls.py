"""Ingest endpoints, mounted under /api/v1/ in the "api" namespace by config/urls.py."""

from django.urls import path

from ingest.api import IngestView
from ingest.api_prometheus import PrometheusIngestView, PushgatewayIngestView
from ingest.api_remote_write import RemoteWriteIngestView

urlpatterns = [
    path("ingest", IngestView.as_view(), name="ingest"),
    path("ingest/prometheus", PrometheusIngestView.as_view(), name="ingest-prometheus"),
    path("ingest/remote-write", RemoteWriteIngestView.as_view(), name="ingest-remote-write"),
    path(
        "ingest/prometheus/metrics/<path:grouping>",
        PushgatewayIngestView.as_view(),
        name="ingest-prometheus-push",
    ),
]
