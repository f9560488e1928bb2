"""Diagnosis endpoints, mounted under /api/v1/ in the "api" namespace by config/urls.py."""

from django.urls import path

from diagnosis.api import RunSlowdownsApi, SlowdownDecideApi

urlpatterns = [
    path("runs/<int:run_id>/slowdowns", RunSlowdownsApi.as_view(), name="run-slowdowns"),
    path(
        "slowdowns/<int:slowdown_id>/decision",
        SlowdownDecideApi.as_view(),
        name="slowdown-decide",
    ),
]
