"""The slowdown pass end to end through the ingest contract: the jobs of
tests/diagnosis/slowdown_job.py sent as batches and DCGM pushes, the beat's passes run (rank
timings rolled up, slowdowns found), and GET /api/v1/runs/<id>/slowdowns read as a user."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from diagnosis.models import Slowdown
from diagnosis.services import slowdowns as slowdown_services
from logbook.models import AuditEvent, LogbookEntry, WebhookDelivery, WebhookEndpoint
from logbook.services import stragglers as straggler_services
from telemetry.models import Attempt, Run
from tests.diagnosis import slowdown_job


def _slowdowns(client: Client, run: Run) -> list[dict[str, Any]]:
    response = client.get(f"/api/v1/runs/{run.pk}/slowdowns")
    assert response.status_code == 200, response.content
    return response.json()["slowdowns"]


def _passes() -> None:
    straggler_services.rank_timings_refresh()
    slowdown_services.slowdowns_refresh()


@pytest.mark.django_db
def test_each_planted_cause_opens_one_slowdown_named_right_and_noise_opens_none(
    send, client, alice
):
    # given the five jobs, sent as a user's job and exporter send them
    jobs = slowdown_job.jobs("pass", end_s=time.time())
    runs = {job.kind: (job, send(job)) for job in jobs}
    # when the beat's passes run
    _passes()
    # then
    client.force_login(alice)
    for kind, (job, run) in runs.items():
        found = _slowdowns(client, run)
        if kind == "noise":
            assert found == [], found
            continue
        assert len(found) == 1, (kind, found)
        top = found[0]["causes"][0]
        assert top["kind"] == kind, (kind, found[0]["causes"])
        assert set(job.hosts) <= set(top["hosts"]), (kind, top)
        assert set(job.config_keys) <= set(top["config_keys"]), (kind, top)
        if kind == "section":
            assert "data_loading" in top["detail"]
        assert found[0]["drop_pct"] >= 5
        assert found[0]["gpu_hours_lost"] > 0
        assert set(found[0]) == {"id", "attempt", "start_step", "end_step", "start_time",
                                 "end_time", "metric", "baseline", "value", "drop_pct",
                                 "gpu_hours_lost", "causes"}  # fmt: skip
        assert set(top) == {"kind", "detail", "hosts", "ranks", "devices", "config_keys",
                            "confidence", "evidence"}  # fmt: skip


@pytest.mark.django_db
def test_the_config_of_each_attempt_is_kept_and_a_pass_twice_changes_nothing(send, client, alice):
    job = slowdown_job.build("config_change", "cfg-run", end_s=time.time())
    run = send(job)
    configs = dict(Attempt.objects.filter(run=run).values_list("number", "config"))
    assert configs[1]["micro_batch_size"] == 4 and configs[2]["micro_batch_size"] == 8
    # The run's config is the latest attempt's, as before.
    assert run.config["micro_batch_size"] == 8
    _passes()
    first = list(Slowdown.objects.filter(run=run).values_list("pk", "start_step", "cause_kind"))
    version = Run.objects.get(pk=run.pk).data_version
    assert slowdown_services.slowdowns_scan(run_id=run.pk) == 0
    assert (
        list(Slowdown.objects.filter(run=run).values_list("pk", "start_step", "cause_kind"))
        == first
    )
    assert Run.objects.get(pk=run.pk).data_version == version


@pytest.mark.django_db
def test_outsiders_see_no_slowdowns_and_viewers_cannot_decide(send, client, bob, charlie):
    job = slowdown_job.build("section", "private-run", end_s=time.time())
    run = send(job)
    _passes()
    slowdown = Slowdown.objects.get(run=run)
    client.force_login(charlie)
    assert client.get(f"/api/v1/runs/{run.pk}/slowdowns").status_code == 404
    response = client.post(f"/api/v1/slowdowns/{slowdown.pk}/decision", {"status": "confirmed"},
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 404
    client.force_login(bob)
    response = client.post(f"/api/v1/slowdowns/{slowdown.pk}/decision", {"status": "confirmed"},
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 403
    response = client.post(f"/api/v1/slowdowns/{slowdown.pk}/decision", {"status": "bogus"},
                           content_type="application/json")  # fmt: skip
    assert response.status_code in (400, 403)


@pytest.mark.django_db
def test_confirming_with_a_corrected_cause_is_audited_and_drafts_a_logbook_entry(
    send, client, alice
):
    job = slowdown_job.build("config_change", "confirm-run", end_s=time.time())
    run = send(job)
    _passes()
    slowdown = Slowdown.objects.get(run=run)
    client.force_login(alice)
    response = client.post(
        f"/api/v1/slowdowns/{slowdown.pk}/decision",
        {"status": "confirmed", "cause_kind": "config_change", "note": "bigger micro batches"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    slowdown.refresh_from_db()
    assert slowdown.status == "confirmed" and slowdown.decided_by == alice
    audit = AuditEvent.objects.get(entity="slowdown", object_id=slowdown.pk)
    assert audit.user == alice and audit.changes["status"] == ["open", "confirmed"]
    entry = LogbookEntry.objects.get(run=run, source_key=f"draft:slowdown:{slowdown.pk}")
    assert "micro_batch_size changed" in entry.title
    assert entry.config_changes == [{"key": "micro_batch_size", "before": "4", "after": "8"}]
    # A later pass keeps the decision and the cause it was charged to.
    slowdown_services.slowdowns_scan(run_id=run.pk)
    slowdown.refresh_from_db()
    assert slowdown.status == "confirmed" and slowdown.cause_kind == "config_change"


@pytest.mark.django_db
def test_a_costly_slowdown_notifies_the_webhooks_once(send, project, settings):
    settings.SLOWDOWN_WEBHOOK_GPU_HOURS = 0.01
    WebhookEndpoint.objects.create(project=project, name="ops", url="http://127.0.0.1:9/hook",
                                   events=["slowdown"])  # fmt: skip
    job = slowdown_job.build("thermal", "hot-run", end_s=time.time())
    run = send(job)
    _passes()
    slowdown_services.slowdowns_scan(run_id=run.pk)
    deliveries = WebhookDelivery.objects.filter(event="slowdown")
    assert deliveries.count() == 1
    payload = deliveries.get().payload
    assert payload["chronicle"]["cause"] == "thermal"
    assert payload["chronicle"]["hosts"] == list(job.hosts)
