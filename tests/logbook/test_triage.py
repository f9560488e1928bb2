"""The triage services: each edit of an incident is audited field by field with its before
and after, status moves record who and when, a stale version changes nothing, and notes
never reach the page as code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from logbook.models import AuditEvent, Interruption
from logbook.services import interruptions as interruption_services
from logbook.services import triage
from telemetry import services as telemetry_services

T0 = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


def make_incident(project: Any, *, key: str = "i1", at: datetime = T0, **extra: Any):
    run = telemetry_services.run_upsert(project=project, name="triage-run")
    values = {"category": "faulty-gpu", "hosts": ["h2", "h1"], "devices": ["GPU-a"], **extra}
    return interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=at, **values
    )


def events_of(incident: Interruption) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(entity="interruption", object_id=incident.pk).order_by("pk")
    )


# --- incident_update ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_each_field_edit_is_audited_with_before_and_after(project, alice):
    # given an incident as ingest opened it: Faulty GPU on h1, h2 and one device
    incident = make_incident(project)
    assert (incident.version, incident.status, incident.severity) == (1, "open", "medium")

    # when alice edits every editable field at once
    updated = triage.incident_update(
        interruption=incident,
        user=alice,
        version=1,
        changes={
            "root_cause": "nic",
            "component": "ConnectX-7 port 2",
            "hosts": ["h3", "h1"],
            "devices": [],
            "severity": "high",
            "manual_intervention": True,
            "lost_steps": 345,
            "notes": "Cable *reseated*.",
        },
    )

    # then the row has the new values, one version on
    assert updated.version == 2
    assert updated.root_cause.slug == "nic"
    assert sorted(h.name for h in updated.hosts.all()) == ["h1", "h3"]
    assert list(updated.devices.all()) == []
    assert (updated.severity, updated.manual_intervention, updated.lost_steps) == (
        "high",
        True,
        345,
    )
    # and one audit event says who changed which fields from what to what
    [event] = events_of(incident)
    assert (event.user, event.username, event.action) == (alice, "alice", "update")
    assert event.project == project
    assert event.changes == {
        "root_cause": ["faulty-gpu", "nic"],
        "component": ["Faulty GPU", "ConnectX-7 port 2"],
        "hosts": [["h1", "h2"], ["h1", "h3"]],
        "devices": [["GPU-a"], []],
        "severity": ["medium", "high"],
        "manual_intervention": [False, True],
        "lost_steps": [None, 345],
        "notes": ["", "Cable *reseated*."],
        "version": [1, 2],
    }


@pytest.mark.django_db
def test_one_field_edit_records_only_that_field(project, alice):
    incident = make_incident(project)

    triage.incident_update(interruption=incident, user=alice, version=1, changes={"lost_steps": 7})

    [event] = events_of(incident)
    assert event.changes == {"lost_steps": [None, 7], "version": [1, 2]}


@pytest.mark.django_db
def test_an_edit_that_changes_nothing_writes_nothing(project, alice):
    incident = make_incident(project)

    same = triage.incident_update(
        interruption=incident,
        user=alice,
        version=1,
        changes={"root_cause": "faulty-gpu", "hosts": ["h1", "h2"], "severity": "medium"},
    )

    assert same.version == 1
    assert events_of(incident) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "changes",
    [
        {"root_cause": "gremlins"},
        {"severity": "apocalyptic"},
        {"lost_steps": -1},
        {"lost_steps": 2**63},
        {"manual_intervention": "yes"},
        {"hosts": "h1,h2"},
        {"planned": True},
        {"component": "x" * 201},
    ],
)
def test_bad_values_are_refused_before_any_write(project, alice, changes):
    incident = make_incident(project)

    with pytest.raises(ValidationError) as refused:
        triage.incident_update(interruption=incident, user=alice, version=1, changes=changes)

    assert set(refused.value.message_dict) == set(changes)
    incident.refresh_from_db()
    assert incident.version == 1 and incident.root_cause.slug == "faulty-gpu"
    assert events_of(incident) == []


# --- incident_transition ---------------------------------------------------------------------


@pytest.mark.django_db
def test_status_moves_record_who_and_when(project, alice, bob):
    incident = make_incident(project)

    # when alice triages it
    before = timezone.now()
    triaged = triage.incident_transition(
        interruption=incident, user=alice, version=1, status="triaged"
    )
    after = timezone.now()

    # then
    assert (triaged.status, triaged.triaged_by, triaged.version) == ("triaged", alice, 2)
    assert before <= triaged.triaged_at <= after
    assert triaged.resolved_at is None

    # when bob resolves it (the service trusts its caller; pages check roles)
    resolved = triage.incident_transition(
        interruption=incident, user=bob, version=2, status="resolved"
    )

    # then the triage stamp stays and the resolution is bob's
    assert (resolved.status, resolved.resolved_by, resolved.triaged_by) == ("resolved", bob, alice)
    assert resolved.resolved_at >= triaged.triaged_at

    # when alice reopens it: the resolution goes, the audit keeps it
    reopened = triage.incident_transition(
        interruption=incident, user=alice, version=3, status="open"
    )
    assert (reopened.status, reopened.resolved_by, reopened.resolved_at) == ("open", None, None)
    assert reopened.version == 4

    first, second, third = events_of(incident)
    assert first.username == "alice"
    assert first.changes["status"] == ["open", "triaged"]
    assert first.changes["triaged_by"] == [None, "alice"]
    assert first.changes["triaged_at"] == [None, triaged.triaged_at.isoformat()]
    assert first.changes["version"] == [1, 2]
    assert second.username == "bob"
    assert second.changes["status"] == ["triaged", "resolved"]
    assert second.changes["resolved_by"] == [None, "bob"]
    assert "triaged_by" not in second.changes
    assert third.changes["status"] == ["resolved", "open"]
    assert third.changes["resolved_by"] == ["bob", None]
    assert third.changes["resolved_at"] == [resolved.resolved_at.isoformat(), None]


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["resolved", "open", "closed", ""])
def test_moves_outside_the_workflow_are_refused(project, alice, status):
    incident = make_incident(project)

    with pytest.raises(ValidationError):
        triage.incident_transition(interruption=incident, user=alice, version=1, status=status)

    incident.refresh_from_db()
    assert (incident.status, incident.version) == ("open", 1)
    assert events_of(incident) == []


# --- optimistic locking ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_stale_version_raises_and_changes_nothing(project, alice, bob):
    # given alice and bob both loaded version 1; alice saved first
    incident = make_incident(project)
    triage.incident_update(
        interruption=incident, user=alice, version=1, changes={"root_cause": "nic"}
    )

    # when bob saves his edit made on version 1
    with pytest.raises(triage.StaleEdit) as stale:
        triage.incident_update(
            interruption=incident,
            user=bob,
            version=1,
            changes={"root_cause": "faulty-gpu", "notes": "bob was here"},
        )

    # then he is told who changed what, and nothing of his was written
    assert stale.value.current.version == 2
    assert [e.username for e in stale.value.their_changes] == ["alice"]
    assert stale.value.their_changes[0].changes["root_cause"] == ["faulty-gpu", "nic"]
    assert "alice" in str(stale.value)
    incident.refresh_from_db()
    assert (incident.root_cause.slug, incident.notes, incident.version) == ("nic", "", 2)
    assert len(events_of(incident)) == 1

    # and a stale status move is refused the same way
    with pytest.raises(triage.StaleEdit):
        triage.incident_transition(interruption=incident, user=bob, version=1, status="triaged")
    incident.refresh_from_db()
    assert (incident.status, incident.version) == ("open", 2)


@pytest.mark.django_db
def test_their_changes_are_only_those_after_my_version(project, alice, bob):
    incident = make_incident(project)
    triage.incident_update(interruption=incident, user=alice, version=1, changes={"lost_steps": 1})
    triage.incident_update(interruption=incident, user=bob, version=2, changes={"lost_steps": 2})
    triage.incident_transition(interruption=incident, user=alice, version=3, status="triaged")

    with pytest.raises(triage.StaleEdit) as stale:
        triage.incident_update(interruption=incident, user=bob, version=2, changes={"notes": "x"})

    assert [e.changes["version"] for e in stale.value.their_changes] == [[2, 3], [3, 4]]


@pytest.mark.django_db
def test_merge_proposal_keeps_both_peoples_work(project, alice, bob):
    # given alice changed the root cause and the severity since bob loaded version 1
    incident = make_incident(project)
    triage.incident_update(
        interruption=incident,
        user=alice,
        version=1,
        changes={"root_cause": "nic", "severity": "high"},
    )
    mine = {
        "root_cause": "faulty-gpu",  # as bob found it
        "severity": "low",  # bob changed it too
        "notes": "bob's notes",  # only bob changed it
        "hosts": ["h1", "h2"],  # nobody changed it
    }
    with pytest.raises(triage.StaleEdit) as stale:
        triage.incident_update(interruption=incident, user=bob, version=1, changes=mine)

    # when
    proposal, conflicts = triage.merge_proposal(stale=stale.value, mine=mine)

    # then
    assert proposal == {
        "root_cause": "nic",
        "severity": "low",
        "notes": "bob's notes",
        "hosts": ["h1", "h2"],
    }
    assert conflicts == ["severity"]


# --- notes rendered safely -------------------------------------------------------------------

HOSTILE_NOTES = """**Root cause**: NIC flap on `h1`.

