"""The run page's "clip outliers" view: a chart one spike flattens is scaled to its p1-p99
band (widened a quarter each side) with the spike marked at the edge; a chart without
outliers keeps its whole range; the choice is kept in the link."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from telemetry import services as telemetry_services
from telemetry.models import Attempt

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
START = datetime(2026, 11, 20, tzinfo=UTC)

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

    # when the page is opened from a link with clipping on
    page.goto(f"{live_server.url}/runs/{run.pk}/?yclip=1")
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

    # when clipping is turned off, then the spike is in range again and the link forgets it
    page.click("#y-clip")
    page.wait_for_function(f"() => ({Y_RANGE})({grad})[1] > 150")
    assert page.evaluate(f"({CLIPPED})({grad})") == [] and "yclip" not in page.url
    # and turned on again, the link keeps it
    page.click("#y-clip")
    page.wait_for_function(f"() => ({Y_RANGE})({grad})[1] < 2")
    assert "yclip=1" in page.url
