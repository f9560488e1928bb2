"""The Django admin writes through the services: a staff user's save or delete there moves
the versions the cached pages key on (and the SDC verdict is audited), so the next page shows
the edit; the logbook's own records are read-only there (written by the batches and the
pages, audited)."""

from __future__ import annotations

from typing import Any

import pytest

from logbook.models import (
    AuditEvent,
    Checkpoint,
    Interruption,
    LogbookEntry,
    RootCause,
    SdcReplay,
    TriageSuggestion,
)
from logbook.services import autotriage, checkpoints, entries, interruptions, sdc
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Device, Host, MetricSeries, Run
from tests.dashboard.test_run_versions import MINUTE, T0, _versions


@pytest.fixture
def run(run: Run) -> Run:
    """The shared run: two attempts on host ad-h0, an incident naming it and its GPU."""
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=["ad-h0"])
    second = telemetry_services.attempt_ensure(run=run, number=2, started_at=T0 + 60 * MINUTE)
    telemetry_services.attempt_end(
        attempt=second, status=Attempt.Status.FAILED, ended_at=T0 + 90 * MINUTE,
        reason="the second attempt's own end",
    )  # fmt: skip
    interruptions.interruption_record(
        run=run, source_key="ad-i0", occurred_at=T0 + 30 * MINUTE, category="nic",
        hosts=["ad-h0"], devices=["GPU-ad-0"], ends_attempt=False,
        message="NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12",
    )  # fmt: skip
    return run


@pytest.fixture
def reader(client: Any, alice: Any) -> Any:
    """alice's browser: she reads the pages the admin's edits should show on."""
    client.force_login(alice)
    return client


def _page(reader: Any, url: str) -> str:
    response = reader.get(url)
    assert response.status_code == 200
    return str(response.content.decode())


def _saved(response: Any) -> None:
    assert response.status_code == 302, response.content.decode()[:3000]


@pytest.mark.django_db
def test_a_run_renamed_in_the_admin_shows_on_the_incident_queue(
    run, reader, admin_client, form_values
):
    # given the queue drawn (and cached) with the run's name
    assert f"/{run.name}</a>" in _page(reader, "/incidents/")
    before = _versions(run)
    url = f"/admin/telemetry/run/{run.pk}/change/"

    # when a staff user renames the run in the admin
    _saved(admin_client.post(url, form_values(admin_client, url) | {"name": ["ad-renamed"]}))

    # then both versions moved, and the next queue names it so
    after = _versions(run)
    assert after[0] > before[0] and after[1] > before[1]
    page = _page(reader, "/incidents/")
    assert "/ad-renamed</a>" in page and f"/{run.name}</a>" not in page


@pytest.mark.django_db
def test_an_attempt_deleted_in_the_runs_inline_leaves_the_run_page(
    run, reader, admin_client, form_values
):
    assert "the second attempt&#x27;s own end" in _page(reader, f"/runs/{run.pk}/")
    url = f"/admin/telemetry/run/{run.pk}/change/"
    data = form_values(admin_client, url)
    (row,) = [key[: -len("number")] for key, value in data.items() if key.endswith("-number")
              and value == ["2"]]  # fmt: skip

    _saved(admin_client.post(url, data | {f"{row}DELETE": ["on"]}))

    assert list(run.attempts.values_list("number", flat=True)) == [1]
    assert "the second attempt&#x27;s own end" not in _page(reader, f"/runs/{run.pk}/")


