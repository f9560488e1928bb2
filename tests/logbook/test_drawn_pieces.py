"""The triage queue, logbook, SDC ledger, fleet page and run page draw their tables once per
state of the data they show (telemetry.run_cache.cached_html). A change made through the
services shows on the very next request; an unchanged page comes from the cache; readers
of other projects, other roles or another display zone never get each other's copy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from logbook.models import Interruption
from logbook.services import entries as entry_services
from logbook.services import interruptions as interruption_services
from logbook.services import quarantine as quarantine_services
from logbook.services import sdc as sdc_services
from logbook.services import triage
from telemetry import display
from telemetry import services as telemetry_services
from telemetry.models import Host, Run

T0 = datetime(2026, 11, 2, 6, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)


def incident_run(project: Any, name: str = "drawn") -> Run:
    """One attempt on two hosts, an unexpected interruption naming the first, 2 h later."""
    run = telemetry_services.run_upsert(project=project, name=name)
    attempt = telemetry_services.attempt_ensure(
        run=run, number=1, started_at=T0, hosts=[f"{name}-h0", f"{name}-h1"]
    )
    interruption_services.interruption_record(
        run=run, source_key="i1", occurred_at=T0 + 2 * HOUR, category="faulty-gpu",
        attempt=attempt, hosts=[f"{name}-h0"],
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(last_seen_at=T0 + 3 * HOUR)
    return run


def _page(client: Any, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        _page(client, url)
    return len(captured)


@pytest.mark.django_db
def test_triage_queue_rows_follow_every_change_and_stay_in_their_project(client, alice, charlie):
    run = incident_run(alice.memberships.get().project)
    client.force_login(alice)
    url = "/incidents/?status=all"
    assert _queries(client, url) > _queries(client, url)  # the second from the cache
    html = _page(client, url)
    assert 'data-status="open"' in html and "1 incident." in html

    incident = Interruption.objects.get(run=run)
    triage.incident_transition(
        interruption=incident, user=alice, version=incident.version, status="triaged"
    )
    html = _page(client, url)
    assert 'data-status="triaged"' in html and 'data-status="open"' not in html
    interruption_services.interruption_record(
        run=run, source_key="i2", occurred_at=T0 + 5 * HOUR, category="nic"
    )
    assert "2 incidents." in _page(client, url)

    # Another project's member asks for the same URL: none of alice's rows.
    client.force_login(charlie)
    html = _page(client, url)
    assert "No incidents match." in html and run.name not in html


@pytest.mark.django_db
def test_cached_pieces_are_drawn_in_the_readers_display_zone(client, alice):
    incident_run(alice.memberships.get().project)
    client.force_login(alice)
    utc = _page(client, "/incidents/?status=all")
    client.cookies[display.TZ_COOKIE] = "Asia/Tokyo"
    tokyo = _page(client, "/incidents/?status=all")
    # 08:30 UTC is 17:30 in Tokyo: each reader gets the copy drawn in their zone.
    assert "08:30" in utc and "17:30" not in utc
    assert "17:30" in tokyo and "08:30" not in tokyo


@pytest.mark.django_db
def test_logbook_entries_show_at_once_and_edit_links_only_to_writers(client, alice, bob):
    run = incident_run(alice.memberships.get().project)
    url = f"/runs/{run.pk}/logbook/"
    client.force_login(alice)
    assert _queries(client, url) > _queries(client, url)
    entry_services.logbook_entry_create(run=run, user=alice, title="Swapped h0's GPU 3")
    html = _page(client, url)
    assert "Swapped h0&#x27;s GPU 3" in html and 'class="edit-link"' in html
    # the new-entry form's "Corrects" menu offers the new entry too
    assert html.count("Swapped h0&#x27;s GPU 3") >= 2 and 'id="entry-form"' in html

    client.force_login(bob)  # a viewer: the same entries, no form and no edit links
    html = _page(client, url)
    assert "Swapped h0&#x27;s GPU 3" in html
    assert 'class="edit-link"' not in html and 'id="entry-form"' not in html


@pytest.mark.django_db
def test_sdc_ledger_shows_a_new_record_at_once(client, alice):
    run = incident_run(alice.memberships.get().project)
    client.force_login(alice)
    url = "/sdc/"
    assert _queries(client, url) > _queries(client, url)
    assert 'id="sdc-total">0<' in _page(client, url)
    sdc_services.sdc_record(
        run=run, source_key="r1", step=1200, detected_at=T0 + HOUR, host="drawn-h1",
        message="replay disagreed",
    )  # fmt: skip
    html = _page(client, url)
    assert 'id="sdc-total">1<' in html and "replay disagreed" in html


@pytest.mark.django_db
def test_run_page_tables_and_quarantines_show_at_once(client, alice):
    run = incident_run(alice.memberships.get().project)
    client.force_login(alice)
    url = f"/runs/{run.pk}/"
    assert _queries(client, url) > _queries(client, url)
    html = _page(client, url)
    assert "<dt>Interruptions</dt><dd>1</dd>" in html
    assert 'id="quarantined-hardware"' not in html

    interruption_services.interruption_record(
        run=run, source_key="i2", occurred_at=T0 + 150 * timedelta(minutes=1), category="nic",
        attempt=run.attempts.get(), message="link flapped on drawn-h1",
    )  # fmt: skip
    html = _page(client, url)
    assert "<dt>Interruptions</dt><dd>2</dd>" in html and "link flapped on drawn-h1" in html

    # A quarantine changes the fleet, not the run: the run page still shows it at once.
    host = Host.objects.get(name="drawn-h1")
    quarantine_services.host_quarantine(host=host, user=alice, reason="ECC errors")
    html = _page(client, url)
    assert 'id="quarantined-hardware"' in html and "ECC errors" in html
    quarantine_services.host_release(host=host, user=alice)
    assert 'id="quarantined-hardware"' not in _page(client, url)


@pytest.mark.django_db
def test_failure_breakdown_and_its_api_show_a_new_incident_at_once(client, alice):
    run = incident_run(alice.memberships.get().project)
    client.force_login(alice)
    assert _queries(client, "/failures/") > _queries(client, "/failures/")
    assert 'id="unexpected-total">1<' in _page(client, "/failures/")
    assert client.get("/api/v1/failures").json()["breakdown"]["unexpected"] == 1
    interruption_services.interruption_record(
        run=run, source_key="i2", occurred_at=T0 + 5 * HOUR, category="nic"
    )
    assert 'id="unexpected-total">2<' in _page(client, "/failures/")
    assert client.get("/api/v1/failures").json()["breakdown"]["unexpected"] == 2


def test_an_upgrade_draws_afresh_what_the_previous_code_cached(tmp_path):
    from telemetry import run_cache

    # given a checkout's code and templates
    (tmp_path / "telemetry").mkdir()
    (tmp_path / "templates").mkdir()
    (tmp_path / "telemetry" / "charts.py").write_text("WIDTH = 0.95\n")
    (tmp_path / "templates" / "page.html").write_text("<td>{{ seconds }}</td>\n")
    (tmp_path / "telemetry" / "notes.txt").write_text("not code\n")
    folders = ("telemetry", "templates")
    before = run_cache.code_digest(tmp_path, folders)

    # then the digest ignores what is not code, follows a module or a template changing,
    # and is the same for the same contents (another checkout, other file times)
    (tmp_path / "telemetry" / "notes.txt").write_text("still not code\n")
    assert run_cache.code_digest(tmp_path, folders) == before
    (tmp_path / "telemetry" / "charts.py").write_text("WIDTH = 0.98\n")
    after_code = run_cache.code_digest(tmp_path, folders)
    (tmp_path / "templates" / "page.html").write_text("<td>{{ seconds|duration }}</td>\n")
    after_template = run_cache.code_digest(tmp_path, folders)
    assert len({before, after_code, after_template}) == 3
    (tmp_path / "telemetry" / "charts.py").write_text("WIDTH = 0.95\n")
    (tmp_path / "templates" / "page.html").write_text("<td>{{ seconds }}</td>\n")
    assert run_cache.code_digest(tmp_path, folders) == before

    # and every cached value's key carries this code's digest
    from django.core.cache import cache

    assert run_cache.cached("probe-key", lambda: "value") == "value"
    assert cache.get(f"{run_cache.KEY_PREFIX}:{run_cache.code_version()}:probe-key") == "value"