<script>alert("x")</script>
[click me](javascript:alert(1))
<img src=x onerror="alert(2)">
<a href="javascript:alert(3)">raw link</a>
[data](data:text/html;base64,PHNjcmlwdD5hbGVydCg0KTwvc2NyaXB0Pg==)
"""


class _Tags(HTMLParser):
    """Every start tag and its attributes, as a browser would build them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.script_text.append(data)


def assert_no_code(page: str) -> None:
    parser = _Tags()
    parser.feed(page)
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert all(attrs.get("src", "").startswith("/static/") for attrs in scripts), scripts
    assert parser.script_text == []
    assert not [tag for tag, _ in parser.tags if tag in ("img", "svg", "iframe", "object")]
    for tag, attrs in parser.tags:
        assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
        if tag == "link" and attrs == {"rel": "icon", "href": "data:,"}:
            continue  # base.html's empty favicon, which spares a request
        for name in ("href", "src", "action"):
            value = attrs.get(name, "").strip().lower()
            assert not value.startswith(("javascript:", "data:")), (tag, attrs)


@pytest.mark.django_db
def test_markdown_notes_are_rendered_and_never_reach_the_page_as_code(client, project, alice):
    # given notes full of payloads, saved through the service
    incident = make_incident(project)
    triage.incident_update(
        interruption=incident, user=alice, version=1, changes={"notes": HOSTILE_NOTES}
    )
    client.force_login(alice)

    # when
    page = client.get(f"/incidents/{incident.pk}/").content.decode()

    # then the Markdown is rendered, the payloads are text (in the notes, the history and the
    # form), and no tag or attribute of theirs exists
    notes = page.split('id="incident-notes">', 1)[1].split("</div>", 1)[0]
    assert "<strong>Root cause</strong>" in notes
    assert "<code>h1</code>" in notes
    assert "&lt;script&gt;" in notes
    assert "click me</a>" in notes
    assert_no_code(page)

    # and the JSON gives the same sanitized HTML
    body = client.get(f"/api/v1/incidents/{incident.pk}").json()
    assert_no_code(body["incident"]["notes_html"])
    assert body["incident"]["notes"] == HOSTILE_NOTES


@pytest.mark.django_db
def test_the_queue_escapes_what_jobs_report(client, project, alice):
    # given a job that sent markup as its category, component and host name
    make_incident(
        project,
        category='<img src=x onerror="alert(1)">',
        component="<script>alert(2)</script>",
        hosts=['h"><svg onload=alert(3)>'],
        at=T0 + timedelta(minutes=1),
    )
    client.force_login(alice)

    page = client.get("/incidents/").content.decode()

    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert_no_code(page)
