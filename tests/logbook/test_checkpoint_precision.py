"""Checkpoint times keep their precision: fractional save costs are not cut to whole
seconds, and the save-cost chart's dates are right whatever resolution pandas gives a
datetime column (pandas 3 makes microsecond or second columns where pandas 2 made ns)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from logbook import charts
from logbook.services import checkpoints as checkpoint_services
from telemetry import services as telemetry_services

SAVED = datetime(2026, 11, 1, 12, 0, 0, 500_000, tzinfo=UTC)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_utc_text_is_right_at_every_datetime_resolution(unit):
    moments = pd.Series([SAVED, None]).astype(f"datetime64[{unit}, UTC]")
    expected = SAVED if unit != "s" else SAVED.replace(microsecond=0)

    text, missing = charts.utc_text(moments)
    assert _utc(text) == expected and missing is None
    # naive: plotly.js shows a string's hours as written (an offset would be misread)
    assert "+" not in text and not text.endswith("Z")


def test_save_cost_chart_is_dated_when_the_saves_were_made():
    frame = pd.DataFrame(
        {
            "saved_at": pd.Series([SAVED]).astype("datetime64[us, UTC]"),
            "step": [100],
            "blocking_save_s": [622.08],
            "async_save_s": [None],
        }
    )

    figure = charts.save_cost_figure(frame)

    (x,) = figure["data"][0]["x"]
    assert _utc(x) == SAVED  # not January 1970
    assert figure["data"][0]["y"] == [622.08]


def test_save_cost_chart_of_thousands_of_saves_keeps_each_buckets_extremes():
    # given 3,102 saves (a Llama-scale run's), one of them far slower than the rest
    count = 3102
    blocking = [20.0 + (i % 7) for i in range(count)]
    blocking[1234] = 900.0
    frame = pd.DataFrame(
        {
            "saved_at": pd.Series([SAVED + timedelta(minutes=20 * i) for i in range(count)]),
            "step": [300 * i for i in range(count)],
            "blocking_save_s": blocking,
            "async_save_s": [100.0 + i % 300 for i in range(count)],
        }
    )

    # when it is drawn
    blocking_line, async_line = charts.save_cost_figure(frame)["data"]

    # then each line keeps at most SAVE_COST_MAX_POINTS, in time order, with the slow save
    # and the fastest, each hover still naming its step
    assert len(blocking_line["x"]) <= charts.SAVE_COST_MAX_POINTS
    assert len(async_line["x"]) <= charts.SAVE_COST_MAX_POINTS
    assert blocking_line["x"] == sorted(blocking_line["x"])
    assert max(blocking_line["y"]) == 900.0 and min(blocking_line["y"]) == 20.0
    assert 300 * 1234 in blocking_line["customdata"]
    assert (min(async_line["y"]), max(async_line["y"])) == (100.0, 399.0)


@pytest.mark.django_db
def test_checkpoint_page_keeps_hundredths_of_a_second(client, alice):
    # given saves 622.08 s apart, each blocking for 622.08 s
    run = telemetry_services.run_upsert(
        project=alice.memberships.get().project, name="precise", info={}
    )
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=SAVED)
    for i in range(3):
        checkpoint_services.checkpoint_record(
            run=run,
            step=100 * (i + 1),
            attempt=attempt,
            saved_at=SAVED + timedelta(seconds=622.08 * (i + 1)),
            blocking_save_s=622.08,
        )
    client.force_login(alice)

    # when
    body = client.get(f"/api/v1/runs/{run.pk}/checkpoints").json()
    page = client.get(f"/runs/{run.pk}/checkpoints/").content.decode()

    # then
    advisor = body["advisor"]
    assert advisor["delta_s"]["value"] == pytest.approx(622.08)
    assert advisor["actual_period_s"]["value"] == pytest.approx(622.08, abs=1e-3)
    assert "(622.08 s)" in page and "622.0 s" not in page
    charts_data = re.search(
        r'<script id="charts-data" type="application/json">(.*?)</script>', page
    )
    assert charts_data is not None
    figures: list[dict[str, Any]] = json.loads(charts_data.group(1))
    save_cost = next(chart["figure"] for chart in figures if chart["id"] == "chart-save-cost")
    assert min(_utc(x) for x in save_cost["data"][0]["x"]) > SAVED  # dated 2026, not 1970
