"""Every URL that takes an unsafe method refuses a session-authenticated request without a
CSRF token (403), walking the URL configuration so a new endpoint cannot slip through. The
token-authenticated endpoints (ingest, MLflow) take no session, so need no CSRF token: the
same request, a session and no token, is refused there as unauthenticated (401)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone
from rest_framework.authentication import SessionAuthentication

from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services

UNSAFE_METHODS = ("post", "put", "patch", "delete")


def _walk(patterns: list[Any], prefix: str = "") -> list[str]:
    routes: list[str] = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            routes += _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            routes.append(prefix + str(entry.pattern))
    return routes


def _concrete(route: str, values: dict[str, str]) -> str | None:
    if route.startswith("admin/") or "^" in route or "(?P" in route:
        return None  # the admin's own URLs are Django's, CSRF-protected by the same middleware
    path = "/" + route
    for converter, value in values.items():
        path = path.replace(converter, value)
    return None if "<" in path else path


def _takes_a_session(path: str) -> bool:
    """False for a DRF view whose authentication has no session (the ingest endpoints and
    the MLflow-compatible API take ingest tokens only): found from the view, not listed, so
    a new token endpoint (POST /api/v1/ingest/remote-write) is told apart without an edit."""
    view = resolve(path).func
    view_class = getattr(view, "view_class", None) or getattr(view, "cls", None)
    classes = getattr(view_class, "authentication_classes", None)
    if classes is None:
        return True  # a Django view: the session middleware's, CSRF-checked
    return any(issubclass(cls, SessionAuthentication) for cls in classes)


@pytest.mark.django_db
def test_unsafe_requests_without_csrf_token_are_refused(alice, project):
    # given an on-call engineer with a session, and objects for every URL parameter
    run = telemetry_services.run_upsert(project=project, name="csrf")
    telemetry_services.attempt_ensure(run=run, number=1, hosts=["csrf-host"])
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    interruption = interruption_services.interruption_record(
        run=run, source_key="csrf", occurred_at=timezone.now(), category="nic"
    )
    values = {
        "<int:run_id>": str(run.pk),
        "<str:name>": "csrf-host",
        "<int:pk>": str(interruption.pk),
        "<slug:slug>": project.slug,
    }
    paths = sorted(
        {p for p in (_concrete(r, values) for r in _walk(get_resolver().url_patterns)) if p}
    )
    assert len(paths) > 10  # the walk found the site, not nothing

    token_only = [path for path in paths if not _takes_a_session(path)]
    assert "/api/v1/ingest/remote-write" in token_only  # the walk tells token endpoints apart

    # when each is called with each unsafe method and no CSRF token (nor ingest token)
    accepted = []
    for path in paths:
        # 405 (method not allowed) and 404 refuse too; anything else must be 403 (no CSRF
        # token), or 401 (no ingest token) where a session is not how one gets in
        refused = (403, 404, 405) if path not in token_only else (401, 404, 405)
        for method in UNSAFE_METHODS:
            response = getattr(client, method)(path, data={}, content_type="application/json")
            if response.status_code not in refused:
                accepted.append((method.upper(), path, response.status_code))

    # then none was accepted
    assert accepted == []


@pytest.mark.django_db
def test_the_same_requests_with_a_csrf_token_get_through(alice, project):
    from telemetry.models import Host, Membership

    Membership.objects.filter(user=alice).update(role="oncall")
    run = telemetry_services.run_upsert(project=project, name="csrf")
    telemetry_services.attempt_ensure(run=run, number=1, hosts=["csrf-host"])
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/fleet/hosts/csrf-host/")
    token = client.cookies["csrftoken"].value

    response = client.post(
        "/fleet/hosts/csrf-host/",
        {"action": "quarantine", "reason": "xid 79", "csrfmiddlewaretoken": token},
    )

    assert response.status_code in (200, 302)
    assert Host.objects.get(name="csrf-host").quarantined_at is not None
