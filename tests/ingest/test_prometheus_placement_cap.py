"""A Prometheus push's cost is bounded (issue 42, finding 1): one push of 20,000 lines each
naming a new host ran past gunicorn's 30 s timeout placing its devices. A push may place (create
or move) at most DCGM_MAX_PLACEMENTS_PER_PUSH GPUs; past it, 422 and nothing stored. The
placement itself is one UPDATE from arrays, linear in the push (bulk_update's CASE per row
was quadratic). Timings are bench.push_flood's; these tests check outcomes."""

from __future__ import annotations

from typing import Any

import pytest

from telemetry.models import Device, DeviceHealthState, Host

URL = "/api/v1/ingest/prometheus"


def _push_text(hosts: int, *, tag: str = "new", index_of: Any = lambda n: 0) -> bytes:
    return "".join(
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="{index_of(n)}",UUID="GPU-{n:05d}",'
        f'modelName="NVIDIA H100 80GB HBM3",Hostname="{tag}-h{n:05d}"}} 66\n'
        for n in range(hosts)
    ).encode()


def _push(client: Any, token: str, body: bytes) -> Any:
    return client.post(
        URL, data=body, content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


@pytest.mark.django_db
def test_a_push_placing_more_gpus_than_the_cap_is_refused_whole(client, ingest_token, settings):
    # given a cap of 5 placements a push
    settings.DCGM_MAX_PLACEMENTS_PER_PUSH = 5

    # when one push names 6 GPUs on 6 hosts never seen
    answer = _push(client, ingest_token, _push_text(6))

    # then it is a 422 saying the cap, and nothing was stored
    assert answer.status_code == 422
    assert "names 6 GPUs" in answer.json()["detail"]
    assert "at most 5 (DCGM_MAX_PLACEMENTS_PER_PUSH)" in answer.json()["detail"]
    assert not Host.objects.exists() and not Device.objects.exists()


@pytest.mark.django_db
def test_a_push_at_the_cap_places_and_moves_its_gpus(client, ingest_token, settings):
    settings.DCGM_MAX_PLACEMENTS_PER_PUSH = 5
    # given 5 GPUs placed by one push, at the cap
    assert _push(client, ingest_token, _push_text(5)).status_code == 200
    assert Device.objects.count() == 5 and DeviceHealthState.objects.count() == 5

    # when they all move to other hosts and indexes in one push (5 placements again)
    moved = _push_text(5, tag="moved", index_of=lambda n: n + 1)
    assert _push(client, ingest_token, moved).status_code == 200

    # then each device is where the exporter now says
    placed = {d.uuid: (d.host.name, d.index_on_host) for d in Device.objects.select_related("host")}
    assert placed == {f"GPU-{n:05d}": (f"moved-h{n:05d}", n + 1) for n in range(5)}
    # and a push of the same GPUs again places nothing, whatever its size against the cap
    settings.DCGM_MAX_PLACEMENTS_PER_PUSH = 1
    assert _push(client, ingest_token, moved).status_code == 200


@pytest.mark.django_db
def test_known_gpus_do_not_count_against_the_cap(client, ingest_token, settings):
    settings.DCGM_MAX_PLACEMENTS_PER_PUSH = 3
    assert _push(client, ingest_token, _push_text(3)).status_code == 200
    # 3 known and 3 new: 3 placements, at the cap
    assert _push(client, ingest_token, _push_text(6)).status_code == 200
    assert Device.objects.count() == 6
