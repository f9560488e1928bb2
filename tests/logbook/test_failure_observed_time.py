"""Failure rates when a run has interruptions but no attempt times (a chronicle brought in
from a logbook): observed time is the span of its events, never zero, and MTBF counts the
interruptions of the same runs whose hours it counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services

START = datetime(2026, 3, 1, tzinfo=UTC)


def _interrupt(run: Any, key: str, at: datetime, category: str = "faulty-gpu") -> None:
    interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=at, category=category
    )


@pytest.fixture
def chronicle_run(project: Any) -> Any:
    """Four unexpected interruptions over 3 days, and no attempt at all."""
    run = telemetry_services.run_upsert(
        project=project, name="opt-chronicle", info={"accelerator_count": 992}
    )
    for i in range(4):
        _interrupt(run, f"c{i}", START + timedelta(days=i))
    return run


@pytest.mark.django_db
def test_run_without_attempt_times_is_observed_over_its_events(client, alice, chronicle_run):
    client.force_login(alice)

    rates = client.get("/api/v1/failures", {"run": chronicle_run.pk}).json()["rates"]

    # 3 days from the first to the last interruption; MTBF = 72 h / 4 = 18 h, not 0 h
    assert rates["observed_days"]["value"] == pytest.approx(3.0)
    assert rates["observed_days"]["inputs"]["runs_observed_from_events"] == 1
    assert "span of its events" in rates["observed_days"]["note"]
    assert rates["job_mtbf_h"]["value"] == pytest.approx(18.0)
    assert rates["failure_rate_per_1000_accelerator_days"]["value"] == pytest.approx(
        1000 * 4 / (992 * 3)
    )


@pytest.mark.django_db
def test_single_event_gives_no_mtbf_rather_than_zero(client, alice, project):
    run = telemetry_services.run_upsert(project=project, name="one-event", info={})
    _interrupt(run, "only", START)
    client.force_login(alice)

    rates = client.get("/api/v1/failures", {"run": run.pk}).json()["rates"]

    assert rates["job_mtbf_h"]["value"] is None
    assert "Not computable" in rates["job_mtbf_h"]["note"]


@pytest.mark.django_db
def test_all_runs_mtbf_uses_one_set_of_runs(client, alice, project, chronicle_run):
    # given a timed run (10 days, 2 interruptions) beside the untimed chronicle (3 days, 4)
    timed = telemetry_services.run_upsert(
        project=project, name="timed", info={"accelerator_count": 8}
    )
    attempt = telemetry_services.attempt_ensure(run=timed, number=1, started_at=START)
    telemetry_services.attempt_end(
        attempt=attempt, status="completed", ended_at=START + timedelta(days=10)
    )
    _interrupt(timed, "t1", START + timedelta(days=2))
    _interrupt(timed, "t2", START + timedelta(days=5))
    client.force_login(alice)

    rates = client.get("/api/v1/failures").json()["rates"]

    # both runs' hours over both runs' interruptions: (240 h + 72 h) / 6 = 52 h
    assert rates["observed_days"]["value"] == pytest.approx(13.0)
    assert rates["job_mtbf_h"]["inputs"] == {"observed_h": pytest.approx(312.0), "unexpected": 6}
    assert rates["job_mtbf_h"]["value"] == pytest.approx(52.0)
