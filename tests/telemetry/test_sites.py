"""A run across sites: an attempt's hosts by site and each site's share of the step from its
ranks' timings (GET /api/v1/runs/<id>/sites), with a slow site or a slow link named."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.test import Client

from telemetry import services as telemetry_services
from telemetry.models import RankBucket, RankPlacement
from telemetry.services.topology import host_placements_set

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)


def _two_site_attempt(project, *, wait: tuple[float, float]):
    run = telemetry_services.run_upsert(project=project, name="two-sites")
    hosts = ["a0", "a1", "b0", "b1", "loose"]
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=hosts)
    placed = {name: {"site": "west" if name[0] == "a" else "east"} for name in hosts[:4]}
    host_placements_set(project=project, placements=placed)
    ranks = list(range(8))
    rank_hosts = ["a0", "a0", "a1", "a1", "b0", "b0", "b1", "b1"]
    RankPlacement.objects.bulk_create(
        [
            RankPlacement(attempt=attempt, rank=r, host=h)
            for r, h in zip(ranks, rank_hosts, strict=True)
        ]
    )
    step = 2.0
    waits = [wait[0]] * 4 + [wait[1]] * 4
    for section, values in {"step": [step] * 8, "collective_wait": waits}.items():
        RankBucket.objects.create(
            attempt=attempt, section=section, bucket_s=settings.RANK_BUCKET_S, bucket_start=T0,
            ranks=ranks, means_s=values, medians_s=values, counts=[3] * 8,
        )  # fmt: skip
    return run


@pytest.mark.django_db
def test_each_sites_share_of_the_step_and_the_slow_site_named(project, bob, charlie):
    # site east's ranks compute 1.9 s of a 2 s step, west's 1.1 s: west waits for east
    run = _two_site_attempt(project, wait=(0.9, 0.1))
    client = Client()
    client.force_login(bob)
    body = client.get(f"/api/v1/runs/{run.pk}/sites").json()
    sites = {one["site"]: one for one in body["sites"]}
    assert list(sites) == ["east", "west", ""]
    assert sites["west"]["hosts"] == ["a0", "a1"] and sites["west"]["ranks"] == 4
    assert sites[""]["hosts"] == ["loose"] and sites[""]["ranks"] == 0
    assert sites["west"]["share"]["collective_wait"] == pytest.approx(0.45)
    assert sites["east"]["share"]["collective_wait"] == pytest.approx(0.05)
    assert body["note"].startswith("Site east's ranks compute 73% longer a step than site west's")
    # not the outsider's
    outsider = Client()
    outsider.force_login(charlie)
    assert outsider.get(f"/api/v1/runs/{run.pk}/sites").status_code == 404
    assert client.get(f"/api/v1/runs/{run.pk}/sites", {"attempt": "x"}).status_code == 400
    assert client.get(f"/api/v1/runs/{run.pk}/sites", {"attempt": "9"}).status_code == 404


@pytest.mark.django_db
def test_every_site_waiting_names_the_link(project, bob):
    run = _two_site_attempt(project, wait=(0.8, 0.8))
    client = Client()
    client.force_login(bob)
    note = client.get(f"/api/v1/runs/{run.pk}/sites").json()["note"]
    assert note.startswith("Every site waits in collectives for at least 40% of the step")
