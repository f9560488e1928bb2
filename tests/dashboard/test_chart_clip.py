"""The run page's "clip outliers" view, on by default: a chart one spike flattens is scaled to
its p1-p99 band (widened a quarter each side) with the spike marked at the edge; a chart
without outliers keeps its whole range; turning it off is kept in the link (yclip=0). The
compare page has the same controls (log y, clip outliers, smoothing)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import transaction

from telemetry import services as telemetry_services
from telemetry.models import Attempt

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
START = datetime(2026, 11, 20, tzinfo=UTC)
SHOTS = Path("/work/notes/shots/charts")

Y_RANGE = "i => document.querySelector('#chart-' + i).layout.yaxis.range.map(Number)"
CLIPPED = (
    "i => document.querySelector('#chart-' + i).data.filter(t => t.clipped).map(t => [t.y, t.text])"
)


def test_one_spike_no_longer_flattens_its_chart(browser, live_server, login_page, alice, run):
    # given a loss curve and a grad_norm near 1 with one spike of 150 at step 120
    attempt = Attempt.objects.create(run=run, number=1, started_at=START)
    points = []
    for step in range(200):
        at = START + timedelta(seconds=30 * step)
        points.append(("loss", step, 4.0 - step / 100, at))
        grad = 150.0 if step == 120 else 1.0 + 0.1 * math.sin(step)
        points.append(("grad_norm", step, grad, at))
    with transaction.atomic():
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    page = browser.new_page()
    login_page(page, live_server.url, "alice")

    # when the page is opened as a user would, with no view in the link
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    charts = page.evaluate(
        "Array.from(document.querySelectorAll('[data-linked-x]')).map(gd => gd.dataset.metric)"
    )
    grad, loss = charts.index("grad_norm"), charts.index("loss")

    # then grad_norm is scaled to its band, the spike marked at its top edge with its value
    low, high = page.evaluate(f"({Y_RANGE})({grad})")
    assert low > 0.8 and high < 1.3
    ((ys, texts),) = page.evaluate(f"({CLIPPED})({grad})")
    assert texts == ["150"] and low < ys[0] < high
    # and the loss chart, which no outlier flattens, keeps its whole range
    assert page.evaluate(f"({CLIPPED})({loss})") == []
    assert page.evaluate(f"({Y_RANGE})({loss})")[1] > 3.9
    assert page.is_checked("#y-clip")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(f"#chart-{grad}").screenshot(path=str(SHOTS / "spiky-chart-clipped.png"))

    # when clipping is turned off, then the spike is in range again and the link keeps that
    page.click("#y-clip")
    page.wait_for_function(f"() => ({Y_RANGE})({grad})[1] > 150")
    assert page.evaluate(f"({CLIPPED})({grad})") == [] and "yclip=0" in page.url
    page.locator(f"#chart-{grad}").screenshot(path=str(SHOTS / "spiky-chart-unclipped.png"))
    # and turned on again, the link is back to the default
    page.click("#y-clip")
    page.wait_for_function(f"() => ({Y_RANGE})({grad})[1] < 2")
    assert "yclip" not in page.url
    # and a link with yclip=0 opens unclipped
    page.goto(f"{live_server.url}/runs/{run.pk}/?yclip=0")
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    assert not page.is_checked("#y-clip")
    assert page.evaluate(f"({Y_RANGE})({grad})")[1] > 150


def test_compare_clips_by_default_and_has_log_and_smoothing(
    browser, live_server, login_page, alice, run, project
):
    # given two runs, one with a grad_norm spike
    other = telemetry_services.run_upsert(project=project, name="other", info={})
    for each, spike in ((run, True), (other, False)):
        attempt = Attempt.objects.create(run=each, number=1, started_at=START)
        points = [
            ("grad_norm", step, 150.0 if spike and step == 120 else 1.0 + 0.1 * math.sin(step),
             START + timedelta(seconds=30 * step))
            for step in range(200)
        ]  # fmt: skip
        with transaction.atomic():
            telemetry_services.metric_points_insert(run=each, attempt=attempt, points=points)
    page = browser.new_page()
    login_page(page, live_server.url, "alice")
    # when the compare page opens
    page.goto(f"{live_server.url}/compare/?runs={run.pk},{other.pk}")
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    # then grad_norm is clipped to its band, and log y and smoothing are there to use
    assert page.is_checked("#y-clip")
    assert page.evaluate(f"({Y_RANGE})(0)")[1] < 2
    page.click("#y-log")
    page.wait_for_function("() => document.querySelector('#chart-0').layout.yaxis.type === 'log'")
    assert "ylog=1" in page.url
    page.fill("#smoothing", "0.6")
    page.dispatch_event("#smoothing", "change")
    page.wait_for_function("() => new URLSearchParams(location.search).get('smooth') === '0.6'")
    page.screenshot(path=str(SHOTS / "compare-clipped.png"), full_page=True)
