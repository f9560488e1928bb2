"""Run.data_version and Project.fleet_version: every service that changes what a run's pages
or the fleet pages show moves them in its transaction, an ingest batch moves them once (at its
end, with its progress), and the cached pages show the change on the very next request."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest import services as ingest_services
from logbook.models import Interruption, SdcReplay
from logbook.services import annotations as annotation_services
from logbook.services import checkpoints, entries, interruptions, quarantine, sdc, triage
from telemetry import services as telemetry_services
from telemetry.models import AcceleratorType, Attempt, Host, Project, Run

T0 = datetime(2026, 11, 2, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def _versions(run: Run) -> tuple[int, int]:
    run_version, fleet = Run.objects.values_list("data_version", "project__fleet_version").get(
        pk=run.pk
    )
    return run_version, fleet


@pytest.fixture
def run(run: Run) -> Run:
    """The shared run, with an attempt on a host and a loss series."""
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=["v-h0"])
    telemetry_services.metric_points_insert(
        run=run,
        attempt=attempt,
        points=[("loss", step, 3.0 - step / 100, T0 + step * MINUTE) for step in range(50)],
    )
    return run


@pytest.mark.django_db
def test_every_kind_of_change_moves_the_versions_it_should(run, alice):
    attempt = run.attempts.get()
    incident = interruptions.interruption_record(
        run=run, source_key="v-i0", occurred_at=T0 + 10 * MINUTE, category="nic", hosts=["v-h0"]
    )
    entry = entries.logbook_entry_create(run=run, user=alice, title="first")
    note = annotation_services.annotation_create(run=run, user=alice, text="eval", step=20)
    # (what changes, whether the fleet pages list it too)
    changes: list[tuple[str, Callable[[], Any], bool]] = [
        ("run info", lambda: telemetry_services.run_upsert(
            project=run.project, name=run.name, info={"description": "new"}), False),
        ("new attempt", lambda: telemetry_services.attempt_ensure(run=run, number=2), False),
        ("attempt hosts", lambda: telemetry_services.attempt_ensure(
            run=run, number=2, hosts=["v-h1"]), True),
        ("resumed from", lambda: telemetry_services.attempt_resumed_from(
            attempt=run.attempts.get(number=2), step=30), False),
        ("attempt end if running", lambda: telemetry_services.attempt_end_if_running(
            attempt=run.attempts.get(number=2), status=Attempt.Status.FAILED,
            ended_at=T0 + 70 * MINUTE), False),
        ("device placed", lambda: telemetry_services.devices_place_unplaced(
            devices=telemetry_services.devices_ensure(project=run.project, uuids=["v-gpu9"]),
            host=Host.objects.get(name="v-h0")), True),
        ("attempt end", lambda: telemetry_services.attempt_end(
            attempt=attempt, status=Attempt.Status.FAILED, ended_at=T0 + 60 * MINUTE), False),
        ("points", lambda: telemetry_services.metric_points_insert(
            run=run, attempt=attempt, points=[("loss", 60, 2.0, None)]), False),
        ("new series", lambda: telemetry_services.series_ensure(
            run=run, attempt=attempt, names=["grad_norm"]), False),
        ("step starts", lambda: telemetry_services.step_starts_record(
            attempt=attempt, first_step=0, start_times=[T0, T0 + MINUTE]), False),
        ("interval", lambda: telemetry_services.interval_record(
            run=run, attempt=attempt, kind="data_loading", started_at=T0,
            ended_at=T0 + MINUTE, source_key="v-iv"), False),
        ("interruption", lambda: interruptions.interruption_record(
            run=run, source_key="v-i1", occurred_at=T0 + 30 * MINUTE, category="faulty-gpu"),
         True),
        ("incident edit", lambda: triage.incident_update(
            interruption=incident, user=alice, version=incident.version,
            changes={"component": "switch"}), True),
        ("incident triaged", lambda: triage.incident_transition(
            interruption=Interruption.objects.get(pk=incident.pk), user=alice,
            version=Interruption.objects.get(pk=incident.pk).version, status="triaged"), True),
        ("checkpoint", lambda: checkpoints.checkpoint_record(
            run=run, step=40, saved_at=T0 + 40 * MINUTE, blocking_save_s=3), False),
        ("checkpoint restore", lambda: checkpoints.checkpoint_restore_record(
            attempt=run.attempts.get(number=2), step=40, restore_s=5), False),
        ("SDC record", lambda: sdc.sdc_record(
            run=run, source_key="v-s0", step=10, detected_at=T0, host="v-h0"), True),
        ("SDC verdict", lambda: sdc.sdc_verdict_set(
            replay=SdcReplay.objects.get(run=run), user=alice, verdict="confirmed"), True),
        ("entry", lambda: entries.logbook_entry_create(run=run, user=alice, title="2nd"), False),
        ("annotation", lambda: annotation_services.annotation_create(
            run=run, user=alice, text="eval 3", step=30), False),
        ("automatic entry", lambda: entries.logbook_entry_record(
            run=run, title="auto", occurred_at=T0), False),
        ("entry edit", lambda: entries.logbook_entry_update(
            entry=entry, user=alice, version=entry.version, changes={"title": "second"}), False),
        ("entry delete", lambda: entries.logbook_entry_delete(
            entry=entry, user=alice), False),
        ("annotation edit", lambda: annotation_services.annotation_update(
            annotation=note, user=alice, text="eval 2"), False),
        ("annotation delete", lambda: annotation_services.annotation_delete(
            annotation=note, user=alice), False),
        ("quarantine", lambda: quarantine.host_quarantine(
            host=Host.objects.get(name="v-h0"), user=alice, reason="fans"), True),
        ("release", lambda: quarantine.host_release(
            host=Host.objects.get(name="v-h0"), user=alice), True),
    ]  # fmt: skip
    for what, change, fleet_too in changes:
        # when each change is made through its service
        run_before, fleet_before = _versions(run)
        change()
        run_after, fleet_after = _versions(run)

        # then the run's version moves (quarantine and placing a GPU are about hardware, not
        # one run's data), and the fleet's when the fleet pages list what changed
        if what not in ("quarantine", "release", "device placed"):
            assert run_after > run_before, what
        assert (fleet_after > fleet_before) is fleet_too, what


@pytest.mark.django_db
def test_a_quarantine_moves_only_its_projects_fleet(run, other_project, alice):
    # hardware belongs to one project: only that project's fleet lists the host
    before = dict(Project.objects.values_list("pk", "fleet_version"))
    quarantine.host_quarantine(host=Host.objects.get(name="v-h0"), user=alice, reason="x")
    after = dict(Project.objects.values_list("pk", "fleet_version"))
    assert set(before) == {run.project_id, other_project.pk}
    assert after[run.project_id] == before[run.project_id] + 1
    assert after[other_project.pk] == before[other_project.pk]


@pytest.mark.django_db
def test_an_ingest_batch_moves_each_version_once_with_its_last_write(run):
    # given a batch that touches points, an attempt's hosts, an interruption, a checkpoint
    # and a note: each of their services asks for a bump
    token, _ = ingest_services.token_create(project=run.project, name="v")
    document = {
        "batch_id": "v-batch",
        "run": run.name,
        "attempt": 1,
        "metrics": [{"name": "loss", "step": 70, "value": 1.5}],
        "events": [
            {"type": "attempt_started", "time": T0.timestamp(), "hosts": ["v-h2"]},
            {"type": "interruption", "time": (T0 + MINUTE).timestamp(), "category": "nic",
             "hosts": ["v-h2"], "step": 70},
            {"type": "checkpoint_saved", "time": (T0 + MINUTE).timestamp(), "step": 70},
            {"type": "note", "time": (T0 + MINUTE).timestamp(), "title": "a note"},
        ],
    }  # fmt: skip
    batch = ingest_services.batch_submit(token=token, body=json.dumps(document).encode()).batch
    run_before, fleet_before = _versions(run)

    # when a worker processes it
    with CaptureQueriesContext(connection) as captured:
        assert ingest_services.batch_process(batch_pk=batch.pk) == "done"

    # then each version moved once, and the run's row was written once, after every other
    # write of the batch but the project's version and the batch's own row (workers share a
    # run by taking its row's lock last)
    assert _versions(run) == (run_before + 1, fleet_before + 1)
    writes = [
        q["sql"] for q in captured.captured_queries
        if q["sql"].startswith(("INSERT", "UPDATE", "DELETE"))
    ]  # fmt: skip
    run_writes = [i for i, sql in enumerate(writes) if sql.startswith('UPDATE "telemetry_run"')]
    assert len(run_writes) == 1
    assert all(
        sql.startswith(('UPDATE "telemetry_project"', 'UPDATE "ingest_ingestbatch"'))
        for sql in writes[run_writes[0] + 1 :]
    ), writes[run_writes[0] :]


@pytest.mark.django_db
def test_a_failed_batch_moves_no_version(run):
    run_before, fleet_before = _versions(run)
    with pytest.raises(RuntimeError), telemetry_services.version_bumps_deferred():
        telemetry_services.run_data_version_bump(run_id=run.pk)
        telemetry_services.fleet_version_bump(project_id=run.project_id)
        raise RuntimeError("the batch failed")
    assert _versions(run) == (run_before, fleet_before)


def _charts(client: Any, url: str) -> list[dict[str, Any]]:
    html = client.get(url).content.decode()
    script = html.split('<script id="charts-data" type="application/json">')[1]
    charts: list[dict[str, Any]] = json.loads(script.split("</script>")[0])
    return charts


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


@pytest.mark.django_db
def test_the_run_page_charts_show_a_change_on_the_next_request(client, run, alice):
    client.force_login(alice)
    url = f"/runs/{run.pk}/"
    cold, warm = _queries(client, url), _queries(client, url)
    assert warm <= cold
    before = json.dumps(_charts(client, url))
    assert "a new mark" not in before

    annotation_services.annotation_create(run=run, user=alice, text="a new mark", step=25)

    assert "a new mark" in json.dumps(_charts(client, url))


@pytest.mark.django_db
def test_the_mfu_page_follows_the_accelerator_catalog(client, project, alice):
    # given a run on an accelerator the catalog does not know yet
    run = telemetry_services.run_upsert(
        project=project,
        name="versioned-mfu",
        info={"accelerator_type": "Z100", "accelerator_count": 8, "parameter_count": 10**9,
              "n_layers": 16, "n_heads": 16, "head_dim": 64, "seq_len": 2048},
    )  # fmt: skip
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("tokens_per_s", s, 1e5, None) for s in range(5)]
    )
    client.force_login(alice)
    assert client.get(f"/api/v1/runs/{run.pk}/mfu").json()["available"] is False

    # when an admin adds it (not one run's data: no run version moves)
    AcceleratorType.objects.create(name="Z100", peak_flops_bf16=1e15, source="test")

    # then the next request computes MFU with it
    assert client.get(f"/api/v1/runs/{run.pk}/mfu").json()["available"] is True


@pytest.mark.django_db
def test_admin_edits_move_the_versions_too(client, run, admin_user):
    # given the Django admin, which writes rows without the services
    client.force_login(admin_user)
    host = Host.objects.get(name="v-h0")
    run_before, fleet_before = _versions(run)

    # when a host is renamed there
    response = client.post(
        f"/admin/telemetry/host/{host.pk}/change/",
        {"name": "v-h0-renamed", "cluster": "", "quarantined_at_0": "", "quarantined_at_1": "",
         "quarantine_reason": "", "quarantined_by": ""},
    )  # fmt: skip

    # then the fleet pages' version moves (a host's name is what they list)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Host.objects.filter(name="v-h0-renamed").exists()
    assert _versions(run) == (run_before, fleet_before + 1)


@pytest.mark.django_db
def test_a_run_going_silent_moves_what_the_open_pages_poll(client, alice, run):
    """Nothing is written when a run goes silent: the polled versions carry the run's
    liveness (run page) and the number of silent runs (lists), so an open page redraws."""
    from django.utils import timezone

    from telemetry.liveness import RUN_STALL_AFTER

    client.force_login(alice)

    def polled() -> tuple[str, str]:
        one = client.get(f"/runs/{run.pk}/version/").json()["version"]
        lists = client.get("/runs/version/").json()["version"]
        return one, lists

    Run.objects.filter(pk=run.pk).update(last_seen_at=timezone.now())
    fresh = polled()
    assert fresh == polled()  # nothing changed: the same answer
    # (data arrives, its step was first reached at T0: "no progress", not silent)
    assert fresh[0].endswith(".no-progress")
    # the same data, an hour older than the stall threshold: both answers move
    quiet = timezone.now() - RUN_STALL_AFTER - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(last_seen_at=quiet)
    silent = polled()
    assert silent[0] != fresh[0] and silent[0].endswith(".silent")
    assert silent[1] != fresh[1]
    # and the run page's first answer is the one its poll compares against
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'data-live-version="{silent[0]}"' in page


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/incidents/?status=all", "/fleet/"])
def test_the_lists_start_from_the_version_they_were_drawn_at(client, alice, run, path):
    """The run list, triage queue and fleet health carry the polled figure in their HTML,
    read before their data. Without it the first poll took its answer as the starting point,
    and a change committed between the drawing and that poll was never shown (CI: an
    incident recorded right after the triage queue loaded never appeared)."""
    client.force_login(alice)
    page = client.get(path).content.decode()
    drawn_at = client.get("/runs/version/").json()["version"]
    assert f'data-live-version="{drawn_at}"' in page
    # a change after the drawing moves what the poll answers away from it
    interruptions.interruption_record(
        run=run, source_key="after-drawing", occurred_at=T0, category="nic"
    )
    assert client.get("/runs/version/").json()["version"] != drawn_at
