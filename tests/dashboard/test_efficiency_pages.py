"""The MFU and goodput pages and their JSON: numbers end to end from ingest, who may read
them, what bad parameters get, and a fixed number of queries whatever the run's size."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from ingest import services as ingest_services
from ingest.models import IngestBatch
from logbook.services import checkpoints as checkpoint_services
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Membership, Project, Run

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
# H100-SXM dense BF16 peak, from the seeded catalog (telemetry/accelerators.py).
H100_PEAK = 989e12


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _submit(
    project: Project, documents: list[dict[str, Any]], process_batch: Callable[[int], None]
) -> None:
    token, _ = ingest_services.token_create(project=project, name="efficiency-test")
    for document in documents:
        acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
        process_batch(acceptance.batch.pk)


def worked_example_batches(run: str = "worked") -> list[dict[str, Any]]:
    """The worked example of the goodput issue, as a job would post it: job start 0; init 0-1,
    prep 1-3, data loading 3-5; steps 0..9 at 10, 20, 23, ..., 44; a 2 s eval inside step 5;
    crash; job start 100, data loading 101-102, restore of the step-7 checkpoint, steps 7..11
    every 3 s from 105; job end 120."""
    first_starts = [at(10)] + [at(20 + 3 * i) for i in range(9)]
    return [
        {
            "batch_id": f"{run}-1",
            "run": run,
            "attempt": 1,
            "events": [
                {"type": "attempt_started", "time": at(0), "attempt": 1},
                {"type": "interval", "kind": "accelerator_init", "start": at(0), "end": at(1)},
                {"type": "interval", "kind": "training_prep", "start": at(1), "end": at(3)},
                {"type": "interval", "kind": "data_loading", "start": at(3), "end": at(5)},
                {"type": "step_times", "first_step": 0, "start_times": first_starts},
                {"type": "interval", "kind": "custom", "label": "eval", "start": at(32.5),
                 "end": at(34.5), "step": 5},
                # a save with no blocking time reported: it is the checkpoint resumed from
                {"type": "checkpoint_saved", "time": at(38), "step": 7},
                {"type": "interruption", "time": at(46), "id": "crash", "category": "faulty-gpu",
                 "step": 9},
            ],
        },
        {
            "batch_id": f"{run}-2",
            "run": run,
            "attempt": 2,
            "events": [
                {"type": "attempt_started", "time": at(100), "attempt": 2, "resumed_from_step": 7},
                {"type": "interval", "kind": "data_loading", "start": at(101), "end": at(102)},
                {"type": "checkpoint_restored", "time": at(105), "step": 7},
                {"type": "step_times", "first_step": 7,
                 "start_times": [at(105 + 3 * i) for i in range(5)]},
                {"type": "attempt_ended", "time": at(120), "attempt": 2, "status": "completed"},
            ],
        },
    ]  # fmt: skip


@pytest.fixture
def worked_run(project: Project, process_batch: Callable[[int], None]) -> Run:
    _submit(project, worked_example_batches(), process_batch)
    return Run.objects.get(project=project, name="worked")


def goodput_url(run: Run, query: str = "") -> str:
    return f"/api/v1/runs/{run.pk}/goodput{query}"


def mfu_url(run: Run, query: str = "") -> str:
    return f"/api/v1/runs/{run.pk}/mfu{query}"


# --- Goodput --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_goodput_of_the_ingested_worked_example(client, bob, worked_run):
    client.force_login(bob)

    response = client.get(goodput_url(worked_run))

    assert response.status_code == 200
    body = response.json()
    assert body["step_source"] == "recorded"
    assert body["elapsed_s"] == pytest.approx(120)
    assert body["productive_s"] == pytest.approx(33.667, abs=5e-4)
    assert 100 * body["goodput"] == pytest.approx(28.06, abs=5e-3)
    badput = body["badput_s"]
    assert badput["program_startup"] == pytest.approx(7.333, abs=5e-4)
    assert badput["wasted_progress"] == pytest.approx(6)
    assert badput["infrastructure_recovery"] == pytest.approx(56)
    assert badput["data_loading_sync"] == pytest.approx(3)
    assert badput["accelerator_init"] == pytest.approx(1)
    assert badput["training_prep"] == pytest.approx(2)
    assert badput["custom:eval"] == pytest.approx(2)
    # no save or restore was reported: null ("not reported"), not a measured 0
    assert badput["checkpoint_save"] is None and badput["checkpoint_restore"] is None
    assert body["not_reported"] == ["checkpoint_restore", "checkpoint_save"]
    assert badput["other"] == pytest.approx(9.0)
    assert body["disruptions"] == 1
    assert [s["resume_step"] for s in body["segments"]] == [7, 11]


@pytest.mark.django_db
def test_goodput_window_and_planned_exclusion(client, alice, worked_run):
    # given maintenance declared planned from 60 to 90 s (inside the recovery)
    interruption_services.interruption_record(
        run=worked_run,
        source_key="firmware",
        occurred_at=T0 + timedelta(seconds=60),
        recovered_at=T0 + timedelta(seconds=90),
        category="planned-maintenance",
        planned=True,
    )
    client.force_login(alice)

    # when
    excluded = client.get(goodput_url(worked_run, "?exclude_planned=1")).json()
    kept = client.get(goodput_url(worked_run)).json()
    second_launch = client.get(
        goodput_url(worked_run, f"?start={at(100).replace('+', '%2B')}")
    ).json()

    # then the 30 s leave elapsed time and recovery only
    assert excluded["elapsed_s"] == pytest.approx(90)
    assert excluded["badput_s"]["infrastructure_recovery"] == pytest.approx(26)
    assert excluded["goodput"] == pytest.approx(33.6667 / 90, abs=1e-4)
    assert len(excluded["exclusions"]) == 1
    assert kept["elapsed_s"] == pytest.approx(120)
    # and from the second job start on: 15 s productive of 20 s
    assert second_launch["elapsed_s"] == pytest.approx(20)
    assert second_launch["goodput"] == pytest.approx(0.75)


@pytest.mark.django_db
def test_blocking_save_and_restore_are_counted(client, alice, project, process_batch):
    # given the worked example where the step-3 save blocked 1 s and the restore took 2 s
    batches = worked_example_batches("with-saves")
    batches[0]["events"].append(
        {"type": "checkpoint_saved", "time": at(29), "step": 3, "blocking_save_s": 1.0}
    )
    restore = next(e for e in batches[1]["events"] if e["type"] == "checkpoint_restored")
    restore["restore_s"] = 2.0
    _submit(project, batches, process_batch)
    run = Run.objects.get(name="with-saves")
    client.force_login(alice)

    body = client.get(goodput_url(run)).json()

    assert body["badput_s"]["checkpoint_save"] == pytest.approx(1)
    assert body["productive_s"] == pytest.approx(33.667 - 1, abs=5e-4)
    assert body["badput_s"]["checkpoint_restore"] == pytest.approx(2)
    assert body["badput_s"]["other"] == pytest.approx(7.0)


@pytest.mark.django_db
def test_goodput_page_of_a_run_without_steps_draws_no_empty_charts(
    client, alice, project, process_batch
):
    # given a job that started and was interrupted before it reported any step
    batch = {"batch_id": "no-steps-1", "run": "no-steps", "attempt": 1, "events": [
        {"type": "attempt_started", "time": at(0), "hosts": ["h1"]},
        {"type": "interruption", "time": at(600), "id": "no-steps-1", "hosts": ["h1"],
         "message": "NET/IB : Got completion from peer with error 12"},
    ]}  # fmt: skip
    _submit(project, [batch], process_batch)
    client.force_login(alice)

    # when its goodput page is opened
    page = client.get(f"/runs/{Run.objects.get(name='no-steps').pk}/goodput/")

    # then it says why goodput cannot be computed, and draws no blank chart frames
    text = page.content.decode()
    assert 'id="goodput-reason"' in text and "no step data" in text
    assert "<figure" not in text


@pytest.mark.django_db
def test_goodput_page_shows_numbers_and_formula(client, bob, worked_run):
    client.force_login(bob)

    response = client.get(f"/runs/{worked_run.pk}/goodput/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "28.06%" in html
    assert "productive / elapsed" in html
    assert 'data-bucket="infrastructure_recovery"' in html
    # durations in the unit that fits, the exact seconds on hover
    attempts = html.split('id="goodput-attempts"')[1].split("</table>")[0]
    assert '<td class="num" title="20.0 s">20 s</td>' in attempts, attempts
    ids = [chart["id"] for chart in response.context["charts_payload"]]
    assert ids == ["chart-buckets", "chart-goodput-time"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"), [("?start=yesterday", "start"), ("?start=2026-13-01T00:00Z", "start"),
                         (f"?start={at(50).replace('+', '%2B')}&end={at(10).replace('+', '%2B')}",
                          "end")],
)  # fmt: skip
def test_bad_window_is_a_400_naming_the_parameter(client, alice, worked_run, query, field):
    client.force_login(alice)

    response = client.get(goodput_url(worked_run, query))

    assert response.status_code == 400
    assert field in response.json()
    # the page says so instead of failing
    page = client.get(f"/runs/{worked_run.pk}/goodput/{query}")
    assert page.status_code == 200 and b"query-error" in page.content


# --- MFU ------------------------------------------------------------------------------------


def _mfu_run(project: Project, *, name: str = "mfu-run", attempts: int = 2, steps: int = 20) -> Run:
    """A run of shape N=1e9, L=2, H=4, Q=8, T=16 on 8 H100s; tokens/s set so MFU is 50% in
    attempt 1 and 25% in the others, every step 2 s long. Attempt n resumes half-way through
    attempt n-1's steps."""
    run = telemetry_services.run_upsert(
        project=project,
        name=name,
        info={"parameter_count": 10**9, "n_layers": 2, "n_heads": 4, "head_dim": 8,
              "seq_len": 16, "accelerator_type": "H100", "accelerator_count": 8},
    )  # fmt: skip
    flops_per_token = 6e9 + 12 * 2 * 4 * 8 * 16  # by hand
    full = 8 * H100_PEAK / flops_per_token  # tokens/s at 100% MFU
    for number in range(1, attempts + 1):
        attempt = telemetry_services.attempt_ensure(
            run=run, number=number, started_at=T0 + timedelta(hours=number)
        )
        share = 0.5 if number == 1 else 0.25
        points = []
        first = (number - 1) * steps // 2
        for step in range(first, first + steps):
            moment = T0 + timedelta(hours=number, seconds=2 * (step - first))
            points += [("tokens_per_s", step, share * full, moment),
                       ("step_time_s", step, 2.0, moment)]  # fmt: skip
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    return run


