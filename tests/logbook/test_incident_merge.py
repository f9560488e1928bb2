"""One failure, one incident: a dcgm-exporter XID on an attempt's host, the job's crash report,
a hang and an MLflow FAILED of the same attempt within the window are one interruption with
every source linked; its occurrence is the earliest, the job's report fills its step and
losses; the failure counts see one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook.models import IncidentSource, Interruption, WebhookDelivery
from logbook.services import interruptions as interruption_services
from logbook.services import webhooks as webhook_services
from telemetry.models import Attempt
from telemetry.services import attempt_ensure, run_upsert

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)


@pytest.fixture
def attempt(project: Any) -> Attempt:
    run = run_upsert(project=project, name="merge")
    return attempt_ensure(run=run, number=1, started_at=T0 - timedelta(hours=1), hosts=["node0"])


def dcgm(attempt: Attempt, at: datetime, key: str = "dcgm:1:1") -> Interruption:
    return interruption_services.interruption_record(
        run=attempt.run,
        source_key=key,
        occurred_at=at,
        attempt=attempt,
        ends_attempt=False,
        category="faulty-gpu",
        hosts=["node0"],
        devices=["GPU-0"],
        message="dcgm-exporter: XID 79 (GPU has fallen off the bus)",
        detected_at=at + timedelta(seconds=5),
        step=152,
        severity=Interruption.Severity.HIGH,
    )


def crash(attempt: Attempt, at: datetime, key: str = "crash-1") -> Interruption:
    return interruption_services.interruption_record(
        run=attempt.run,
        source_key=key,
        occurred_at=at,
        attempt=attempt,
        message="RuntimeError: CUDA error: unspecified launch failure",
        step=153,
        lost_steps=13,
        recovered_at=at + timedelta(seconds=45),
    )


@pytest.mark.django_db
@pytest.mark.parametrize("dcgm_first", [True, False])
def test_an_xid_and_the_crash_report_20_s_apart_are_one_incident(
    attempt: Attempt, dcgm_first: bool
) -> None:
    # when: the XID and the job's crash report arrive, in either order
    if dcgm_first:
        first, second = dcgm(attempt, T0), crash(attempt, T0 + timedelta(seconds=20))
    else:
        first, second = crash(attempt, T0 + timedelta(seconds=20)), dcgm(attempt, T0)
    # then: one interruption, both sources linked
    assert first.pk == second.pk
    incident = Interruption.objects.get()
    assert sorted(incident.sources.values_list("kind", flat=True)) == ["dcgm", "job"]
    # the earliest time is the occurrence, the job's report fills step, losses and recovery
    assert incident.occurred_at == T0
    assert incident.detected_at == T0 + timedelta(seconds=5)
    assert (incident.step, incident.lost_steps) == (153, 13)
    assert incident.recovered_at == T0 + timedelta(seconds=65)
    # the GPU's evidence names it (the job gave no category), at the GPU's severity
    assert incident.root_cause.slug == "faulty-gpu"
    assert incident.severity == Interruption.Severity.HIGH
    assert "XID 79" in incident.message and "unspecified launch failure" in incident.message
    assert [h.name for h in incident.hosts.all()] == ["node0"]
    # the crash report ended the attempt; the XID alone would not have
    attempt.refresh_from_db()
    assert attempt.status == Attempt.Status.FAILED
    # and recording either again changes nothing
    assert crash(attempt, T0 + timedelta(seconds=20)).pk == incident.pk
    assert dcgm(attempt, T0).pk == incident.pk
    assert IncidentSource.objects.count() == 2


@pytest.mark.django_db
def test_signals_apart_or_of_another_attempt_stay_apart(attempt: Attempt) -> None:
    other = attempt_ensure(run=attempt.run, number=2, started_at=T0 + timedelta(hours=2))
    dcgm(attempt, T0)
    # beyond the 10-minute window: another failure
    crash(attempt, T0 + timedelta(minutes=11))
    # another attempt's crash: another failure
    crash(other, T0 + timedelta(seconds=20), key="crash-2")
    # a second crash report of the same attempt is not the same failure as the first's
    crash(attempt, T0 + timedelta(minutes=11, seconds=5), key="crash-3")
    assert Interruption.objects.count() == 4


@pytest.mark.django_db
def test_a_merged_incident_pages_the_webhooks_once(
    attempt: Attempt, project: Any, settings: Any
) -> None:
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    webhook_services.webhook_endpoint_create(
        project=project, name="oncall", url="http://127.0.0.1:9/hook", events=[]
    )
    dcgm(attempt, T0)
    crash(attempt, T0 + timedelta(seconds=20))
    assert WebhookDelivery.objects.filter(event="interruption").count() == 1


@pytest.mark.django_db
def test_a_hang_then_the_watchdogs_crash_are_one_incident(attempt: Attempt) -> None:
    # given: hang detection found the step stuck since T0 and said so 5 minutes later
    hang = interruption_services.interruption_record(
        run=attempt.run,
        source_key=f"hang:{attempt.pk}:150",
        occurred_at=T0,
        detected_at=T0 + timedelta(minutes=5),
        attempt=attempt,
        category="NCCL Watchdog Timeouts",
        step=150,
        ends_attempt=False,
        message="Hang suspected",
    )
    # when: the NCCL watchdog kills the job 9 minutes after the hang was detected (14 after
    # its step stopped), and MLflow is told FAILED
    crash(attempt, T0 + timedelta(minutes=14))
    interruption_services.interruption_record(
        run=attempt.run,
        source_key="mlflow-abc-1-failed",
        occurred_at=T0 + timedelta(minutes=14, seconds=2),
        attempt=attempt,
        message="MLflow set run abc to FAILED",
    )
    # then: one incident, from the hang's start, with three sources
    incident = Interruption.objects.get()
    assert incident.pk == hang.pk and incident.occurred_at == T0
    assert sorted(incident.sources.values_list("kind", flat=True)) == ["hang", "job", "mlflow"]
    assert incident.step == 153
