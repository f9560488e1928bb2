from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from ingest.api import IngestView
from telemetry.api import RunListApi, SeriesApi

api_v1 = [
    path("ingest", IngestView.as_view(), name="ingest"),
    path("runs", RunListApi.as_view(), name="runs"),
    path("runs/<int:run_id>/series", SeriesApi.as_view(), name="run-series"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include((api_v1, "api"))),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("", include("logbook.urls")),
    path("", include("telemetry.urls")),
]
