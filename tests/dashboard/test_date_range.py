"""One date-range picker on every page with a time filter (issue 15): the same "From / To"
labels in the display zone, presets "last 24 h / last 7 d / whole run (or all)", one Apply.
On a run's pages the presets count back from the run's latest data, so a run that stopped
days ago still shows its last day under "last 24 h"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from logbook.services.checkpoints import checkpoint_record
from telemetry import services as telemetry_services
from telemetry.models import Run

PAGES_ACROSS_RUNS = ("/failures/", "/fleet/", "/sdc/", "/incidents/")


@pytest.mark.django_db
def test_every_time_filter_is_the_one_picker(client, project, alice):
    run = telemetry_services.run_upsert(project=project, name="picked")
    client.force_login(alice)
    pages = {url: "all" for url in PAGES_ACROSS_RUNS}
    pages |= {f"/runs/{run.pk}/{page}/": "whole run" for page in ("checkpoints", "goodput", "mfu")}
    for url, clear_label in pages.items():
        html = client.get(url).content.decode()
        assert html.count("data-date-range") == 1, url
        for words in ("From (UTC)", "To (UTC)", "last 24 h", "last 7 d", f">{clear_label}<"):
            assert words in html, f"{url}: {words!r}"
        for old in ("Since", "Until", "Start (", "exclusive)", "a day: inclusive", ">Filter<"):
            assert old not in html, f"{url} still says {old!r}"


@pytest.mark.django_db(transaction=True)
def test_last_24_hours_of_a_stopped_run_shows_its_last_day(
    live_server, browser, login_page, project, alice
):
    # given a run whose checkpoints span three days and whose data ended nine days ago
    run = telemetry_services.run_upsert(project=project, name="stopped")
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(days=9)
    for hours_before_end, step in ((60, 100), (30, 200), (5, 300)):
        checkpoint_record(run=run, step=step, saved_at=end - timedelta(hours=hours_before_end))
    Run.objects.filter(pk=run.pk).update(last_seen_at=end)
    page = browser.new_page()
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/runs/{run.pk}/checkpoints/")
    assert page.locator("tr[data-step]").count() == 3

    # when alice picks "last 24 h"
    with page.expect_navigation():
        page.click("[data-date-range] button[data-preset='24h']")

    # then the page shows the run's last day (the checkpoint 5 h before its end), not the
    # empty last 24 hours of the clock, and the From field says where the window starts
    assert [row.get_attribute("data-step") for row in page.locator("tr[data-step]").all()] == [
        "300"
    ]
    start = parse_qs(urlsplit(page.url).query)["start"][0]
    assert start == (end - timedelta(hours=24)).strftime("%Y-%m-%d %H:%M")
    assert page.input_value("[data-date-range] input[name=start]") == start

    # and "whole run" clears the window again
    with page.expect_navigation():
        page.click("[data-date-range] button[data-preset='all']")
    assert page.locator("tr[data-step]").count() == 3
    page.close()