@pytest.mark.django_db
def test_mfu_from_model_shape_and_catalog(client, bob, project):
    run = _mfu_run(project)
    client.force_login(bob)

    body = client.get(mfu_url(run)).json()

    assert body["label"] == "MFU" and body["available"] is True
    assert body["inputs"]["flops_per_token"] == pytest.approx(6e9 + 12288)
    assert body["inputs"]["peak_flops"] == pytest.approx(H100_PEAK)
    assert body["inputs"]["accelerator"] == "H100-SXM"
    assert [a["mean"] for a in body["attempts"]] == pytest.approx([0.5, 0.25])
    assert [(a["first_step"], a["last_step"], a["steps"]) for a in body["attempts"]] == [
        (0, 19, 20),
        (10, 29, 20),
    ]
    # equal step times: the mean over both attempts is the plain mean
    assert body["mean"] == pytest.approx(0.375)
    assert body["total_points"] == 40


@pytest.mark.django_db
def test_a_run_that_declares_causal_attention_gets_the_causal_count(
    client, bob, project, post_batch
):
    # given the same run, declared causal through ingest's run_info
    run = _mfu_run(project)
    response = post_batch({"batch_id": "causal", "run": run.name, "attempt": 1,
                           "run_info": {"attention": "causal"}, "metrics": []})  # fmt: skip
    assert response.status_code in (200, 202), response.content
    ingest_services.batch_process(batch_pk=IngestBatch.objects.get(batch_id="causal").pk)
    client.force_login(bob)

    # when its MFU is read, as JSON and as the page
    body = client.get(mfu_url(run)).json()
    page = client.get(reverse("dashboard:run-mfu", args=[run.pk])).content.decode()

    # then FLOPs per token count half the attention term, and the page says which count
    assert body["inputs"]["flops_per_token"] == pytest.approx(6e9 + 6144)
    assert "6·L·H·Q·T</code> (causal attention" in page


