"""Goodput says "not computable" with its reason when there is no step data, and a bucket
with no input says "not reported": never 0.00% or 0.000 s that read as measurements."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook.services import interruptions as interruption_services
from telemetry import goodput as g
from telemetry import services as telemetry_services

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def test_no_step_data_is_not_computable_and_its_buckets_not_reported():
    inputs = g.GoodputInputs(
        attempts=[g.AttemptRecord(1, 0.0, 3600.0), g.AttemptRecord(2, 4000.0, 8000.0)]
    )

    result = g.goodput(inputs)

    assert result is not None and math.isnan(result.goodput)
    assert "no step data" in result.not_computable
    assert result.disruptions == 1  # the restart is known without steps
    assert g.PRODUCTIVE in result.not_reported and g.WASTED_PROGRESS in result.not_reported


def test_buckets_without_input_are_not_reported_but_measured_ones_are():
    inputs = g.GoodputInputs(
        attempts=[g.AttemptRecord(1, 0.0, 100.0, True, [(1, 10.0), (2, 20.0), (3, 30.0)])],
        checkpoint_saves=[g.CheckpointSave(2, 1.0, 25.0)],
    )

    result = g.goodput(inputs)

    assert result is not None and not result.not_computable
    assert result.reported(g.CHECKPOINT_SAVE) and result.reported(g.PRODUCTIVE)
    for bucket in (g.ACCELERATOR_INIT, g.TRAINING_PREP, g.DATA_LOADING_SYNC, g.CHECKPOINT_RESTORE):
        assert not result.reported(bucket), bucket


@pytest.fixture
def stepless_run(project: Any) -> Any:
    """Three attempts with start and end times, 200 interruptions, and no step at all."""
    run = telemetry_services.run_upsert(project=project, name="stepless", info={})
    for number in (1, 2, 3):
        attempt = telemetry_services.attempt_ensure(
            run=run, number=number, started_at=T0 + timedelta(hours=10 * number)
        )
        telemetry_services.attempt_end(
            attempt=attempt, status="failed", ended_at=T0 + timedelta(hours=10 * number + 9)
        )
    for i in range(200):
        interruption_services.interruption_record(
            run=run, source_key=f"i{i}", occurred_at=T0 + timedelta(minutes=i), category="nic"
        )
    return run


@pytest.mark.django_db
def test_goodput_api_gives_null_and_the_reason(client, bob, stepless_run):
    client.force_login(bob)

    body = client.get(f"/api/v1/runs/{stepless_run.pk}/goodput").json()

    assert body["available"] is True
    assert body["goodput"] is None and body["productive_s"] is None
    assert "no step data" in body["not_computable_reason"]
    assert body["badput_s"]["accelerator_init"] is None
    assert body["badput_s"]["wasted_progress"] is None
    assert "accelerator_init" in body["not_reported"]
    assert body["disruptions"] == 2


@pytest.mark.django_db
def test_goodput_page_says_not_computable_and_not_reported(client, bob, stepless_run):
    client.force_login(bob)

    page = client.get(f"/runs/{stepless_run.pk}/goodput/").content.decode()

    assert "0.00%" not in page and "0.000" not in page.split('id="buckets"')[1]
    assert '<dd id="goodput-pct">not computable</dd>' in page
    assert "no step data" in page
    assert "not reported" in page
