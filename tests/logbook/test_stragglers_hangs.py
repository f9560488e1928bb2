"""The straggler ledger (scores below the threshold for N windows name a rank, its host and
device; a later attempt on other hardware resolves it) and hang detection (heartbeats
without progress open one "hang suspected" interruption; silence stays "stopped
reporting")."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from ingest import services
from logbook.models import Interruption, StragglerRecord, WebhookDelivery
from logbook.services import hangs, stragglers
from logbook.services import webhooks as webhook_services
from telemetry.models import RankStepStats, Run
from telemetry.services import rank_timings

HOSTS = ["h0", "h0", "h1", "h1", "h2", "h2", "h3", "h3"]


@pytest.fixture
def token(project: Any) -> Any:
    row, _ = services.token_create(project=project, name="ranks")
    return row


def send(
    token: Any,
    batch_id: str,
    events: list[dict[str, Any]],
    attempt: int = 1,
    metrics: list[dict[str, Any]] | None = None,
) -> None:
    document: dict[str, Any] = {
        "batch_id": batch_id,
        "run": "big",
        "attempt": attempt,
        "events": events,
    }
    if metrics:
        document["metrics"] = metrics
    acceptance = services.batch_submit(token=token, body=json.dumps(document).encode())
    assert services.batch_process(batch_pk=acceptance.batch.pk) == "done"


def gathered_steps(
    token: Any,
    *,
    attempt: int,
    steps: range,
    start: Any,
    slow: dict[int, float],
    hosts: list[str],
    ranks: int = 8,
    devices: bool = True,
) -> None:
    """Rank 0 gathers every rank's step and forward time, one step a minute from `start`
    (and each rank's GPU, unless `devices` is False, as a job that does not know them)."""
    events = []
    for step in steps:
        step_s = [1.0 * slow.get(rank, 1.0) + rank * 1e-4 for rank in range(ranks)]
        events.append(
            {
                "type": "rank_timings",
                "time": (start + timedelta(minutes=step - steps.start)).isoformat(),
                "first_step": step,
                "ranks": list(range(ranks)),
                "hosts": hosts,
                **(
                    {"devices": [f"GPU-{host}-{rank % 2}" for rank, host in enumerate(hosts)]}
                    if devices
                    else {}
                ),
                "sections": {"step": step_s, "forward": [s * 0.4 for s in step_s]},
            }
        )
    send(token, f"a{attempt}-{steps.start}", events, attempt=attempt)


@pytest.mark.django_db
def test_a_rank_20_percent_slower_for_three_windows_is_a_straggler_then_resolved(
    token: Any,
) -> None:
    # given: 8 ranks for 30 minutes (three 10-minute windows), rank 5 20% slower throughout
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    start -= timedelta(minutes=start.minute % 10)
    gathered_steps(token, attempt=1, steps=range(0, 30), start=start, slow={5: 1.2}, hosts=HOSTS)
    # when: the periodic pass runs (twice: it is idempotent)
    assert stragglers.rank_timings_refresh() == 1
    stragglers.rank_timings_refresh()
    # then: one record, naming rank 5, its host and device
    record = StragglerRecord.objects.get()
    assert (record.rank, record.host.name, record.device.uuid) == (5, "h2", "GPU-h2-1")
    assert record.status == StragglerRecord.Status.OPEN
    assert record.sections == ["forward", "step"]
    assert record.relative_score == pytest.approx(1 / 1.2, rel=1e-3)
    assert record.windows == 3

    # when: attempt 2 keeps rank 5 on h2: still open
    later = start + timedelta(hours=1)
    gathered_steps(token, attempt=2, steps=range(30, 31), start=later, slow={}, hosts=HOSTS)
    stragglers.rank_timings_refresh()
    record.refresh_from_db()
    assert record.status == StragglerRecord.Status.OPEN

    # when: attempt 3 runs rank 5 on another host, and it is fast there
    moved = [*HOSTS[:4], "h9", "h9", *HOSTS[6:]]
    gathered_steps(token, attempt=3, steps=range(31, 41), start=later, slow={}, hosts=moved)
    stragglers.rank_timings_refresh()
    # then: resolved by attempt 3, and attempt 3 has no straggler of its own
    record.refresh_from_db()
    assert record.status == StragglerRecord.Status.RESOLVED
    assert record.resolved_by_attempt.number == 3 and record.resolved_at is not None
    assert StragglerRecord.objects.count() == 1


@pytest.mark.django_db
def test_timings_that_arrive_at_once_date_the_straggler_from_when_it_slowed(token: Any) -> None:
    # given: an hour of 8 ranks sent in one go (a backfill, or a worker that fell behind);
    # rank 5 ran at speed for 20 minutes, then 25% slower for the last 40
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=3)
    start -= timedelta(minutes=start.minute % 10)
    gathered_steps(token, attempt=1, steps=range(0, 20), start=start, slow={}, hosts=HOSTS)
    gathered_steps(token, attempt=1, steps=range(20, 60), start=start + timedelta(minutes=20),
                   slow={5: 1.25}, hosts=HOSTS)  # fmt: skip
    # when: one pass sees all of it
    stragglers.rank_timings_refresh()
    # then: the record starts where rank 5 slowed and counts its four slow windows, not just
    # the last three the rule needs
    record = StragglerRecord.objects.get()
    assert record.rank == 5
    assert record.first_window_at == start + timedelta(minutes=20)
    assert record.last_window_at == start + timedelta(minutes=50)
    assert record.windows == 4