@pytest.mark.django_db
def test_mfu_of_a_resized_attempt_uses_its_own_accelerator_count(client, bob, project):
    # given the 8-GPU run whose attempt 2 ran on 4 GPUs (a cluster resized between attempts)
    run = _mfu_run(project)
    telemetry_services.attempt_ensure(run=run, number=2, accelerator_count=4)
    client.force_login(bob)

    body = client.get(mfu_url(run)).json()

    # then attempt 2's throughput is divided by 4 accelerators, not the run's 8
    assert [a["mean"] for a in body["attempts"]] == pytest.approx([0.5, 0.5])
    assert body["mean"] == pytest.approx(0.5)


@pytest.mark.django_db
def test_mfu_window_covers_one_attempt(client, bob, project):
    run = _mfu_run(project)
    client.force_login(bob)
    start = (T0 + timedelta(hours=2)).isoformat().replace("+", "%2B")

    body = client.get(mfu_url(run, f"?start={start}")).json()

    assert body["total_points"] == 20
    assert body["mean"] == pytest.approx(0.25)


@pytest.mark.django_db
def test_job_counting_recomputation_is_labelled_hfu(client, bob, project):
    run = _mfu_run(project)
    Run.objects.filter(pk=run.pk).update(counts_recomputation=True)
    client.force_login(bob)

    body = client.get(mfu_url(run)).json()
    page = client.get(f"/runs/{run.pk}/mfu/").content.decode()

    assert body["label"] == "HFU"
    assert "HFU over steps" in page and "MFU over" not in page