@pytest.mark.django_db
def test_an_attempt_edited_in_the_admin_shows_on_the_run_page(
    run, reader, admin_client, form_values
):
    # given the run page drawn (its tables cached)
    assert "restarted by hand" not in _page(reader, f"/runs/{run.pk}/")
    attempt = run.attempts.get(number=1)
    spare = telemetry_services.hosts_ensure(project=run.project, names=["ad-h1"])[0]
    url = f"/admin/telemetry/attempt/{attempt.pk}/change/"
    data = form_values(admin_client, url)
    assert data["hosts"] == [str(Host.objects.get(name="ad-h0").pk)]
    before = _versions(run)

    # when a staff user writes its end and adds a host (a many-to-many field)
    data |= {"end_reason": ["restarted by hand"], "hosts": [*data["hosts"], str(spare.pk)]}
    _saved(admin_client.post(url, data))

    # then both are stored, both versions moved, and the run page shows the end
    assert set(attempt.hosts.values_list("name", flat=True)) == {"ad-h0", "ad-h1"}
    after = _versions(run)
    assert after[0] > before[0] and after[1] > before[1]
    assert "restarted by hand" in _page(reader, f"/runs/{run.pk}/")


@pytest.mark.django_db
def test_a_host_renamed_in_the_admin_shows_on_the_fleet_page_and_keeps_its_quarantine(
    run, reader, admin_client, form_values
):
    assert 'data-host="ad-h0"' in _page(reader, "/fleet/")
    host = Host.objects.get(name="ad-h0")
    url = f"/admin/telemetry/host/{host.pk}/change/"
    data = form_values(admin_client, url)
    assert "quarantine_reason" not in data  # shown, changed on the fleet page (audited)

    _saved(admin_client.post(url, data | {"name": ["ad-h0-renamed"],
                                          "quarantine_reason": ["sneaked in"]}))  # fmt: skip

    host.refresh_from_db()
    assert (host.name, host.quarantined_at, host.quarantine_reason) == ("ad-h0-renamed", None, "")
    page = _page(reader, "/fleet/")
    assert 'data-host="ad-h0-renamed"' in page and 'data-host="ad-h0"' not in page


@pytest.mark.django_db
def test_hardware_deleted_in_the_admin_moves_the_fleets_version(run, admin_client):
    device = Device.objects.get(uuid="GPU-ad-0")
    before = _versions(run)

    response = admin_client.post(f"/admin/telemetry/device/{device.pk}/delete/", {"post": "yes"})

    _saved(response)
    assert not Device.objects.filter(pk=device.pk).exists()
    assert _versions(run) == (before[0], before[1] + 1)


@pytest.mark.django_db
def test_a_series_deleted_in_the_admin_leaves_the_run_page(run, reader, admin_client):
    # given a run page drawn (its metric names cached) with a metric logged by mistake
    attempt = run.attempts.get(number=1)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("oops_metric", 1, 1.0, None), ("loss", 1, 2.0, None)]
    )
    assert "oops_metric" in _page(reader, f"/runs/{run.pk}/")
    series = MetricSeries.objects.get(run=run, name="oops_metric")

    # when a staff user deletes it (its change page is read-only: batches make series)
    url = f"/admin/telemetry/metricseries/{series.pk}"
    assert admin_client.post(f"{url}/change/").status_code == 403
    _saved(admin_client.post(f"{url}/delete/", {"post": "yes"}))

    # then the next run page no longer lists it, and keeps the loss
    page = _page(reader, f"/runs/{run.pk}/")
    assert "oops_metric" not in page and "loss" in page


@pytest.mark.django_db
def test_an_sdc_verdict_in_the_admin_is_audited_and_shows_on_the_ledger(
    run, reader, admin_client, form_values
):
    # given a pending SDC record, on the ledger as such
    replay = sdc.sdc_record(run=run, source_key="ad-s0", step=40, detected_at=T0, message="x")
    confirmed = f'<span class="status">{SdcReplay.Verdict.CONFIRMED.label}</span>'
    assert confirmed not in _page(reader, "/sdc/")
    url = f"/admin/logbook/sdcreplay/{replay.pk}/change/"
    data = form_values(admin_client, url)
    assert "message" not in data and "step" not in data  # what the job reported: read-only

    # when a staff user confirms it (and tries to change what the job reported)
    _saved(admin_client.post(url, data | {"verdict": ["confirmed"], "message": ["edited"],
                                          "step": ["41"]}))  # fmt: skip

    # then the verdict alone is stored, audited as the staff user's, and on the next ledger
    replay.refresh_from_db()
    assert (replay.verdict, replay.message, replay.step) == ("confirmed", "x", 40)
    (event,) = AuditEvent.objects.filter(entity="sdc_replay", object_id=replay.pk)
    assert (event.username, event.changes) == ("admin", {"verdict": ["pending", "confirmed"]})
    assert confirmed in _page(reader, "/sdc/")


