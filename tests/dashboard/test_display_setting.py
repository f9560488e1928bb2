"""One way to read times: the topbar's "Times" switch (UTC by default, or the browser's zone)
changes every page and form, and every time says which zone it is in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook.models import AuditEvent
from logbook.services import checkpoints as checkpoint_services
from logbook.services import entries as entry_services
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from logbook.views.incidents import history_rows
from telemetry import services as telemetry_services
from telemetry.models import Run

OCCURRED = datetime(2026, 6, 1, 1, 0, tzinfo=UTC)  # 06:30 in Asia/Kolkata (UTC+5:30)
NOTED = datetime(2026, 6, 1, 3, 15, tzinfo=UTC)  # 08:45 IST


def _pages(project, alice) -> dict[str, str]:
    run = telemetry_services.run_upsert(project=project, name="tz-run")
    incident = interruption_services.interruption_record(
        run=run, source_key="tz1", occurred_at=OCCURRED, category="faulty-gpu", hosts=["tzh1"],
        # One long line, as jobs report them: a phone must wrap it, not widen the page.
        message="Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for "
        "600112 milliseconds before timing out.",
    )  # fmt: skip
    entry_services.logbook_entry_create(run=run, user=alice, title="Noted", occurred_at=NOTED)
    sdc_services.sdc_record(run=run, source_key="tz-sdc", step=10, detected_at=OCCURRED)
    checkpoint_services.checkpoint_record(run=run, step=10, saved_at=NOTED, blocking_save_s=5)
    Run.objects.filter(pk=run.pk).update(last_seen_at=OCCURRED)
    return {
        "run list": "/",
        "run page": f"/runs/{run.pk}/",
        "checkpoints": f"/runs/{run.pk}/checkpoints/",
        "SDC ledger": "/sdc/",
        "triage queue": "/incidents/",
        "incident": f"/incidents/{incident.pk}/",
        "logbook": f"/runs/{run.pk}/logbook/",
        "fleet": "/fleet/",
        "host": "/fleet/hosts/tzh1/",
    }


def _time_chart(page: Any) -> tuple[str, str]:
    """The x axis title and first time of the page's first chart on a time axis, drawn."""
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    return page.evaluate(
        "() => { const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".find(c => c.layout.xaxis.type === 'date');"
        " return [gd.layout.xaxis.title.text, String(gd.data[0].x[0]).replace('T', ' ')]; }"
    )


@pytest.mark.django_db(transaction=True)
def test_the_time_switch_changes_every_page(
    live_server, browser, login_page, console_errors, project, alice
):
    # given a run with an incident and a logbook entry, read from a browser in India
    pages = _pages(project, alice)
    context = browser.new_context(timezone_id="Asia/Kolkata")
    page = context.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # then by default every page shows UTC, and says so, its time charts too
    for name, path in pages.items():
        page.goto(live_server.url + path)
        text = page.inner_text("main")
        assert "2026-06-01 01:00" in text or "2026-06-01 03:15" in text, name
        assert "UTC" in text, name
        assert "06:30" not in text and "08:45" not in text, name
    for name in ("checkpoints", "host"):
        page.goto(live_server.url + pages[name])
        title, first = _time_chart(page)
        assert title.endswith("(UTC)") and first[:16] in ("2026-06-01 01:00", "2026-06-01 03:15")

    # when she switches to her browser's zone
    with page.expect_navigation():
        page.select_option("#tz-switch select[name=zone]", "browser")

    # then every page shows India's time, labelled, and no UTC reading of those moments
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")  # Asia/Calcutta
    for name, path in pages.items():
        page.goto(live_server.url + path)
        text = page.inner_text("main")
        assert "2026-06-01 06:30" in text or "2026-06-01 08:45" in text, name
        assert "IST" in text or zone in text, name
        assert "01:00 UTC" not in text and "03:15 UTC" not in text, name
    assert page.input_value("#tz-switch select[name=zone]") == "browser"
    assert zone in page.inner_text("#tz-switch")
    for name in ("checkpoints", "host"):
        page.goto(live_server.url + pages[name])
        title, first = _time_chart(page)
        assert title.endswith(f"({zone})"), (name, title)
        assert first[:16] in ("2026-06-01 06:30", "2026-06-01 08:45"), (name, first)

    # and the logbook form reads a typed time in that zone and says so
    page.goto(live_server.url + pages["logbook"])
    label = page.text_content("label:has(#id_occurred_at)")
    assert label.strip().startswith(f"Time ({zone})")
    label = page.text_content("label:has(#id_occurred_until)")
    assert label.strip().startswith(f"Window end ({zone})")
    context.close()
    assert errors == []


