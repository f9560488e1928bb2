"""The logbook APIs' answers come from output serializers, with one NaN policy: a measured
value keeps its NaN as the string "NaN", a derived figure without a value is null."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.utils import timezone

from logbook.models import SdcReplay
from telemetry import services as telemetry_services


@pytest.mark.django_db
def test_a_measured_nan_is_the_string_nan_and_a_missing_rate_is_null(
    client: Any, project: Any, alice: Any
) -> None:
    run = telemetry_services.run_upsert(project=project, name="nan-sdc")
    SdcReplay.objects.create(
        run=run, step=5, detected_at=timezone.now(), observed_value=math.nan, expected_value=1.5
    )
    client.force_login(alice)

    record = client.get("/api/v1/sdc").json()["records"][0]
    assert (record["observed_value"], record["expected_value"]) == ("NaN", 1.5)
    assert record["difference"] == "NaN" and record["run"]["name"] == "nan-sdc"

    rates = client.get("/api/v1/failures").json()["rates"]
    assert rates["job_mtbf_h"]["value"] is None  # no unexpected interruption: no MTBF
    assert rates["job_mtbf_h"]["formula"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query", ["page_size=null", "page_size=0", "page_size=²", "page_size=5&page_size=7"]
)
def test_a_page_size_that_is_not_one_whole_number_is_a_400(client, alice, query):
    # Found by negative fuzzing: these were answered 200 with the default page size, so a
    # client asking for more rows than it got would think the list had ended.
    client.force_login(alice)
    for url in ("/api/v1/fleet/hosts", "/api/v1/runs"):
        response = client.get(f"{url}?{query}")
        assert response.status_code == 400, (url, query)
        assert "page_size" in response.content.decode()


@pytest.mark.django_db
def test_a_filter_given_twice_is_a_400_not_whichever_came_last(client, alice):
    # Found by negative fuzzing: ?run=false&...&run= filtered by the last (empty) value.
    client.force_login(alice)
    response = client.get("/api/v1/incidents?run=1&run=")
    assert response.status_code == 400
    assert response.json() == {"run": "must be given once"}


@pytest.mark.django_db
def test_unicode_digits_in_number_filters_are_a_400_not_a_500(client, alice, project):
    # "²".isdigit() is true in Python but int("²") raises: every whole-number filter checked
    # isdigit() alone. Each must refuse it in words.
    from telemetry.services import run_upsert

    run = run_upsert(project=project, name="digits")
    client.force_login(alice)
    for url in (
        "/api/v1/incidents?run=²",
        "/api/v1/fleet/hosts?k=²",
        "/api/v1/failures?accelerators=²",
        f"/api/v1/runs/{run.pk}/series?name=loss&max_points=²",
        "/api/v1/annotations?run=²",
        f"/compare/?runs={run.pk},²",
    ):
        response = client.get(url)
        assert 400 <= response.status_code < 500, (url, response.status_code)
    # a page shows the message above its unfiltered view
    page = client.get("/fleet/?k=²")
    assert page.status_code == 200 and "must be an integer" in page.content.decode()
