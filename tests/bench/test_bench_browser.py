"""The benchmark's browser phase (bench/browser.py) against a live server: it reads real
load, first-chart and all-charts times from Chromium's clock for a page with charts and one
without."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from bench import browser
from telemetry import services as telemetry_services

STARTED = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_the_browser_phase_times_load_and_the_first_chart(live_server, project, alice):
    # given a run with three series, so its page draws three charts
    run = telemetry_services.run_upsert(project=project, name="timed")
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=STARTED)
    telemetry_services.metric_points_insert(
        run=run,
        attempt=attempt,
        points=[
            (name, step, 3.0 - step / 100, None)
            for name in ("loss", "grad_norm", "lr")
            for step in range(50)
        ],
    )

    # when the phase runs, in a thread of its own: Playwright's sync API refuses to start
    # where another test's browser (the session's, in this process) runs its event loop
    with ThreadPoolExecutor(max_workers=1) as pool:
        figures = pool.submit(
            browser.measure,
            live_server.url,
            username="alice",
            password="alice-pw-1",
            run_id=run.pk,
            warm=2,
            pages=[("run page", "/runs/{run}/"), ("triage", "/incidents/")],
        ).result()

    by_label = {f.label: f for f in figures}
    assert not any(f.errors for f in figures), [f.errors for f in figures]
    for figure in figures:
        assert figure.loads == 2
        assert 0 < figure.load_p50_ms <= figure.load_p95_ms < 60_000
        assert 0 < figure.cold_load_ms < 60_000
    # the run page's first chart is timed; a page without charts waits for none
    assert by_label["run page"].chart_p50_ms is not None and by_label["run page"].chart_p50_ms > 0
    assert by_label["triage"].chart_p50_ms is None
    # and all its charts, drawn one per frame after the first, no sooner than the first
    run_page = by_label["run page"]
    assert run_page.all_p50_ms is not None and run_page.all_p50_ms >= run_page.chart_p50_ms
    assert by_label["triage"].all_p50_ms is None
    # and the server's share of it, and the page's size (its charts' data are in it)
    assert 0 < run_page.server_p50_ms < run_page.load_p50_ms
    assert run_page.html_kb > by_label["triage"].html_kb > 0
    lines = browser.table([f.as_dict() for f in figures])
    assert any(line.strip().startswith("run page") for line in lines)
