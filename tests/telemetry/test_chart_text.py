"""Text in a Plotly figure is user input (metric, root-cause and host names): Plotly renders
a subset of HTML in it (a link in a title is clickable), so charts_script escapes every
string of every figure, keeping only the chart code's own hover templates as markup."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from logbook.services import interruptions as interruption_services
from telemetry import charts, metric_charts
from telemetry import services as telemetry_services

LINK = '<a href="https://evil.example/">click me</a>'
SHOTS = Path("/work/notes/shots")


def _embedded(script: str) -> list[dict]:
    body = re.fullmatch(r'<script id="charts-data" type="application/json">(.*)</script>', script)
    assert body is not None
    return json.loads(body.group(1))


def test_every_string_of_a_figure_is_escaped_but_the_codes_templates():
    # given a figure whose title, trace name, hover text and category ticks are user input
    figure = {
        "data": [
            {
                "type": "bar",
                "x": ["h<b>1</b>", "h2"],
                "y": [3, 1],
                "name": LINK,
                "text": ["Faulty <i>GPU</i> & co"],
                "hovertemplate": "%{x}<br>%{y} interruptions<extra></extra>",
            }
        ],
        "layout": {
            "title": {"text": LINK},
            "annotations": [{"text": "<a href='x'>note</a>"}],
            "xaxis": {"ticktext": ["<b>h1</b>"], "tickvals": [0]},
        },
    }

    # when it is embedded
    [embedded] = _embedded(str(charts.charts_script([{"id": "c", "figure": figure}])))
    out = embedded["figure"]

    # then no user string keeps a tag, and the code's template keeps its markup
    escaped_link = '&lt;a href="https://evil.example/"&gt;click me&lt;/a&gt;'
    assert out["layout"]["title"]["text"] == escaped_link
    assert out["data"][0]["name"] == out["layout"]["title"]["text"]
    assert out["data"][0]["x"] == ["h&lt;b&gt;1&lt;/b&gt;", "h2"]
    assert out["data"][0]["text"] == ["Faulty &lt;i&gt;GPU&lt;/i&gt; &amp; co"]
    assert out["layout"]["annotations"][0]["text"] == "&lt;a href='x'&gt;note&lt;/a&gt;"
    assert out["layout"]["xaxis"]["ticktext"] == ["&lt;b&gt;h1&lt;/b&gt;"]
    assert out["data"][0]["hovertemplate"] == "%{x}<br>%{y} interruptions<extra></extra>"
    assert out["data"][0]["y"] == [3, 1]


def test_a_metric_figure_title_is_escaped():
    frame = pd.DataFrame({"attempt": [1, 1], "x": [1, 2], "value": [1.0, 0.5]})
    figure = metric_charts.metric_figure(frame, title=LINK, axis="step")

    script = str(charts.charts_script([{"id": "c", "figure": json.loads(figure.to_json())}]))

    assert "<a" not in json.dumps(_embedded(script))


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_link_is_drawn_from_names_on_the_run_page(
    browser, live_server, alice, project, login_page
):
    # given a run with a metric and a root cause named with a link
    run = telemetry_services.run_upsert(project=project, name="escape-me")
    attempt = telemetry_services.attempt_ensure(run=run, number=1, hosts=["h<b>1</b>"])
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[(LINK, 1, 1.0, None), (LINK, 2, 0.5, None)]
    )
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("loss", 1, 2.0, None), ("loss", 2, 1.5, None)]
    )
    interruption_services.interruption_record(
        run=run,
        source_key="i-1",
        occurred_at=datetime(2026, 3, 2, 9, 30, tzinfo=UTC),
        attempt=attempt,
        category=LINK,
        planned=False,
        step=2,
    )
    page = browser.new_page()
    login_page(page, live_server.url, "alice")

    # when alice opens the run page
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector(".js-plotly-plot .main-svg")
    page.wait_for_timeout(300)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "limits-chart-text.png"), full_page=True)

    # then the charts draw the names as text: no link anywhere in their SVG
    links = page.evaluate("document.querySelectorAll('.js-plotly-plot svg a').length")
    titles = page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot .gtitle')].map(t => t.textContent)"
    )
    assert links == 0
    assert LINK in titles
    page.close()


def test_long_lists_are_escaped_item_by_item_only_where_a_string_needs_it():
    # given a time axis of plain ISO times with gaps, one with a tag at its end, and a list
    # of plain strings holding a nested list that needs escaping
    times = ["2026-11-25T10:00:00", None, "2026-11-25T10:00:05", 3.5]
    tagged = [*times, "h<b>9</b>"]
    nested = ["plain", ["a & b", None], 7]

    # then plain lists come back equal (and new), the others escaped where needed
    out = charts.figure_text_escape({"x": times, "text": tagged, "customdata": nested})
    assert out["x"] == times and out["x"] is not times
    assert out["text"] == [*times, "h&lt;b&gt;9&lt;/b&gt;"]
    assert out["customdata"] == ["plain", ["a &amp; b", None], 7]
