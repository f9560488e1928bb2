"""One incident number on every page: the one /incidents/ and its URLs use. A restart card
in the logbook once said "incident #8" in its text and linked "incident #1" (the run-local
number, which only chronicle files use)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from logbook.services import drafts as draft_services
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
SHOTS = Path("/work/notes/shots/numbers")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_restart_card_text_link_and_incident_page_say_one_number(
    browser, live_server, alice, project, login_page, console_errors
):
    # given another run's incident first, so this run's first incident is not incident 1
    other = telemetry_services.run_upsert(project=project, name="other", info={})
    interruption_services.interruption_record(run=other, source_key="o1", occurred_at=T0)
    run = telemetry_services.run_upsert(project=project, name="r12", info={})
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    incident = interruption_services.interruption_record(
        run=run, source_key="i1", occurred_at=T0 + timedelta(hours=1), category="faulty-gpu"
    )
    second = telemetry_services.attempt_ensure(
        run=run, number=2, started_at=T0 + timedelta(hours=2), resumed_from_step=100
    )
    draft_services.restart_entry_draft(attempt=second)
    assert incident.number == 1 and incident.pk != 1
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when on-call reads the restart card and follows its link
    page.goto(f"{live_server.url}/runs/{run.pk}/logbook/")
    card = page.locator("article.entry[data-kind=restart]")
    text = card.locator(".body").inner_text()
    link = card.locator("a.link-incident")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "logbook-restart-card.png"), full_page=True)
    link_text = link.inner_text()
    link.click()
    page.wait_for_selector("h1")

    # then the text, the link and the incident page all say #<the id in the URL>
    said = set(re.findall(r"incident #(\d+)", text + " " + link_text, flags=re.IGNORECASE))
    assert said == {str(incident.pk)}, (text, link_text)
    assert page.url.endswith(f"/incidents/{incident.pk}/")
    assert page.locator("h1").inner_text().startswith(f"Incident #{incident.pk}:")
    assert page.locator("#incident-run-number").count() == 0
    assert f"Incident #{incident.pk} is this" in page.locator("#incident-number-note").inner_text()
    page.screenshot(path=str(SHOTS / "incident-detail.png"), full_page=True)
    assert errors == []
    page.close()
