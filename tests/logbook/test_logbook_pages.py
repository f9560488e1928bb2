"""The failure breakdown and checkpoint pages and their JSON endpoints: the numbers on real
records, the filters, who may see what, the query counts, and both pages in a browser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from logbook.services import checkpoints as checkpoint_services
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Cluster, Host, Run, Site

START = datetime(2026, 3, 1, tzinfo=UTC)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# Llama 3 paper, Table 5: category name, count, and count / 419 as a percent worked out by
# hand to one decimal (the paper prints 30.1% for Faulty GPU; 148 / 419 is 35.3%).
TABLE5 = {
    "Faulty GPU": (148, 35.3),
    "GPU HBM3 Memory": (72, 17.2),
    "Software Bug": (54, 12.9),
    "Network Switch/Cable": (35, 8.4),
    "Host Maintenance": (32, 7.6),
    "GPU SRAM Memory": (19, 4.5),
    "GPU System Processor": (17, 4.1),
    "NIC": (7, 1.7),
    "NCCL Watchdog Timeouts": (7, 1.7),
    "Silent Data Corruption": (6, 1.4),
    "GPU Thermal Interface + Sensor": (6, 1.4),
    "SSD": (3, 0.7),
    "Power Supply": (3, 0.7),
    "Server Chassis": (2, 0.5),
    "IO Expansion Board": (2, 0.5),
    "Dependency": (2, 0.5),
    "CPU": (2, 0.5),
    "System Memory": (2, 0.5),
}


def _interrupt(run: Run, key: str, at: datetime, category: str, **extra: Any) -> None:
    interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=at, category=category, **extra
    )


@pytest.fixture
def llama3_run(project: Any) -> Run:
    """54 days on 16,384 GPUs with Table 5's 419 unexpected and 47 planned interruptions."""
    run = telemetry_services.run_upsert(
        project=project,
        name="llama3-405b",
        info={"accelerator_type": "H100-SXM", "accelerator_count": 16_384},
    )
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=START)
    telemetry_services.attempt_end(
        attempt=attempt, status="completed", ended_at=START + timedelta(days=54)
    )
    n = 0
    for category, (count, _) in TABLE5.items():
        for _ in range(count):
            _interrupt(run, f"u{n}", START + timedelta(hours=2 * n + 1), category)
            n += 1
    for i in range(47):
        _interrupt(run, f"p{i}", START + timedelta(hours=2 * i + 1), "planned-maintenance")
    return run


@pytest.fixture
def small_world(project: Any, other_project: Any) -> dict[str, Any]:
    """A 10-day run on 8 GPUs with hosts in three clusters of two sites, and another
    project's run that alice must never see counted."""
    eu, us = Site.objects.create(name="eu"), Site.objects.create(name="us")
    clusters = {
        "a": Cluster.objects.create(site=eu, name="a"),
        "b": Cluster.objects.create(site=eu, name="b"),
        "c": Cluster.objects.create(site=us, name="c"),
    }
    for name, cluster in clusters.items():
        Host.objects.create(project=project, name=f"h-{name}1", cluster=cluster)
    run = telemetry_services.run_upsert(project=project, name="r1", info={"accelerator_count": 8})
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=START, hosts=["h-a1"])
    telemetry_services.attempt_end(
        attempt=attempt, status="completed", ended_at=START + timedelta(days=10)
    )
    day = timedelta(days=1)
    _interrupt(run, "1", START + 1 * day, "faulty-gpu", hosts=["h-a1"])
    _interrupt(run, "2", START + 3 * day, "nic", hosts=["h-b1"])
    _interrupt(run, "3", START + 6 * day, "faulty-gpu", hosts=["h-c1"])
    _interrupt(run, "4", START + 8 * day, "planned-maintenance", hosts=["h-a1"])
    secret = telemetry_services.run_upsert(
        project=other_project, name="secret", info={"accelerator_count": 4}
    )
    telemetry_services.attempt_ensure(run=secret, number=1, started_at=START)
    _interrupt(secret, "s1", START + 2 * day, "ssd", hosts=["h-a1"])
    return {"run": run, "secret": secret}


