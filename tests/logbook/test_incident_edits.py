"""Two people editing the same incident, through the page and the API: the second save sees
the first and loses nothing, a field both changed is named, a stale status move changes
nothing, the API answers 409 on a stale version and refuses bad input."""

from __future__ import annotations

import pytest
from django.test import Client

from logbook.models import AuditEvent, Interruption
from logbook.services import triage
from telemetry.models import Membership
from tests.logbook.incident_queue import build_queue, form_data, shown_version


@pytest.mark.django_db
def test_second_save_through_the_page_sees_the_first_and_loses_nothing(alice, bob, project):
    # given bob on-call too, and both with the incident's page open at version 1
    Membership.objects.filter(user=bob).update(role=Membership.Role.ONCALL)
    incident = build_queue(project)["incidents"][1]
    alice_client, bob_client = Client(), Client()
    alice_client.force_login(alice)
    bob_client.force_login(bob)
    url = f"/incidents/{incident.pk}/"
    alice_form = form_data(incident)
    bob_form = form_data(incident)
    assert shown_version(alice_client.get(url).content.decode()) == 1
    assert shown_version(bob_client.get(url).content.decode()) == 1

    # when alice saves a new root cause, then bob saves his notes and a severity
    assert alice_client.post(url, {**alice_form, "root_cause": "nic"}).status_code == 302
    response = bob_client.post(url, {**bob_form, "notes": "Bob: cable swapped", "severity": "high"})

    # then bob is told who changed what, and nothing of his was written over hers
    page = response.content.decode()
    assert response.status_code == 200
    assert "Someone else (alice, " in page
    assert "changed this incident while you were editing" in page
    assert "Root cause: faulty-gpu → nic" in page
    incident.refresh_from_db()
    assert (incident.root_cause.slug, incident.notes, incident.severity) == ("nic", "", "medium")
    assert AuditEvent.objects.filter(object_id=incident.pk, username="bob").count() == 0
    # and his input is kept, merged with hers, at the current version
    assert "Bob: cable swapped</textarea>" in page
    assert '<option value="high" selected>' in page
    assert '<option value="nic" selected>' in page
    assert shown_version(page) == 2

    # when bob saves the form as it now stands
    merged = form_data(incident, notes="Bob: cable swapped", severity="high")
    assert bob_client.post(url, merged).status_code == 302

    # then both changes are kept
    incident.refresh_from_db()
    assert (incident.root_cause.slug, incident.notes, incident.severity) == (
        "nic",
        "Bob: cable swapped",
        "high",
    )
    assert incident.version == 3


@pytest.mark.django_db
def test_both_changing_the_same_field_is_named(alice, bob, project):
    Membership.objects.filter(user=bob).update(role=Membership.Role.ONCALL)
    incident = build_queue(project)["incidents"][1]
    alice_client, bob_client = Client(), Client()
    alice_client.force_login(alice)
    bob_client.force_login(bob)
    url = f"/incidents/{incident.pk}/"
    start = form_data(incident)

    alice_client.post(url, {**start, "severity": "critical"})
    page = bob_client.post(url, {**start, "severity": "low"}).content.decode()

    assert "You both changed <strong>Severity</strong>" in page
    assert "Severity: medium → critical" in page
    assert '<option value="low" selected>' in page  # his value, for him to decide
    assert Interruption.objects.get(pk=incident.pk).severity == "critical"


@pytest.mark.django_db
def test_stale_status_move_through_the_page_changes_nothing(client, alice, project):
    incident = build_queue(project)["incidents"][1]
    triage.incident_update(interruption=incident, user=alice, version=1, changes={"notes": "n"})
    client.force_login(alice)

    response = client.post(
        f"/incidents/{incident.pk}/", {"action": "transition", "version": 1, "status": "triaged"}
    )

    assert response.status_code == 200
    assert "changed this incident while you were editing" in response.content.decode()
    assert Interruption.objects.get(pk=incident.pk).status == "open"


@pytest.mark.django_db
def test_api_patch_edits_and_answers_409_on_a_stale_version(alice, bob, project):
    # given bob on-call too
    Membership.objects.filter(user=bob).update(role=Membership.Role.ONCALL)
    incident = build_queue(project)["incidents"][1]
    alice_client, bob_client = Client(), Client()
    alice_client.force_login(alice)
    bob_client.force_login(bob)
    url = f"/api/v1/incidents/{incident.pk}"

    # when alice patches version 1
    response = alice_client.patch(
        url,
        {"version": 1, "root_cause": "nic", "hosts": ["qh7"], "status": "triaged"},
        content_type="application/json",
    )

    # then the fields and the status move (one audit event each)
    assert response.status_code == 200
    body = response.json()["incident"]
    assert (body["root_cause"]["slug"], body["hosts"], body["status"]) == (
        "nic",
        ["qh7"],
        "triaged",
    )
    assert (body["triaged_by"], body["version"]) == ("alice", 3)

    # when bob patches the version 1 he read
    response = bob_client.patch(
        url, {"version": 1, "notes": "bob's view"}, content_type="application/json"
    )

    # then 409 with the current state and what changed since
    assert response.status_code == 409
    conflict = response.json()
    assert "alice" in conflict["detail"]
    assert conflict["current"]["version"] == 3
    assert conflict["current"]["root_cause"]["slug"] == "nic"
    assert [e["user"] for e in conflict["their_changes"]] == ["alice", "alice"]
    assert conflict["their_changes"][0]["changes"]["root_cause"] == ["faulty-gpu", "nic"]
    assert conflict["their_changes"][1]["changes"]["status"] == ["open", "triaged"]
    assert Interruption.objects.get(pk=incident.pk).notes == ""

    # and the history shows both of alice's changes, newest first
    history = bob_client.get(url).json()["history"]
    assert [sorted(e["changes"]) for e in history] == [
        ["status", "triaged_at", "triaged_by", "version"],
        ["hosts", "root_cause", "version"],
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {"notes": "no version"},
        {"version": 1, "planned": True},
        {"version": 1, "severity": "apocalyptic"},
        {"version": 1, "root_cause": "gremlins"},
        {"version": 1, "lost_steps": -3},
        {"version": 1, "status": "resolved"},  # open cannot jump to resolved
        {"version": 1, "hosts": "qh1"},
    ],
)
def test_api_patch_refuses_bad_input(client, alice, project, body):
    incident = build_queue(project)["incidents"][1]
    client.force_login(alice)

    response = client.patch(
        f"/api/v1/incidents/{incident.pk}", body, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()
    incident.refresh_from_db()
    assert (incident.version, incident.status, incident.root_cause.slug) == (
        1,
        "open",
        "faulty-gpu",
    )
    assert not AuditEvent.objects.filter(object_id=incident.pk).exists()
