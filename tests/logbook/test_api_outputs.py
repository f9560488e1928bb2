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