@pytest.mark.django_db
def test_job_reported_flops_are_used_and_labelled_hfu(client, bob, project):
    run = _mfu_run(project)
    Run.objects.filter(pk=run.pk).update(flops_per_token=2 * (6e9 + 12288))
    client.force_login(bob)

    body = client.get(mfu_url(run)).json()

    assert body["label"] == "HFU"
    assert body["inputs"]["flops_source"] == "job"
    assert [a["mean"] for a in body["attempts"]] == pytest.approx([1.0, 0.5])


@pytest.mark.django_db
def test_mfu_from_step_time_and_tokens_per_step(client, bob, project):
    # given a job that reports only seconds per step, with its tokens per step
    run = telemetry_services.run_upsert(
        project=project, name="step-time-only",
        info={"parameter_count": 10**9, "n_layers": 2, "n_heads": 4, "head_dim": 8,
              "seq_len": 16, "accelerator_type": "A100", "accelerator_count": 4},
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(tokens_per_step=1_000_000)
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("step_time_s", s, 0.5, T0) for s in range(5)]
    )
    client.force_login(bob)

    body = client.get(mfu_url(run)).json()

    # 2e6 tokens/s x (6e9 + 12288) FLOPs / (4 x 312e12)
    assert body["inputs"]["throughput_source"] == "step_time_s"
    assert body["mean"] == pytest.approx(2e6 * (6e9 + 12288) / (4 * 312e12))