@pytest.mark.django_db
def test_the_forms_read_typed_times_in_the_display_zone(client, project, alice):
    # given alice reads times in India
    run = telemetry_services.run_upsert(project=project, name="tz-form")
    client.force_login(alice)
    client.cookies["chronicle_tz"] = "Asia/Kolkata"

    # when she writes an entry at 06:30 her time
    response = client.post(
        f"/runs/{run.pk}/logbook/",
        {
            "action": "save",
            "kind": "note",
            "role": "oncall",
            "title": "t",
            "occurred_at": "2026-06-01 06:30",
            "time_precision": "window",
            "occurred_until": "2026-06-01 08:30",
        },
    )

    # then it is stored as 01:00 UTC, its window's end as 03:00 UTC
    assert response.status_code in (200, 302)
    entry = run.logbook_entries.get()
    assert entry.occurred_at == OCCURRED
    assert entry.occurred_until == OCCURRED + timedelta(hours=2)

    # and a filter's date is her day, not UTC's
    response = client.get("/failures/", {"start": "2026-06-01 06:30"})
    assert "2026-06-01 06:30" in response.content.decode()


def test_the_incident_history_shows_times_as_every_page_does():
    event = AuditEvent(
        action="update",
        username="alice",
        at=OCCURRED,
        changes={"recovered_at": [None, "2026-11-23T15:47:08.016098+00:00"]},
    )
    [row] = history_rows([event])
    assert row.changes[0].after == "2026-11-23 15:47:08 UTC"


