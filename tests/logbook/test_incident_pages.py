"""The triage queue and incident pages and their JSON: the queue's filters, who may read and
who may edit, query counts that do not grow with the data, and an on-call engineer's pass
in a real browser (two people editing one incident: test_incident_edits.py)."""

from __future__ import annotations

from typing import Any

import pytest

from logbook.models import Interruption
from logbook.services import interruptions as interruption_services
from logbook.services import triage
from telemetry import services as telemetry_services
from tests.logbook.incident_queue import (
    HOUR,
    T0,
    build_queue,
    form_data,
    queue_extra,
    queue_ids,
    shown_version,
)

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
