"""Hardware belongs to a project (issue 14, §1): another project naming the same host or GPU
gets a record of its own, never a view into, or a hand on, the first project's. One test per
attack that worked when hosts and devices were shared; project B is the victim throughout."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from ingest import services as ingest_services
from logbook.models import AuditEvent, Interruption
from logbook.services import quarantine as quarantine_services
from telemetry.models import Attempt, Device, DeviceHealthState, Host, Project
from telemetry.services import attempt_ensure, run_upsert
from tests.ingest.dcgm_exposition import A01_GPU0, FIXTURE, URL, exposition

XID = "DCGM_FI_DEV_XID_ERRORS"


@pytest.fixture
def victim(db: None) -> Project:
    return Project.objects.create(slug="team-b", name="Team B")


@pytest.fixture
def victim_token(victim: Project) -> str:
    return ingest_services.token_create(project=victim, name="b")[1]


def _push(client: Any, token: str, text: str) -> Any:
    return client.post(
        URL,
        data=text.encode(),
        content_type="text/plain; version=0.0.4",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


@pytest.fixture
def victim_fleet(client: Any, victim: Project, victim_token: str) -> Host:
    """B runs on node-a01, its exporter has pushed twice (the second time an XID 13 on GPU 0)
    and its on-call quarantined the host."""
    run = run_upsert(project=victim, name="b-run")
    attempt_ensure(run=run, number=1, started_at=datetime(2026, 11, 1, tzinfo=UTC),
                   hosts=["node-a01"])  # fmt: skip
    assert _push(client, victim_token, FIXTURE).status_code == 200
    assert _push(client, victim_token, exposition({(A01_GPU0, XID): "13"})).status_code == 200
    host = Host.objects.get(name="node-a01")  # the only one so far
    quarantine_services.host_quarantine(host=host, user=None, reason="b-secret flapping NVLink")
    return host


@pytest.mark.django_db
def test_naming_another_projects_host_shows_none_of_its_hardware(
    client, project, alice, victim_fleet
):
    # given project A's ingest token names B's host in an attempt_started (the worker path)
    token, _ = ingest_services.token_create(project=project, name="a")
    document = {
        "batch_id": "a-1",
        "run": "a-run",
        "attempt": 1,
        "events": [{"type": "attempt_started", "time": "2026-11-02T00:00:00Z",
                    "attempt": 1, "hosts": ["node-a01"]}],
    }  # fmt: skip
    acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
    assert ingest_services.batch_process(batch_pk=acceptance.batch.pk) == "done"

    # when A's on-call opens the host page and the fleet API
    client.force_login(alice)
    page = client.get("/fleet/hosts/node-a01/")
    fleet = client.get("/api/v1/fleet/hosts")

    # then A sees its own record of node-a01: none of B's GPUs, readings, XID or quarantine
    assert page.status_code == 200
    body = page.content.decode() + fleet.content.decode()
    for secret in (A01_GPU0, "b-secret", "Xid 13", "NVIDIA H100 80GB HBM3"):
        assert secret not in body, secret
    mine = Host.objects.get(project=project, name="node-a01")
    assert mine.pk != victim_fleet.pk and mine.quarantined_at is None
    assert not Device.objects.filter(host=mine).exists()
    victim_fleet.refresh_from_db()
    assert victim_fleet.quarantine_reason == "b-secret flapping NVLink"


@pytest.mark.django_db
def test_another_projects_on_call_cannot_release_its_quarantine(
    client, project, alice, victim_fleet
):
    # given alice is on-call in A, whose run also names node-a01
    attempt_ensure(run=run_upsert(project=project, name="a-run"), number=1, hosts=["node-a01"])
    client.force_login(alice)

    # when she releases B's record of node-a01, then her own project's
    theirs = client.delete("/api/v1/fleet/hosts/node-a01/quarantine?project=team-b")
    mine = client.delete("/api/v1/fleet/hosts/node-a01/quarantine")

    # then B's is not hers to see, let alone release; hers is a record of its own
    assert theirs.status_code == 404
    assert mine.status_code == 200 and mine.json()["quarantine"] is None
    victim_fleet.refresh_from_db()
    assert victim_fleet.quarantined_at is not None
    assert victim_fleet.quarantine_reason == "b-secret flapping NVLink"


@pytest.mark.django_db
def test_an_xid_pushed_for_another_projects_gpu_does_not_touch_it(
    client, ingest_token, victim, victim_token, victim_fleet
):
    # given B's GPU 0 runs B's current attempt; A pushes an XID 79 for its UUID
    state = DeviceHealthState.objects.get(device__uuid=A01_GPU0)  # B's, the only one so far
    assert _push(client, ingest_token, FIXTURE).status_code == 200
    assert _push(client, ingest_token, exposition({(A01_GPU0, XID): "79"})).status_code == 200
    assert DeviceHealthState.objects.get(pk=state.pk).last_xid == 13  # B's state is B's

    # when B's own exporter then reports a real XID 79 on that GPU
    response = _push(client, victim_token, exposition({(A01_GPU0, XID): "79"}))

    # then it opens B's interruption, as if A had pushed nothing
    assert [e["kind"] for e in response.json()["events"]] == ["xid"]
    (interruption,) = Interruption.objects.filter(
        run__project=victim, root_cause__slug="faulty-gpu"
    )
    assert list(interruption.devices.values_list("pk", flat=True)) == [state.device_id]
    assert Attempt.objects.get(run__project=victim).status == Attempt.Status.RUNNING


@pytest.mark.django_db
def test_a_push_cannot_move_another_projects_gpu_onto_its_host(
    client, ingest_token, victim, victim_fleet
):
    # when A's exporter claims B's GPU 0 sits on A's host
    gpu = Device.objects.get(uuid=A01_GPU0)  # B's, the only one so far
    moved = FIXTURE.replace('Hostname="node-a01"', 'Hostname="node-evil"')
    assert _push(client, ingest_token, moved).status_code == 200

    # then B's GPU is where B's exporter put it; A has a record of its own
    assert Device.objects.get(pk=gpu.pk).host_id == victim_fleet.pk
    theirs = Device.objects.exclude(pk=gpu.pk).get(uuid=A01_GPU0)
    assert theirs.host.name == "node-evil" and theirs.host.project_id != victim.pk


@pytest.mark.django_db
def test_quarantine_audit_names_the_hosts_project(victim, victim_fleet):
    (event,) = AuditEvent.objects.filter(entity=AuditEvent.Entity.HOST, object_id=victim_fleet.pk)
    assert event.project_id == victim.pk


@pytest.mark.django_db
def test_a_member_of_both_projects_reaches_each_projects_record(client, project, victim):
    # given a user in both projects, each of which names node-x; B's record is quarantined
    from django.contrib.auth import get_user_model

    from telemetry.models import Membership

    user = get_user_model().objects.create_user(username="both", password="both-pw-1")
    for owner in (project, victim):
        Membership.objects.create(project=owner, user=user, role="oncall")
        run = run_upsert(project=owner, name="r")
        attempt_ensure(run=run, number=1, hosts=["node-x"])
    theirs = Host.objects.get(project=victim, name="node-x")
    quarantine_services.host_quarantine(host=theirs, user=user, reason="b's own reason")
    client.force_login(user)

    # when / then: each project's page shows its own record
    b_page = client.get("/fleet/hosts/node-x/?project=team-b").content.decode()
    a_page = client.get("/fleet/hosts/node-x/?project=pretrain").content.decode()
    assert "b&#x27;s own reason" in b_page or "b's own reason" in b_page
    assert "own reason" not in a_page
    # and the fleet page links B's quarantined row to B's record
    fleet = client.get("/fleet/").content.decode()
    assert "/fleet/hosts/node-x/?project=team-b" in fleet
