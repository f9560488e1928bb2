"""The triage queue on a 390 px phone: a card per incident, its number, the suggestion, status,
lost steps and root cause readable without scrolling sideways (the table hid Suggested,
Status and Lost steps off the right edge)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from logbook.services import autotriage as autotriage_services
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services

T0 = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)
SHOTS = Path("/work/notes/shots/triage")
XID = "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_queue_at_390_px_shows_the_key_columns_of_every_incident(
    browser, live_server, alice, project, login_page, console_errors
):
    # given three incidents with suggestions and lost steps
    run = telemetry_services.run_upsert(project=project, name="llama-70b-pretrain", info={})
    incidents = []
    for n in range(3):
        incident = interruption_services.interruption_record(
            run=run, source_key=f"i{n}", occurred_at=T0 + timedelta(hours=n),
            hosts=[f"node-{17 + n}"], message=XID, lost_steps=13 + n, step=140 + n,
        )  # fmt: skip
        autotriage_services.suggestion_make(interruption_id=incident.pk)
        incidents.append(incident)
    page = browser.new_page(viewport={"width": 390, "height": 844})
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when on-call opens the queue on a phone
    page.goto(f"{live_server.url}/incidents/")
    page.wait_for_selector("#incidents tr[data-incident]")

    # then nothing is wider than the screen, and each card shows its number and key facts
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    for incident in incidents:
        card = page.locator(f"#incidents tr[data-incident='{incident.pk}']")
        text = card.inner_text()
        assert f"#{incident.pk}" in text
        for label in ("Suggested", "Status", "Lost steps", "Root cause"):
            cell = card.locator(f"td[data-label='{label}']")
            box = cell.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, label
            assert cell.is_visible(), label
        assert "Faulty GPU" in card.locator("td[data-label='Suggested']").inner_text()
        assert str(incident.lost_steps) in card.locator("td[data-label='Lost steps']").inner_text()
        # the key facts come first, right under the number and time
        labels = card.locator("td").evaluate_all(
            "cells => cells.map(c => [c.dataset.label, c.getBoundingClientRect().top])"
            ".sort((a, b) => a[1] - b[1]).map(c => c[0])"
        )
        assert labels[0] == "Occurred" and set(labels[1:5]) == {
            "Suggested", "Status", "Lost steps", "Root cause"
        }, labels  # fmt: skip
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "queue-390.png"), full_page=True)
    assert errors == []
    page.close()