@pytest.mark.django_db
def test_an_incident_page_lists_the_stragglers_of_the_attempt_it_ended(
    token: Any, client: Any, alice: Any
) -> None:
    # given: rank 5 (on h2) slow for 30 minutes, then the attempt fails naming h2 and its GPU
    # (the job reports no rank's GPU)
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    start -= timedelta(minutes=start.minute % 10)
    gathered_steps(token, attempt=1, steps=range(0, 30), start=start, slow={5: 1.2}, hosts=HOSTS,
                   devices=False)  # fmt: skip
    stragglers.rank_timings_refresh()
    failed_at = (start + timedelta(minutes=31)).isoformat()
    send(token, "fail", [{"type": "interruption", "time": failed_at, "category": "faulty-gpu",
                          "hosts": ["h2"], "devices": ["GPU-2f1c"], "step": 30}])  # fmt: skip
    incident = Interruption.objects.get()
    # when
    client.force_login(alice)
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    # then: the straggler is listed, flagged as on the hardware the incident names
    section = page[page.index('id="incident-stragglers"') :]
    section = section[: section.index("</section>")]
    assert "Stragglers in attempt 1" in section
    assert 'data-rank="5" class="named"' in section
    assert "h2</a> <strong>(named by this incident)</strong>" in section
    assert "0.833" in section
    # and its device is the GPU the incident names on h2 (the rank's own was not reported)
    row = section[section.index('data-rank="5"') :]
    assert (
        'GPU-2f1c <span class="hint">(the incident\'s GPU on this host' in row[: row.index("</tr>")]
    )


def rolled_steps(run_name: str = "big") -> set[int]:
    return set(
        RankStepStats.objects.filter(attempt__run__name=run_name).values_list("step", flat=True)
    )


@pytest.mark.django_db
def test_a_pass_that_runs_late_rolls_up_everything_since_the_last_one(token: Any) -> None:
    # given: steps 0-9 rolled up by a pass; then steps 10-19 arrive and the next pass only
    # runs ten minutes later (a busy worker): their rows were received long before it
    start = timezone.now() - timedelta(hours=1)
    gathered_steps(token, attempt=1, steps=range(0, 10), start=start, slow={}, hosts=HOSTS)
    assert stragglers.rank_timings_refresh() == 1
    gathered_steps(token, attempt=1, steps=range(10, 20), start=start, slow={}, hosts=HOSTS)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE telemetry_ranktiming_raw SET received_at = received_at - interval '10 min'"
            " WHERE first_step >= 10"
        )
        cursor.execute("UPDATE telemetry_attempt SET rank_timings_rolled_up_at ="
                       " rank_timings_rolled_up_at - interval '11 min'")  # fmt: skip
    # when
    assert stragglers.rank_timings_refresh() == 1
    # then: every step is rolled up (a fixed look-back of a minute skipped 10-19)
    assert rolled_steps() == set(range(20))
    # and once past the overlap, a pass with nothing new visits nobody
    later = timezone.now() + rank_timings.ROLLUP_OVERLAP * 2
    stragglers.rank_timings_refresh(now=later)
    assert stragglers.rank_timings_refresh() == 0


@pytest.mark.django_db
def test_evenly_fast_ranks_make_no_straggler(token: Any) -> None:
    start = timezone.now() - timedelta(hours=2)
    gathered_steps(token, attempt=1, steps=range(0, 40), start=start, slow={}, hosts=HOSTS)
    stragglers.rank_timings_refresh()
    assert not StragglerRecord.objects.exists()


