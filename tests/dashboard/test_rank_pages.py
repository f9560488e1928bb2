"""The run's ranks page (heat map, per-step spread, straggler ledger) and the host page's
rank scores, through the test client and in Chromium."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from ingest import services
from logbook.services import stragglers
from telemetry.models import Run

SHOTS = Path("/work/notes/shots")
RANKS = 64
SLOW_RANK = 37


def host_of(rank: int) -> str:
    return f"node{rank // 8:03d}"


def ranked(project: Any, process_batch: Any, *, name: str = "ranked", steps: int = 50) -> Run:
    """64 ranks on 8 hosts for `steps` minutes, a step a minute, rank 37 20% slower throughout."""
    token, _ = services.token_create(project=project, name=name)
    ago = max(timedelta(hours=2), timedelta(minutes=steps + 10))  # all of it in the past
    start = timezone.now().replace(second=0, microsecond=0) - ago
    start -= timedelta(minutes=start.minute % 10)
    events = []
    for step in range(steps):
        base = [1.0 + 0.002 * ((rank * 7 + step) % 5) for rank in range(RANKS)]
        step_s = [t * (1.2 if rank == SLOW_RANK else 1.0) for rank, t in enumerate(base)]
        events.append(
            {
                "type": "rank_timings",
                "time": (start + timedelta(minutes=step)).isoformat(),
                "first_step": 100 + step,
                "ranks": list(range(RANKS)),
                "hosts": [host_of(rank) for rank in range(RANKS)],
                "devices": [f"GPU-{rank:04d}" for rank in range(RANKS)],
                "sections": {
                    "step": step_s,
                    "forward": [t * 0.35 for t in step_s],
                    "backward": [t * 0.5 for t in step_s],
                    "data_loading": [0.05] * RANKS,
                },
            }
        )
    document = {"batch_id": name, "run": name, "attempt": 1, "events": events}
    acceptance = services.batch_submit(token=token, body=json.dumps(document).encode())
    process_batch(acceptance.batch.pk)
    stragglers.rank_timings_refresh()
    return Run.objects.get(name=name)


@pytest.fixture
def ranked_run(project: Any, process_batch: Any) -> Run:
    return ranked(project, process_batch)


@pytest.mark.django_db
def test_ranks_page_has_heat_map_spread_and_ledger(
    client: Any, alice: Any, ranked_run: Run
) -> None:
    client.force_login(alice)
    response = client.get(f"/runs/{ranked_run.pk}/ranks/")
    assert response.status_code == 200
    body = response.content.decode()
    charts = json.loads(
        body.split('id="charts-data" type="application/json">')[1].split("</script>")[0]
    )
    heatmap, spread = (chart["figure"]["data"] for chart in charts)
    # one Plotly heatmap, a row per rank (64 fit), hover naming rank and host
    assert [trace["type"] for trace in heatmap] == ["heatmap"]
    cells = heatmap[0]["customdata"][SLOW_RANK]
    assert cells[0] == [SLOW_RANK, host_of(SLOW_RANK)]
    assert "rank %{customdata[0]} on %{customdata[1]}" in heatmap[0]["hovertemplate"]
    # the spread's slowest-rank line names rank 37 on its host
    slowest = next(trace for trace in spread if trace.get("name", "").endswith("slowest rank"))
    assert slowest["customdata"][0] == [SLOW_RANK, host_of(SLOW_RANK)]
    # the ledger names the rank, host and device, with a quarantine offer for on-call
    assert f'data-rank="{SLOW_RANK}" data-status="open"' in body
    assert "GPU-0037" in body and "Quarantine host" in body


@pytest.mark.django_db
def test_ranks_page_costs_the_same_queries_for_a_longer_run(
    client: Any, alice: Any, project: Any, process_batch: Any, query_budget: Any
) -> None:
    # given a run of 50 steps and one of 150 (the same 64 ranks)
    short = ranked(project, process_batch, name="short", steps=50)
    long = ranked(project, process_batch, name="long", steps=150)
    client.force_login(alice)
    got: list[Any] = []
    # when their ranks pages are drawn, then they cost the same (constant in the steps)
    small, big = (
        query_budget.count(lambda run=run: got.append(client.get(f"/runs/{run.pk}/ranks/")))
        for run in (short, long)
    )
    assert [response.status_code for response in got] == [200, 200]
    query_budget.constant(small=small, big=big, guards="the steps")


@pytest.mark.django_db
def test_ranks_page_for_viewer_outsider_and_a_bad_section(
    client: Any, bob: Any, charlie: Any, ranked_run: Run
) -> None:
    client.force_login(bob)
    response = client.get(f"/runs/{ranked_run.pk}/ranks/")
    assert response.status_code == 200 and "Quarantine host" not in response.content.decode()
    bad = client.get(f"/runs/{ranked_run.pk}/ranks/?section=nope")
    assert (
        bad.status_code == 400
        and "Section: &#x27;nope&#x27; is not one this run reported" in bad.content.decode()
    )
    client.force_login(charlie)
    assert client.get(f"/runs/{ranked_run.pk}/ranks/").status_code == 404


def heatmap_times(body: str) -> list[str]:
    charts = json.loads(
        body.split('id="charts-data" type="application/json">')[1].split("</script>")[0]
    )
    return charts[0]["figure"]["data"][0]["x"]


@pytest.mark.django_db
def test_ranks_page_draws_the_heat_map_over_the_range_asked(
    client: Any, alice: Any, ranked_run: Run
) -> None:
    client.force_login(alice)
    whole = client.get(f"/runs/{ranked_run.pk}/ranks/")
    assert len(heatmap_times(whole.content.decode())) == 5  # 50 minutes of 10-minute buckets
    first = ranked_run.attempts.get().rank_buckets.filter(bucket_s=600).earliest("bucket_start")
    start = first.bucket_start + timedelta(minutes=20)
    part = client.get(
        f"/runs/{ranked_run.pk}/ranks/",
        {"start": start.isoformat(), "end": (start + timedelta(minutes=20)).isoformat()},
    )
    body = part.content.decode()
    assert part.status_code == 200 and len(heatmap_times(body)) == 2
    assert "over 10 min" in body
    bad = client.get(f"/runs/{ranked_run.pk}/ranks/", {"start": "yesterday"})
    assert bad.status_code == 400 and "From: cannot read" in bad.content.decode()


@pytest.mark.django_db
def test_host_page_shows_its_ranks_scores(client: Any, alice: Any, ranked_run: Run) -> None:
    client.force_login(alice)
    response = client.get(f"/fleet/hosts/{host_of(SLOW_RANK)}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="chart-host-rank-scores"' in body
    # the straggler record counts on the host page as an incident of the host
    assert "Straggler rank 37" in body


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_ranks_pages_in_a_browser(
    browser: Any,
    live_server: Any,
    alice: Any,
    login_page: Any,
    console_errors: Any,
    ranked_run: Run,
) -> None:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/runs/{ranked_run.pk}/ranks/")
    page.wait_for_selector("#chart-rank-heatmap .main-svg")
    page.wait_for_selector("#chart-rank-spread .main-svg")
    kinds = page.evaluate("document.querySelector('#chart-rank-heatmap').data.map(t => t.type)")
    assert kinds == ["heatmap"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "ranks-run-page.png"), full_page=True)
    page.goto(f"{live_server.url}/fleet/hosts/{host_of(SLOW_RANK)}/")
    page.wait_for_selector("#chart-host-rank-scores .main-svg")
    page.screenshot(path=str(SHOTS / "ranks-host-page.png"), full_page=True)
    assert errors == []


def test_the_spread_has_one_legend_entry_per_line_kind_whatever_the_attempts() -> None:
    from telemetry.rank_charts import spread_figure
    from telemetry.selectors.ranks import SpreadPoint

    # given the spread of eight attempts, two steps each
    points = [
        SpreadPoint(attempt, step, 1.0, 1.1, 1.2, 1.3, 1.5, 7, "h1")
        for attempt in range(1, 9)
        for step in (attempt * 10, attempt * 10 + 1)
    ]

    # when it is drawn
    figure = spread_figure(points, section="step")

    # then the legend names each kind of line once (eight attempts made 32 entries), each
    # kind toggles together, and the hover says which attempt a line is
    legend = [trace["name"] for trace in figure["data"] if trace["showlegend"]]
    assert legend == ["fastest to p90", "median", "p99", "slowest rank"]
    assert {trace["legendgroup"] for trace in figure["data"]} == set(legend)
    slowest = [trace for trace in figure["data"] if trace["name"] == "slowest rank"]
    assert len(slowest) == 8 and slowest[7]["hovertemplate"].startswith("attempt 8 · step")
