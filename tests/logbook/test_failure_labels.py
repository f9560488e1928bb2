"""The failure breakdown's bar labels ("16.7%") are drawn whole, inside the chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services

T0 = datetime(2026, 11, 2, 6, 30, tzinfo=UTC)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_longest_bars_label_is_not_cut(browser, live_server, login_page, project, alice):
    # given six unexpected interruptions, one per component: every bar is the longest
    run = telemetry_services.run_upsert(project=project, name="labels")
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=["h0"])
    categories = ["faulty-gpu", "gpu-hbm3-memory", "loss-divergence", "nccl-watchdog-timeout",
                  "network-switch-cable", "software-bug"]  # fmt: skip
    for index, category in enumerate(categories):
        interruption_services.interruption_record(
            run=run, source_key=f"i{index}", occurred_at=T0 + timedelta(hours=index + 1),
            category=category, attempt=attempt, hosts=["h0"],
        )  # fmt: skip
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    login_page(page, live_server.url, "alice")

    # when the failure breakdown is drawn
    page.goto(f"{live_server.url}/failures/")
    page.wait_for_selector(".chart .bartext")

    # then each "16.7%" ends inside the chart's drawing
    labels = page.eval_on_selector_all(
        ".chart .bartext", "els => els.map(e => [e.textContent, e.getBoundingClientRect().right])"
    )
    edge = page.eval_on_selector(".chart .main-svg", "svg => svg.getBoundingClientRect().right")
    assert len(labels) == 6
    assert all(text == "16.7%" and right <= edge - 2 for text, right in labels), (labels, edge)
