"""The checkpoint and fleet pages keep their costly parts (the advisor and its charts, the
fleet's rows, the incidents chart) in the cache: a change to the data they show must still
show on the very next request, and an unchanged page must come from the cache."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from logbook.services import checkpoints as checkpoint_services
from logbook.services import interruptions as interruption_services
from logbook.services import quarantine as quarantine_services
from telemetry import services as telemetry_services
from telemetry.models import Host, Run

START = datetime(2026, 3, 1, tzinfo=UTC)
T0 = datetime(2026, 11, 2, tzinfo=UTC)
DAY = timedelta(days=1)


def _at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def checkpoint_run(project: Any) -> Run:
    """One attempt over 3 hours, last seen at its end: four saves 1000 s apart (blocking 20,
    30, 40, 30 s: δ = 30 s) and an unexpected interruption recovered 600 s later."""
    run = telemetry_services.run_upsert(project=project, name="cached-ckpt")
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=_at(0))
    for step, blocking in [(200, 20), (400, 30), (600, 40), (800, 30)]:
        checkpoint_services.checkpoint_record(
            run=run, step=step, attempt=attempt, saved_at=_at(5 * step), blocking_save_s=blocking
        )
    interruption_services.interruption_record(
        run=run, source_key="i1", occurred_at=_at(4500), category="faulty-gpu",
        attempt=attempt, recovered_at=_at(5100),
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(last_seen_at=_at(10_800))
    return run


def _api(client: Any, run: Run) -> dict[str, Any]:
    response = client.get(f"/api/v1/runs/{run.pk}/checkpoints")
    assert response.status_code == 200
    found: dict[str, Any] = response.json()
    return found


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


@pytest.mark.django_db
def test_checkpoint_advisor_is_cached_until_the_data_changes(client, alice):
    run = checkpoint_run(alice.memberships.get().project)
    client.force_login(alice)
    page = f"/runs/{run.pk}/checkpoints/"
    api = f"/api/v1/runs/{run.pk}/checkpoints"

    # an unchanged run is served from the cache: fewer queries the second time
    cold_page, warm_page = _queries(client, page), _queries(client, page)
    cold_api, warm_api = _queries(client, api), _queries(client, api)
    assert warm_page < cold_page and warm_api < cold_api
    first = _api(client, run)
    assert first["count"] == 4
    assert first["advisor"]["delta_s"]["value"] == pytest.approx(30.0)
    assert ">30 s<" in client.get(page).content.decode()

    # a new checkpoint shows at once, in the count, δ, the chart and the table
    checkpoint_services.checkpoint_record(
        run=run, step=1000, attempt=run.attempts.get(), saved_at=_at(5000), blocking_save_s=80
    )
    second = _api(client, run)
    assert second["count"] == 5
    assert second["advisor"]["delta_s"]["value"] == pytest.approx(40.0)
    html = client.get(page).content.decode()
    assert ">40 s<" in html and 'data-step="1000"' in html
    script = html.split('<script id="charts-data" type="application/json">')[1].split("</script>")[
        0
    ]
    save_cost = json.loads(script)[0]["figure"]["data"][0]
    assert save_cost["y"][-1] == 80 and 1000 in save_cost["customdata"]

    # so does a save turned failed (only saved checkpoints count toward δ): the status is not
    # in the coarse checkpoint aggregates, its version must still move
    checkpoint_services.checkpoint_record(run=run, step=1000, status="failed")
    assert _api(client, run)["advisor"]["delta_s"]["value"] == pytest.approx(30.0)
    assert ">30 s<" in client.get(page).content.decode()

    # and a new interruption (MTBF halves: 3 h over 2 instead of 1)
    mtbf = _api(client, run)["advisor"]["mtbf_s"]["value"]
    interruption_services.interruption_record(
        run=run, source_key="i2", occurred_at=_at(9000), category="nic",
        attempt=run.attempts.get(),
    )  # fmt: skip
    assert _api(client, run)["advisor"]["mtbf_s"]["value"] == pytest.approx(mtbf / 2)


def fleet_run(project: Any) -> Run:
    """Four hosts; two interruptions on h000 (days 2 and 5), none elsewhere."""
    names = [f"cached-h{i:03d}" for i in range(4)]
    run = telemetry_services.run_upsert(project=project, name="cached-fleet")
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=names)
    Run.objects.filter(pk=run.pk).update(last_seen_at=T0 + 14 * DAY)
    for day in (2, 5):
        interruption_services.interruption_record(
            run=run, source_key=f"int-{day}", occurred_at=T0 + day * DAY,
            category="faulty-gpu", hosts=[names[0]],
        )  # fmt: skip
    return run


def _hosts(client: Any) -> dict[str, dict[str, Any]]:
    body = client.get("/api/v1/fleet/hosts", {"until": "2026-11-29"}).json()
    return {one["name"]: one for one in body["hosts"]}


def _chart(client: Any) -> dict[str, int]:
    html = client.get("/fleet/", {"until": "2026-11-29"}).content.decode()
    script = html.split('<script id="charts-data" type="application/json">')[1].split("</script>")[
        0
    ]
    bars = json.loads(script)[0]["figure"]["data"][0]  # interruptions per host
    return dict(zip(bars["x"], bars["y"], strict=True))


@pytest.mark.django_db
def test_fleet_rows_are_cached_until_the_fleet_changes(client, alice):
    run = fleet_run(alice.memberships.get().project)
    client.force_login(alice)
    url = "/api/v1/fleet/hosts?until=2026-11-29"

    # an unchanged fleet is served from the cache: fewer queries the second time
    assert _queries(client, url) > _queries(client, url)
    hosts = _hosts(client)
    assert set(hosts) == {"cached-h000"}
    assert hosts["cached-h000"]["interruptions"] == 2
    assert _chart(client) == {"cached-h000": 2}

    # a new interruption shows at once, on a host listed before and one that was not
    interruption_services.interruption_record(
        run=run, source_key="int-7", occurred_at=T0 + 7 * DAY, category="nic",
        hosts=["cached-h000", "cached-h001"],
    )  # fmt: skip
    hosts = _hosts(client)
    assert hosts["cached-h000"]["interruptions"] == 3
    assert hosts["cached-h000"]["repeat_offender"] is True
    assert hosts["cached-h001"]["interruptions"] == 1
    assert _chart(client) == {"cached-h000 ⚠": 3, "cached-h001": 1}

    # so does a quarantine (of a host without incidents), and its release
    quiet = Host.objects.get(name="cached-h003")
    quarantine_services.host_quarantine(host=quiet, user=alice, reason="fans failing")
    hosts = _hosts(client)
    assert hosts["cached-h003"]["quarantine"]["reason"] == "fans failing"
    assert 'id="quarantined-count">1 host' in client.get("/fleet/").content.decode()
    quarantine_services.host_release(host=quiet, user=alice)
    assert "cached-h003" not in _hosts(client)
    assert 'id="quarantined-count">0 hosts' in client.get("/fleet/").content.decode()