@pytest.mark.django_db
def test_mfu_says_what_is_missing(client, bob, project):
    run = telemetry_services.run_upsert(
        project=project, name="bare", info={"accelerator_type": "Z80", "accelerator_count": 1}
    )
    client.force_login(bob)

    body = client.get(mfu_url(run)).json()
    page = client.get(f"/runs/{run.pk}/mfu/")

    assert body["available"] is False
    assert any("Z80" in reason for reason in body["missing"])
    assert any("n_layers" in reason for reason in body["missing"])
    assert page.status_code == 200 and b"cannot be computed" in page.content


@pytest.mark.django_db
def test_mfu_page_draws_the_chosen_axis(client, bob, project):
    run = _mfu_run(project)
    interruption_services.interruption_record(
        run=run, source_key="x", occurred_at=T0 + timedelta(hours=1, seconds=50), step=19,
        category="faulty-gpu",
    )  # fmt: skip
    client.force_login(bob)

    by_step = client.get(f"/runs/{run.pk}/mfu/")
    by_time = client.get(f"/runs/{run.pk}/mfu/?axis=time")

    assert by_step.status_code == by_time.status_code == 200
    figure = by_step.context["charts_payload"][0]["figure"]
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["attempt 1", "attempt 2", "interruptions"]
    assert figure["layout"]["xaxis"]["title"]["text"] == "step"
    time_figure = by_time.context["charts_payload"][0]["figure"]
    assert time_figure["layout"]["xaxis"]["title"]["text"] == "time (UTC)"
    assert b"50.00%" in by_step.content  # attempt 1's mean in the table


# --- Who may read, and what it costs ----------------------------------------------------------


@pytest.mark.django_db
def test_outsider_gets_404_everywhere(client, charlie, worked_run):
    client.force_login(charlie)

    for url in (goodput_url(worked_run), mfu_url(worked_run),
                f"/runs/{worked_run.pk}/goodput/", f"/runs/{worked_run.pk}/mfu/"):  # fmt: skip
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"worked" not in response.content


@pytest.mark.django_db
def test_anonymous_is_refused(client, worked_run):
    for url in (goodput_url(worked_run), mfu_url(worked_run)):
        assert client.get(url).status_code in (401, 403)
    for url in (f"/runs/{worked_run.pk}/goodput/", f"/runs/{worked_run.pk}/mfu/"):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]


def _grow(project: Project, run: Run) -> None:
    """Add six more attempts of 200 steps, intervals and checkpoints to `run`."""
    for number in range(3, 9):
        base = 200.0 * number
        attempt = telemetry_services.attempt_ensure(
            run=run, number=number, started_at=T0 + timedelta(seconds=base)
        )
        telemetry_services.step_starts_record(
            attempt=attempt,
            first_step=100 * number,
            start_times=[T0 + timedelta(seconds=base + 1 + 0.5 * i) for i in range(200)],
        )
        for kind in ("accelerator_init", "data_loading", "custom"):
            telemetry_services.interval_record(
                run=run, attempt=attempt, kind=kind, source_key=f"{kind}-{number}",
                started_at=T0 + timedelta(seconds=base), ended_at=T0 + timedelta(seconds=base + 1),
            )  # fmt: skip
        checkpoint_services.checkpoint_record(run=run, step=100 * number, blocking_save_s=0.1)
        checkpoint_services.checkpoint_restore_record(
            attempt=attempt, step=100 * number, restore_s=1
        )
        interruption_services.interruption_record(
            run=run, source_key=f"int-{number}", attempt=attempt, planned=number % 2 == 0,
            occurred_at=T0 + timedelta(seconds=base + 150), category="faulty-gpu",
        )  # fmt: skip


