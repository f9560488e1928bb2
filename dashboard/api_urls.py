"""The dashboard's read API, mounted under /api/v1/ in the "api" namespace by config/urls.py."""

from django.urls import path

from dashboard.api import FailureBreakdownApi, RunGoodputApi, RunListApi, RunMfuApi

urlpatterns = [
    path("runs", RunListApi.as_view(), name="runs"),
    path("failures", FailureBreakdownApi.as_view(), name="failures"),
    path("runs/<int:run_id>/mfu", RunMfuApi.as_view(), name="run-mfu"),
    path("runs/<int:run_id>/goodput", RunGoodputApi.as_view(), name="run-goodput"),
]
