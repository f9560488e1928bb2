"""The admin's "add" pages take initial values from the query string: an id that is not one
(letters, a NUL, 25 digits) starts the form empty there instead of answering 500."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse


def _add_pages() -> list[tuple[str, tuple[str, ...]]]:
    """Every registered admin a superuser may add through, with the relation fields its
    query string can fill: derived from the admin site, so a replaced model (TriagePattern
    by TriageRule in logbook 0019) or a new admin is covered without editing this list."""
    request = SimpleNamespace(user=User(is_superuser=True, is_staff=True, is_active=True))
    pages = []
    for model, model_admin in admin.site._registry.items():
        if not model_admin.has_add_permission(request):
            continue
        fields = tuple(
            field.name
            for field in model._meta.get_fields()
            if field.is_relation and field.concrete and field.editable
        )
        if fields:
            url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")
            pages.append((url, fields))
    return sorted(pages)


ADD_PAGES = _add_pages()


def test_the_add_pages_are_found_in_every_app_with_an_admin() -> None:
    urls = [url for url, _ in ADD_PAGES]
    for app in ("telemetry", "logbook"):
        assert any(url.startswith(f"/admin/{app}/") for url in urls), urls


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "fields"), ADD_PAGES)
@pytest.mark.parametrize("value", ["abc", "%00", "9" * 25, "1,x", "-1"])
def test_a_bad_id_in_an_add_pages_query_is_no_500(
    django_user_model: Any, url: str, fields: tuple[str, ...], value: str
) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-12345-x")
    client = Client(raise_request_exception=False)
    client.force_login(root)
    # Every relation of the page at once: any one of them answering 500 fails the page.
    query = "&".join(f"{field}={value}" for field in fields)
    response = client.get(f"{url}?{query}")
    assert response.status_code == 200