@pytest.fixture
def endpoint(project: Any, settings: Any) -> Any:
    # Deliveries are recorded in the transaction; nothing is sent (no worker here). Loopback
    # receivers are refused unless allowed.
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return webhook_services.webhook_endpoint_create(
        project=project, name="oncall", url="http://127.0.0.1:9/hook", events=[]
    )


def heartbeat(token: Any, batch_id: str, at: Any) -> None:
    send(token, batch_id, [{"type": "heartbeat", "time": at.isoformat(), "rank": 0}])


@pytest.mark.django_db
def test_heartbeats_without_progress_open_one_hang_naming_the_ranks_that_stopped_first(
    token: Any, endpoint: Any
) -> None:
    # given: 8 ranks report steps 1..20 until 20 minutes ago, except rank 3, which stopped
    # after step 18; heartbeats keep coming
    now = timezone.now()
    stuck_at = now - timedelta(minutes=20)
    events = []
    for step in range(1, 21):
        ranks = [rank for rank in range(8) if step <= 18 or rank != 3]
        events.append(
            {
                "type": "rank_timings",
                "time": (stuck_at - timedelta(seconds=20 - step)).isoformat(),
                "first_step": step,
                "ranks": ranks,
                "hosts": [HOSTS[rank] for rank in ranks],
                "sections": {"step": [1.0] * len(ranks)},
            }
        )
    send(token, "steps", events)
    heartbeat(token, "hb-1", now - timedelta(minutes=1))
    stragglers.rank_timings_refresh()
    # when: the check runs twice, 6 minutes after the server received the steps (progress
    # and last seen are the server's receive times; the threshold is the 5-minute floor),
    # heartbeats having kept arriving until 20 s before it
    check_at = timezone.now() + timedelta(minutes=6)
    Run.objects.filter(name="big").update(last_seen_at=check_at - timedelta(seconds=20))
    opened = hangs.hangs_check(now=check_at)
    hangs.hangs_check(now=check_at)
    # then: one interruption, NCCL Watchdog Timeouts until triaged, naming step 20 and rank 3
    hang = Interruption.objects.get()
    assert opened == [hang]
    assert hang.root_cause.name == "NCCL Watchdog Timeouts"
    assert hang.step == 20 and not hang.planned
    assert "Ranks that stopped reporting first: 3 (h1)" in hang.message
    assert [host.name for host in hang.hosts.all()] == ["h1"]
    # the job may still be alive: the attempt is not ended by a suspicion
    assert Run.objects.get(name="big").attempts.get().status == "running"
    # and the webhook is paged once
    delivery = WebhookDelivery.objects.get()
    assert delivery.event == "interruption"


@pytest.mark.django_db
def test_a_run_under_its_threshold_or_silent_is_not_a_hang(token: Any, endpoint: Any) -> None:
    now = timezone.now()
    # Step stuck 4 minutes (under the 5-minute floor), still reporting: no hang.
    events = [
        {
            "type": "rank_timings",
            "time": (now - timedelta(minutes=4)).isoformat(),
            "first_step": 5,
            "ranks": [0, 1],
            "sections": {"step": [1.0, 1.0]},
        }
    ]
    send(token, "recent", events)
    heartbeat(token, "hb", now)
    assert hangs.hangs_check(now=now) == []
    # Silent for 30 minutes: the "stopped reporting" case, not a hang.
    Run.objects.filter(name="big").update(
        last_seen_at=now - timedelta(minutes=30), last_step_at=now - timedelta(minutes=40)
    )
    assert hangs.hangs_check(now=now) == []
    assert webhook_services.run_stall_check(now=now) == 1
    assert not Interruption.objects.exists()


@pytest.mark.django_db
def test_a_run_that_went_silent_after_its_last_step_is_not_a_hang(
    token: Any, endpoint: Any
) -> None:
    # given: the README's curl example: one batch of two points, then nothing (and a job
    # killed right after a last trailing batch)
    send(
        token,
        "hello-1",
        [],
        metrics=[
            {"name": "loss", "step": 1, "value": 3.2},
            {"name": "loss", "step": 2, "value": 2.9},
        ],
    )
    run = Run.objects.get(name="big")
    assert run.last_step == 2 and run.last_seen_at == run.last_step_at
    # when: hang detection looks every 30 s for the next 14 minutes
    checks = [run.last_step_at + timedelta(seconds=30 * n) for n in range(1, 29)]
    opened = [hang for at in checks for hang in hangs.hangs_check(now=at)]
    # and: a trailing batch 1 s after the step changes nothing either
    Run.objects.filter(pk=run.pk).update(last_seen_at=run.last_step_at + timedelta(seconds=1))
    opened += [hang for at in checks for hang in hangs.hangs_check(now=at)]
    # then: no hang; past 15 minutes it is the "stopped reporting" notification
    assert opened == [] and not Interruption.objects.exists()
    assert webhook_services.run_stall_check(now=run.last_step_at + timedelta(minutes=16)) == 1


