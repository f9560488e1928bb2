"""GET /api/v1/runs and GET /api/v1/runs/<id>/series: what they return, who may read them, how
bad parameters are answered, and that the run list costs a fixed number of queries."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from logbook.services import interruptions as interruption_services
from logbook.services import quarantine as quarantine_services
from telemetry import services as telemetry_services
from telemetry.models import Run

START = datetime(2026, 11, 1, tzinfo=UTC)
SPIKE_STEP, SPIKE_VALUE = 31_337, 42.0
ATTEMPT_1_STEPS = 50_000
RESUMED_FROM = 40_000  # attempt 2 repeats steps 40,000-44,999 of attempt 1
ATTEMPT_2_STEPS = 5_000
NAN_STEP = 42_000
LAST_LOSS = 1.234


def build_run(project: Any, name: str = "llama-70b", *, points: int = ATTEMPT_1_STEPS) -> Run:
    """Attempt 1 with `points` loss points (a spike at SPIKE_STEP when long enough), then
    interrupted; attempt 2 resumed at 4/5 of them and repeating a tenth of them (one NaN in
    the middle), ending at LAST_LOSS. The defaults give the layout the constants describe."""
    run = telemetry_services.run_upsert(
        project=project, name=name, info={"accelerator_type": "H100-SXM", "accelerator_count": 8}
    )
    first = telemetry_services.attempt_ensure(run=run, number=1, started_at=START)
    rng = np.random.default_rng(42)
    values = np.linspace(3.0, 1.5, points) + rng.normal(0, 0.05, points)
    if points > SPIKE_STEP:
        values[SPIKE_STEP] = SPIKE_VALUE
    telemetry_services.metric_points_insert(
        run=run,
        attempt=first,
        points=[
            ("loss", step, float(value), START + timedelta(seconds=step))
            for step, value in enumerate(values)
        ],
    )
    interruption_services.interruption_record(
        run=run,
        source_key="xid-79",
        occurred_at=START + timedelta(seconds=points),
        attempt=first,
        category="faulty-gpu",
    )
    resumed_from, repeated_count = points * 4 // 5, points // 10
    second = telemetry_services.attempt_ensure(
        run=run, number=2, started_at=START + timedelta(days=1), resumed_from_step=resumed_from
    )
    repeated = [
        (
            "loss",
            step,
            1.6 - (step - resumed_from) / 100_000,
            START + timedelta(days=1, seconds=step),
        )
        for step in range(resumed_from, resumed_from + repeated_count)
    ]
    repeated[repeated_count * 2 // 5] = (
        "loss",
        resumed_from + repeated_count * 2 // 5,
        math.nan,
        None,
    )
    repeated[-1] = ("loss", repeated[-1][1], LAST_LOSS, START + timedelta(days=2))
    telemetry_services.metric_points_insert(run=run, attempt=second, points=repeated)
    run.refresh_from_db()
    return run


@pytest.fixture
def run(project: Any) -> Run:
    """Instead of the shared empty run: 50,000 points in attempt 1 and 5,000 in attempt 2."""
    return build_run(project)


@pytest.fixture
def small_run(project: Any) -> Run:
    """The same shape, small: 300 points in attempt 1 and 30 in attempt 2."""
    return build_run(project, points=300)


def series_url(run: Run, query: str = "name=loss&max_points=1000") -> str:
    return f"/api/v1/runs/{run.pk}/series?{query}"


def listed(response: Any, run: Run) -> dict[str, Any] | None:
    return next((row for row in response.json() if row["id"] == run.pk), None)


# --- Run list ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_run_list_shows_current_attempt_progress_and_last_loss(client, alice, run):
    client.force_login(alice)

    response = client.get("/api/v1/runs")

    assert response.status_code == 200
    row = listed(response, run)
    assert row is not None
    assert row["project"] == "pretrain"
    assert row["name"] == "llama-70b"
    assert row["current_attempt"] == 2
    assert row["status"] == "running"
    assert row["last_step"] == ATTEMPT_1_STEPS - 1
    assert row["interruption_count"] == 1
    # the last loss of the latest attempt, not the highest step of any attempt
    assert row["last_loss"] == pytest.approx(LAST_LOSS)
    assert row["accelerator_type"] == "H100-SXM" and row["accelerator_count"] == 8
    assert row["last_seen_at"].startswith("2026-11-03")


@pytest.mark.django_db
def test_run_list_renders_a_nan_last_loss_as_a_string(client, alice, project):
    run = telemetry_services.run_upsert(project=project, name="nan-run")
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("loss", 0, 2.0, None), ("loss", 1, math.nan, None)]
    )
    client.force_login(alice)

    row = listed(client.get("/api/v1/runs"), run)

    assert row is not None
    assert row["last_loss"] == "NaN"
    assert row["interruption_count"] == 0


@pytest.mark.django_db
def test_run_list_query_count_does_not_grow_with_runs(client, alice, project):
    # given one run with attempts, points and an interruption
    build_run(project, "run-a", points=200)
    client.force_login(alice)
    with CaptureQueriesContext(connection) as one_run:
        assert len(client.get("/api/v1/runs").json()) == 1

    # when there are three
    build_run(project, "run-b", points=200)
    build_run(project, "run-c", points=200)
    with CaptureQueriesContext(connection) as three_runs:
        response = client.get("/api/v1/runs")

    # then all are listed, with the same number of queries (constant in the runs listed)
    assert response.status_code == 200
    assert sorted(row["name"] for row in response.json()) == ["run-a", "run-b", "run-c"]
    assert all(row["current_attempt"] == 2 for row in response.json())
    assert len(three_runs) == len(one_run)


# --- Series --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_series_is_downsampled_per_attempt_keeping_spike_and_nan(client, alice, run):
    client.force_login(alice)

    response = client.get(series_url(run))

    assert response.status_code == 200, response.content
    body = response.json()
    total = ATTEMPT_1_STEPS + ATTEMPT_2_STEPS
    assert (body["run"], body["name"], body["max_points"]) == (run.pk, "loss", 1000)
    assert body["total_points"] == total
    assert 0 < body["returned_points"] <= 1000
    assert body["downsampled"] is True
    assert [a["attempt"] for a in body["attempts"]] == [1, 2]
    first, second = body["attempts"]
    assert (first["total_points"], second["total_points"]) == (ATTEMPT_1_STEPS, ATTEMPT_2_STEPS)
    assert body["returned_points"] == len(first["steps"]) + len(second["steps"])
    for attempt in body["attempts"]:
        assert len(attempt["steps"]) == len(attempt["values"])
        assert attempt["steps"] == sorted(set(attempt["steps"]))
    # the single-step spike of attempt 1 survives the downsampling
    assert SPIKE_VALUE in first["values"]
    assert first["steps"][first["values"].index(SPIKE_VALUE)] == SPIKE_STEP
    # the NaN of attempt 2 survives, as the string JSON can carry
    assert "NaN" in second["values"]
    assert second["steps"][second["values"].index("NaN")] == NAN_STEP
    assert "NaN" not in first["values"]
    # steps repeated by attempt 2 stay apart from attempt 1's
    assert min(second["steps"]) == RESUMED_FROM
    assert max(second["steps"]) == RESUMED_FROM + ATTEMPT_2_STEPS - 1
    assert LAST_LOSS in second["values"]


@pytest.mark.django_db
def test_series_defaults_to_2000_points(client, alice, run):
    client.force_login(alice)

    body = client.get(series_url(run, "name=loss")).json()

    assert body["max_points"] == 2000
    assert 1000 < body["returned_points"] <= 2000


@pytest.mark.django_db
def test_series_small_enough_is_returned_whole(client, alice, small_run):
    client.force_login(alice)

    body = client.get(series_url(small_run, "name=loss&max_points=20000")).json()

    assert body["total_points"] == body["returned_points"] == 300 + 30
    assert body["downsampled"] is False
    assert body["attempts"][0]["steps"] == list(range(300))


@pytest.mark.django_db
def test_unknown_metric_is_empty_not_an_error(client, alice, small_run):
    client.force_login(alice)

    response = client.get(series_url(small_run, "name=no_such_metric"))

    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "no_such_metric"
    assert (body["total_points"], body["returned_points"], body["attempts"]) == (0, 0, [])
    assert body["downsampled"] is False


@pytest.mark.django_db
def test_missing_name_is_a_400_naming_the_parameter(client, alice, small_run):
    client.force_login(alice)

    for query in ("", "max_points=100", "name="):
        response = client.get(series_url(small_run, query))

        assert response.status_code == 400, query
        assert "name" in response.json()
        assert "required" in str(response.json()["name"])


@pytest.mark.parametrize("max_points", ["5", "abc", "9", "20001", "-10", "1e3", "100.5"])
@pytest.mark.django_db
def test_bad_max_points_is_a_400_naming_the_parameter(client, alice, small_run, max_points):
    client.force_login(alice)

    response = client.get(series_url(small_run, f"name=loss&max_points={max_points}"))

    assert response.status_code == 400
    assert "max_points" in response.json()
    assert "10 to 20000" in str(response.json()["max_points"])


@pytest.mark.parametrize("max_points", ["10", "20000"])
@pytest.mark.django_db
def test_max_points_bounds_are_accepted(client, alice, small_run, max_points):
    client.force_login(alice)

    response = client.get(series_url(small_run, f"name=loss&max_points={max_points}"))

    assert response.status_code == 200
    assert response.json()["max_points"] == int(max_points)


@pytest.mark.django_db
def test_small_max_points_fits_with_two_attempts_without_nan(client, alice, project):
    run = telemetry_services.run_upsert(project=project, name="two")
    for number, count in ((1, 3000), (2, 500)):
        attempt = telemetry_services.attempt_ensure(run=run, number=number)
        telemetry_services.metric_points_insert(
            run=run, attempt=attempt, points=[("loss", s, float(s % 7), None) for s in range(count)]
        )
    client.force_login(alice)

    body = client.get(series_url(run, "name=loss&max_points=10")).json()

    assert body["total_points"] == 3500
    assert 4 <= body["returned_points"] <= 10


@pytest.mark.parametrize("attempts", [2, 6])
@pytest.mark.django_db
def test_small_max_points_is_never_overrun(client, alice, project, attempts):
    # given a long attempt 1, then short attempts that each hit one NaN
    run = telemetry_services.run_upsert(project=project, name="flaky")
    for number in range(1, attempts + 1):
        count = 5000 if number == 1 else 100
        points = [("loss", s, 1.0 + s % 7, None) for s in range(count)]
        if number > 1:
            points[50] = ("loss", 50, math.nan, None)
        attempt = telemetry_services.attempt_ensure(run=run, number=number)
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    client.force_login(alice)

    body = client.get(series_url(run, "name=loss&max_points=10")).json()

    assert body["returned_points"] <= 10


# --- Who may read ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_viewer_can_read_the_list_and_the_series(client, bob, small_run):
    client.force_login(bob)

    runs = client.get("/api/v1/runs")
    series = client.get(series_url(small_run))

    assert runs.status_code == 200 and listed(runs, small_run) is not None
    assert series.status_code == 200
    assert series.json()["total_points"] == 330


@pytest.mark.django_db
def test_outsider_neither_sees_the_run_nor_reads_its_series(
    client, charlie, small_run, other_project
):
    own = telemetry_services.run_upsert(project=other_project, name="their-run")
    client.force_login(charlie)

    runs = client.get("/api/v1/runs")
    series = client.get(series_url(small_run))

    assert runs.status_code == 200
    assert [row["name"] for row in runs.json()] == ["their-run"]
    assert listed(runs, small_run) is None
    assert series.status_code == 404
    assert b"llama" not in series.content
    assert client.get(series_url(own)).status_code == 200


@pytest.mark.django_db
def test_missing_run_is_404(client, alice, small_run):
    client.force_login(alice)

    assert client.get(f"/api/v1/runs/{small_run.pk + 1000}/series?name=loss").status_code == 404


@pytest.mark.django_db
def test_anonymous_is_refused(client, small_run):
    runs = client.get("/api/v1/runs")
    series = client.get(series_url(small_run))

    assert runs.status_code in (401, 403)
    assert series.status_code in (401, 403)
    assert b"llama" not in runs.content and b"llama" not in series.content


@pytest.mark.django_db
def test_ingest_token_is_refused_on_the_read_api(client, ingest_token, small_run):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}

    runs = client.get("/api/v1/runs", **headers)
    series = client.get(series_url(small_run), **headers)

    assert runs.status_code in (401, 403)
    assert series.status_code in (401, 403)
    assert b"llama" not in runs.content and b"llama" not in series.content


@pytest.mark.django_db
def test_run_page_shows_quarantined_hardware_the_run_touched(client, alice, project):
    from telemetry.models import Device, Host

    # given a run on two hosts, one of them quarantined, a device quarantined on the other,
    # and a quarantined host the run never touched
    run = telemetry_services.run_upsert(project=project, name="q-run")
    telemetry_services.attempt_ensure(run=run, number=1, hosts=["qh1", "qh2"])
    Host.objects.create(name="elsewhere")
    device = Device.objects.create(uuid="GPU-q", host=Host.objects.get(name="qh2"))
    quarantine_services.host_quarantine(
        host=Host.objects.get(name="qh1"), user=alice, reason="xid 79"
    )
    quarantine_services.host_quarantine(
        host=Host.objects.get(name="elsewhere"), user=alice, reason="x"
    )
    quarantine_services.device_quarantine(device=device, user=alice, reason="ECC storm")
    client.force_login(alice)

    # when the run page is opened
    page = client.get(f"/runs/{run.pk}/").content.decode()

    # then both show, with their reasons, and the untouched host does not
    section = page.split('id="quarantined-hardware"')[1].split("</section>")[0]
    assert "qh1" in section and "xid 79" in section
    assert "GPU-q" in section and "ECC storm" in section
    assert "elsewhere" not in section


@pytest.mark.django_db
def test_a_nul_in_the_series_name_is_a_400_naming_it(client, alice, small_run):
    client.force_login(alice)
    response = client.get(f"/api/v1/runs/{small_run.pk}/series?name=lo%00ss")
    assert response.status_code == 400
    assert response.json() == {"name": "must not contain a NUL character"}
