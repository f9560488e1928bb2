"""The fleet page's table and its "Incidents per host" chart count the same records: a host
with an interruption and a straggler record read Incidents 2 in the table and 1 in the
chart, the straggler said only on the host page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from logbook.models import StragglerRecord
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Host

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
SHOTS = Path("/work/notes/shots/numbers")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_fleet_table_and_chart_count_the_same_records(
    browser, live_server, alice, project, login_page, console_errors, page_drawn
):
    # given h0027 with one interruption and one straggler record, h0031 with an interruption
    run = telemetry_services.run_upsert(project=project, name="r1", info={})
    attempt = telemetry_services.attempt_ensure(
        run=run, number=1, started_at=T0, hosts=["h0027", "h0031"]
    )
    for key, host in (("i1", "h0027"), ("i2", "h0031")):
        interruption_services.interruption_record(
            run=run, source_key=key, occurred_at=T0 + timedelta(hours=2), attempt=attempt,
            category="faulty-gpu", hosts=[host],
        )  # fmt: skip
    StragglerRecord.objects.create(
        run=run, attempt=attempt, rank=3, host=Host.objects.get(name="h0027"),
        relative_score=0.4, windows=3, first_window_at=T0 + timedelta(hours=1),
        last_window_at=T0 + timedelta(hours=1, minutes=5),
    )  # fmt: skip
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when
    page.goto(f"{live_server.url}/fleet/")
    page_drawn(page)
    page.wait_for_selector("#chart-host-incidents .main-svg")

    # then the chart's stacked bar for each host is the table's Incidents, and the table
    # names the straggler records in their own column
    headers = page.locator("#fleet-hosts thead th").all_inner_texts()
    assert "Straggler records" in headers
    column = {name: headers.index(name) for name in ("Straggler records", "Incidents")}
    charted = page.evaluate(
        """() => {
            const totals = {};
            for (const trace of document.querySelector('#chart-host-incidents').data)
                trace.x.forEach((x, i) => {
                    const host = x.replace(' ⚠', '');
                    totals[host] = (totals[host] || 0) + trace.y[i];
                });
            return totals;
        }"""
    )
    table = {}
    for host in ("h0027", "h0031"):
        cells = page.locator(f'#fleet-hosts tr[data-host="{host}"] td').all_inner_texts()
        table[host] = (int(cells[column["Incidents"]]), int(cells[column["Straggler records"]]))
    assert table == {"h0027": (2, 1), "h0031": (1, 0)}
    assert charted == {"h0027": 2, "h0031": 1}
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "fleet.png"), full_page=True)
    assert errors == []
    page.close()