def test_job_alive_needs_reports_after_the_step_and_a_recent_one() -> None:
    step = timezone.now()
    minute = timedelta(seconds=60)
    alive = partial(hangs.job_alive, last_step_at=step, threshold=minute)
    # heartbeats every 20 s for a minute and a half: alive
    assert alive(last_seen_at=step + timedelta(seconds=80), now=step + timedelta(seconds=90))
    # the last one 1 s after the step: silent
    assert not alive(last_seen_at=step + timedelta(seconds=1), now=step + timedelta(seconds=61))
    # reported for long enough, but silent for the last 40 s: not (yet) a hang
    assert not alive(last_seen_at=step + timedelta(seconds=35), now=step + timedelta(seconds=75))


@pytest.mark.django_db
def test_a_runs_own_hang_threshold_wins(token: Any) -> None:
    now = timezone.now()
    document_events = [
        {
            "type": "rank_timings",
            "time": (now - timedelta(minutes=20)).isoformat(),
            "first_step": 5,
            "ranks": [0],
            "sections": {"step": [1.0]},
        }
    ]
    send(token, "s", document_events)
    heartbeat(token, "hb", now)
    Run.objects.filter(name="big").update(hang_after_s=3600)
    assert hangs.hangs_check(now=now) == []


@pytest.mark.django_db
def test_a_hang_after_s_of_60_opens_the_hang_just_past_a_minute(token: Any) -> None:
    # given: a run that asked for hang_after_s 60 reached step 5 (the server's receive time
    # is its progress time) and keeps sending heartbeats
    document = {
        "batch_id": "s",
        "run": "big",
        "run_info": {"hang_after_s": 60},
        "events": [
            {
                "type": "rank_timings",
                "time": timezone.now().isoformat(),
                "first_step": 5,
                "ranks": [0],
                "sections": {"step": [1.0]},
            }
        ],
    }
    acceptance = services.batch_submit(token=token, body=json.dumps(document).encode())
    assert services.batch_process(batch_pk=acceptance.batch.pk) == "done"
    progressed_at = Run.objects.get(name="big").last_step_at
    assert progressed_at is not None
    heartbeat(token, "hb-1", timezone.now())
    # when: the check runs 50 s after the last step, then 61 s after it, a heartbeat having
    # arrived 40 s after the step
    Run.objects.filter(name="big").update(last_seen_at=progressed_at + timedelta(seconds=40))
    before = hangs.hangs_check(now=progressed_at + timedelta(seconds=50))
    after = hangs.hangs_check(now=progressed_at + timedelta(seconds=61))
    # then: nothing under the threshold, the hang just past it (not at the 5-minute floor)
    assert before == []
    hang = Interruption.objects.get()
    assert after == [hang]
    assert hang.step == 5
    assert "for 1 min (threshold 1 min)" in hang.message


@pytest.mark.django_db
def test_a_pass_that_finds_another_running_leaves_it_the_work(token: Any) -> None:
    # given: timings to roll up, and another pass holding the lock (a second session, as a
    # second worker process would)
    import psycopg

    start = timezone.now() - timedelta(hours=1)
    gathered_steps(token, attempt=1, steps=range(0, 10), start=start, slow={}, hosts=HOSTS)
    db = connection.settings_dict
    other = psycopg.connect(
        dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"] or None,
        host=db["HOST"] or None, port=db["PORT"] or None, autocommit=True,
    )  # fmt: skip
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [stragglers.RANK_PASS_LOCK])
        # when a pass starts meanwhile, then it returns at once, rolling nothing up
        assert stragglers.rank_timings_refresh() == 0
        assert rolled_steps() == set()
        other.execute("SELECT pg_advisory_unlock(%s)", [stragglers.RANK_PASS_LOCK])
    finally:
        other.close()
    # and once the other pass is over, the next one does the work and frees the lock
    assert stragglers.rank_timings_refresh() == 1
    assert rolled_steps() == set(range(10))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [stragglers.RANK_PASS_LOCK])
        assert cursor.fetchone()[0] is True
        cursor.execute("SELECT pg_advisory_unlock(%s)", [stragglers.RANK_PASS_LOCK])
