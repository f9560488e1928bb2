"""Every dashboard page on the realistic demo data set, in a real browser: it answers, each
chart has traces, and the page logs no console error (CSP violations included)."""

from __future__ import annotations

import re

import pytest

from logbook.models import Interruption
from telemetry.models import Run


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_demo_every_page(demo_data, browser, live_server, console_errors, page_drawn):
    # given the demo, loaded the way `make demo` loads it
    run = Run.objects.get(name="demo-70b-pretrain")
    host = Interruption.objects.filter(hosts__isnull=False).values_list("hosts__name", flat=True)[0]
    pages = [
        "/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/?axis=time",
        f"/runs/{run.pk}/mfu/",
        f"/runs/{run.pk}/mfu/?axis=time",
        f"/runs/{run.pk}/goodput/",
        f"/runs/{run.pk}/goodput/?exclude_planned=1",
        f"/runs/{run.pk}/checkpoints/",
        f"/runs/{run.pk}/ranks/",
        "/failures/",
        f"/failures/?run={run.pk}",
        "/sdc/",
        "/fleet/",
        f"/fleet/hosts/{host}/",
    ]
    page = browser.new_page()
    errors = console_errors(page)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "chronicle-demo")
    page.click("button[type=submit]")

    for path in pages:
        # when each page is opened
        response = page.goto(f"{live_server.url}{path}")
        page_drawn(page)

        # then it answers, and every chart it has is drawn with traces
        assert response is not None and response.status == 200, path
        traces = page.evaluate(
            "Array.from(document.querySelectorAll('.js-plotly-plot')).map(c => c.data.length)"
        )
        if path != "/":  # the run list is a table; every other page has charts
            assert traces and all(count > 0 for count in traces), (path, traces)
        # and every time axis holds naive UTC times: plotly.js misreads "+00:00", and the
        # display zone's conversion (charts.js) reads only naive ones
        aware = page.evaluate(
            "Array.from(document.querySelectorAll('.js-plotly-plot'))"
            ".filter(c => c._fullLayout.xaxis.type === 'date')"
            ".flatMap(c => c.data.flatMap(t => Array.from(t.x || [])))"
            ".filter(x => typeof x === 'string' && /(Z|[+-]\\d\\d:\\d\\d)$/.test(x)).slice(0, 3)"
        )
        assert aware == [], (path, aware)
        assert errors == [], (path, errors)
        # and no template syntax leaks into what the reader sees (a multi-line {# #} does)
        leaked = re.findall(r"\{[#%]|[#%]\}", page.inner_text("body"))
        assert leaked == [], (path, leaked)
    page.close()