def checkpoint_run(project: Any, name: str = "ckpt-run", *, extra_checkpoints: int = 0) -> Run:
    """Three attempts over 3 hours, two unexpected interruptions (recovered 600 s after
    each), six saves 1000 s apart within attempts (mean blocking save 30 s), attempts 2 and
    3 resumed from steps 800 and 1200."""
    run = telemetry_services.run_upsert(project=project, name=name, info={"accelerator_count": 64})
    at = lambda s: START + timedelta(seconds=s)  # noqa: E731
    first = telemetry_services.attempt_ensure(run=run, number=1, started_at=at(0))
    for step, saved, blocking in [(200, 1000, 20), (400, 2000, 30), (600, 3000, 40),
                                  (800, 4000, 30)]:  # fmt: skip
        checkpoint_services.checkpoint_record(
            run=run, step=step, attempt=first, saved_at=at(saved), blocking_save_s=blocking,
            async_save_s=blocking * 4, size_bytes=980_000_000_000, tier="object_store",
        )  # fmt: skip
    _interrupt(run, "i1", at(4500), "faulty-gpu", attempt=first, detected_at=at(4560),
               recovered_at=at(5100))  # fmt: skip
    second = telemetry_services.attempt_ensure(run=run, number=2, started_at=at(5100))
    checkpoint_services.checkpoint_restore_record(attempt=second, step=800, restored_at=at(5100))
    for step, saved in [(1000, 6100), (1200, 7100)]:
        checkpoint_services.checkpoint_record(
            run=run, step=step, attempt=second, saved_at=at(saved), blocking_save_s=30
        )
    _interrupt(run, "i2", at(7200), "nic", attempt=second, detected_at=at(7260),
               recovered_at=at(7800))  # fmt: skip
    third = telemetry_services.attempt_ensure(run=run, number=3, started_at=at(7800))
    checkpoint_services.checkpoint_restore_record(attempt=third, step=1200, restored_at=at(7800))
    for i in range(extra_checkpoints):
        # Failed saves: more rows to read, same advice.
        checkpoint_services.checkpoint_record(
            run=run, step=2000 + i, attempt=third, saved_at=at(8000 + i), status="failed"
        )
    telemetry_services.attempt_end(attempt=third, status="completed", ended_at=at(10_800))
    return run


# --- Failure breakdown API -------------------------------------------------------------------


@pytest.mark.django_db
def test_table5_through_the_api_computes_every_percentage(client, alice, llama3_run):
    # given
    client.force_login(alice)

    # when
    response = client.get("/api/v1/failures", {"run": llama3_run.pk})

    # then every component is its count over 419
    assert response.status_code == 200
    body = response.json()
    table = body["breakdown"]
    assert (table["total"], table["unexpected"], table["planned"]) == (419, 419, 47)
    rows = {row["component"]: row for row in table["rows"]}
    assert set(rows) == set(TABLE5)
    for component, (count, percent) in TABLE5.items():
        assert rows[component]["count"] == count
        assert round(rows[component]["percent"], 1) == percent, component
    # hardware, the paper's "about 78%": GPU 268 + Host 21 + Network 35 = 324 / 419 = 77.3%
    # (unplanned Host Maintenance is not hardware)
    assert table["hardware"] == 324
    assert round(table["hardware_share"]["value"], 1) == 77.3
    assert table["hardware_share"]["inputs"] == {"hardware": 324, "unexpected": 419}
    groups = {row["group"]: row["is_hardware"] for row in table["groups"]}
    assert groups == {
        "GPU": True,
        "Host": True,
        "Network": True,
        "Dependency": False,
        "Unplanned Maintenance": False,
        "Unknown": False,
    }
    # job MTBF = 54 · 24 h / 419 = 3.093 h; 1000 · 419 / (16,384 · 54) = 0.4736
    rates = body["rates"]
    assert rates["job_mtbf_h"]["value"] == pytest.approx(3.093, abs=1e-3)
    assert rates["job_mtbf_h"]["formula"] == "observed time / unexpected interruptions"
    assert rates["failure_rate_per_1000_accelerator_days"]["value"] == pytest.approx(
        0.4736, abs=1e-4
    )
    # at 100,000 GPUs: 16,384 · 54 · 1440 / (419 · 100,000) = 30.4 min
    assert body["projection"]["value"] == pytest.approx(30.406, abs=1e-3)