def test_the_switch_refuses_to_redirect_off_site(client):
    response = client.post(
        "/settings/time-zone/",
        {"zone": "browser", "browser_zone": "Europe/Paris", "next": "https://evil.example/"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert response.cookies["chronicle_tz"].value == "Europe/Paris"


@pytest.mark.django_db
def test_numbers_read_the_same_on_every_page(client, project, alice):
    # given a run whose figures used to be written three ways
    from logbook.services.checkpoints import checkpoint_record

    run = telemetry_services.run_upsert(
        project=project, name="numbers", info={"parameter_count": 70553706496}
    )
    checkpoint_record(
        run=run,
        step=12000,
        saved_at=OCCURRED,
        blocking_save_s=6.417400000000001,
        size_bytes=39_600_000,
        tier="object_store",
    )
    client.force_login(alice)

    # when the run page and the checkpoint page are read
    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    checkpoints = client.get(f"/runs/{run.pk}/checkpoints/").content.decode()

    # then both separate thousands, write sizes in their unit and choices by their label
    assert "70,553,706,496" in run_page
    for html in (run_page, checkpoints):
        assert ">12,000<" in html
        assert "39.6 MB" in html and "0 GB" not in html
        assert ">Object store<" in html and ">object_store<" not in html
        # not 6.417400000000001 (the chart data keeps every digit); the checkpoint table keeps
        # measured save times to hundredths
        assert ">6.4<" in html or ">6.42<" in html


def test_a_short_downtime_reads_in_seconds():
    from logbook.restart_drafts import duration_text

    assert duration_text(9) == "9 s"  # was "0 min"
    assert duration_text(253610.0) == "2.9 d"


@pytest.mark.django_db(transaction=True)
def test_revoking_a_token_asks_first(live_server, browser, login_page, project, dave, ingest_token):
    from ingest.models import IngestToken

    page = browser.new_page()
    login_page(page, live_server.url, "dave")
    page.goto(f"{live_server.url}/projects/{project.slug}/tokens/")
    asked: list[str] = []

    # when dave clicks Revoke and then thinks better of it
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#tokens button:has-text('Revoke')")
    page.wait_for_timeout(300)

    # then he was asked, and nothing was revoked
    assert asked and "Revoke the token" in asked[0]
    assert not IngestToken.objects.filter(revoked_at__isnull=False).exists()

    # and when he confirms, the token is revoked
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click("#tokens button:has-text('Revoke')")
    assert IngestToken.objects.filter(revoked_at__isnull=False).count() == 1
    page.close()


@pytest.mark.django_db(transaction=True)
def test_the_annotation_form_speaks_its_own_words(live_server, browser, login_page, project, alice):
    run = telemetry_services.run_upsert(project=project, name="words")
    page = browser.new_page()
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/runs/{run.pk}/")

    # when alice marks a step range that ends before it starts
    page.fill("#annotate-text", "eval")
    page.fill("#annotate-step", "10")
    page.fill("#annotate-step-end", "5")
    page.click("#annotate-submit")

    # then the error names the form's field, not the API's
    page.wait_for_selector("#annotate-error:not(:empty)")
    error = page.text_content("#annotate-error")
    assert error.startswith("To step: ") and "stepEnd" not in error
    page.close()


@pytest.mark.django_db(transaction=True)
def test_pages_fit_a_390px_phone(live_server, browser, login_page, project, alice):
    pages = _pages(project, alice)
    page = browser.new_page(viewport={"width": 390, "height": 844})
    login_page(page, live_server.url, "alice")
    for name, path in {"run list": "/", **pages}.items():
        page.goto(live_server.url + path)
        # nothing wider than the screen: the navigation wraps and scrolls inside itself
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, name
        assert page.is_visible("header.topbar nav a:has-text('Runs')"), name
    page.close()


@pytest.mark.django_db
def test_every_destructive_form_asks_first(client, project, dave, alice, ingest_token):
    """Removing a member, revoking a token, deleting a logbook entry, releasing a host or a
    device from quarantine and disabling a webhook each carry the question display.js asks
    (the token's is answered in a browser above); quarantining, enabling and adding do not."""
    import re

    from logbook.models import WebhookEndpoint
    from logbook.services import entries as entry_services
    from logbook.services import quarantine as quarantine_services
    from telemetry import services as telemetry_services
    from telemetry.models import Device, Host

    run = telemetry_services.run_upsert(project=project, name="asks")
    telemetry_services.attempt_ensure(run=run, number=1, hosts=["asks-h0"])
    host = Host.objects.get(name="asks-h0")
    [device] = telemetry_services.devices_ensure(project=project.pk, uuids=["GPU-asks-0"])
    Device.objects.filter(pk=device.pk).update(host=host)
    entry = entry_services.logbook_entry_create(run=run, user=dave, title="to delete")
    WebhookEndpoint.objects.create(project=project, name="pager", url="https://hooks.example/x")
    client.force_login(dave)

    def questions(url: str) -> list[str]:
        html = client.get(url).content.decode()
        return re.findall(r'<form[^>]*data-confirm="([^"]+)"', html)

    assert any("Remove alice" in q for q in questions(f"/projects/{project.slug}/members/"))
    assert any("Revoke the token" in q for q in questions(f"/projects/{project.slug}/tokens/"))
    edit = f"/runs/{run.pk}/logbook/{entry.pk}/edit/"
    assert any("Delete this logbook entry" in q for q in questions(edit))
    webhooks = f"/projects/{project.slug}/webhooks/"
    assert any("Disable the webhook pager" in q for q in questions(webhooks))
    host_page = f"/fleet/hosts/asks-h0/?project={project.slug}"
    assert questions(host_page) == []  # nothing quarantined: quarantining does not ask
    quarantine_services.host_quarantine(host=host, user=dave, reason="fans")
    quarantine_services.device_quarantine(device=device, user=dave, reason="ECC")
    asked = questions(host_page)
    assert any("Release asks-h0" in q for q in asked)
    assert any("Release the device GPU-asks-0" in q for q in asked)
    WebhookEndpoint.objects.update(enabled=False)
    assert questions(webhooks) == []  # enabling again does not ask
