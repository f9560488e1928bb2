"""The admin's "add" pages take initial values from the query string: an id that is not one
(letters, a NUL, 25 digits) starts the form empty there instead of answering 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

ADD_PAGES = [
    ("/admin/telemetry/device/add/", "host"),
    ("/admin/telemetry/attempt/add/", "hosts"),
    ("/admin/telemetry/membership/add/", "user"),
    ("/admin/telemetry/host/add/", "cluster"),
    ("/admin/telemetry/cluster/add/", "site"),
    ("/admin/logbook/triagepattern/add/", "root_cause"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "field"), ADD_PAGES)
@pytest.mark.parametrize("value", ["abc", "%00", "9" * 25, "1,x", "-1"])
def test_a_bad_id_in_an_add_pages_query_is_no_500(
    django_user_model: Any, url: str, field: str, value: str
) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-12345-x")
    client = Client(raise_request_exception=False)
    client.force_login(root)
    response = client.get(f"{url}?{field}={value}")
    assert response.status_code == 200