@pytest.mark.django_db
def test_projection_at_the_runs_own_size_is_its_mtbf(client, alice, llama3_run):
    client.force_login(alice)

    body = client.get("/api/v1/failures", {"run": llama3_run.pk, "accelerators": 16384}).json()

    # 54 days / 419 = 185.6 minutes, the measured job MTBF
    assert body["projection"]["value"] == pytest.approx(54 * 1440 / 419)
    assert body["filters"]["projection_accelerators"] == 16384


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "counts", "planned"),
    [
        ({}, {"Faulty GPU": 2, "NIC": 1}, 1),
        ({"site": "eu"}, {"Faulty GPU": 1, "NIC": 1}, 1),
        ({"cluster": "eu/a"}, {"Faulty GPU": 1}, 1),
        ({"site": "us"}, {"Faulty GPU": 1}, 0),
        ({"start": "2026-03-03", "end": "2026-03-07T12:00"}, {"NIC": 1, "Faulty GPU": 1}, 0),
    ],
)
def test_filters_narrow_what_is_counted(client, alice, small_world, params, counts, planned):
    client.force_login(alice)

    body = client.get("/api/v1/failures", params).json()

    found = {row["component"]: row["count"] for row in body["breakdown"]["rows"]}
    assert found == counts  # never the other project's SSD
    assert body["breakdown"]["planned"] == planned


@pytest.mark.django_db
def test_window_cuts_the_observed_time(client, alice, small_world):
    client.force_login(alice)

    # a 5-day window (days 2 to 7) holding the NIC at day 3 and the GPU at day 6
    body = client.get(
        "/api/v1/failures", {"start": "2026-03-03", "end": "2026-03-08T00:00:00Z"}
    ).json()

    rates = body["rates"]
    assert rates["observed_days"]["value"] == pytest.approx(5.0)
    assert rates["unexpected_per_day"]["value"] == pytest.approx(2 / 5)
    # 120 h / 2 = 60 h; 1000 · 2 / (8 GPUs · 5 days) = 50
    assert rates["job_mtbf_h"]["value"] == pytest.approx(60.0)
    assert rates["failure_rate_per_1000_accelerator_days"]["value"] == pytest.approx(50.0)


@pytest.mark.django_db
def test_outsider_gets_404_for_the_run_and_only_sees_their_own(client, charlie, small_world):
    client.force_login(charlie)

    denied = client.get("/api/v1/failures", {"run": small_world["run"].pk})
    own = client.get("/api/v1/failures").json()
    page = client.get("/failures/", {"run": small_world["run"].pk})

    assert denied.status_code == 404
    assert page.status_code == 404
    assert [(r["component"], r["count"]) for r in own["breakdown"]["rows"]] == [("SSD", 1)]


@pytest.mark.django_db
def test_anonymous_is_refused(client, small_world):
    run = small_world["run"]
    assert client.get("/api/v1/failures").status_code in (401, 403)
    assert client.get(f"/api/v1/runs/{run.pk}/checkpoints").status_code in (401, 403)
    assert client.get("/failures/").status_code == 302
    assert client.get(f"/runs/{run.pk}/checkpoints/").status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"run": "x"}, "run", "Run: must be a run id"),
        ({"start": "yesterday"}, "start", "From: must be a date"),
        ({"start": "2026-03-05", "end": "2026-03-01"}, "end", "To: must be after From"),
        ({"accelerators": "0"}, "accelerators", "Project to accelerators: must be an integer"),
        ({"cluster": "a"}, "cluster", "Cluster: must be written"),
    ],
)
def test_bad_filters_are_explained(client, alice, params, field, words):
    client.force_login(alice)

    response = client.get("/api/v1/failures", params)
    page = client.get("/failures/", params)

    # the API names the parameter; the page the field its reader sees, by its label
    assert response.status_code == 400
    assert field in response.json()
    assert page.status_code == 200
    said = page.content.decode().split('class="error filter-error">')[1].split("</span>")[0]
    assert said.startswith(words)


