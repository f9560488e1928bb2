"""Project webhooks against a real HTTP receiver on 127.0.0.1: delivery and its record,
retries with backoff, giving up, once per event, stalled runs, SDC confirmations, and the
admins' webhooks page."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from logbook.models import AuditEvent, SdcReplay, WebhookDelivery, WebhookEndpoint
from logbook.selectors import webhooks as webhook_selectors
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from logbook.services import webhooks as webhook_services
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Membership, Run
from tests.logbook.webhook_receiver import Receiver

T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


@pytest.fixture(autouse=True)
def loopback_receivers_allowed(settings: Any) -> None:
    """The receivers here listen on loopback, which webhooks refuse unless allowed."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    one = Receiver()
    yield one
    one.close()


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """Run enqueued tasks in-process (the real task code, without a worker)."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def dana(project: Any) -> Any:
    """Admin of the project."""
    user = get_user_model().objects.create_user(username="dana", password="dana-pw-1")
    Membership.objects.create(project=project, user=user, role="admin")
    return user


@pytest.fixture
def run_name() -> str:
    return "llama-notify"


@pytest.fixture
def endpoint(project: Any, receiver: Receiver) -> WebhookEndpoint:
    return webhook_services.webhook_endpoint_create(
        project=project, name="oncall-slack", url=receiver.url, events=[]
    )


def _interruption(run: Run, key: str = "i-1", **fields: Any) -> Any:
    attempt = telemetry_services.attempt_ensure(run=run, number=3, hosts=["h017"])
    values = {
        "category": "Faulty GPU",
        "hosts": ["h017", "h018"],
        "message": "Xid 79 <GPU fell off the bus> & NCCL timeout",
        "step": 12_345,
        "planned": False,
        **fields,
    }
    return interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=T0, attempt=attempt, **values
    )


def _sweep_until_settled(start: datetime, *, limit: int = 20) -> list[str]:
    """Act as the retry sweep: whenever a delivery is due, attempt it."""
    outcomes: list[str] = []
    now = start
    for _ in range(limit):
        due = webhook_selectors.deliveries_due(now=now)
        if not due:
            pending = WebhookDelivery.objects.filter(status="pending").order_by("next_attempt_at")
            if not pending.exists():
                return outcomes
            now = pending.first().next_attempt_at  # jump to the next due time
            continue
        for pk in due:
            outcomes.append(webhook_services.webhook_deliver(delivery_pk=pk, now=now))
    return outcomes


# --- Delivery ----------------------------------------------------------------------------------


def test_an_unexpected_interruption_is_delivered_and_recorded(
    run, endpoint, receiver, eager_celery, django_capture_on_commit_callbacks
):
    # given a project webhook; when an unexpected interruption is recorded and notified
    with django_capture_on_commit_callbacks(execute=True):
        interruption = _interruption(run)
        webhook_services.interruption_notify(interruption=interruption)

    # then the receiver got one Slack-compatible POST naming run, category, hosts, message
    assert len(receiver.requests) == 1
    sent = receiver.requests[0]
    assert sent["path"] == "/hook" and sent["content_type"] == "application/json"
    text = sent["body"]["text"]
    assert "llama-notify" in text and "Faulty GPU" in text and "h017, h018" in text
    # Slack control characters in job-supplied text are escaped
    assert "&lt;GPU fell off the bus&gt; &amp; NCCL" in text
    assert f"/runs/{run.pk}/" in text
    assert sent["body"]["blocks"][0]["text"]["text"] == text
    facts = sent["body"]["chronicle"]
    assert facts["event"] == "interruption" and facts["hosts"] == ["h017", "h018"]
    assert facts["category"] == "Faulty GPU" and facts["step"] == 12_345
    # and the delivery's outcome is recorded
    delivery = WebhookDelivery.objects.get()
    assert delivery.endpoint == endpoint and delivery.event == "interruption"
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    assert delivery.delivered_at is not None and delivery.last_error == ""
    assert delivery.next_attempt_at is None


def test_two_500s_then_200_is_retried_and_delivered_on_the_third_attempt(run, endpoint, receiver):
    # given a receiver that fails twice
    receiver.statuses = [500, 500]
    webhook_services.interruption_notify(interruption=_interruption(run))
    delivery = WebhookDelivery.objects.get()
    start = timezone.now()

    # when the first attempt fails, the next one waits for the backoff
    assert webhook_services.webhook_deliver(delivery_pk=delivery.pk, now=start) == "retry"
    delivery.refresh_from_db()
    first_wait = timedelta(seconds=webhook_services.RETRY_BACKOFF_S[0])
    assert delivery.next_attempt_at == start + first_wait
    assert (delivery.status, delivery.last_status_code) == ("pending", 500)
    assert "500" in delivery.last_error
    assert webhook_services.webhook_deliver(
        delivery_pk=delivery.pk, now=start + first_wait / 2
    ) == ("not due")
    assert len(receiver.requests) == 1

    # then the sweep retries it when due, until it is delivered
    outcomes = _sweep_until_settled(start + first_wait)
    assert outcomes == ["retry", "delivered"]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 3, 200)
    assert delivery.last_error == ""
    assert len(receiver.requests) == 3
    # every attempt sent the same payload
    assert receiver.requests[0]["body"] == receiver.requests[2]["body"]


def test_an_endpoint_that_always_fails_is_given_up_with_the_error_shown(
    client, dana, run, endpoint, receiver
):
    # given a receiver answering 503 to everything
    receiver.statuses = [503] * 50
    webhook_services.interruption_notify(interruption=_interruption(run))

    # when the sweep keeps retrying
    outcomes = _sweep_until_settled(timezone.now())

    # then it gives up after MAX_ATTEMPTS, with the last answer recorded
    assert outcomes == ["retry"] * (webhook_services.MAX_ATTEMPTS - 1) + ["failed"]
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", webhook_services.MAX_ATTEMPTS)
    assert delivery.last_status_code == 503
    # by its status code only: the receiver's body is not shown
    assert delivery.last_error == "HTTP 503"
    assert delivery.next_attempt_at is None
    assert len(receiver.requests) == webhook_services.MAX_ATTEMPTS
    assert webhook_selectors.deliveries_due(now=timezone.now() + timedelta(days=1)) == []
    # and the admins' page shows the outcome
    client.force_login(dana)
    page = client.get("/projects/pretrain/webhooks/").content.decode()
    assert f'data-delivery="{delivery.pk}" data-status="failed"' in page
    assert "HTTP 503" in page and "Failed (gave up)" in page
    assert "down for maintenance" not in page


def test_a_refused_connection_is_an_error_without_a_status_code(run, project):
    # given an endpoint on a loopback port nobody listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    webhook_services.webhook_endpoint_create(
        project=project, name="gone", url=f"http://127.0.0.1:{port}/", events=[]
    )
    webhook_services.interruption_notify(interruption=_interruption(run))
    delivery = WebhookDelivery.objects.get()

    assert webhook_services.webhook_deliver(delivery_pk=delivery.pk) == "retry"

    delivery.refresh_from_db()
    assert delivery.last_status_code is None
    # one generic message, whatever the socket said
    assert delivery.last_error == "Could not connect to the endpoint."


def test_redirects_are_not_followed(run, endpoint, receiver):
    # given a receiver that redirects to another listener
    other = Receiver()
    try:
        receiver.statuses = [302]
        receiver.redirect_to = other.url
        webhook_services.interruption_notify(interruption=_interruption(run))

        outcome = webhook_services.webhook_deliver(delivery_pk=WebhookDelivery.objects.get().pk)

        # then the payload went to the configured URL only
        assert outcome == "retry"
        assert len(receiver.requests) == 1 and other.requests == []
        assert WebhookDelivery.objects.get().last_status_code == 302
    finally:
        other.close()


def test_a_delivery_whose_endpoint_was_disabled_gives_up(run, endpoint, receiver):
    webhook_services.interruption_notify(interruption=_interruption(run))
    webhook_services.webhook_endpoint_set_enabled(endpoint=endpoint, enabled=False)

    assert (
        webhook_services.webhook_deliver(delivery_pk=WebhookDelivery.objects.get().pk) == "failed"
    )

    assert receiver.requests == []
    assert "disabled" in WebhookDelivery.objects.get().last_error


# --- Which events, and only once -------------------------------------------------------------


def test_the_same_event_is_delivered_once(
    run, endpoint, receiver, eager_celery, django_capture_on_commit_callbacks
):
    # when the same interruption is reported twice (ingest retries) and notified each time
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(2):
            webhook_services.interruption_notify(interruption=_interruption(run, key="same"))
        again = webhook_services.notify(
            project=run.project, event="interruption", event_key="x:1", payload={"text": "a"}
        )
        twice = webhook_services.notify(
            project=run.project, event="interruption", event_key="x:1", payload={"text": "a"}
        )

    # then one delivery per event and endpoint, each POSTed once
    assert len(again) == 1 and twice == []
    assert WebhookDelivery.objects.count() == 2
    assert len(receiver.requests) == 2


def test_the_delivery_task_twice_sends_once(run, endpoint, receiver):
    from logbook.tasks import webhook_deliver_task

    webhook_services.interruption_notify(interruption=_interruption(run))
    pk = WebhookDelivery.objects.get().pk

    assert webhook_deliver_task(pk) == "delivered"
    assert webhook_deliver_task(pk) == "not due"
    assert len(receiver.requests) == 1


def test_planned_interruptions_subscriptions_and_disabled_endpoints(project, run, receiver):
    # given one endpoint for SDC only, one disabled, one for everything
    sdc_only = webhook_services.webhook_endpoint_create(
        project=project, name="sdc", url=receiver.url, events=["sdc_confirmed"]
    )
    disabled = webhook_services.webhook_endpoint_create(
        project=project, name="off", url=receiver.url, events=[]
    )
    webhook_services.webhook_endpoint_set_enabled(endpoint=disabled, enabled=False)
    everything = webhook_services.webhook_endpoint_create(
        project=project, name="all", url=receiver.url, events=[]
    )

    # when a planned and an unexpected interruption are notified
    planned = _interruption(run, key="p-1", category="Host Maintenance", planned=True)
    assert webhook_services.interruption_notify(interruption=planned) == []
    webhook_services.interruption_notify(interruption=_interruption(run, key="u-1"))

    # then only the catch-all endpoint gets the unexpected one
    assert [d.endpoint for d in WebhookDelivery.objects.all()] == [everything]
    assert not WebhookDelivery.objects.filter(endpoint__in=[sdc_only, disabled]).exists()


def test_a_confirmed_sdc_notifies_once(project, run, receiver):
    # given an SDC-only endpoint and a pending SDC record
    webhook_services.webhook_endpoint_create(
        project=project, name="sdc", url=receiver.url, events=["sdc_confirmed"]
    )
    replay = sdc_services.sdc_record(
        run=run, source_key="s-1", step=4096, detected_at=T0, device="GPU-abc", host="h017"
    )

    # a pending verdict notifies nothing
    assert webhook_services.sdc_confirmed_notify(replay) == []

    # when the verdict becomes confirmed (and the record is saved again later)
    replay.verdict = SdcReplay.Verdict.CONFIRMED
    replay.action = SdcReplay.Action.QUARANTINED
    replay.save()
    first = webhook_services.sdc_confirmed_notify(replay)
    second = webhook_services.sdc_confirmed_notify(replay)

    # then one delivery, naming step, device and host
    assert len(first) == 1 and second == []
    webhook_services.webhook_deliver(delivery_pk=first[0].pk)
    body = receiver.requests[0]["body"]
    assert "step 4096" in body["text"] and "GPU-abc on h017" in body["text"]
    assert body["chronicle"]["event"] == "sdc_confirmed"
    assert body["chronicle"]["action"] == "quarantined"


def test_setting_an_sdc_verdict_is_audited_and_pages_once(project, run, alice):
    # given an SDC-only endpoint and a pending SDC record
    endpoint = webhook_services.webhook_endpoint_create(
        project=project, name="sdc", url="http://127.0.0.1:9/hook", events=["sdc_confirmed"]
    )
    replay = sdc_services.sdc_record(run=run, source_key="s-1", step=4096, detected_at=T0)

    # when alice confirms it, then sets the same verdict again with the action taken
    sdc_services.sdc_verdict_set(replay=replay, user=alice, verdict="confirmed")
    sdc_services.sdc_verdict_set(
        replay=replay, user=alice, verdict="confirmed", action="quarantined", replay_result="0x1f"
    )

    # then the record holds both decisions, each audited with its before and after
    replay.refresh_from_db()
    assert (replay.verdict, replay.action, replay.replay_result) == (
        "confirmed",
        "quarantined",
        "0x1f",
    )
    events = AuditEvent.objects.filter(entity="sdc_replay", object_id=replay.pk)
    assert [event.changes for event in events.order_by("at", "pk")] == [
        {"verdict": ["pending", "confirmed"]},
        {"action": ["none", "quarantined"], "replay_result": ["", "0x1f"]},
    ]
    assert {(event.username, event.project_id) for event in events} == {("alice", project.pk)}
    # and the webhook is paged once
    assert list(WebhookDelivery.objects.values_list("endpoint", "event")) == [
        (endpoint.pk, "sdc_confirmed")
    ]


def test_an_sdc_verdict_outside_the_choices_is_refused(run, alice):
    replay = sdc_services.sdc_record(run=run, source_key="s-1", step=1, detected_at=T0)

    with pytest.raises(ValidationError) as refused:
        sdc_services.sdc_verdict_set(
            replay=replay, user=alice, verdict="maybe", action="pray", replay_result="x" * 501
        )

    assert set(refused.value.message_dict) == {"verdict", "action", "replay_result"}
    replay.refresh_from_db()
    assert replay.verdict == "pending"
    assert not AuditEvent.objects.filter(entity="sdc_replay").exists()


def test_confirming_in_the_admin_goes_through_the_verdict_service(
    project, run, admin_client, form_values
):
    # given an SDC-only endpoint and a pending record
    endpoint = webhook_services.webhook_endpoint_create(
        project=project, name="sdc", url="http://127.0.0.1:9/hook", events=["sdc_confirmed"]
    )
    replay = sdc_services.sdc_record(
        run=run, source_key="s-1", step=4096, detected_at=T0, observed_value=2.5
    )
    url = f"/admin/logbook/sdcreplay/{replay.pk}/change/"

    # when an admin changes the verdict and the replay's hardware in the admin's form
    data = form_values(admin_client, url)
    data |= {"verdict": ["confirmed"], "replay_hardware": ["spare node h900"], "_save": ["Save"]}
    response = admin_client.post(url, data)

    # then the record is saved, the decision audited and the webhook paged once
    assert response.status_code == 302, response.content.decode()[:2000]
    replay.refresh_from_db()
    assert (replay.verdict, replay.replay_hardware, replay.step) == (
        "confirmed",
        "spare node h900",
        4096,
    )
    (event,) = AuditEvent.objects.filter(entity="sdc_replay", object_id=replay.pk)
    assert event.username == "admin"
    assert event.changes == {
        "verdict": ["pending", "confirmed"],
        "replay_hardware": ["", "spare node h900"],
    }
    assert list(WebhookDelivery.objects.values_list("endpoint", flat=True)) == [endpoint.pk]

    # and saving the form again changes nothing and pages nobody again
    data = form_values(admin_client, url) | {"_save": ["Save"]}
    assert admin_client.post(url, data).status_code == 302
    assert AuditEvent.objects.filter(entity="sdc_replay").count() == 1
    assert WebhookDelivery.objects.count() == 1


# --- Runs that stop reporting ----------------------------------------------------------------


def _seen(run: Run, at: datetime, status: str = Attempt.Status.RUNNING) -> None:
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    Attempt.objects.filter(pk=attempt.pk).update(status=status)
    Run.objects.filter(pk=run.pk).update(last_seen_at=at, last_step=777)


def test_a_stalled_run_notifies_once_per_stall(project, other_project, run, endpoint, receiver):
    # given at 10:00: our run silent for 20 min, a run silent for 5 min, a finished run
    # silent for an hour, and another project's silent run (no webhook there)
    now = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    _seen(run, now - timedelta(minutes=20))
    fresh = telemetry_services.run_upsert(project=project, name="fresh")
    _seen(fresh, now - timedelta(minutes=5))
    _seen(
        telemetry_services.run_upsert(project=project, name="done"),
        now - timedelta(hours=1),
        status=Attempt.Status.COMPLETED,
    )
    _seen(telemetry_services.run_upsert(project=other_project, name="x"), now - timedelta(hours=1))

    # when the check runs twice
    first = webhook_services.run_stall_check(now=now)
    second = webhook_services.run_stall_check(now=now + timedelta(minutes=5))

    # then one notification, for our run only
    assert (first, second) == (1, 0)
    delivery = WebhookDelivery.objects.get()
    assert delivery.event == "run_stalled"
    assert delivery.payload["chronicle"]["run"]["name"] == "llama-notify"
    assert delivery.payload["chronicle"]["silent_min"] == 20
    assert "777" in delivery.payload["text"]

    # when the run reports again and then stalls again, it notifies again (the fresh run
    # ends meanwhile, so it does not count)
    _seen(fresh, now, status=Attempt.Status.COMPLETED)
    _seen(run, now + timedelta(minutes=30))
    assert webhook_services.run_stall_check(now=now + timedelta(minutes=40)) == 0
    assert webhook_services.run_stall_check(now=now + timedelta(minutes=46)) == 1
    assert WebhookDelivery.objects.filter(event="run_stalled").count() == 2


def test_a_run_silent_for_days_is_abandoned_not_stalled(run, endpoint):
    now = timezone.now()
    _seen(run, now - webhook_services.RUN_STALL_LOOKBACK - timedelta(minutes=1))
    assert webhook_services.run_stall_check(now=now) == 0


def test_the_stall_check_task(run, endpoint):
    from logbook.tasks import runs_stall_check_task, webhooks_retry_due_task

    _seen(run, timezone.now() - timedelta(hours=1))
    assert runs_stall_check_task() == 1
    assert runs_stall_check_task() == 0
    # the sweep sees the new, due delivery (enqueue only; the worker test below sends)
    assert webhook_selectors.deliveries_due() == [WebhookDelivery.objects.get().pk]
    assert webhooks_retry_due_task.name == "logbook.webhooks_retry_due"


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_delivers_after_commit(celery_worker, project, receiver, wait):
    # given a webhook; when a notification is committed
    run = telemetry_services.run_upsert(project=project, name="worker-run")
    webhook_services.webhook_endpoint_create(
        project=project, name="hook", url=receiver.url, events=[]
    )
    webhook_services.interruption_notify(interruption=_interruption(run))

    # then the worker POSTs it and records the outcome
    wait(
        lambda: WebhookDelivery.objects.filter(status="delivered").exists(),
        what="the worker's delivery",
    )
    assert len(receiver.requests) == 1
    assert WebhookDelivery.objects.get().attempts == 1


# --- The webhooks page ---------------------------------------------------------------------------


PAGE = "/projects/pretrain/webhooks/"


def test_webhooks_page_permissions(client, project, alice, bob, charlie, dana, endpoint):
    assert client.get(PAGE).status_code == 302  # anonymous: to the login page
    expected = {charlie: 404, bob: 403, alice: 403, dana: 200}
    for user, status in expected.items():
        client.force_login(user)
        assert client.get(PAGE).status_code == status, user
        posted = client.post(PAGE, {"action": "add", "name": "x", "url": "https://h.example/"})
        assert posted.status_code == (302 if status == 200 else status), user
        disable = client.post(PAGE, {"action": "disable", "endpoint": endpoint.pk})
        assert disable.status_code == (302 if status == 200 else status), user
    # only dana's changes happened
    assert list(WebhookEndpoint.objects.order_by("name").values_list("name", "enabled")) == [
        ("oncall-slack", False),
        ("x", True),
    ]
    client.force_login(charlie)
    assert client.get("/projects/no-such-project/webhooks/").status_code == 404


def test_admin_adds_an_endpoint_for_some_events(client, dana, project):
    client.force_login(dana)
    refused = client.post(PAGE, {"action": "add", "name": "ftp", "url": "ftp://h.example/x"})
    assert refused.status_code == 200 and "http or https" in refused.content.decode()
    response = client.post(
        PAGE,
        {
            "action": "add",
            "name": "sdc-pager",
            "url": "https://hooks.example/T000/B000",
            "events": ["sdc_confirmed", "run_stalled"],
        },
    )
    assert response.status_code == 302
    added = WebhookEndpoint.objects.get(name="sdc-pager")
    assert added.project == project and added.enabled
    assert added.events == ["sdc_confirmed", "run_stalled"]
    assert client.post(PAGE, {"action": "bogus"}).status_code == 400


def test_webhooks_index_leads_admins_to_their_project(client, dana, alice):
    client.force_login(dana)
    assert client.get("/webhooks/").url == PAGE
    client.force_login(alice)
    page = client.get("/webhooks/")
    assert page.status_code == 200 and "not an admin of any project" in page.content.decode()


def test_webhooks_page_query_count(client, dana, run, endpoint, query_budget):
    client.force_login(dana)
    costs = []
    for count in (1, 15):
        for index in range(count):
            webhook_services.notify(
                project=run.project,
                event="run_stalled",
                event_key=f"q{count}:{index}",
                payload={"text": "x"},
            )
        cost, response = query_budget.run(lambda: client.get(PAGE))
        costs.append(cost)
        assert response.status_code == 200
    query_budget.constant(small=costs[0], big=costs[1], guards="the deliveries")
