"""Stored auto-triage suggestions: made from the message and the evidence in the database,
remade when a DCGM push lands in the window, confirmed in one audited step or overridden,
and made by the real worker within 10 s of the batch or of the evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from logbook import tasks
from logbook.models import (
    AuditEvent,
    Interruption,
    RootCause,
    SdcReplay,
    StragglerRecord,
    TriageRule,
    TriageSuggestion,
)
from logbook.services import autotriage as autotriage_services
from logbook.services import gpu_health, triage
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from telemetry import dcgm
from telemetry import services as telemetry_services

T0 = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)
NCCL = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
    "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 milliseconds before timing out."
)
DEMO = f"{NCCL} ; NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus"


def record(project: Any, *, message: str, hosts: list[str], at: datetime = T0, key: str = "i1"):
    run = telemetry_services.run_upsert(project=project, name="auto-run")
    attempt = telemetry_services.attempt_ensure(
        run=run, number=1, started_at=at - timedelta(hours=1), hosts=["h1", "h2", "h3"]
    )
    return interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=at, attempt=attempt, hosts=hosts, message=message
    )


def xid_push(project: Any, *, host: str, uuid: str, code: int, at: datetime) -> None:
    """Two pushes of one GPU: a clean one (so the next is not a first sight), then the XID."""
    for value, moment in ((0, at - timedelta(minutes=5)), (code, at)):
        gpu = dcgm.GpuReadings(
            host=host, uuid=uuid, gpu_index=0, values={dcgm.XID: float(value)},
            timestamps={dcgm.XID: moment.timestamp()}, fields_sent={dcgm.XID},
        )  # fmt: skip
        gpu_health.dcgm_push_record(project=project, gpus=[gpu], received_at=moment)


@pytest.mark.django_db
def test_a_message_with_an_xid_79_is_suggested_as_a_faulty_gpu_on_its_host(project):
    interruption = record(project, message=DEMO, hosts=["h2"])
    # when the worker's service runs
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    # then
    assert suggestion is not None
    assert suggestion.root_cause.slug == "faulty-gpu"
    assert suggestion.hosts == ["h2"]
    assert suggestion.confidence >= 0.9
    assert suggestion.evidence[0]["kind"] == "message"
    assert "79" in suggestion.evidence[0]["text"]
    assert suggestion.outcome == TriageSuggestion.Outcome.PENDING
    # the incident itself is not changed until on-call confirms
    interruption.refresh_from_db()
    assert interruption.root_cause.slug == "unknown"


@pytest.mark.django_db
def test_an_xid_on_one_of_its_hosts_40_s_earlier_turns_a_watchdog_timeout_into_a_faulty_gpu(
    project,
):
    # given the XID 79 stored 40 s before a bare watchdog timeout on h1 and h2
    xid_push(project, host="h2", uuid="GPU-bad", code=79, at=T0 - timedelta(seconds=40))
    interruption = record(project, message=NCCL, hosts=["h1", "h2"])
    # when
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    # then
    assert suggestion is not None
    assert suggestion.root_cause.slug == "faulty-gpu"
    assert suggestion.hosts == ["h2"]
    assert suggestion.devices == ["GPU-bad"]
    assert "reads as NCCL Watchdog Timeouts" in suggestion.note
    assert suggestion.evidence[0]["kind"] == "dcgm"
    assert suggestion.evidence[0]["url"] == "/fleet/hosts/h2/"


@pytest.mark.django_db
def test_a_dcgm_push_a_minute_later_remakes_the_suggestion(
    project, django_capture_on_commit_callbacks
):
    interruption = record(project, message=NCCL, hosts=["h1", "h3"])
    first = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert first is not None and first.root_cause.slug == "nccl-watchdog-timeout"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        xid_push(project, host="h3", uuid="GPU-h3", code=48, at=T0 + timedelta(minutes=1))
    assert callbacks, "the push enqueues a re-triage after commit"
    # when the worker handles the arrived events
    remade = autotriage_services.suggestions_for_events(
        event_ids=list(interruption.run.project.device_events.values_list("pk", flat=True))
    )
    # then
    assert remade == 1
    again = TriageSuggestion.objects.get(interruption=interruption)
    assert again.root_cause.slug == "gpu-hbm3-memory"
    assert again.hosts == ["h3"]
    assert again.first_made_at == first.first_made_at
    assert again.made_at >= first.made_at


@pytest.mark.django_db
def test_a_straggler_names_the_culprit_of_an_unexplained_timeout(project):
    interruption = record(project, message=NCCL, hosts=["h1", "h2", "h3"])
    host = interruption.hosts.get(name="h3")
    StragglerRecord.objects.create(
        run=interruption.run, attempt=interruption.attempt, rank=17, host=host,
        relative_score=0.4, windows=6, first_window_at=T0 - timedelta(minutes=30),
        last_window_at=T0 - timedelta(minutes=2),
    )  # fmt: skip
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert suggestion is not None
    assert suggestion.root_cause.slug == "nccl-watchdog-timeout"
    assert suggestion.hosts == ["h3"]
    assert any(item["kind"] == "straggler" for item in suggestion.evidence)


@pytest.mark.django_db
def test_the_task_twice_stores_one_unchanged_suggestion(project):
    interruption = record(project, message=DEMO, hosts=["h2"])
    assert tasks.triage_suggest_task(interruption.pk) == "faulty-gpu"
    made = TriageSuggestion.objects.get(interruption=interruption)
    assert tasks.triage_suggest_task(interruption.pk) == "faulty-gpu"
    again = TriageSuggestion.objects.get(interruption=interruption)
    assert TriageSuggestion.objects.count() == 1
    assert again.made_at == made.made_at  # nothing new: not rewritten
    assert tasks.triage_suggest_task(10**9) == "none"  # gone: nothing to do


@pytest.mark.django_db
def test_an_admin_pattern_is_read_on_the_next_suggestion(project, rules_alone):
    interruption = record(project, message="rack 7 busbar tripped", hosts=["h1"])
    assert autotriage_services.suggestion_make(interruption_id=interruption.pk) is None
    TriageRule.objects.create(
        project=project, name="busbar", pattern=r"busbar trip",
        root_cause=RootCause.objects.get(slug="power-supply"), component="Rack busbar",
        weight=0.8,
    )  # fmt: skip
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert suggestion is not None
    assert suggestion.root_cause.slug == "power-supply"
    assert suggestion.component == "Rack busbar"


@pytest.mark.django_db
def test_confirming_files_it_in_one_step_audited_and_counts_as_confirmed(project, alice):
    interruption = record(project, message=DEMO, hosts=["h2"])
    autotriage_services.suggestion_make(interruption_id=interruption.pk)
    # when alice confirms
    confirmed = autotriage_services.suggestion_confirm(
        interruption=interruption, user=alice, version=interruption.version
    )
    # then the incident is filed as suggested and triaged, and the audit trail says so
    assert confirmed.root_cause.slug == "faulty-gpu"
    assert confirmed.component == "GPU has fallen off the bus (XID 79)"
    assert confirmed.status == Interruption.Status.TRIAGED
    assert confirmed.triaged_by == alice
    changes = [
        event.changes
        for event in AuditEvent.objects.filter(object_id=interruption.pk).order_by("pk")
    ]
    assert changes[0]["root_cause"] == ["unknown", "faulty-gpu"]
    assert changes[1]["status"] == ["open", "triaged"]
    suggestion = TriageSuggestion.objects.get(interruption=interruption)
    assert suggestion.outcome == TriageSuggestion.Outcome.CONFIRMED
    assert suggestion.decided_by == alice
    # a decided suggestion is never remade
    assert autotriage_services.suggestion_make(interruption_id=interruption.pk) == suggestion


@pytest.mark.django_db
def test_triaging_it_as_something_else_records_the_override(project, alice):
    interruption = record(project, message=DEMO, hosts=["h2"])
    autotriage_services.suggestion_make(interruption_id=interruption.pk)
    edited = triage.incident_update(
        interruption=interruption, user=alice, version=interruption.version,
        changes={"root_cause": "io-expansion-board"},
    )  # fmt: skip
    triage.incident_transition(
        interruption=edited, user=alice, version=edited.version, status="triaged"
    )
    suggestion = TriageSuggestion.objects.get(interruption=interruption)
    assert suggestion.outcome == TriageSuggestion.Outcome.OVERRIDDEN
    assert suggestion.decided_root_cause.slug == "io-expansion-board"


@pytest.mark.django_db
def test_a_planned_interruption_gets_no_suggestion(project):
    run = telemetry_services.run_upsert(project=project, name="planned-run")
    planned = interruption_services.interruption_record(
        run=run, source_key="p", occurred_at=T0, category="planned-maintenance", message=DEMO
    )
    assert autotriage_services.suggestion_make(interruption_id=planned.pk) is None
    assert not TriageSuggestion.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_worker_suggests_within_10_s_of_the_batch_and_of_later_evidence(
    celery_worker, post_batch, project, wait
):
    # given a job that reports its interruption with only a message and its host
    now = timezone.now()
    document = {
        "batch_id": "auto-1", "run": "auto-worker", "attempt": 1, "metrics": [],
        "events": [
            {"type": "attempt_started", "time": (now - timedelta(hours=1)).isoformat(),
             "hosts": ["w1", "w2"]},
            {"type": "interruption", "time": now.isoformat(), "message": NCCL,
             "hosts": ["w1", "w2"]},
        ],
    }  # fmt: skip
    # when it is posted
    assert post_batch(document).status_code == 202

    # then the worker suggests the watchdog timeout (nothing explains it yet)
    def made() -> TriageSuggestion | None:
        return TriageSuggestion.objects.select_related("root_cause").first()

    first = wait(made, what="the first suggestion")
    assert first.root_cause.slug == "nccl-watchdog-timeout"

    # when DCGM pushes an XID 79 on w2 a minute later
    xid_push(project, host="w2", uuid="GPU-w2", code=79, at=now + timedelta(seconds=60))

    def remade() -> bool:
        return TriageSuggestion.objects.get(pk=first.pk).root_cause.slug == "faulty-gpu"

    wait(remade, what="the suggestion remade from the XID")
    assert TriageSuggestion.objects.get(pk=first.pk).hosts == ["w2"]


@pytest.mark.django_db
def test_an_sdc_record_stored_later_remakes_the_suggestion(
    project, django_capture_on_commit_callbacks, monkeypatch
):
    # given a loss spike reported as an interruption, suggested as loss divergence
    interruption = record(project, message="loss spike at step 9001", hosts=["h1"])
    first = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert first is not None and first.root_cause.slug == "loss-divergence"
    published: list[Any] = []
    monkeypatch.setattr(tasks.triage_run_evidence_task, "delay", lambda *a: published.append(a))
    # when a replay found an hour before it is stored afterwards, and confirmed
    with django_capture_on_commit_callbacks(execute=True):
        replay = sdc_services.sdc_record(
            run=interruption.run, source_key="sdc-1", step=9000,
            detected_at=T0 - timedelta(hours=1), host="h2", device="GPU-h2",
        )  # fmt: skip
        SdcReplay.objects.filter(pk=replay.pk).update(verdict="confirmed")
    # then the worker is asked to remake the run's suggestions in the record's window
    (window,) = published
    assert window[0] == interruption.run_id
    assert tasks.triage_run_evidence_task(*window) == 1
    remade = TriageSuggestion.objects.get(interruption=interruption)
    assert remade.root_cause.slug == "silent-data-corruption"
    assert remade.hosts == ["h2"]
    assert remade.devices == ["GPU-h2"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "detected_at",
    [datetime(1, 1, 1, 0, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, tzinfo=UTC)],
    ids=["year 1", "year 9999"],
)
def test_an_sdc_record_at_either_end_of_time_is_stored(run: Any, detected_at: datetime) -> None:
    # given an SDC suspicion at a time the ingest contract accepts, minutes from the first or
    # last moment a datetime holds (hypothesis found year 1: OverflowError, a failed batch)
    # when it is recorded (its evidence window reaches past that moment)
    record = sdc_services.sdc_record(
        run=run, source_key="edge", step=1, detected_at=detected_at, detection="other"
    )

    # then it is stored, and the window held at the edge
    assert record.pk is not None and record.detected_at == detected_at