@pytest.mark.django_db
def test_failure_page_shows_numbers_with_formulas(client, alice, small_world):
    client.force_login(alice)

    html = client.get("/failures/", {"run": small_world["run"].pk}).content.decode()

    # 2 of 3 unexpected are Faulty GPU: 66.7%; MTBF 240 h / 3 = 80 h
    assert 'data-component="Faulty GPU"' in html and "66.7%" in html
    assert "observed time / unexpected interruptions" in html
    assert "3.3 d" in html  # 80 h, in days as on every page
    assert "80 h" not in html
    assert "count / 3 · 100" in html
    assert "At 100,000 accelerators" in html


@pytest.mark.django_db
def test_failure_pages_cost_a_fixed_number_of_queries(
    client, alice, small_world, llama3_run, query_budget
):
    client.force_login(alice)
    # a run of 3 unexpected interruptions and one of Table 5's 466 cost the same queries
    # (constant in the interruptions), on the page and in the API
    for path in ("/failures/", "/api/v1/failures"):
        costs = []
        for run in (small_world["run"], llama3_run):
            cost, response = query_budget.run(
                lambda run=run, path=path: client.get(path, {"run": run.pk})
            )
            assert response.status_code == 200
            costs.append(cost)
        query_budget.constant(small=costs[0], big=costs[1], guards=f"the interruptions ({path})")


# --- Checkpoints ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_checkpoint_history_and_advice_by_hand(client, alice):
    # given
    run = checkpoint_run(alice.memberships.get().project)
    client.force_login(alice)

    # when
    body = client.get(f"/api/v1/runs/{run.pk}/checkpoints").json()

    # then the history says which attempt resumed from which checkpoint
    history = {c["step"]: c for c in body["checkpoints"]}
    assert [c["step"] for c in body["checkpoints"]] == [1200, 1000, 800, 600, 400, 200]
    assert history[800]["restored_by_attempts"] == [2]
    assert history[1200]["restored_by_attempts"] == [3]
    assert history[600]["restored_by_attempts"] == []
    assert history[200]["blocking_save_s"] == 20
    advisor = body["advisor"]
    # M = 3 h / 2 = 5400 s; δ = (20+30+40+30+30+30) / 6 = 30 s; R = 600 s
    assert advisor["mtbf_s"]["value"] == pytest.approx(5400)
    assert advisor["delta_s"]["value"] == pytest.approx(30)
    assert advisor["restart_cost_s"]["value"] == pytest.approx(600)
    # Young √(2·30·5400) = √324,000 = 569.2 s; Daly 569.2·(1 + ⅓·0.0527 + 0.00278/9) - 30
    assert advisor["young_s"]["value"] == pytest.approx(569.21, abs=0.01)
    assert advisor["daly_s"]["value"] == pytest.approx(549.39, abs=0.01)
    assert advisor["daly_s"]["inputs"] == {"delta_s": 30, "mtbf_s": 5400}
    # saves 1000 s apart within attempts; τ_actual = 1000 - 30 = 970 s; 200 steps apart
    assert advisor["actual_period_s"]["value"] == pytest.approx(1000)
    assert advisor["actual_tau_s"]["value"] == pytest.approx(970)
    assert advisor["median_step_gap"]["value"] == pytest.approx(200)
    # waste at 970 s: 30/970 + (485 + 600)/5400 = 0.2319
    assert advisor["waste_at_actual"]["value"] == pytest.approx(0.23185, abs=1e-5)
    assert advisor["waste_at_daly"]["value"] < advisor["waste_at_actual"]["value"]
    curve = advisor["waste_curve"]
    assert len(curve["interval_s"]) == len(curve["waste_fraction"]) > 50
    assert 970 in curve["interval_s"]


