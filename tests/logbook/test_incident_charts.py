"""The incident page draws the run's first metrics around the interruption's step, read with
a step window, the interruption marked."""

from __future__ import annotations

import base64
import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Attempt
from telemetry.selectors import series as series_selectors

START = datetime(2026, 6, 1, tzinfo=UTC)


def _values(data: Any) -> np.ndarray:
    """An array of a figure's JSON: a list, or plotly.py's {dtype, bdata} (base64)."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
    return np.array(data)


@pytest.fixture
def crashed(project: Any) -> Any:
    """Attempt 1 ran steps 0..2000 and crashed at 2000, losing 500 steps; attempt 2 resumed
    from 1500 and ran to 3000. Metrics loss and grad_norm; one NaN loss at step 1501."""
    run = telemetry_services.run_upsert(project=project, name="crashed")
    first = Attempt.objects.create(run=run, number=1, started_at=START)
    second = Attempt.objects.create(run=run, number=2, started_at=START, resumed_from_step=1500)
    for attempt, steps in ((first, range(0, 2001)), (second, range(1500, 3001))):
        points = [
            (name, step, math.nan if (name, attempt, step) == ("loss", second, 1501) else
             10 - step / 1000, START + timedelta(seconds=step))
            for name in ("loss", "grad_norm") for step in steps
        ]  # fmt: skip
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    return interruption_services.interruption_record(
        run=run, source_key="crash", occurred_at=START + timedelta(seconds=2000),
        attempt=first, category="faulty-gpu", step=2000, lost_steps=500,
    )  # fmt: skip


@pytest.mark.django_db
def test_the_step_window_read_keeps_every_nth_step_and_every_non_finite(crashed) -> None:
    (one, two) = series_selectors.series_for_run_in_steps(
        run=crashed.run, name="loss", first_step=1500, last_step=2200, max_points=200
    )
    # 701 steps x 2 series in 200 points: every 8th step from 1500
    assert (one.attempt, two.attempt) == (1, 2)
    assert one.steps[0] == 1500 and one.steps[-1] == 1996 and set(np.diff(one.steps)) == {8}
    assert 1501 in two.steps and math.isnan(two.values[list(two.steps).index(1501)])
    assert two.steps.max() <= 2200
    assert one.wall_times[0] == np.datetime64("2026-06-01T00:25:00", "us")


@pytest.mark.django_db
def test_incident_page_charts_the_window_around_the_step_and_marks_it(client, alice, crashed):
    client.force_login(alice)

    html = client.get(f"/incidents/{crashed.pk}/").content.decode()

    found = re.search(r'<script id="charts-data" type="application/json">(.*?)</script>', html)
    assert found, "no charts on the incident page"
    charts = json.loads(found.group(1))
    assert [c["id"] for c in charts] == ["chart-0", "chart-1"]
    assert 'data-metric="loss"' in html and 'data-metric="grad_norm"' in html
    loss = charts[0]["figure"]
    # the window: max(200, 500 lost steps) before the step, 200 after
    assert loss["layout"]["xaxis"]["range"] == [1500, 2200]
    lines = {t["name"]: _values(t["x"]) for t in loss["data"] if t.get("mode") == "lines"}
    assert lines["attempt 1"].min() == 1500 and lines["attempt 1"].max() == 2000
    assert lines["attempt 2"].min() == 1500 and lines["attempt 2"].max() == 2200
    # the interruption: a dotted line and a named marker at step 2000
    (marker,) = [t for t in loss["data"] if t["name"] == "interruptions"]
    assert list(_values(marker["x"])) == [2000]
    assert marker["text"] == [crashed.root_cause.name]
    assert [s["x0"] for s in loss["layout"]["shapes"] if s["line"].get("dash") == "dot"] == [2000]
    # and where attempt 2 resumed: the run page's dashed line, named
    assert [s["x0"] for s in loss["layout"]["shapes"] if s["line"].get("dash") == "dash"] == [1500]
    assert [a["text"] for a in loss["layout"]["annotations"]] == ["attempt 2"]
    assert "Metrics around step 2000" in html
    assert f'href="/runs/{crashed.run_id}/?x0=1500&amp;x1=2200"' in html


@pytest.mark.django_db
def test_the_window_stops_a_little_past_the_runs_last_step(client, alice, project):
    # given a run that ended with a crash at step 40 (its last step)
    run = telemetry_services.run_upsert(project=project, name="short")
    attempt = Attempt.objects.create(run=run, number=1, started_at=START)
    points = [("loss", step, 3 - step / 100, START + timedelta(seconds=step)) for step in range(41)]
    telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    type(run).objects.filter(pk=run.pk).update(last_step=40)
    crash = interruption_services.interruption_record(
        run=run, source_key="crash", occurred_at=START + timedelta(seconds=40),
        attempt=attempt, category="faulty-gpu", step=40,
    )  # fmt: skip
    client.force_login(alice)

    # when its incident page is read
    html = client.get(f"/incidents/{crash.pk}/").content.decode()

    # then the chart spans the run's steps and a few past its end, not 200 empty steps
    charts = json.loads(
        re.search(r'<script id="charts-data" type="application/json">(.*?)</script>', html)[1]
    )
    assert charts[0]["figure"]["layout"]["xaxis"]["range"] == [0, 45]
    assert "Steps 0 to 45;" in html


@pytest.mark.django_db
def test_an_incident_without_a_step_has_no_charts(client, alice, crashed):
    no_step = interruption_services.interruption_record(
        run=crashed.run, source_key="later", occurred_at=START + timedelta(hours=5)
    )
    client.force_login(alice)

    html = client.get(f"/incidents/{no_step.pk}/").content.decode()

    assert 'id="charts-data"' not in html and "plotly" not in html
