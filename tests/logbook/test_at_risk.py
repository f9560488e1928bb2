"""Hardware about to fail, from stored DCGM pushes: a GPU whose pushes show a rising
correctable-ECC rate and a pending row remap is on GET /api/v1/fleet/at-risk with those
signals and an action, before the XID 79 that ends its run; another GPU showing the same
later lists that incident as what followed the same signals."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from logbook.models import Interruption
from telemetry import services as telemetry_services

AT_RISK = "/api/v1/fleet/at-risk"
PUSH = "/api/v1/ingest/prometheus"


def exposition(host: str, uuid: str, values: dict[str, float], at_ms: int) -> str:
    return "".join(
        f'{name}{{gpu="0",UUID="{uuid}",Hostname="{host}"}} {value:g} {at_ms}\n'
        for name, value in values.items()
    )


def failing_pushes(client: Client, token: str, host: str, uuid: str, *, hours: int = 10) -> None:
    """An exporter's hourly pushes (timestamped, as a replay of its last hours): correctable
    errors growing ever faster, a row remap pending for the last three."""
    now = timezone.now()
    count = 0.0
    for hour in range(hours):
        count += 1 if hour < hours // 2 else 12 * (hour - hours // 2 + 1)
        values = {
            "DCGM_FI_DEV_GPU_TEMP": 60.0,
            "DCGM_FI_DEV_XID_ERRORS": 0.0,  # the exporter sends the last XID, 0 for none
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": count,
            "DCGM_FI_DEV_ROW_REMAP_PENDING": 1.0 if hour >= hours - 3 else 0.0,
        }
        at = now - timedelta(hours=hours - 1 - hour, minutes=1)
        text = exposition(host, uuid, values, int(at.timestamp() * 1000))
        response = client.post(
            PUSH, data=text, content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        assert response.status_code == 200, response.content


def _member(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_gpu_with_rising_ecc_and_a_pending_remap_is_at_risk_before_its_xid_79(
    client, ingest_token, project, bob
):
    run = telemetry_services.run_upsert(project=project, name="risky-run")
    telemetry_services.attempt_ensure(
        run=run, number=1, started_at=timezone.now() - timedelta(days=1), hosts=["gpu-node-7"]
    )
    failing_pushes(client, ingest_token, "gpu-node-7", "GPU-risky-0")

    (listed,) = _member(bob).get(AT_RISK).json()["devices"]
    assert (listed["host"], listed["device"]) == ("gpu-node-7", "GPU-risky-0")
    kinds = [one["kind"] for one in listed["signals"]]
    assert kinds == ["ecc_rate", "row_remap_pending"]
    assert "correctable (single-bit) ECC errors" in listed["signals"][0]["detail"]
    assert listed["score"] == 0.75
    assert listed["action"].startswith("drain before the next restart and reset the GPU")
    assert not Interruption.objects.exists()

    # when the XID 79 comes, it ends the run's attempt (an interruption on it)
    xid = exposition("gpu-node-7", "GPU-risky-0", {"DCGM_FI_DEV_XID_ERRORS": 79},
                     int(timezone.now().timestamp() * 1000))  # fmt: skip
    response = client.post(PUSH, data=xid, content_type="text/plain",
                           HTTP_AUTHORIZATION=f"Bearer {ingest_token}")  # fmt: skip
    assert response.status_code == 200, response.content
    (incident,) = Interruption.objects.filter(run=run)
    assert "79" in incident.message

    # then the next GPU showing the same signals lists that incident as what followed them
    failing_pushes(client, ingest_token, "gpu-node-9", "GPU-risky-1")
    listed = {one["device"]: one for one in _member(bob).get(AT_RISK).json()["devices"]}
    followed = listed["GPU-risky-1"]["followed"]
    assert [one["incident"] for one in followed] == [incident.pk]
    assert set(followed[0]["signals"]) >= {"ecc_rate", "row_remap_pending"}


@pytest.mark.django_db
def test_a_steady_gpu_is_not_at_risk_and_the_list_is_per_project(
    client, ingest_token, project, bob, charlie
):
    now = timezone.now()
    for hour in range(8):
        at = int((now - timedelta(hours=8 - hour)).timestamp() * 1000)
        text = exposition("calm", "GPU-calm", {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 5.0 * hour}, at)
        client.post(PUSH, data=text, content_type="text/plain",
                    HTTP_AUTHORIZATION=f"Bearer {ingest_token}")  # fmt: skip
    failing_pushes(client, ingest_token, "secret-node", "GPU-secret")
    devices = [one["device"] for one in _member(bob).get(AT_RISK).json()["devices"]]
    assert devices == ["GPU-secret"]
    assert _member(charlie).get(AT_RISK).json() == {"devices": []}
    assert _member(charlie).get(AT_RISK, {"project": project.slug}).status_code == 404


@pytest.mark.django_db
def test_a_push_is_marked_after_it_commits(
    client, ingest_token, project, django_capture_on_commit_callbacks
):
    from django.core.cache import cache

    from telemetry.push_marks import push_marks

    # given a project whose GPUs never pushed
    assert push_marks(project_ids=[project.pk]) == (0.0,)

    # when one pushes (the test's transaction stands for the push's: its commit runs the
    # callbacks) and then again
    with django_capture_on_commit_callbacks(execute=True) as marked:
        failing_pushes(client, ingest_token, "gpu-node-1", "GPU-marked", hours=1)
    (first,) = push_marks(project_ids=[project.pk])
    text = exposition("gpu-node-1", "GPU-marked", {"DCGM_FI_DEV_GPU_TEMP": 60.0},
                      int(timezone.now().timestamp() * 1000))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(PUSH, data=text, content_type="text/plain",
                               HTTP_AUTHORIZATION=f"Bearer {ingest_token}")  # fmt: skip
    assert response.status_code == 200, response.content
    (second,) = push_marks(project_ids=[project.pk])

    # then each moved the mark, and only after its commit
    assert marked
    assert 0.0 < first < second

    # and with its mark gone from the cache, a list cached before it is computed again
    cache.delete(f"gpu-pushed:v1:{project.pk}")
    assert push_marks(project_ids=[project.pk]) == (0.0,)


@pytest.mark.django_db
def test_a_list_costlier_than_its_age_is_held_past_a_push_and_recomputed_after(
    client, ingest_token, project, bob, monkeypatch, django_capture_on_commit_callbacks
):
    from logbook.selectors import at_risk

    # given a GPU known from a steady push (placing it moves the fleet's version), and the
    # list read once (empty), as costly as a 100,000-GPU fleet's would be
    steady = exposition("gpu-node-7", "GPU-held", {"DCGM_FI_DEV_GPU_TEMP": 60.0},
                        int((timezone.now() - timedelta(hours=12)).timestamp() * 1000))  # fmt: skip
    response = client.post(PUSH, data=steady, content_type="text/plain",
                           HTTP_AUTHORIZATION=f"Bearer {ingest_token}")  # fmt: skip
    assert response.status_code == 200, response.content
    monkeypatch.setattr(at_risk, "HOLD_FACTOR", 1e9)
    reader = _member(bob)
    assert reader.get(AT_RISK).json() == {"devices": []}

    # when a GPU at risk pushes (its mark moved), the list is held: younger than its hold
    with django_capture_on_commit_callbacks(execute=True):
        failing_pushes(client, ingest_token, "gpu-node-7", "GPU-held")
    assert reader.get(AT_RISK).json() == {"devices": []}

    # and once its hold is over, the next read shows the GPU
    monkeypatch.setattr(at_risk, "HOLD_MAX_S", 0.0)
    devices = [one["device"] for one in reader.get(AT_RISK).json()["devices"]]
    assert devices == ["GPU-held"]
