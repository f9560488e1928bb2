"""The demo's SDC ledger, in a browser: its deliberate LR change (attempt 8 resumed with a
lower peak LR) is not a suspicion, and the spike at step 1290 is one record, found by the
spike detector and by the replay that disagreed with it."""

from __future__ import annotations

from pathlib import Path

import pytest

SHOTS = Path("/work/notes/shots/numbers")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_demo_sdc_ledger_counts_each_event_once(demo_data, browser, live_server, page_drawn):
    # given the demo, loaded the way `make demo` loads it
    page = browser.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "chronicle-demo")
    page.click("button[type=submit]")

    # when on-call opens the ledger
    page.goto(f"{live_server.url}/sdc/")
    page_drawn(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "sdc-ledger-demo.png"), full_page=True)

    # then no record compares attempt 8 with 7, and the page says why
    rows = page.locator("#sdc-records tbody tr").all_inner_texts()
    assert not [row for row in rows if "8 vs 7" in row], rows
    assert "attempt 8 vs 7 and earlier not compared: config changed: Lowered peak LR" in (
        page.locator("#sdc-not-compared").inner_text()
    )
    # and step 1290 is one record, detected two ways, and the total counts it once
    at_1290 = [row for row in rows if "1290" in row.split("\t")]
    assert len(at_1290) == 1, rows
    assert "Loss spike + attempt divergence (loss)" in at_1290[0]
    assert page.locator("#sdc-total").inner_text() == str(len(rows))
    page.close()
