"""The run page in a browser: it updates itself after a new batch, its charts zoom together,
its picker reaches every metric, its controls do not reload the page, and no request leaves
this machine. The run list and the triage queue update themselves too, keeping what the
reader ticked and typed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlparse

import pytest
from django.db import transaction

from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
START = datetime(2026, 11, 20, tzinfo=UTC)
# A wait for what a poll brings, not a limit on it: the pages poll every 5 s, and a loaded
# 2-core machine may take a while to draw; how fast an update shows is `make bench`'s.
LIVE_TIMEOUT_MS = 30_000


def _points(names: list[str], steps: range) -> list[tuple[str, int, float, datetime | None]]:
    return [
        (name, step, 10.0 - step / 50 + index, START + timedelta(seconds=30 * step))
        for index, name in enumerate(names)
        for step in steps
    ]


@pytest.fixture
def add_points(run: Run) -> Callable[[list[str], range], None]:
    attempt = Attempt.objects.create(run=run, number=1, started_at=START)

    def add(names: list[str], steps: range) -> None:
        with transaction.atomic():
            telemetry_services.metric_points_insert(
                run=run, attempt=attempt, points=_points(names, steps)
            )

    return add


def _open(browser: Any, live_server: Any, login_page: Any, path: str) -> Any:
    page = browser.new_page()
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}{path}")
    page.wait_for_selector("#chart-0 .main-svg")
    # The first chart is drawn at once, the others one per frame after it.
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    return page


def test_the_run_page_updates_itself_after_a_new_batch(
    browser, live_server, login_page, alice, run, add_points
):
    # given a run page open on 100 steps of loss
    add_points(["loss"], range(0, 100))
    page = _open(browser, live_server, login_page, f"/runs/{run.pk}/")
    page.evaluate("window.__notReloaded = true")
    assert "updated" in page.locator("#live").inner_text()

    # when a new batch brings steps 100 to 199
    add_points(["loss"], range(100, 200))

    # then a poll brings them into the chart, without a reload (the wait is generous: the
    # poll comes every 5 s, and a loaded machine may be slow to draw)
    page.wait_for_function(
        "() => Math.max(...Array.from("
        "document.querySelector('[data-metric=loss]')._fullData[0].x)) >= 199",
        timeout=LIVE_TIMEOUT_MS,
    )
    assert page.evaluate("window.__notReloaded") is True
    assert "199" in page.locator("#run-head").inner_text()


def test_zooming_one_chart_zooms_all_and_keeps_the_view_in_the_url(
    browser, live_server, login_page, alice, run, add_points
):
    # given two metrics over 200 steps
    add_points(["loss", "grad_norm"], range(0, 200))
    page = _open(browser, live_server, login_page, f"/runs/{run.pk}/")
    # both panels share one step range and have no legend of their own but the first
    first = page.evaluate("document.querySelector('#chart-0').layout")
    second = page.evaluate("document.querySelector('#chart-1').layout")
    assert first["xaxis"]["range"] == second["xaxis"]["range"] == [0, 199]
    assert first["showlegend"] is True and second["showlegend"] is False
    assert first["hovermode"] == "x unified" and first["xaxis"]["tickformat"] == "d"

    # when the loss chart is zoomed to steps 50..60
    page.evaluate("Plotly.relayout(document.querySelector('#chart-0'), {'xaxis.range': [50, 60]})")

    # then the grad norm chart follows, its y axis fitted to the points in view
    page.wait_for_function(
        "() => JSON.stringify(document.querySelector('#chart-1').layout.xaxis.range) === '[50,60]'"
    )
    y0, y1 = page.evaluate("document.querySelector('#chart-1').layout.yaxis.range")
    # grad_norm = 11 - step/50: 9.8 at step 60, 10 at step 50 (5% padding)
    assert 9.7 < y0 < 9.8 and 10.0 < y1 < 10.1
    page.wait_for_function("() => location.search.includes('x0=50')")

    # and the link reproduces the view
    again = _open(browser, live_server, login_page, f"/runs/{run.pk}/?x0=50&x1=60")
    again.wait_for_function(
        "() => JSON.stringify(document.querySelector('#chart-1').layout.xaxis.range) === '[50,60]'"
    )


def test_the_picker_finds_metric_150_of_200(
    browser, live_server, login_page, alice, run, add_points
):
    # given a run with 200 metrics, of which the page draws the first 12
    names = [f"train/metric_{index:03d}" for index in range(200)]
    add_points(names, range(0, 5))
    page = _open(browser, live_server, login_page, f"/runs/{run.pk}/")
    assert page.locator("#charts-area figure.chart").count() == 12
    assert "12 of 200" in page.locator("#metric-picker summary").first.inner_text()
    page.evaluate("window.__notReloaded = true")

    # when the user searches for metric 150 and ticks it
    page.click("#metric-picker > summary")
    page.fill("#metric-search", "metric_150")
    box = page.locator("input[name=metric][value='train/metric_150']")
    assert box.is_visible()
    assert page.locator("input[name=metric]:visible").count() == 1
    box.check()

    # then its chart is drawn, the URL pins it, and the page was not reloaded
    page.wait_for_selector("[data-metric='train/metric_150'] .main-svg")
    assert "train%2Fmetric_150" in page.url or "train/metric_150" in page.url
    assert page.evaluate("window.__notReloaded") is True
    # and the picker counts the 13 charts drawn now
    assert page.locator("#charts-area figure.chart").count() == 13
    assert "13 of 200" in page.locator("#metric-picker summary").first.inner_text()


def test_a_147_metric_run_draws_what_people_look_at_first(
    browser, live_server, login_page, alice, run, add_points
):
    # given a run of 147 metrics: 140 per-layer grad norms and seven top-level ones
    names = [f"grad_norm/layer_{index:03d}" for index in range(140)]
    top = ["train/loss", "lr", "grad_norm", "tokens_per_s", "step_time_s", "mfu", "val/loss"]
    add_points(names + top, range(0, 5))

    # when the run page opens with no metric chosen
    page = _open(browser, live_server, login_page, f"/runs/{run.pk}/")

    # then the loss, lr, grad norm, throughput and step time come first, then the rest by name
    drawn = page.eval_on_selector_all(
        "#charts-area figure.chart", "charts => charts.map(c => c.dataset.metric)"
    )
    assert drawn[:6] == ["train/loss", "val/loss", "lr", "grad_norm", "tokens_per_s",
                         "step_time_s"]  # fmt: skip
    assert drawn[6:] == [f"grad_norm/layer_{index:03d}" for index in range(6)]
    assert "12 of 147" in page.locator("#metric-picker summary").first.inner_text()

    # and a 13th metric ticked is drawn after them, and counted
    page.click("#metric-picker > summary")
    page.fill("#metric-search", "mfu")
    page.locator("input[name=metric][value='mfu']").check()
    page.wait_for_selector("[data-metric='mfu'] .main-svg")
    after = page.eval_on_selector_all(
        "#charts-area figure.chart", "charts => charts.map(c => c.dataset.metric)"
    )
    assert after == [*drawn, "mfu"]
    assert "13 of 147" in page.locator("#metric-picker summary").first.inner_text()


def test_switching_to_wall_clock_time_does_not_reload_the_page(
    browser, live_server, login_page, alice, run, add_points
):
    add_points(["loss"], range(0, 50))
    page = _open(browser, live_server, login_page, f"/runs/{run.pk}/")
    page.evaluate("window.__notReloaded = true")

    page.click("#axis-switch a[data-axis=time]")

    page.wait_for_function("() => document.querySelector('#chart-0').layout.xaxis.type === 'date'")
    assert page.evaluate("window.__notReloaded") is True
    assert "axis=time" in page.url


def test_no_request_leaves_this_machine_and_no_share_button(
    browser, live_server, login_page, alice, run, add_points
):
    # given a page that records the host of every request it makes
    add_points(["loss", "grad_norm"], range(0, 50))
    page = browser.new_page()
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlparse(request.url).hostname or ""))

    # when on-call browses the run list, the run page, triage and fleet health
    login_page(page, live_server.url, "alice")
    for path in ("/", f"/runs/{run.pk}/", "/incidents/", "/fleet/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector("#chart-0 .modebar", state="attached")

    # then every request went to the test server, and no chart offers to send data away
    assert hosts <= {"127.0.0.1", "localhost"}, hosts
    assert page.locator("[data-title*='Chart Studio'], [data-title*='cloud']").count() == 0
    links = page.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
    assert all(urlparse(link).hostname in {"127.0.0.1", "localhost"} for link in links), links


def test_log_scale_smoothing_and_the_legend_reach_every_chart(
    browser, live_server, login_page, alice, run, add_points
):
    # given three metrics, the page opened from a link with log scale and smoothing on
    add_points(["loss", "grad_norm", "lr"], range(0, 100))
    page = _open(browser, live_server, login_page, f"/runs/{run.pk}/?ylog=1&smooth=0.5")

    # then every chart, the ones drawn after the first too, is on a log axis and smoothed,
    # its raw line kept faint
    assert page.evaluate(
        "[0, 1, 2].map(i => document.querySelector('#chart-' + i).layout.yaxis.type)"
    ) == ["log", "log", "log"]
    lines = page.evaluate(
        "document.querySelector('#chart-2')._fullData.map(t => [t.name, t.opacity])"
    )
    assert lines == [["attempt 1", 0.25], ["attempt 1", 1]]
    assert page.is_checked("#y-log")

    # when log scale is turned off, then every chart goes linear and the link forgets it
    page.click("#y-log")
    page.wait_for_function(
        "() => [0, 1, 2].every(i =>"
        " document.querySelector('#chart-' + i).layout.yaxis.type === 'linear')"
    )
    assert "ylog" not in page.url and "smooth=0.5" in page.url

    # when the page's one legend hides attempt 1, then it is hidden on every chart
    page.click("#chart-0 .legend .traces .legendtoggle")
    page.wait_for_function(
        "() => document.querySelector('#chart-2').data"
        ".filter(t => t.name === 'attempt 1').every(t => t.visible === 'legendonly')"
    )


def test_the_lists_update_themselves_and_keep_what_the_reader_did(
    browser, live_server, login_page, alice, run, add_points
):
    # given the run list open, run ticked for Compare and a search typed but not sent
    from logbook.services import interruptions as interruption_services

    add_points(["loss"], range(0, 10))
    page = browser.new_page()
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/")
    page.check(f"input[name=runs][value='{run.pk}']")
    page.fill("input[name=q]", "half-typed")
    page.evaluate("window.__notReloaded = true")

    # when a new run appears, a poll shows it in the list, without a reload
    telemetry_services.run_upsert(project=run.project, name="newcomer")
    page.wait_for_selector("#run-list a:has-text('newcomer')", timeout=LIVE_TIMEOUT_MS)
    assert page.evaluate("window.__notReloaded") is True
    # and what the reader did is still there, and "updated" keeps counting
    assert page.is_checked(f"input[name=runs][value='{run.pk}']")
    assert page.input_value("input[name=q]") == "half-typed"
    page.wait_for_function(
        "() => /updated [0-9]+ s ago/.test(document.getElementById('live-updated').textContent)",
        timeout=LIVE_TIMEOUT_MS,
    )

    # and the triage queue shows a new incident the same way, its date presets still working
    page.goto(f"{live_server.url}/incidents/?status=all")
    page.evaluate("window.__notReloaded = true")
    interruption_services.interruption_record(
        run=run, source_key="live-1", occurred_at=START + timedelta(hours=1), category="nic"
    )
    page.wait_for_selector("#incidents tr[data-status=open]", timeout=LIVE_TIMEOUT_MS)
    assert page.evaluate("window.__notReloaded") is True
    page.click("[data-preset='7d']")
    assert page.input_value("input[name=since]") != ""
    page.close()


def test_attempt_labels_never_print_over_each_other(browser, live_server, login_page, alice, run):
    # given a run restarted seven times within 70 steps of its 400, read on a 390 px phone,
    # where the three staggered rows of "attempt N" labels cannot all fit
    for number in range(1, 9):
        attempt = Attempt.objects.create(
            run=run,
            number=number,
            started_at=START + timedelta(minutes=number),
            resumed_from_step=None if number == 1 else 300 + 10 * number,
        )
        steps = range(0, 310) if number == 1 else range(300 + 10 * number, 400)
        with transaction.atomic():
            telemetry_services.metric_points_insert(
                run=run, attempt=attempt, points=_points(["loss"], steps)
            )
    page = browser.new_page(viewport={"width": 390, "height": 800})
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    boxes = (
        "() => Array.from(document.querySelectorAll('#chart-0 g.annotation-text-g'))"
        ".map(g => { const b = g.getBoundingClientRect();"
        " return {shown: g.style.visibility !== 'hidden', text: g.textContent,"
        " l: b.left, r: b.right, t: b.top, b: b.bottom}; })"
    )

    def clashes(labels: list[dict[str, Any]]) -> list[tuple[str, str]]:
        shown = [label for label in labels if label["shown"]]
        return [
            (a["text"], b["text"])
            for i, a in enumerate(shown)
            for b in shown[i + 1 :]
            if a["l"] + 1 < b["r"]
            and b["l"] + 1 < a["r"]
            and a["t"] + 1 < b["b"]
            and b["t"] + 1 < a["b"]
        ]

    # then no two labels shown overlap; those that would are hidden, the first one is shown
    labels = page.evaluate(boxes)
    assert len(labels) == 7, labels
    assert clashes(labels) == []
    assert labels[0]["shown"] and labels[0]["text"] == "attempt 2"
    assert any(not label["shown"] for label in labels), labels

    # and when zoomed in on the restarts, the labels are laid out again: more of them fit
    hidden_before = sum(not label["shown"] for label in labels)
    page.evaluate(
        "() => Plotly.relayout(document.getElementById('chart-0'), {'xaxis.range': [305, 385]})"
    )
    page.wait_for_timeout(300)
    zoomed = page.evaluate(boxes)
    assert clashes(zoomed) == []
    assert sum(not label["shown"] for label in zoomed) < hidden_before, zoomed
    page.close()


def test_a_time_axis_read_in_india_shows_india_time_and_links_in_utc(
    browser, live_server, login_page, alice, run, add_points
):
    # given 200 steps of loss, 30 s apart from 2026-11-20 00:00 UTC, read in India's time
    add_points(["loss"], range(0, 200))
    context = browser.new_context()
    context.add_cookies([{"name": "chronicle_tz", "value": "Asia/Kolkata", "url": live_server.url}])
    page = context.new_page()
    login_page(page, live_server.url, "alice")

    # when the run's wall-clock view is opened from a link to 00:10-00:20 UTC
    ms = int(START.timestamp() * 1000)
    x0, x1 = ms + 600_000, ms + 1_200_000
    page.goto(f"{live_server.url}/runs/{run.pk}/?axis=time&x0={x0}&x1={x1}")
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    chart = page.evaluate(
        "() => { const gd = document.getElementById('chart-0');"
        " return {title: gd.layout.xaxis.title.text, range: gd.layout.xaxis.range,"
        " first: gd.data[0].x[0]}; }"
    )

    # then the axis is India's (UTC+5:30), says so, and shows the linked moments
    assert chart["title"] == "wall-clock time (Asia/Kolkata)", chart
    assert str(chart["first"]).startswith("2026-11-20 05:30:00"), chart
    assert [str(x)[:16] for x in chart["range"]] == ["2026-11-20 05:40", "2026-11-20 05:50"]

    # and a zoom there keeps UTC milliseconds in the URL, so the link reads the same anywhere
    page.evaluate(
        "() => Plotly.relayout(document.getElementById('chart-0'),"
        " {'xaxis.range': ['2026-11-20 05:50:00', '2026-11-20 06:00:00']})"
    )
    page.wait_for_function(
        "x0 => new URLSearchParams(location.search).get('x0') !== String(x0)", arg=x0
    )
    query = dict(part.split("=") for part in page.url.split("?")[1].split("&"))
    assert (int(float(query["x0"])), int(float(query["x1"]))) == (ms + 1_200_000, ms + 1_800_000)
    context.close()