@pytest.mark.django_db
def test_query_count_does_not_grow_with_the_run(client, alice, project, worked_run, query_budget):
    mfu_run = _mfu_run(project, name="small", attempts=2, steps=10)
    client.force_login(alice)
    urls = [goodput_url(worked_run, "?exclude_planned=1"), f"/runs/{worked_run.pk}/goodput/",
            mfu_url(mfu_run), f"/runs/{mfu_run.pk}/mfu/"]  # fmt: skip
    got: list[Any] = []
    small = [query_budget.count(lambda url=url: got.append(client.get(url))) for url in urls]

    # when the runs grow (more attempts, steps, intervals, checkpoints, interruptions)
    _grow(project, worked_run)
    bigger = _mfu_run(project, name="big", attempts=8, steps=300)
    urls[2:] = [mfu_url(bigger), f"/runs/{bigger.pk}/mfu/"]
    big = [query_budget.count(lambda url=url: got.append(client.get(url))) for url in urls]

    # then each page costs what it did (constant in the run's size)
    assert [response.status_code for response in got] == [200] * 8
    for url, before, after in zip(urls, small, big, strict=True):
        query_budget.constant(small=before, big=after, guards=f"the run's size ({url})")


# --- In a browser ---------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_demo_run_pages_draw_their_charts(
    demo_data, browser, live_server, alice, login_page, console_errors
):
    # given the demo run (no step_times: goodput derives step starts from step_time_s)
    demo = Project.objects.get(slug="demo")
    Membership.objects.create(project=demo, user=alice, role="viewer")
    run = Run.objects.get(project=demo, name="demo-70b-pretrain")
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when alice opens the MFU page, over steps and over wall time
    page.goto(f"{live_server.url}/runs/{run.pk}/mfu/")
    page.wait_for_selector("#chart-mfu .main-svg")
    traces = page.evaluate("document.querySelector('#chart-mfu').data.map(t => t.name)")
    mean = page.locator("#mfu-mean").inner_text()
    page.click("#axis-time")
    page.wait_for_selector("#chart-mfu[data-axis=time] .main-svg")
    time_traces = page.evaluate("document.querySelector('#chart-mfu').data.length")

    # then every attempt has a line, interruptions are marked, and the mean is plausible
    assert [f"attempt {n}" for n in range(1, 9)] == traces[:8]
    assert "interruptions" in traces
    assert 25 < float(mean.rstrip("%")) < 40  # the demo is built to sit near 32%
    assert time_traces == len(traces)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mfu-page.png"), full_page=True)

    # when she opens the goodput page
    page.goto(f"{live_server.url}/runs/{run.pk}/goodput/")
    page.wait_for_selector("#chart-goodput-time .main-svg")
    bars = page.evaluate("document.querySelector('#chart-buckets').data.map(t => t.name)")
    rolling = page.evaluate("document.querySelector('#chart-goodput-time').data.length")
    goodput_pct = float(page.locator("#goodput-pct").inner_text().rstrip("%"))

    # then the buckets are drawn with productive time first and a goodput line over time
    assert bars[0] == "Productive"
    assert {"Wasted progress", "Infrastructure recovery", "Checkpoint save (blocking)"} <= set(bars)
    assert rolling == 1
    assert 0 < goodput_pct < 100
    assert errors == []
    page.screenshot(path=str(ARTIFACTS / "goodput-page.png"), full_page=True)
    page.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_goodput_charts_fit_their_boxes(browser, live_server, alice, login_page, worked_run):
    # given the goodput page on a 1400 px wide screen (two charts side by side)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    login_page(page, live_server.url, "alice")

    # when its charts are drawn
    page.goto(f"{live_server.url}/runs/{worked_run.pk}/goodput/")
    page.wait_for_selector("#chart-goodput-time .main-svg")
    sizes = page.evaluate(
        "[...document.querySelectorAll('figure.chart')].map(f => [f.id, f.clientWidth,"
        " f.querySelector('.main-svg').getBoundingClientRect().width])"
    )

    # then each plot is as wide as its box's inside, not over its border
    assert [s[0] for s in sizes] == ["chart-buckets", "chart-goodput-time"]
    assert all(svg <= inside for _, inside, svg in sizes), sizes
    page.close()