@pytest.mark.django_db
def test_a_root_cause_renamed_in_the_admin_shows_on_the_incident_queue(
    run, reader, admin_client, form_values
):
    nic = Interruption.objects.get(run=run).root_cause
    assert f">{nic.name}<" in _page(reader, "/incidents/")
    before = _versions(run)
    url = f"/admin/logbook/rootcause/{nic.pk}/change/"

    _saved(admin_client.post(url, form_values(admin_client, url) | {"name": ["Network card"]}))

    assert RootCause.objects.get(pk=nic.pk).name == "Network card"
    after = _versions(run)
    assert after[0] > before[0] and after[1] > before[1]
    assert ">Network card<" in _page(reader, "/incidents/")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "model", ["interruption", "checkpoint", "logbookentry", "triagesuggestion"]
)
def test_the_logbooks_records_are_read_only_in_the_admin(run, alice, admin_client, model):
    # given one record of each, written by its service (audited where it is)
    checkpoints.checkpoint_record(run=run, step=10, saved_at=T0)
    entries.logbook_entry_create(run=run, user=alice, title="a note")
    assert autotriage.suggestion_make(interruption_id=Interruption.objects.get(run=run).pk)
    incident = Interruption.objects.get(run=run)
    row = {
        "interruption": incident,
        "checkpoint": Checkpoint.objects.get(run=run),
        "logbookentry": LogbookEntry.objects.get(run=run),
        "triagesuggestion": TriageSuggestion.objects.get(interruption=incident),
    }[model]
    change = f"/admin/logbook/{model}/{row.pk}/change/"

    # then the admin shows it, and refuses to add, change or delete one
    assert admin_client.get(change).status_code == 200
    assert admin_client.get(f"/admin/logbook/{model}/add/").status_code == 403
    assert admin_client.post(change, {}).status_code == 403
    delete = f"/admin/logbook/{model}/{row.pk}/delete/"
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert type(row).objects.filter(pk=row.pk).exists()


# --- What issue 39's checker found: every admin write goes through a service --------------------


@pytest.mark.django_db
def test_a_token_is_only_revoked_in_the_admin_and_the_revoke_is_token_revokes(
    project, admin_client, post_batch
):
    from ingest import services as ingest_services
    from ingest.models import IngestToken

    # given a token that works (and so sits in this process's token cache)
    token, plaintext = ingest_services.token_create(project=project, name="ci")
    batch = {"batch_id": "b1", "run": "r", "attempt": 1, "metrics": []}
    assert post_batch(batch, token=plaintext).status_code == 202
    # when the admin tries to edit or delete it, then it is refused (read-only)
    change = f"/admin/ingest/ingesttoken/{token.pk}/change/"
    assert admin_client.get(change).status_code == 200
    assert (
        admin_client.post(change, {"name": "renamed", "revoked_at_0": "2026-01-01"}).status_code
        == 403
    )
    delete = f"/admin/ingest/ingesttoken/{token.pk}/delete/"
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert IngestToken.objects.get(pk=token.pk).revoked_at is None
    # when it is revoked with the action
    listing = "/admin/ingest/ingesttoken/"
    body = {"action": "revoke", "_selected_action": [token.pk], "index": 0}
    assert admin_client.post(listing, body).status_code == 302
    # then the very next request with it is refused: the cache was flushed (token_revoke)
    assert IngestToken.objects.get(pk=token.pk).revoked_at is not None
    assert post_batch({**batch, "batch_id": "b2"}, token=plaintext).status_code == 401


