"""Telemetry's read API, mounted under /api/v1/ in the "api" namespace by config/urls.py."""

from django.urls import path

from telemetry.api import RunSitesApi, SeriesApi

urlpatterns = [
    path("runs/<int:run_id>/series", SeriesApi.as_view(), name="run-series"),
    path("runs/<int:run_id>/sites", RunSitesApi.as_view(), name="run-sites"),
]