@pytest.mark.django_db
def test_checkpoint_window_keeps_saves_inside_it(client, alice):
    run = checkpoint_run(alice.memberships.get().project)
    client.force_login(alice)

    # the first hour: saves at 1000, 2000, 3000 s, no interruption yet
    body = client.get(
        f"/api/v1/runs/{run.pk}/checkpoints",
        {"start": "2026-03-01T00:00:00Z", "end": "2026-03-01T01:00:00Z"},
    ).json()

    assert [c["step"] for c in body["checkpoints"]] == [600, 400, 200]
    assert body["advisor"]["mtbf_s"]["value"] is None
    assert body["advisor"]["daly_s"]["value"] is None
    assert body["advisor"]["waste_curve"] is None


@pytest.mark.django_db
def test_checkpoints_of_another_project_are_404(client, charlie, alice):
    run = checkpoint_run(alice.memberships.get().project)
    client.force_login(charlie)

    assert client.get(f"/api/v1/runs/{run.pk}/checkpoints").status_code == 404
    assert client.get(f"/runs/{run.pk}/checkpoints/").status_code == 404


@pytest.mark.django_db
def test_checkpoint_page_shows_advice_with_formulas(client, bob):
    run = checkpoint_run(bob.memberships.get().project)
    client.force_login(bob)

    html = client.get(f"/runs/{run.pk}/checkpoints/").content.decode()

    assert "√(2δM)·[1 + ⅓·√(δ/2M) + (1/9)·(δ/2M)] - δ" in html
    assert "9.2 min (549.39 s)" in html  # Daly, to hundredths of a second
    assert "16.2 min (970 s)" in html  # actual (whole seconds: no fraction to show)
    assert 'data-step="800"' in html


@pytest.mark.django_db
def test_checkpoint_pages_cost_a_fixed_number_of_queries(client, alice, query_budget):
    project = alice.memberships.get().project
    runs = [checkpoint_run(project), checkpoint_run(project, "big", extra_checkpoints=40)]
    client.force_login(alice)
    # six checkpoints and 46 cost the same queries (constant in the checkpoints)
    for path in ("/api/v1/runs/{}/checkpoints", "/runs/{}/checkpoints/"):
        costs = []
        for run in runs:
            url = path.format(run.pk)
            cost, response = query_budget.run(lambda url=url: client.get(url))
            assert response.status_code == 200
            costs.append(cost)
        query_budget.constant(small=costs[0], big=costs[1], guards=f"the checkpoints ({path})")


# --- Browser ---------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_both_pages_draw_their_charts(
    browser, live_server, alice, small_world, login_page, console_errors
):
    # given a run with checkpoints next to the small world's interruptions
    run = checkpoint_run(small_world["run"].project)
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when on-call opens the failure breakdown
    page.goto(f"{live_server.url}/failures/")
    page.wait_for_selector("#chart-breakdown .main-svg")

    # then one bar trace per group: GPU, Host (small world) and GPU, Host (checkpoint run)
    traces = page.evaluate("document.querySelector('#chart-breakdown').data.map(t => t.name)")
    assert sorted(traces) == ["GPU", "Host"]
    assert "Faulty GPU" in page.locator("#breakdown").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "failures-page.png"), full_page=True)

    # and the checkpoint page draws save cost and the waste curve with its marks
    page.goto(f"{live_server.url}/runs/{run.pk}/checkpoints/")
    page.wait_for_selector("#chart-waste .main-svg")
    page.wait_for_selector("#chart-save-cost .main-svg")
    assert page.evaluate("document.querySelector('#chart-save-cost').data.length") == 2
    names = page.evaluate("document.querySelector('#chart-waste').data.map(t => t.name)")
    assert names[0] == "expected waste"
    assert any(n.startswith("Daly") for n in names) and any(n.startswith("actual") for n in names)
    assert page.locator("#checkpoint-history tbody tr").count() == 6
    page.screenshot(path=str(ARTIFACTS / "checkpoints-page.png"), full_page=True)
    assert errors == []
    page.close()
