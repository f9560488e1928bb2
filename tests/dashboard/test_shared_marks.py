"""A run page's charts share its marks: the logbook entries are the same on every chart, so
the page writes their hover ticks' trace once and charts.js gives each chart its copy before
drawing it; many restarts are one path shape, and many interruptions and entries only their
ticks."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook.services.entries import logbook_entry_record
from logbook.services.interruptions import interruption_record
from telemetry import services as telemetry_services
from telemetry.charts import MANY_MARKS, MARKS_AXIS, SHARED_TRACES_ID, shared_marks

T0 = datetime(2026, 11, 1, tzinfo=UTC)
ATTEMPTS = MANY_MARKS + 5  # marks past MANY_MARKS: one path and one trace of ticks a kind


def _marks_trace(xs: list[int]) -> dict[str, Any]:
    return {"type": "scatter", "yaxis": MARKS_AXIS, "name": "restarts",
            "x": [v for x in xs for v in (x, x, None)]}  # fmt: skip


def test_marks_two_charts_hold_alike_are_written_once_and_the_rest_stay() -> None:
    own = {"type": "scatter", "name": "attempt 1", "x": [1, 2], "y": [3.0, 2.5]}
    alone = {**_marks_trace([7]), "name": "only here"}
    payload = [
        {"id": "a", "figure": {"data": [own, _marks_trace([5, 9])], "layout": {}}},
        {"id": "b", "figure": {"data": [own, _marks_trace([5, 9]), alone], "layout": {}}},
        {"id": "c", "figure": {"data": [_marks_trace([5, 10])], "layout": {}}},
    ]
    path = {"type": "path", "path": "M5,0L5,1M9,0L9,1", "xref": "x", "yref": "y domain"}
    for entry in payload[:2]:
        entry["figure"]["layout"] = {"shapes": [{"type": "line", "x0": 1}, path]}
    out = shared_marks(payload)
    assert out[-1] == {"id": SHARED_TRACES_ID, "traces": [_marks_trace([5, 9]), path]}
    assert out[0]["figure"]["layout"]["shapes"] == [{"type": "line", "x0": 1}, {"shared": 1}]
    assert out[0]["figure"]["data"] == [own, {"shared": 0}]
    assert out[1]["figure"]["data"] == [own, {"shared": 0}, alone]
    assert out[2]["figure"]["data"] == [_marks_trace([5, 10])]  # differs: kept as it is
    # nothing shared: the payload is returned as it was
    assert shared_marks(payload[2:]) == payload[2:]


def _run(project: Any) -> Any:
    run = telemetry_services.run_upsert(project=project, name="many-restarts", info={})
    for number in range(1, ATTEMPTS + 1):
        first = (number - 1) * 10
        attempt = telemetry_services.attempt_ensure(
            run=run,
            number=number,
            started_at=T0 + timedelta(hours=number),
            resumed_from_step=first if number > 1 else None,
        )
        points = []
        for step in range(first, first + 12):
            at = T0 + timedelta(hours=number, seconds=step)
            points += [("loss", step, 3.0 - step / 1e3, at), ("grad_norm", step, 1.0, at)]
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
        if number < ATTEMPTS:
            interruption_record(run=run, source_key=f"i{number}", attempt=attempt,
                                occurred_at=T0 + timedelta(hours=number, seconds=first + 11),
                                category="faulty-gpu", step=first + 11)  # fmt: skip
            noted_at = T0 + timedelta(hours=number, seconds=first + 5)
            logbook_entry_record(
                run=run, title=f"note {number}", step=first + 5, occurred_at=noted_at
            )
    return run


def _embedded(html: str) -> list[dict[str, Any]]:
    found = re.search(r'<script id="charts-data" type="application/json">(.*?)</script>', html)
    assert found is not None
    return json.loads(found.group(1))


@pytest.mark.django_db
def test_the_run_page_writes_its_logbook_ticks_once(client: Any, project: Any, alice: Any) -> None:
    run = _run(project)
    client.force_login(alice)
    entries = _embedded(client.get(f"/runs/{run.pk}/").content.decode())
    shared = entries[-1]
    assert shared["id"] == SHARED_TRACES_ID
    [ticks] = [t for t in shared["traces"] if t.get("name") == "logbook entries"]
    assert len(ticks["x"]) == ATTEMPTS - 1 and ticks["mode"] == "none"  # hover only
    charts = [entry for entry in entries if "figure" in entry]
    assert len(charts) == 2  # loss and grad_norm
    index = shared["traces"].index(ticks)
    paths = []
    for chart in charts:
        assert {"shared": index} in chart["figure"]["data"]
        shapes = [
            shared["traces"][s["shared"]] if "shared" in s else s
            for s in chart["figure"]["layout"]["shapes"]
        ]
        paths.append([s["path"].count("M") for s in shapes if s["type"] == "path"])
    loss_shapes, grad_shapes = (chart["figure"]["layout"]["shapes"] for chart in charts)
    assert [s for s in loss_shapes if s in grad_shapes] == grad_shapes  # written once
    # the restarts: a path; the many interruptions (on the loss chart) and logbook entries:
    # their ticks only, a path of ticks each
    assert paths == [[ATTEMPTS - 1] * 3, [ATTEMPTS - 1] * 2]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_chart_draws_the_shared_ticks_and_its_mark_paths(
    browser: Any, live_server: Any, login_page: Any, console_errors: Any, project: Any, alice: Any
) -> None:
    run = _run(project)
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_function(
        "() => performance.getEntriesByName('chronicle:all-charts').length > 0", timeout=60_000
    )
    drawn = page.evaluate(
        """() => Array.from(document.querySelectorAll('[data-linked-x]')).map(gd => [
             gd._fullData.filter(t => t.name === 'logbook entries').map(t => t.x.length),
             gd.querySelectorAll('.layer-below .shapelayer path').length,
             gd.querySelectorAll('.layer-above .shapelayer path').length])"""
    )
    # restarts under the data; ticks over it: the loss chart's interruptions and entries,
    # the other chart's entries
    assert drawn == [[[ATTEMPTS - 1], 1, 2], [[ATTEMPTS - 1], 1, 1]]
    assert errors == []
