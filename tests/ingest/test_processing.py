"""Processing accepted batches (ingest.services.batch_process), called directly: idempotency,
where every event type lands, attempt resolution, first-write-wins points and the seeded
root-cause taxonomy (poison batches and the sweeper: test_batch_failures.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from ingest import services
from ingest.models import IngestBatch
from logbook.models import (
    Checkpoint,
    CheckpointRestore,
    Interruption,
    RootCause,
)
from logbook.taxonomy import EXTRA_CATEGORIES, ROOT_CAUSE_SEEDS, TABLE5_COMPONENTS
from telemetry.models import Attempt, MetricPoint, Run
from tests.ingest.batch_documents import (
    at,
    counts,
    full_batch,
    losses,
    moment,
    points_batch,
    process,
)


@pytest.fixture
def token(project: Any) -> Any:
    row, _ = services.token_create(project=project, name="t")
    return row


# --- Idempotency -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_processing_the_same_batch_twice_changes_nothing(token):
    # given a processed batch with points and every kind of event
    batch = process(token, full_batch())
    before = counts()
    assert before["points"] == 20 and before["interruptions"] == 1 and before["entries"] == 1

    # when it is processed again
    result = services.batch_process(batch_pk=batch.pk)

    # then it is refused by status and nothing was written twice
    assert result == "not pending"
    assert counts() == before
    batch.refresh_from_db()
    assert batch.status == "done" and batch.process_attempts == 1


@pytest.mark.django_db
def test_reprocessing_a_batch_forced_back_to_pending_adds_no_duplicates(token):
    # given a processed batch with points and every kind of event
    batch = process(token, full_batch())
    before = counts()

    # when its status is forced back to pending and it is processed again, twice
    for _ in range(2):
        IngestBatch.objects.filter(pk=batch.pk).update(status="pending")
        assert services.batch_process(batch_pk=batch.pk) == "done"

    # then every write was keyed: no new rows, and the restore is still counted once
    assert counts() == before
    assert Checkpoint.objects.get(step=100).restored_count == 1
    assert Attempt.objects.get(number=2).resumed_from_step == 100


@pytest.mark.django_db
def test_reprocessing_an_unnumbered_attempt_started_batch_adds_no_attempt(token):
    # given a batch that starts an attempt without naming its number
    document = {
        "batch_id": "start-1",
        "run": "llama",
        "metrics": losses(0, 10),
        "events": [{"type": "attempt_started", "time": at(8), "hosts": ["h001"]}],
    }
    batch = process(token, document)
    before = counts()
    assert list(Attempt.objects.values_list("number", flat=True)) == [1]

    # when it is forced back to pending and processed again
    IngestBatch.objects.filter(pk=batch.pk).update(status="pending")
    assert services.batch_process(batch_pk=batch.pk) == "done"

    # then it still has one attempt and ten points
    assert list(Attempt.objects.values_list("number", flat=True)) == [1]
    assert counts() == before


# --- Every event type lands in its model -------------------------------------------------


@pytest.mark.django_db
def test_each_event_type_lands_in_its_model(token, project):
    process(token, full_batch())

    run = Run.objects.get(project=project, name="llama")
    attempt = run.attempts.get()
    # attempt_started then attempt_ended
    assert attempt.number == 2
    assert attempt.started_at == moment(8)
    assert attempt.resumed_from_step == 100
    assert sorted(attempt.hosts.values_list("name", flat=True)) == ["h001", "h002"]
    assert attempt.status == "failed"
    assert attempt.end_reason == "Xid 79 on h002"
    assert attempt.ended_at == moment(9)
    # the batch's points went to that attempt
    assert MetricPoint.objects.filter(series__attempt=attempt, series__name="loss").count() == 20
    assert run.last_step == 119
    # checkpoint_saved
    saved = run.checkpoints.get(step=110)
    assert (saved.attempt, saved.saved_at) == (attempt, moment(8, 30))
    assert (saved.blocking_save_s, saved.async_save_s) == (3.5, 20.0)
    assert (saved.size_bytes, saved.tier, saved.status) == (5 * 10**9, "local_nvme", "saved")
    assert (saved.uri, saved.checksum) == ("s3://ckpt/110", "sha256:abc")
    assert saved.restored_count == 0
    # checkpoint_restored: a placeholder checkpoint at 100 with one restore
    restore = CheckpointRestore.objects.get()
    assert (restore.attempt, restore.checkpoint.step) == (attempt, 100)
    assert (restore.restored_at, restore.restore_s) == (moment(8, 1), 42.5)
    assert run.checkpoints.get(step=100).restored_count == 1
    # interruption
    interruption = run.interruptions.get()
    assert interruption.root_cause.slug == "faulty-gpu"
    assert interruption.reported_category == "faulty-gpu"
    assert interruption.component == "Faulty GPU"
    assert interruption.planned is False
    assert interruption.attempt == attempt
    assert interruption.occurred_at == moment(9)
    assert (interruption.detected_at, interruption.recovered_at) == (moment(9, 2), moment(9, 40))
    assert interruption.manual_intervention is True
    assert (interruption.lost_steps, interruption.step) == (9, 119)
    assert interruption.message == "Xid 79 on h002"
    assert list(interruption.hosts.values_list("name", flat=True)) == ["h002"]
    assert list(interruption.devices.values_list("uuid", flat=True)) == ["GPU-aaaa"]
    # sdc_suspected
    sdc = run.sdc_replays.get()
    assert (sdc.step, sdc.detected_at, sdc.attempt) == (115, moment(8, 45), attempt)
    assert (sdc.device.uuid, sdc.host.name) == ("GPU-bbbb", "h001")
    assert (sdc.detection, sdc.observed_value, sdc.verdict) == ("loss_spike", 9.5, "pending")
    assert sdc.message == "loss 9.5 at step 115"
    # note
    entry = run.logbook_entries.get()
    assert entry.is_automatic is True
    assert (entry.title, entry.body, entry.kind, entry.step) == (
        "Restart after Xid 79",
        "Drained h002.",
        "restart",
        119,
    )
    assert (entry.occurred_at, entry.attempt, entry.role) == (moment(9, 5), attempt, "automation")
    assert entry.author_name == "token t"


def _interruption_from(token: Any, **fields: Any) -> Interruption:
    process(
        token,
        {
            "batch_id": "int-1",
            "run": "llama",
            "attempt": 1,
            "events": [{"type": "interruption", "time": at(9), **fields}],
        },
    )
    return Interruption.objects.select_related("root_cause").get()


@pytest.mark.parametrize(
    ("category", "slug", "component"),
    [
        ("faulty-gpu", "faulty-gpu", "Faulty GPU"),
        ("GPU HBM3 Memory", "gpu-hbm3-memory", "GPU HBM3 Memory"),
        ("gpu hbm3 MEMORY", "gpu-hbm3-memory", "GPU HBM3 Memory"),
        ("  NIC  ", "nic", "NIC"),
        ("Cosmic rays", "unknown", "Unknown, under investigation"),
    ],
)
@pytest.mark.django_db
def test_interruption_root_cause_is_resolved_from_slug_or_name(token, category, slug, component):
    interruption = _interruption_from(token, category=category)

    assert interruption.root_cause.slug == slug
    assert interruption.reported_category == category
    assert interruption.component == component


@pytest.mark.django_db
def test_interruption_without_category_is_unknown_and_keeps_its_component(token):
    interruption = _interruption_from(token, component="rack 12 PDU")

    assert interruption.root_cause.slug == "unknown"
    assert interruption.reported_category == ""
    assert interruption.component == "rack 12 PDU"


@pytest.mark.parametrize(
    ("fields", "planned"),
    [
        ({"category": "planned-maintenance"}, True),
        ({"category": "Config or Dataset Change"}, True),
        ({"category": "faulty-gpu"}, False),
        ({"category": "unknown-thing"}, False),
        ({"category": "planned-maintenance", "planned": False}, False),
        ({"category": "faulty-gpu", "planned": True}, True),
    ],
)
@pytest.mark.django_db
def test_interruption_planned_defaults_from_root_cause_unless_sent(token, fields, planned):
    assert _interruption_from(token, **fields).planned is planned


@pytest.mark.django_db
def test_interruption_times_before_occurrence_are_clamped(token):
    interruption = _interruption_from(token, detected_at=at(8), recovered_at=at(7))

    assert interruption.detected_at == moment(9)
    assert interruption.recovered_at == moment(9)


# --- Attempt resolution --------------------------------------------------------------------


def _attempt_of_points(batch_id: str) -> set[int]:
    batch = IngestBatch.objects.get(batch_id=batch_id)
    document = json.loads(bytes(batch.body))
    steps = [m["step"] for m in document["metrics"]]
    return set(
        MetricPoint.objects.filter(step__in=steps).values_list("series__attempt__number", flat=True)
    )


@pytest.mark.django_db
def test_batch_without_attempt_on_a_new_run_is_attempt_one(token):
    process(token, {"batch_id": "a", "run": "llama", "metrics": losses(0, 5)})

    assert list(Attempt.objects.values_list("number", flat=True)) == [1]
    assert _attempt_of_points("a") == {1}


@pytest.mark.django_db
def test_unnumbered_attempt_started_after_attempt_one_opens_attempt_two(token):
    # given attempt 1 with points
    process(token, {"batch_id": "a", "run": "llama", "metrics": losses(0, 5)})

    # when a batch starts an attempt without naming it, with points after the restart
    process(
        token,
        {
            "batch_id": "b",
            "run": "llama",
            "metrics": losses(1000, 1005),
            "events": [{"type": "attempt_started", "time": at(10), "resumed_from_step": 3}],
        },
    )
    # and a later batch names neither attempt nor start
    process(token, {"batch_id": "c", "run": "llama", "metrics": losses(2000, 2005)})

    # then the start opened attempt 2, which got both batches' points
    assert list(Attempt.objects.order_by("number").values_list("number", flat=True)) == [1, 2]
    second = Attempt.objects.get(number=2)
    assert (second.started_at, second.resumed_from_step) == (moment(10), 3)
    assert _attempt_of_points("a") == {1}
    assert _attempt_of_points("b") == {2}
    assert _attempt_of_points("c") == {2}


@pytest.mark.django_db
def test_explicit_attempt_number_wins(token):
    process(token, {"batch_id": "a", "run": "llama", "metrics": losses(0, 5)})

    process(
        token,
        {
            "batch_id": "b",
            "run": "llama",
            "attempt": 3,
            "metrics": losses(10, 15),
            "events": [{"type": "attempt_started", "time": at(10)}],
        },
    )

    assert list(Attempt.objects.order_by("number").values_list("number", flat=True)) == [1, 3]
    assert Attempt.objects.get(number=3).started_at == moment(10)
    assert _attempt_of_points("b") == {3}


@pytest.mark.django_db
def test_attempt_named_by_the_start_event_is_used(token):
    process(
        token,
        {
            "batch_id": "a",
            "run": "llama",
            "metrics": losses(0, 5),
            "events": [{"type": "attempt_started", "time": at(10), "attempt": 4}],
        },
    )

    assert list(Attempt.objects.values_list("number", flat=True)) == [4]
    assert _attempt_of_points("a") == {4}


# --- Points --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_same_step_in_one_attempt_first_write_wins(token):
    # given step 10 stored in attempt 1
    process(token, points_batch("a", 1, (10, 1.0)))

    # when another batch sends step 10 again with another value, and a new step 11
    process(token, points_batch("b", 1, (10, 99.0), (11, 1.1)))

    # then step 10 kept its first value and step 11 was added
    values = dict(MetricPoint.objects.values_list("step", "value"))
    assert values == {10: 1.0, 11: 1.1}


@pytest.mark.django_db
def test_same_step_inside_one_batch_keeps_the_first(token):
    process(token, points_batch("a", 1, (10, 1.0), (10, 2.0)))

    assert list(MetricPoint.objects.values_list("step", "value")) == [(10, 1.0)]


@pytest.mark.django_db
def test_same_step_in_different_attempts_is_kept_separately(token):
    process(token, points_batch("a", 1, (10, 1.0), (11, 1.1)))

    process(token, points_batch("b", 2, (10, 5.0)))

    by_attempt = set(MetricPoint.objects.values_list("series__attempt__number", "step", "value"))
    assert by_attempt == {(1, 10, 1.0), (1, 11, 1.1), (2, 10, 5.0)}


# --- Taxonomy ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_root_cause_taxonomy_is_seeded_by_the_migration():
    rows = {row.slug: row for row in RootCause.objects.all()}

    assert len(TABLE5_COMPONENTS) == 18
    for seed in ROOT_CAUSE_SEEDS:
        row = rows[seed.slug]
        assert (row.name, row.group, row.is_hardware, row.is_planned) == (
            seed.name,
            seed.group,
            seed.is_hardware,
            seed.is_planned,
        ), seed.slug
    by_name = {row.name: row.group for row in rows.values()}
    assert by_name["Faulty GPU"] == "GPU"
    assert by_name["NIC"] == "Host"
    assert by_name["NCCL Watchdog Timeouts"] == "Unknown"
    extras = {seed.slug for seed in EXTRA_CATEGORIES}
    assert {
        "planned-maintenance",
        "loss-divergence",
        "data-pipeline",
        "storage",
        "scheduler-preemption",
        "unknown",
    } <= extras
    assert rows["planned-maintenance"].is_planned is True
    assert sum(1 for row in rows.values() if row.is_planned) == 2


@pytest.mark.django_db
def test_heartbeat_moves_the_runs_last_seen_time_to_when_it_was_received(project):
    # given a heartbeat whose client clock is far behind
    token, _ = services.token_create(project=project, name="hb")
    body = {"batch_id": "hb-1", "run": "alive", "attempt": 1,
            "events": [{"type": "heartbeat", "time": 1_763_700_000, "rank": 3}]}  # fmt: skip
    acceptance = services.batch_submit(token=token, body=json.dumps(body).encode())

    services.batch_process(batch_pk=acceptance.batch.pk)

    # then the run was last seen when the server received it
    run = Run.objects.get(name="alive")
    assert run.last_seen_at == acceptance.batch.received_at


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["worker", "at once"])
def test_last_seen_is_the_receive_time_not_the_clients(project, path):
    from logbook.models import WebhookEndpoint
    from logbook.services.webhooks import run_stall_check
    from telemetry.liveness import RUN_STALL_AFTER

    token, _ = services.token_create(project=project, name="seen")
    ahead = (timezone.now() + timedelta(hours=23)).timestamp()
    # given metrics without a time, then a metric timed nearly a day ahead
    for batch_id, metric in [
        ("m-1", {"name": "loss", "step": 1, "value": 1.0}),
        ("m-2", {"name": "loss", "step": 2, "value": 0.9, "time": ahead}),
    ]:
        body = {"batch_id": batch_id, "run": "r", "attempt": 1, "metrics": [metric]}
        acceptance = services.batch_submit(
            token=token, body=json.dumps(body).encode(), write_now=path == "at once"
        )
        if path == "worker":
            services.batch_process(batch_pk=acceptance.batch.pk)
        run = Run.objects.get(name="r")
        # then each batch moved "last seen" to its receive time, never the client's
        assert run.last_seen_at == acceptance.batch.received_at

    # and once the run is silent, the stalled-run alert still fires
    WebhookEndpoint.objects.create(project=project, name="pager", url="https://h.example/")
    Attempt.objects.filter(run=run).update(status=Attempt.Status.RUNNING)
    assert run_stall_check(now=timezone.now() + RUN_STALL_AFTER + timedelta(minutes=1)) == 1


@pytest.mark.django_db
def test_restore_recount_touches_only_the_checkpoints_involved(project, query_budget):
    from logbook.models import Checkpoint
    from logbook.services import checkpoints as checkpoint_services
    from telemetry import services as telemetry_services

    costs = []
    for restores in (3, 30):
        # given a run with `restores` restored checkpoints
        run = telemetry_services.run_upsert(project=project, name=f"restores-{restores}")
        for number in range(1, restores + 1):
            attempt = telemetry_services.attempt_ensure(run=run, number=number)
            checkpoint_services.checkpoint_restore_record(attempt=attempt, step=number * 100)
        late = telemetry_services.attempt_ensure(run=run, number=restores + 1)

        # when one more restore is recorded, then moved to another checkpoint
        costs.append(
            query_budget.count(
                lambda late=late: checkpoint_services.checkpoint_restore_record(
                    attempt=late, step=100
                )
            )
        )
        checkpoint_services.checkpoint_restore_record(attempt=late, step=200)

        # then the counts follow
        counts = dict(Checkpoint.objects.filter(run=run).values_list("step", "restored_count"))
        assert counts[100] == 1 and counts[200] == 2 and counts[restores * 100] == 1
    # and a restore costs the same queries however many checkpoints were restored before
    # (before, it recounted every restored checkpoint)
    query_budget.constant(small=costs[0], big=costs[1], guards="the restored checkpoints")
