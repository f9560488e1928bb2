"""MLflow tracking REST paths (no trailing slashes, as MLflow sends them). Mounted at
/mlflow/ by config/urls.py, so clients use MLFLOW_TRACKING_URI=http://host/mlflow."""

from __future__ import annotations

from django.urls import path, re_path

from ingest import mlflow_api as api
from ingest import views

app_name = "mlflow"

PREFIX = "api/2.0/mlflow/"

urlpatterns = [
    # The links MLflow prints (<tracking URI>/#/experiments/<id>/runs/<id>) open this in a
    # browser; the page reads the part after # and asks `open` for the run's page.
    path("", views.mlflow_landing, name="landing"),
    path("open", views.mlflow_open, name="open"),
    path(
        f"{PREFIX}experiments/get-by-name",
        api.ExperimentGetByNameApi.as_view(),
        name="experiments-get-by-name",
    ),
    path(f"{PREFIX}experiments/get", api.ExperimentGetApi.as_view(), name="experiments-get"),
    path(
        f"{PREFIX}experiments/create", api.ExperimentCreateApi.as_view(), name="experiments-create"
    ),
    path(f"{PREFIX}runs/create", api.RunCreateApi.as_view(), name="runs-create"),
    path(f"{PREFIX}runs/update", api.RunUpdateApi.as_view(), name="runs-update"),
    path(f"{PREFIX}runs/get", api.RunGetApi.as_view(), name="runs-get"),
    path(f"{PREFIX}runs/log-metric", api.RunLogMetricApi.as_view(), name="runs-log-metric"),
    path(
        f"{PREFIX}runs/log-parameter", api.RunLogParameterApi.as_view(), name="runs-log-parameter"
    ),
    path(f"{PREFIX}runs/set-tag", api.RunSetTagApi.as_view(), name="runs-set-tag"),
    path(f"{PREFIX}runs/log-batch", api.RunLogBatchApi.as_view(), name="runs-log-batch"),
    path(
        f"{PREFIX}metrics/get-history",
        api.MetricGetHistoryApi.as_view(),
        name="metrics-get-history",
    ),
    # Everything else under the prefix (artifacts, /api/3.0 traces, registry): a JSON 404.
    re_path(r"^(?P<path>.*)$", api.endpoint_not_found, name="not-found"),
]
