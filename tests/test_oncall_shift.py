"""An on-call shift, end to end in a real browser: triage an incident (change its root cause,
write Markdown notes), annotate the run's chart, write the logbook, export it. Every edit
lands in the audit trail and the page logs no console error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingest import services as ingest_services
from logbook.models import Annotation, AuditEvent, Interruption, LogbookEntry
from telemetry.models import Run

T0 = 1_763_700_000


def _ingest(token, document) -> None:
    acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
    ingest_services.batch_process(batch_pk=acceptance.batch.pk)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_shift_in_the_browser(browser, live_server, alice, project, login_page, console_errors):
    # given a run whose first attempt died of an NCCL timeout and whose second resumed
    token, _ = ingest_services.token_create(project=project, name="job")
    _ingest(
        token,
        {
            "batch_id": "a1",
            "run": "shift-run",
            "attempt": 1,
            "metrics": [
                {"name": "loss", "step": s, "value": 4 - s / 50, "time": T0 + 10 * s}
                for s in range(100)
            ],
            "events": [
                {"type": "attempt_started", "time": T0, "hosts": ["h7"]},
                {"type": "checkpoint_saved", "time": T0 + 500, "step": 50},
                {
                    "type": "interruption",
                    "time": T0 + 1000,
                    "category": "nccl-watchdog-timeout",
                    "hosts": ["h7"],
                    "step": 99,
                    "lost_steps": 49,
                    "message": "watchdog fired",
                },
            ],
        },
    )
    _ingest(token, {
        "batch_id": "a2", "run": "shift-run", "attempt": 2,
        "metrics": [{"name": "loss", "step": s, "value": 3 - s / 60, "time": T0 + 2000 + 10 * s}
                    for s in range(51, 120)],
        "events": [
            {"type": "attempt_started", "time": T0 + 2000, "attempt": 2, "resumed_from_step": 50,
             "hosts": ["h8"]},
            {"type": "checkpoint_restored", "time": T0 + 2010, "step": 50},
        ],
    })  # fmt: skip
    run = Run.objects.get(name="shift-run")
    incident = Interruption.objects.get(run=run)
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when alice opens the triage queue and the incident, changes its root cause and notes
    page.goto(f"{live_server.url}/incidents/")
    page.click(f"a[href='/incidents/{incident.pk}/']")
    page.select_option("#id_root_cause", "faulty-gpu")
    page.fill("#id_notes", "**Xid 79** on `h7`; see [runbook](https://example.org/rb).")
    page.click("#incident-save")
    page.wait_for_selector("#incident-notes strong")

    # then the page shows the new cause, the rendered notes and the change in its history
    assert page.locator("#incident-root-cause").inner_text() == "Faulty GPU"
    assert page.locator("#incident-notes strong").inner_text() == "Xid 79"
    history = page.locator("#incident-history").inner_text()
    assert "NCCL Watchdog" in history or "nccl-watchdog-timeout" in history
    assert "alice" in history

    # when she annotates the run's loss chart at step 60
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.fill("#annotate-text", "LR drop after restart")
    page.fill("#annotate-tags", "lr")
    page.fill("#annotate-step", "60")
    with page.expect_navigation():
        page.click("#annotate-submit")
    page.wait_for_selector('[data-metric="loss"] .main-svg')

    # then the annotation is on the chart
    traces = page.evaluate(
        "document.querySelector('[data-metric=loss]').data.map(t => [t.name, t.text])"
    )
    assert ["annotations", ["LR drop after restart [lr]"]] in traces

    # when she writes a logbook entry and exports the logbook
    page.goto(f"{live_server.url}/runs/{run.pk}/logbook/")
    if not page.locator("#new-entry").get_attribute("open"):
        page.click("#new-entry summary")
    page.select_option("#id_kind", "analysis")
    page.fill("#id_title", "NCCL hang was a GPU")
    page.fill("#id_body", "The watchdog fired because **h7**'s GPU fell off the bus.")
    page.click("#entry-form button[type=submit]")
    page.wait_for_selector("#entries article:has-text('NCCL hang was a GPU')")
    with page.expect_download() as download:
        page.click("#export-link")
    exported = Path(download.value.path()).read_text(encoding="utf-8")

    # then the export reads like the chronicles: her entry and the automatic restart draft
    assert "NCCL hang was a GPU" in exported
    assert "Attempt 2 resumed from checkpoint at step 50" in exported
    assert exported.index("NCCL hang was a GPU") < exported.index("Attempt 2 resumed")
    # and every edit is in the audit trail, and nothing went wrong in the page
    assert AuditEvent.objects.filter(entity="interruption", object_id=incident.pk).exists()
    assert AuditEvent.objects.filter(entity="annotation").count() == 1
    assert LogbookEntry.objects.filter(run=run, title="NCCL hang was a GPU").exists()
    assert Annotation.objects.get().created_by == alice
    assert errors == []
    page.close()