@pytest.mark.django_db
def test_a_batchs_status_is_not_edited_in_the_admin(project, admin_client, post_batch):
    from ingest.models import IngestBatch

    assert (
        post_batch({"batch_id": "b1", "run": "r", "attempt": 1, "metrics": []}).status_code == 202
    )
    batch = IngestBatch.objects.get(batch_id="b1")
    change = f"/admin/ingest/ingestbatch/{batch.pk}/change/"
    assert admin_client.get(change).status_code == 200
    assert admin_client.post(change, {"status": "dead"}).status_code == 403
    assert (
        admin_client.post(
            f"/admin/ingest/ingestbatch/{batch.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    assert IngestBatch.objects.get(pk=batch.pk).status == batch.status


@pytest.mark.django_db
def test_memberships_in_the_admin_keep_a_project_admin(project, dave, bob, admin_client):
    from telemetry.models import Membership

    # when bob is made on-call in the admin, then it is saved (membership_set)
    bobs = Membership.objects.get(project=project, user=bob)
    url = f"/admin/telemetry/membership/{bobs.pk}/change/"
    _saved(admin_client.post(url, {"role": "oncall"}))
    assert Membership.objects.get(pk=bobs.pk).role == "oncall"
    # when the project's only admin is demoted, or deleted, then it is refused, said, kept
    daves = Membership.objects.get(project=project, user=dave)
    url = f"/admin/telemetry/membership/{daves.pk}/change/"
    refused = admin_client.post(url, {"role": "viewer"}, follow=True)
    assert refused.status_code == 200 and "at least one admin" in refused.content.decode()
    delete = f"/admin/telemetry/membership/{daves.pk}/delete/"
    refused = admin_client.post(delete, {"post": "yes"}, follow=True)
    assert refused.status_code == 200 and "at least one admin" in refused.content.decode()
    assert Membership.objects.get(pk=daves.pk).role == "admin"


@pytest.mark.django_db
def test_a_projects_members_are_shown_not_edited_on_its_admin_page(
    project, dave, admin_client, form_values
):
    from django.contrib.auth import get_user_model

    from telemetry.models import Membership, Project

    # given a user who is not a member
    eve = get_user_model().objects.create_user("eve", password="eve-pw-1")
    url = f"/admin/telemetry/project/{project.pk}/change/"
    values = form_values(admin_client, url)
    # when the project is renamed, with a member row for eve slipped into the post
    values |= {"name": ["Renamed"], "memberships-TOTAL_FORMS": ["1"],
               "memberships-0-user": [str(eve.pk)], "memberships-0-role": ["admin"]}  # fmt: skip
    _saved(admin_client.post(url, values))
    # then the name is saved (project_save), and no member was added from the inline
    assert Project.objects.get(pk=project.pk).name == "Renamed"
    assert not Membership.objects.filter(user=eve).exists()


@pytest.mark.django_db
def test_a_root_cause_deleted_in_the_admin_moves_the_fleets_version(run, admin_client):
    from logbook.services import taxonomy

    spare = taxonomy.root_cause_create(
        name="Cosmic rays", slug="cosmic-rays", group="Unknown", project=None
    )
    before = _versions(run)
    _saved(admin_client.post(f"/admin/logbook/rootcause/{spare.pk}/delete/", {"post": "yes"}))
    assert not RootCause.objects.filter(pk=spare.pk).exists()
    assert _versions(run)[1] > before[1]


@pytest.mark.django_db
def test_a_triage_rule_is_added_and_deleted_in_the_admin(run, admin_client):
    from logbook.models import TriageRule

    nic = RootCause.objects.get(slug="nic")
    body = {"kind": "message", "name": "our-mlx5", "pattern": "mlx5_core.*link down",
            "root_cause": nic.pk, "component": "NIC", "weight": "0.8", "enabled": "on",
            "source": "our fleet", "position": "1000"}  # fmt: skip
    _saved(admin_client.post("/admin/logbook/triagerule/add/", body))
    rule = TriageRule.objects.get(pattern="mlx5_core.*link down")
    _saved(admin_client.post(f"/admin/logbook/triagerule/{rule.pk}/delete/", {"post": "yes"}))
    assert not TriageRule.objects.filter(pk=rule.pk).exists()
