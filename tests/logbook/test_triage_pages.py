"""Auto-triage on the pages and in the API: the queue's suggestion column and order, the
incident page's evidence, runbook and one-click Confirm, the accuracy page and its JSON."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook.models import AuditEvent, Interruption, TriageSuggestion
from logbook.services import autotriage as autotriage_services
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services

T0 = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)
DEMO = (
    "NCCL watchdog: Watchdog caught collective operation timeout ; "
    "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus"
)


CAUSELESS = (
    "the job exited",
    "Killed",
    "worker exited with status 1",
    "the training run has ended",
    "job did not complete",
)


def suggested(project: Any, *, key: str = "s1", message: str = DEMO, at: datetime = T0):
    run = telemetry_services.run_upsert(project=project, name="page-run")
    interruption = interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=at, hosts=["node-17"], message=message
    )
    autotriage_services.suggestion_make(interruption_id=interruption.pk)
    return interruption


@pytest.mark.django_db
def test_the_queue_shows_each_suggestion_and_open_ones_first(client, project, alice):
    older = suggested(project, key="old", at=T0 - timedelta(hours=1))
    triaged = suggested(project, key="new", at=T0)
    Interruption.objects.filter(pk=triaged.pk).update(status="triaged")
    client.force_login(alice)
    page = client.get("/incidents/", {"status": "all"}).content.decode()
    assert page.index(f'data-incident="{older.pk}"') < page.index(f'data-incident="{triaged.pk}"')
    assert "Faulty GPU</span>" in page
    # XID 79 and "fallen off the bus" agree (0.99); the reading by meaning agrees too, and
    # a vote raises no suggestion to certainty (autotriage.VOTE_CAP)
    assert "99%" in page and "100%" not in page and "node-17" in page


@pytest.mark.django_db
def test_the_incident_page_shows_evidence_runbook_and_confirm(client, project, alice):
    interruption = suggested(project)
    client.force_login(alice)
    page = client.get(f"/incidents/{interruption.pk}/").content.decode()
    assert 'id="incident-suggestion"' in page
    assert "Suggested by auto-triage: Faulty GPU" in page
    assert "79, GPU has fallen off the bus" in page  # the matched line, as evidence
    assert "Runbook: Faulty GPU" in page
    assert "docs.nvidia.com/deploy/xid-errors" in page  # the runbook cites its source
    assert 'id="suggestion-confirm"' in page


@pytest.mark.django_db
def test_one_click_confirm_triages_and_is_audited(client, project, alice):
    interruption = suggested(project)
    client.force_login(alice)
    response = client.post(
        f"/incidents/{interruption.pk}/", {"action": "confirm", "version": interruption.version}
    )
    assert response.status_code == 302
    interruption.refresh_from_db()
    assert interruption.root_cause.slug == "faulty-gpu"
    assert interruption.status == "triaged"
    assert list(interruption.hosts.values_list("name", flat=True)) == ["node-17"]
    audit = AuditEvent.objects.filter(object_id=interruption.pk)
    assert {event.username for event in audit} == {"alice"}
    assert TriageSuggestion.objects.get().outcome == "confirmed"
    page = client.get(f"/incidents/{interruption.pk}/").content.decode()
    assert 'id="suggestion-confirm"' not in page  # decided: no second confirm
    assert "Confirmed by alice" in page


@pytest.mark.django_db
def test_a_viewer_cannot_confirm_and_an_outsider_sees_nothing(client, project, bob, charlie):
    interruption = suggested(project)
    client.force_login(bob)
    assert (
        'id="suggestion-confirm"'
        not in client.get(f"/incidents/{interruption.pk}/").content.decode()
    )
    denied = client.post(f"/incidents/{interruption.pk}/", {"action": "confirm", "version": 1})
    assert denied.status_code == 403
    client.force_login(charlie)
    assert client.get(f"/incidents/{interruption.pk}/").status_code == 404
    assert client.get("/api/v1/triage/accuracy").json()["categories"] == []


@pytest.mark.django_db
def test_a_stale_confirm_changes_nothing(client, project, alice):
    interruption = suggested(project)
    client.force_login(alice)
    response = client.post(f"/incidents/{interruption.pk}/", {"action": "confirm", "version": 99})
    assert response.status_code == 200
    interruption.refresh_from_db()
    assert interruption.status == "open" and interruption.root_cause.slug == "unknown"


@pytest.mark.django_db
def test_the_api_carries_the_suggestion_or_null(client, project, alice):
    with_one = suggested(project)
    # Messages that name no cause get no suggestion, with the reading by meaning on too: it
    # abstains where they read like its no-cause class (triage_semantic.NO_CAUSE); none of
    # these is one of the messages that class was trained on.
    causeless = [
        suggested(project, key=f"plain-{i}", message=message) for i, message in enumerate(CAUSELESS)
    ]
    client.force_login(alice)
    listed = {row["id"]: row for row in client.get("/api/v1/incidents").json()["incidents"]}
    assert {message: listed[without.pk]["suggestion"] for message, without in zip(
        CAUSELESS, causeless, strict=True
    )} == dict.fromkeys(CAUSELESS)  # fmt: skip
    suggestion = listed[with_one.pk]["suggestion"]
    assert suggestion["category"] == "faulty-gpu"
    assert suggestion["category_name"] == "Faulty GPU"
    assert suggestion["hosts"] == ["node-17"]
    assert 0.9 <= suggestion["confidence"] <= 1
    assert suggestion["runbook_url"] == "/taxonomy/#faulty-gpu"
    assert set(suggestion["evidence"][0]) == {"kind", "at", "text", "url"}
    detail = client.get(f"/api/v1/incidents/{with_one.pk}").json()
    assert detail["incident"]["suggestion"] == suggestion


@pytest.mark.django_db
def test_accuracy_counts_confirmed_and_overridden_per_category(client, project, alice):
    confirmed = suggested(project, key="a")
    overridden = suggested(project, key="b", at=T0 + timedelta(minutes=5))
    client.force_login(alice)
    client.post(f"/incidents/{confirmed.pk}/", {"action": "confirm", "version": confirmed.version})
    client.post(
        f"/incidents/{overridden.pk}/",
        {"version": overridden.version, "root_cause": "io-expansion-board", "severity": "medium"},
    )
    overridden.refresh_from_db()
    client.post(
        f"/incidents/{overridden.pk}/",
        {"action": "transition", "status": "triaged", "version": overridden.version},
    )
    body = client.get("/api/v1/triage/accuracy").json()
    (row,) = body["categories"]
    assert (row["category"], row["confirmed"], row["overridden"]) == ("faulty-gpu", 1, 1)
    assert row["confirmed_share"] == 0.5
    assert body["triaged_with_suggestion"] == 2
    assert body["median_to_triage_with_suggestion_s"] > 0
    page = client.get("/incidents/accuracy/").content.decode()
    assert 'data-category="faulty-gpu"' in page and "50%" in page


@pytest.mark.django_db
def test_fleet_counts_a_suggested_culprit_only_once_confirmed(client, project, alice):
    # given a bare watchdog timeout reported on h1 whose attempt's slow rank ran on h3
    run = telemetry_services.run_upsert(project=project, name="fleet-run")
    attempt = telemetry_services.attempt_ensure(run=run, number=1, hosts=["h1", "h3"])
    interruption = interruption_services.interruption_record(
        run=run, source_key="f1", occurred_at=T0, attempt=attempt, hosts=["h1"],
        message="NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus",
    )  # fmt: skip
    autotriage_services.suggestion_make(interruption_id=interruption.pk)
    TriageSuggestion.objects.filter(interruption=interruption).update(hosts=["h3"])
    client.force_login(alice)

    def fleet_hosts() -> dict[str, int]:
        rows = client.get("/api/v1/fleet/hosts", {"since": "2026-05-01"}).json()["hosts"]
        return {row["name"]: row["interruptions"] for row in rows}

    # the suggestion alone blames nobody on the fleet pages
    assert fleet_hosts() == {"h1": 1}
    # when on-call confirms it, its culprit is the incident's host
    interruption.refresh_from_db()
    client.post(
        f"/incidents/{interruption.pk}/", {"action": "confirm", "version": interruption.version}
    )
    assert fleet_hosts() == {"h3": 1}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_accuracy_page_right_aligns_its_numbers_in_chromium(
    live_server, browser, login_page, project, alice
):
    # given a confirmed suggestion
    confirmed = suggested(project)
    autotriage_services.suggestion_confirm(
        interruption=confirmed, user=alice, version=confirmed.version
    )
    page = browser.new_page()
    login_page(page, live_server.url, "alice")
    page.wait_for_selector("header nav")

    # when alice opens the accuracy page
    page.goto(f"{live_server.url}/incidents/accuracy/")
    aligned = page.eval_on_selector_all(
        "#accuracy th, #accuracy td",
        "cells => cells.map(c => [c.classList.contains('num'), getComputedStyle(c).textAlign])",
    )
    page.close()

    # then every numeric column (head and cells) is right-aligned, the category left
    assert {align for numeric, align in aligned if numeric} == {"right"}
    assert {align for numeric, align in aligned if not numeric} == {"left"}
    assert sum(numeric for numeric, _ in aligned) == 12
