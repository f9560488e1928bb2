"""The triage queue and incident pages and their JSON: the queue's filters, who may read and
who may edit, two people editing the same incident (page and API), query counts that do not
grow with the data, and an on-call engineer's pass in a real browser."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from logbook.models import AuditEvent, Interruption
from logbook.services import interruptions as interruption_services
from logbook.services import triage
from telemetry import services as telemetry_services
from telemetry.models import Membership, Run

T0 = datetime(2026, 6, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def build_queue(project: Any, *, run_name: str = "q-run", extra: int = 0) -> dict[str, Any]:
    """One run with four unexpected interruptions (hours 1-4) and a planned one (hour 5);
    a second run with one (hour 6). Hour 2 is on host qh2 and NIC; hour 3 is resolved."""
    run = telemetry_services.run_upsert(project=project, name=run_name)
    other = telemetry_services.run_upsert(project=project, name=f"{run_name}-b")

    def record(target: Run, key: str, hours: int, category: str, host: str) -> Interruption:
        return interruption_services.interruption_record(
            run=target,
            source_key=key,
            occurred_at=T0 + hours * HOUR,
            category=category,
            hosts=[host],
            devices=[f"GPU-{key}"],
        )

    incidents = {
        1: record(run, "u1", 1, "faulty-gpu", "qh1"),
        2: record(run, "u2", 2, "nic", "qh2"),
        3: record(run, "u3", 3, "faulty-gpu", "qh1"),
        4: record(run, "u4", 4, "software-bug", "qh1"),
        6: record(other, "b1", 6, "faulty-gpu", "qh1"),
    }
    planned = record(run, "p1", 5, "planned-maintenance", "qh1")
    Interruption.objects.filter(pk=incidents[3].pk).update(status="resolved")
    queue_extra(run, extra)
    return {"run": run, "other": other, "incidents": incidents, "planned": planned}


def queue_extra(run: Run, count: int, *, first: int = 0) -> None:
    """`count` more unexpected SSD interruptions on `run`, each on a host of its own."""
    for index in range(first, first + count):
        interruption_services.interruption_record(
            run=run,
            source_key=f"x{index}",
            occurred_at=T0 + (10 + index) * HOUR,
            category="ssd",
            hosts=[f"qx{index}"],
            devices=[f"GPU-x{index}"],
        )


def form_data(incident: Interruption, **overrides: Any) -> dict[str, Any]:
    """The edit form as the page fills it for `incident`, with `overrides` typed in."""
    incident = Interruption.objects.get(pk=incident.pk)
    values = {
        "action": "save",
        "version": incident.version,
        "root_cause": incident.root_cause.slug,
        "component": incident.component,
        "hosts": "\n".join(sorted(h.name for h in incident.hosts.all())),
        "devices": "\n".join(sorted(d.uuid for d in incident.devices.all())),
        "severity": incident.severity,
        "lost_steps": "" if incident.lost_steps is None else incident.lost_steps,
        "notes": incident.notes,
        **overrides,
    }
    if incident.manual_intervention and "manual_intervention" not in overrides:
        values["manual_intervention"] = "on"
    return values


def shown_version(page: str) -> int:
    return int(re.search(r'name="version" value="(\d+)" id="id_version"', page).group(1))


def queue_ids(response: Any) -> list[int]:
    return [int(pk) for pk in re.findall(r'data-incident="(\d+)"', response.content.decode())]


# --- the queue ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_queue_lists_open_and_triaged_unexpected_incidents_newest_first(client, alice, project):
    world = build_queue(project)
    ids = {hour: incident.pk for hour, incident in world["incidents"].items()}
    client.force_login(alice)

    response = client.get("/incidents/")

    # hour 3 is resolved and hour 5 planned: neither is in the default queue
    assert response.status_code == 200
    assert queue_ids(response) == [ids[6], ids[4], ids[2], ids[1]]
    assert "4 incidents" in response.content.decode()


@pytest.mark.django_db
def test_a_long_queue_shows_a_page_at_a_time_with_the_filters_kept(
    client, alice, project, monkeypatch
):
    # given more open incidents than a page holds (a page of 3 here)
    from logbook.views import incidents as views

    monkeypatch.setattr(views, "QUEUE_PAGE_SIZE", 3)
    world = build_queue(project, extra=2)
    client.force_login(alice)

    # when the queue, filtered to one run, is read page by page
    run = world["run"].pk
    first = client.get(f"/incidents/?run={run}")
    second = client.get(f"/incidents/?run={run}&page=2")

    # then every open incident of the run shows once, newest first, and the count is all of them
    ids = world["incidents"]
    extra = list(Interruption.objects.filter(source_key__in=["x1", "x0"]).order_by("-occurred_at"))
    expected = [e.pk for e in extra] + [ids[4].pk, ids[2].pk, ids[1].pk]
    assert queue_ids(first) + queue_ids(second) == expected
    assert len(queue_ids(first)) == 3
    assert "5 incidents" in first.content.decode()
    assert f"run={run}&amp;page=2" in first.content.decode()


@pytest.mark.django_db
def test_queue_filters(client, alice, project):
    world = build_queue(project)
    ids = {hour: incident.pk for hour, incident in world["incidents"].items()}
    run = world["run"]
    client.force_login(alice)

    assert queue_ids(client.get("/incidents/", {"run": run.pk})) == [ids[4], ids[2], ids[1]]
    assert queue_ids(client.get("/incidents/", {"status": "resolved"})) == [ids[3]]
    # Open incidents (not yet confirmed by anyone) first, newest first within each.
    assert queue_ids(client.get("/incidents/", {"status": "all"})) == [
        ids[6], ids[4], ids[2], ids[1], ids[3]
    ]  # fmt: skip
    assert queue_ids(client.get("/incidents/", {"status": "open,resolved"})) == [
        ids[6], ids[4], ids[2], ids[1], ids[3]
    ]  # fmt: skip
    assert queue_ids(client.get("/incidents/", {"category": "nic"})) == [ids[2]]
    assert queue_ids(client.get("/incidents/", {"host": "qh1"})) == [ids[6], ids[4], ids[1]]
    # the host filter matches a prefix, each incident once
    assert queue_ids(client.get("/incidents/", {"host": "qh"})) == [ids[6], ids[4], ids[2], ids[1]]
    assert queue_ids(
        client.get("/incidents/", {"host": "qh1", "category": "faulty-gpu", "status": "all"})
    ) == [ids[6], ids[1], ids[3]]
    # the date range keeps what occurred from (inclusive) to (exclusive), as every page's
    window = {"since": (T0 + 2 * HOUR).isoformat(), "until": (T0 + 4 * HOUR).isoformat()}
    assert queue_ids(client.get("/incidents/", {**window, "status": "all"})) == [ids[2], ids[3]]
    backwards = client.get("/incidents/", {"since": window["until"], "until": window["since"]})
    assert "To: must be after From" in backwards.content.decode()
    # a bad filter is named, and the default queue shown
    page = client.get("/incidents/", {"status": "closed"})
    assert 'id="filter-error"' in page.content.decode()
    assert queue_ids(page) == [ids[6], ids[4], ids[2], ids[1]]


@pytest.mark.django_db
def test_queue_api_returns_the_same_incidents(client, bob, project):
    world = build_queue(project)
    second = world["incidents"][2]
    client.force_login(bob)

    body = client.get("/api/v1/incidents", {"host": "qh2"}).json()

    assert body["total"] == 1 and body["truncated"] is False
    assert body["filters"] == {"run": "", "status": "open,triaged", "category": "", "host": "qh2"}
    [incident] = body["incidents"]
    assert incident["id"] == second.pk
    assert incident["url"] == f"/incidents/{second.pk}/"
    assert incident["run"] == {"id": world["run"].pk, "name": "q-run", "project": "pretrain"}
    assert incident["root_cause"] == {"slug": "nic", "name": "NIC", "group": "Host"}
    assert incident["hosts"] == ["qh2"] and incident["devices"] == ["GPU-u2"]
    assert incident["occurred_at"].startswith("2026-06-01T02:00")
    assert (incident["status"], incident["version"], incident["planned"]) == ("open", 1, False)

    assert client.get("/api/v1/incidents", {"status": "all"}).json()["total"] == 5
    unstorable = ({"category": "nic\x00"}, {"host": "qh\x00"})
    for bad in ({"status": "closed"}, {"run": "x"}, *unstorable):
        response = client.get("/api/v1/incidents", bad)
        assert response.status_code == 400
        assert set(response.json()) == set(bad)


# --- who may read and write ----------------------------------------------------------------


@pytest.mark.django_db
def test_anonymous_is_refused(client, project):
    incident = build_queue(project)["incidents"][1]

    for path in ("/incidents/", f"/incidents/{incident.pk}/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert client.post(f"/incidents/{incident.pk}/", form_data(incident)).status_code == 302
    assert client.get("/api/v1/incidents").status_code == 403
    assert client.get(f"/api/v1/incidents/{incident.pk}").status_code == 403
    response = client.patch(
        f"/api/v1/incidents/{incident.pk}", {"version": 1}, content_type="application/json"
    )
    assert response.status_code == 403
    assert Interruption.objects.get(pk=incident.pk).version == 1


@pytest.mark.django_db
def test_outsiders_get_404_and_see_nothing(client, charlie, project):
    incident = build_queue(project)["incidents"][1]
    client.force_login(charlie)  # admin of another project

    assert queue_ids(client.get("/incidents/", {"status": "all"})) == []
    assert client.get("/api/v1/incidents").json()["total"] == 0
    assert client.get(f"/incidents/{incident.pk}/").status_code == 404
    assert client.post(f"/incidents/{incident.pk}/", form_data(incident)).status_code == 404
    assert client.get(f"/api/v1/incidents/{incident.pk}").status_code == 404
    response = client.patch(
        f"/api/v1/incidents/{incident.pk}",
        {"version": 1, "notes": "mine now"},
        content_type="application/json",
    )
    assert response.status_code == 404
    assert client.get("/incidents/", {"run": incident.run_id}).status_code == 404
    assert Interruption.objects.get(pk=incident.pk).notes == ""


@pytest.mark.django_db
def test_viewer_reads_but_cannot_edit(client, bob, project):
    incident = build_queue(project)["incidents"][1]
    client.force_login(bob)

    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert 'id="incident-facts"' in page
    assert 'id="incident-form"' not in page and 'id="transitions"' not in page
    body = client.get(f"/api/v1/incidents/{incident.pk}").json()
    assert body["can_edit"] is False and body["incident"]["id"] == incident.pk

    assert (
        client.post(f"/incidents/{incident.pk}/", form_data(incident, notes="x")).status_code == 403
    )
    transition = {"action": "transition", "version": 1, "status": "triaged"}
    assert client.post(f"/incidents/{incident.pk}/", transition).status_code == 403
    response = client.patch(
        f"/api/v1/incidents/{incident.pk}",
        {"version": 1, "notes": "x"},
        content_type="application/json",
    )
    assert response.status_code == 403
    incident.refresh_from_db()
    assert (incident.notes, incident.status, incident.version) == ("", "open", 1)


@pytest.mark.django_db
def test_oncall_edits_and_moves_the_incident(client, alice, project):
    incident = build_queue(project)["incidents"][1]
    client.force_login(alice)
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert shown_version(page) == 1

    # when alice corrects the root cause, hosts and lost steps and writes a note
    response = client.post(
        f"/incidents/{incident.pk}/",
        form_data(
            incident,
            root_cause="gpu-hbm3-memory",
            hosts="qh1, qh9",
            lost_steps="120",
            manual_intervention="on",
            notes="HBM **ECC** errors\r\non rank 17",
        ),
    )

    # then
    assert response.status_code == 302
    assert response["Location"] == f"/incidents/{incident.pk}/#history"
    incident.refresh_from_db()
    assert incident.root_cause.slug == "gpu-hbm3-memory"
    assert sorted(h.name for h in incident.hosts.all()) == ["qh1", "qh9"]
    assert (incident.lost_steps, incident.manual_intervention) == (120, True)
    assert incident.notes == "HBM **ECC** errors\non rank 17"  # CRLF from the browser, stored LF
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "<strong>ECC</strong>" in page
    assert 'data-field="root_cause"' in page and "faulty-gpu" in page
    assert shown_version(page) == 2

    # when she triages then resolves it
    for version, status in ((2, "triaged"), (3, "resolved")):
        response = client.post(
            f"/incidents/{incident.pk}/",
            {"action": "transition", "version": version, "status": status},
        )
        assert response.status_code == 302
    incident.refresh_from_db()
    assert (incident.status, incident.triaged_by, incident.resolved_by) == (
        "resolved",
        alice,
        alice,
    )
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert 'id="to-open"' in page  # reopen is offered
    assert page.count('data-field="status"') == 2


@pytest.mark.django_db
def test_refused_transition_is_explained(client, alice, project):
    incident = build_queue(project)["incidents"][1]
    client.force_login(alice)

    response = client.post(
        f"/incidents/{incident.pk}/", {"action": "transition", "version": 1, "status": "resolved"}
    )

    assert response.status_code == 200
    assert "cannot become resolved" in response.content.decode()
    assert Interruption.objects.get(pk=incident.pk).status == "open"


# --- two people, one incident ----------------------------------------------------------------


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


# --- query counts ------------------------------------------------------------------------------


def _history(incident: Interruption, user: Any, edits: int) -> None:
    for _ in range(edits):
        current = Interruption.objects.get(pk=incident.pk).version
        triage.incident_update(
            interruption=incident, user=user, version=current, changes={"lost_steps": current}
        )


@pytest.mark.django_db
def test_queue_page_and_api_queries_do_not_grow(client, alice, project, query_budget):
    # given the queue, then 40 incidents more
    run = build_queue(project)["run"]
    client.force_login(alice)
    pages: list[Any] = []
    small_page = query_budget.count(lambda: pages.append(client.get("/incidents/")))
    small_api = query_budget.count(lambda: pages.append(client.get("/api/v1/incidents")))
    queue_extra(run, 40)
    big_page = query_budget.count(lambda: pages.append(client.get("/incidents/")))
    big_api = query_budget.count(lambda: pages.append(client.get("/api/v1/incidents")))

    # then each lists them all, at the same cost (constant in the incidents)
    assert [len(queue_ids(pages[0])), len(queue_ids(pages[2]))] == [4, 44]
    assert [pages[1].json()["total"], pages[3].json()["total"]] == [4, 44]
    query_budget.constant(small=small_page, big=big_page, guards="the incidents (page)")
    query_budget.constant(small=small_api, big=big_api, guards="the incidents (API)")


@pytest.mark.django_db
def test_incident_page_and_api_queries_do_not_grow(client, alice, project, query_budget):
    incident = build_queue(project)["incidents"][1]
    client.force_login(alice)
    costs: dict[str, list[int]] = {"page": [], "api": [], "post": []}
    # given an incident edited once, then 25 times
    for edits, more in ((1, 1), (25, 24)):
        _history(incident, alice, more)
        form = form_data(incident, notes=f"bounded at {edits}")
        got = {}
        for what, call in (
            ("page", lambda: client.get(f"/incidents/{incident.pk}/")),
            ("api", lambda: client.get(f"/api/v1/incidents/{incident.pk}")),
            ("post", lambda form=form: client.post(f"/incidents/{incident.pk}/", form)),
        ):
            cost, got[what] = query_budget.run(call)
            costs[what].append(cost)
        # then the page and the API show every edit, and the form saves
        assert got["page"].content.decode().count('data-field="lost_steps"') == edits
        assert sum("lost_steps" in h["changes"] for h in got["api"].json()["history"]) == edits
        assert got["post"].status_code == 302
    # and each costs the same queries (constant in the incident's history)
    for what, (small, big) in costs.items():
        query_budget.constant(small=small, big=big, guards=f"the edits ({what})")


# --- in a browser --------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_oncall_triages_an_incident_in_the_browser(
    live_server, browser, login_page, console_errors, project, alice
):
    # given an open incident reported as a faulty GPU
    incident = build_queue(project)["incidents"][2]
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")
    page.wait_for_selector("header nav")

    # when alice opens the queue, then the incident
    page.goto(f"{live_server.url}/incidents/")
    page.click(f'tr[data-incident="{incident.pk}"] td a')
    page.wait_for_selector("#incident-form")
    assert page.text_content("#incident-root-cause") == "NIC"

    # and changes the root cause and writes Markdown notes, and saves
    page.select_option("#id_root_cause", "network-switch-cable")
    page.fill("#id_notes", "Link flaps on **qh2**, switch port `eth7`.\n\n- reseated the cable")
    page.click("#incident-save")

    # then she sees the rendered notes and her change in the history
    page.wait_for_selector("#incident-notes strong")
    assert page.text_content("#incident-notes strong") == "qh2"
    assert page.text_content("#incident-notes code") == "eth7"
    assert page.text_content("#incident-notes li") == "reseated the cable"
    assert page.text_content("#incident-root-cause") == "Network Switch/Cable"
    change = page.text_content('#incident-history tr[data-field="root_cause"]')
    assert "alice" in change and "nic" in change and "network-switch-cable" in change
    assert "Notes" in page.text_content("#incident-history")
    # times are in the display zone (UTC by default), labelled
    assert "2026-06-01 02:00 UTC" in page.text_content("#incident-facts")
    assert errors == []
    page.close()


@pytest.mark.django_db
def test_invalid_form_input_is_shown_and_nothing_saved(client, alice, project):
    incident = build_queue(project)["incidents"][1]
    client.force_login(alice)

    response = client.post(
        f"/incidents/{incident.pk}/",
        form_data(incident, lost_steps="-5", root_cause="gremlins", notes="kept"),
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Ensure this value is greater than or equal to 0." in page
    assert "Select a valid choice. gremlins is not one of the available choices." in page
    assert "kept</textarea>" in page  # the input survives the refusal
    incident.refresh_from_db()
    assert (incident.version, incident.notes) == (1, "")


@pytest.mark.django_db
def test_host_names_with_a_slash_still_render_and_link(client, alice, project):
    # given a host named with a slash before names were checked (the host route takes a path)
    run = telemetry_services.run_upsert(project=project, name="slashes")
    incident = interruption_services.interruption_record(
        run=run, source_key="s", occurred_at=T0, category="nic", hosts=["rack/7", "qh1"]
    )
    client.force_login(alice)

    queue = client.get("/incidents/").content.decode()
    detail = client.get(f"/incidents/{incident.pk}/").content.decode()

    for page in (queue, detail):
        assert "rack/7" in page
        assert '<a href="/fleet/hosts/rack/7/?project=pretrain">rack/7</a>' in page
        assert '<a href="/fleet/hosts/qh1/?project=pretrain">qh1</a>' in page
