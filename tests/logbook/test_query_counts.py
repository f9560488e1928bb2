"""The checkpoint, failure, SDC and fleet pages and their JSON twins cost the same number of
queries whatever the data: the count on a small world equals the count after adding several
times more attempts, checkpoints (with restores), interruptions, hosts, devices, SDC records
and quarantined hardware. Also: the long tables and lists come a page at a time, and the
pages link to each other."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from logbook.services import checkpoints as checkpoint_services
from logbook.services import interruptions as interruption_services
from logbook.services import quarantine as quarantine_services
from logbook.services import sdc as sdc_services
from telemetry import paging
from telemetry import services as telemetry_services
from telemetry.models import Cluster, Device, Host, Run, Site

START = datetime(2026, 5, 4, tzinfo=UTC)
HOUR = timedelta(hours=1)


def grow(run: Run, user: Any, *, attempts: int, first: int = 1, hosts_per_attempt: int) -> None:
    """`attempts` more attempts of `run` from attempt number `first`, each on its own hosts
    (in cluster iad/east), each with four saves, ended by an interruption naming a host and a
    device, resumed from its last save by the next; one SDC record per attempt; the first
    host and device of every other attempt quarantined."""
    site, _ = Site.objects.get_or_create(name="iad")
    cluster, _ = Cluster.objects.get_or_create(site=site, name="east")
    for number in range(first, first + attempts):
        began = START + number * 10 * HOUR
        names = [f"{run.name}-a{number}-h{i}" for i in range(hosts_per_attempt)]
        attempt = telemetry_services.attempt_ensure(
            run=run, number=number, started_at=began, hosts=names
        )
        Host.objects.filter(name__in=names).update(cluster=cluster)
        if number > 1:
            checkpoint_services.checkpoint_restore_record(
                attempt=attempt, step=(number - 1) * 1000 + 400, restored_at=began
            )
        for save in range(1, 5):
            checkpoint_services.checkpoint_record(
                run=run,
                step=number * 1000 + save * 100,
                attempt=attempt,
                saved_at=began + save * HOUR,
                blocking_save_s=20 + save,
                async_save_s=60,
                size_bytes=10**12,
                tier="object_store",
            )
        device = f"GPU-{run.name}-{number}"
        interruption_services.interruption_record(
            run=run,
            source_key=f"{run.name}-i{number}",
            occurred_at=began + 5 * HOUR,
            detected_at=began + 5 * HOUR + timedelta(minutes=2),
            recovered_at=began + 6 * HOUR,
            category="faulty-gpu" if number % 2 else "nic",
            attempt=attempt,
            hosts=names[:1],
            devices=[device],
        )
        Device.objects.filter(uuid=device).update(host=Host.objects.get(name=names[0]))
        sdc_services.sdc_record(
            run=run,
            source_key=f"{run.name}-sdc{number}",
            step=number * 1000 + 50,
            detected_at=began + 2 * HOUR,
            host=names[-1],
            device=device,
            detection="loss_spike",
            observed_value=9.5,
        )
        if number % 2:
            quarantine_services.host_quarantine(
                host=Host.objects.get(name=names[0]), user=user, reason="flaky"
            )
            quarantine_services.device_quarantine(
                device=Device.objects.get(uuid=device), user=user, reason="ECC"
            )
    Run.objects.filter(pk=run.pk).update(last_seen_at=START + (first + attempts) * 10 * HOUR)


PAGES = [
    "/runs/{run}/checkpoints/",
    "/runs/{run}/checkpoints/?page=2",
    "/failures/",
    "/failures/?run={run}&cluster=iad/east",
    "/sdc/",
    "/sdc/?site=iad",
    "/fleet/",
    "/fleet/?cluster=iad/east&k=2&page=2&devices_page=2",
    "/api/v1/runs/{run}/checkpoints",
    "/api/v1/runs/{run}/checkpoints?page_size=5&page=2",
    "/api/v1/failures",
    "/api/v1/failures?run={run}&site=iad",
    "/api/v1/sdc",
    "/api/v1/fleet/hosts",
    "/api/v1/fleet/hosts?page_size=3&page=2",
    "/api/v1/fleet/topology",
    "/api/v1/fleet/incident-groups",
    "/api/v1/fleet/at-risk",
]


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(captured.captured_queries)


@pytest.mark.django_db
@pytest.mark.parametrize("template", PAGES)
def test_query_count_is_the_same_with_several_times_the_data(client, alice, template, monkeypatch):
    # given a small world: two attempts (8 checkpoints, 2 interruptions, 2 SDC records)
    monkeypatch.setattr(paging, "PAGE_SIZE", 5)  # so that the tables have a second page
    run = telemetry_services.run_upsert(
        project=alice.memberships.get().project, name="qc", info={"accelerator_count": 64}
    )
    grow(run, alice, attempts=2, hosts_per_attempt=2)
    client.force_login(alice)
    url = template.format(run=run.pk)
    small = _queries(client, url)

    # when the run has five times the attempts, checkpoints, interruptions, SDC records and
    # quarantined hardware, on twenty times the hosts, and a second run adds more of all
    grow(run, alice, attempts=8, first=3, hosts_per_attempt=5)
    other = telemetry_services.run_upsert(project=run.project, name="qc-2")
    grow(other, alice, attempts=4, hosts_per_attempt=3)

    # then the same page costs the same number of queries
    assert _queries(client, url) == small


@pytest.mark.django_db
def test_checkpoint_history_comes_a_page_at_a_time(client, alice, monkeypatch):
    monkeypatch.setattr(paging, "PAGE_SIZE", 5)
    run = telemetry_services.run_upsert(project=alice.memberships.get().project, name="pages")
    grow(run, alice, attempts=3, hosts_per_attempt=1)  # 12 checkpoints
    client.force_login(alice)

    # the API: the newest steps first, count, and links to the neighbouring pages
    first = client.get(f"/api/v1/runs/{run.pk}/checkpoints", {"page_size": 5}).json()
    assert first["count"] == 12 and first["previous"] is None
    assert [c["step"] for c in first["checkpoints"]] == [3400, 3300, 3200, 3100, 2400]
    last = client.get(first["next"].replace("http://testserver", "")).json()
    last = client.get(last["next"].replace("http://testserver", "")).json()
    assert [c["step"] for c in last["checkpoints"]] == [1200, 1100]
    assert last["next"] is None
    # restores are listed on the page that shows the checkpoint
    restored = {c["step"]: c["restored_by_attempts"] for c in last["checkpoints"]}
    assert restored == {1200: [], 1100: []}
    middle = client.get(first["next"].replace("http://testserver", "")).json()
    assert {c["step"]: c["restored_by_attempts"] for c in middle["checkpoints"]}[1400] == [2]
    # the advisor still sees every checkpoint, whatever the page
    assert last["advisor"] == first["advisor"]
    assert first["advisor"]["median_step_gap"]["value"] == 100
    assert client.get(f"/api/v1/runs/{run.pk}/checkpoints", {"page": 9}).status_code == 404

    # the page: five rows, a link to the next page keeping the window
    html = client.get(f"/runs/{run.pk}/checkpoints/", {"start": "2026-05-01"}).content.decode()
    assert html.count("<tr data-step=") == 5
    assert "Rows 1\u20135 of 12" in html
    assert 'href="?start=2026-05-01&amp;page=2#checkpoint-history"' in html
    third = client.get(f"/runs/{run.pk}/checkpoints/", {"page": 3}).content.decode()
    assert third.count("<tr data-step=") == 2 and 'data-step="1100"' in third
    # a page past the end shows the last one
    assert 'data-step="1100"' in client.get(f"/runs/{run.pk}/checkpoints/?page=99").content.decode()


@pytest.mark.django_db
def test_fleet_lists_come_a_page_at_a_time(client, alice, monkeypatch):
    monkeypatch.setattr(paging, "PAGE_SIZE", 3)
    run = telemetry_services.run_upsert(project=alice.memberships.get().project, name="fl")
    grow(run, alice, attempts=4, hosts_per_attempt=2)
    client.force_login(alice)

    whole = client.get("/api/v1/fleet/hosts", {"page_size": 100}).json()
    # each attempt: one host named by its interruption, one by its SDC record
    assert whole["hosts_count"] == len(whole["hosts"]) == 8
    assert whole["devices_count"] == len(whole["devices"]) == 4
    assert whole["next"] is None
    first = client.get("/api/v1/fleet/hosts", {"page_size": 3}).json()
    second = client.get("/api/v1/fleet/hosts", {"page_size": 3, "page": 2}).json()
    third = client.get("/api/v1/fleet/hosts", {"page_size": 3, "page": 3}).json()
    names = [h["name"] for page in (first, second, third) for h in page["hosts"]]
    assert names == [h["name"] for h in whole["hosts"]]
    assert [len(p["devices"]) for p in (first, second, third)] == [3, 1, 0]
    assert third["next"] is None and first["previous"] is None

    html = client.get("/fleet/").content.decode()
    assert html.count("<tr data-host=") == 3 and html.count("<tr data-device=") == 3
    assert "Rows 1\u20133 of 8" in html and "Rows 1\u20133 of 4" in html
    # the counts above the tables are the whole fleet's
    assert 'id="quarantined-count">2 hosts, 2 devices' in html
