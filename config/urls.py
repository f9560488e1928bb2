"""The URL root: the site-wide pages (admin, login, the API schema), then each app's own URL
modules. Every app's HTML pages come from its `urls.py` (namespaced by app) and its API from
its `api_urls.py`, all under /api/v1/ in the one "api" namespace."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from telemetry.views.auth import ThrottledLoginView

api_v1 = [
    path("", include("ingest.api_urls")),
    path("", include("telemetry.api_urls")),
    path("", include("logbook.api_urls")),
    path("", include("dashboard.api_urls")),
    path("", include("diagnosis.api_urls")),
]

urlpatterns = [
    # One login for the whole site, so the admin's is throttled too.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", include((api_v1, "api"))),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("mlflow/", include("ingest.mlflow_urls")),
    path("", include("ingest.urls")),
    path("", include("logbook.urls")),
    path("", include("telemetry.urls")),
    path("", include("dashboard.urls")),
    path("", include("diagnosis.urls")),
]

if settings.SSO_ENABLED:
    # /oidc/authenticate/ sends to the identity provider, /oidc/callback/ comes back.
    urlpatterns.insert(3, path("oidc/", include("mozilla_django_oidc.urls")))

handler400 = "config.errors.bad_request"
handler404 = "config.errors.not_found"
handler500 = "config.errors.server_error"
