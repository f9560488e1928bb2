"""The run page's power and heat (its hosts' GPUs from dcgm-exporter's pushes: summed power and
the hottest temperature)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest
from django.core.cache import cache
from django.utils import timezone

from dashboard import power_charts
from telemetry import services as telemetry_services
from telemetry.models import Host, Run
from telemetry.selectors.dcgm import run_power_heat

WATTS = {"node-07": (300.0, 500.0), "node-99": (900.0, 900.0)}  # node-99 is not the run's


def scrape(host: str, minute: int, at_ms: int) -> str:
    """Two GPUs of `host`: constant power, 60 and 70 °C, GPU 1 at 85 °C in minute 12."""
    lines = []
    for gpu, watts in enumerate(WATTS[host]):
        labels = f'gpu="{gpu}",UUID="GPU-{host}-{gpu}",modelName="NVIDIA H100",Hostname="{host}"'
        temp = 85.0 if gpu == 1 and minute == 12 else 60.0 + 10 * gpu
        lines += [
            f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {watts} {at_ms}",
            f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {temp} {at_ms}",
        ]
    return "\n".join(lines) + "\n"


def _push(client: Any, token: str, host: str, start: datetime, minutes: int) -> None:
    for minute in range(minutes):
        at_ms = int((start + timedelta(minutes=minute)).timestamp() * 1000)
        answer = client.post(
            f"/api/v1/ingest/prometheus?host={host}", data=scrape(host, minute, at_ms).encode(),
            content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {token}",
        )  # fmt: skip
        assert answer.status_code == 200, answer.content


def _run(project: Any, name: str, start: datetime, hosts: list[Host]) -> Run:
    """A run of one attempt from `start`, on `hosts`, with a tokens_per_s point a minute."""
    run = telemetry_services.run_upsert(project=project, name=name, info={})
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=start)
    attempt.hosts.add(*hosts)
    points = [("tokens_per_s", m, 1000.0, start + timedelta(minutes=m)) for m in range(20)]
    telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    return run


@pytest.fixture
def start() -> datetime:
    """Two hours ago, on a 5-minute summary's boundary: 20 minutes of pushes fill four."""
    now = int(timezone.now().timestamp())
    return datetime.fromtimestamp(now - now % 300 - 7200, tz=UTC)


@pytest.fixture
def pushed(client: Any, ingest_token: str, start: datetime) -> datetime:
    _push(client, ingest_token, "node-07", start, 20)
    _push(client, ingest_token, "node-99", start, 20)
    return start


def extra_figure(html: str, chart_id: str) -> dict[str, Any] | None:
    """The figure of one chart under the run page's metrics (None when not drawn)."""
    match = re.search(r'<script id="charts-data-more" type="application/json">(.*?)</script>', html)
    entries = json.loads(match.group(1)) if match else []
    return next((one["figure"] for one in entries if one["id"] == chart_id), None)


@pytest.mark.django_db
def test_run_page_draws_power_and_heat_of_its_hosts_gpus_only_when_they_pushed(
    client: Any, alice: Any, project: Any, pushed: datetime
) -> None:
    # given a run on node-07 (which pushed), and one on a host that never did
    on_gpus = _run(project, "on-gpus", pushed, [Host.objects.get(name="node-07")])
    quiet_host = Host.objects.create(project=project, name="node-quiet")
    quiet = _run(project, "quiet", pushed, [quiet_host])
    client.force_login(alice)
    cache.clear()

    # when each run page is opened
    html = client.get(f"/runs/{on_gpus.pk}/").content.decode()
    quiet_html = client.get(f"/runs/{quiet.pk}/").content.decode()

    # then the first draws node-07's two GPUs: 300 + 500 W summed (each GPU's mean over a
    # bucket, not its five readings added), the hottest 70 °C but 85 °C in minute 12's bucket;
    # node-99's 1,800 W are not the run's
    figure = extra_figure(html, "chart-power-heat")
    assert figure is not None and 'id="chart-power-heat"' in html
    power, heat = figure["data"]
    assert power["y"] == [800.0, 800.0, 800.0, 800.0]
    assert heat["y"] == [70.0, 70.0, 85.0, 70.0] and heat["yaxis"] == "y2"
    # and the other has no such chart, not even an empty frame
    assert 'id="chart-power-heat"' not in quiet_html
    assert extra_figure(quiet_html, "chart-power-heat") is None


def test_power_and_heat_leaves_out_a_reading_no_gpu_sent() -> None:
    # given buckets with temperatures but no power (an exporter without the power field)
    points = pd.DataFrame(
        {"at": [datetime(2026, 11, 1, tzinfo=UTC)], "power_w": [None], "temp_max_c": [67.0]}
    )
    # when drawn
    figure = power_charts.power_heat_figure(points)
    # then one trace, the temperature, on the left axis titled °C
    (heat,) = figure.data
    assert heat.name == "hottest GPU (°C)" and heat.yaxis == "y" and list(heat.y) == [67.0]
    assert figure.layout.yaxis.title.text == "°C" and "yaxis2" not in figure.to_dict()["layout"]


@pytest.mark.django_db
def test_power_and_heat_is_one_query_and_bounded_whatever_the_run(
    client: Any, ingest_token: str, project: Any, pushed: datetime, query_budget: Any
) -> None:
    # given a run on one host, and one on two (four GPUs)
    small = _run(project, "small", pushed, [Host.objects.get(name="node-07")])
    big = _run(project, "big", pushed, list(Host.objects.filter(name__in=WATTS)))

    # when each is read, and the big one in at most three buckets
    small_count, small_points = query_budget.run(lambda: run_power_heat(run=small))
    big_count, big_points = query_budget.run(lambda: run_power_heat(run=big))
    coarse = run_power_heat(run=big, max_points=3)

    # then one query each, and the sums hold at any bucket width
    query_budget.constant(small=small_count, big=big_count, guards="hosts and GPUs")
    assert small_count == 1
    assert [p.power_w for p in small_points] == [800.0] * 4
    assert [p.power_w for p in big_points] == [2600.0] * 4
    assert len(coarse) <= 3 and {p.power_w for p in coarse} == {2600.0}
    assert max(p.temp_max_c for p in coarse) == 85.0


def test_one_bucket_is_drawn_as_a_point_on_an_hour_wide_axis() -> None:
    # given a run short enough for one 5-minute bucket of readings
    at = pd.Timestamp("2026-12-02T05:25:00Z")
    points = pd.DataFrame({"at": [at], "power_w": [1281.0], "temp_max_c": [73.0]})

    # when its figure is built
    figure = power_charts.power_heat_figure(points)

    # then each reading shows a marker, and the time axis spans an hour around it
    assert {trace.mode for trace in figure.data} == {"lines+markers"}
    start, end = (pd.Timestamp(x) for x in figure.layout.xaxis.range)
    assert end - start == pd.Timedelta(hours=1)
