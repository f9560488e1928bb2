"""The dashboard in a real browser (Debian's chromium driven by Playwright), against a live
server, with a batch posted over HTTP and stored by the real Celery worker."""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ingest.models import IngestBatch
from telemetry.models import Run

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _post(url: str, token: str, document: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(document).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_posted_batch_shows_up_on_the_run_page(
    browser,
    live_server,
    celery_worker,
    alice,
    charlie,
    ingest_token,
    wait,
    login_page,
    console_errors,
):
    # given a job that posts two attempts over HTTP, with a restart and an interruption
    metrics_1 = [
        {"name": "loss", "step": s, "value": 5 - s / 100, "time": 1_763_690_000 + 30 * s}
        for s in range(0, 300)
    ]
    metrics_2 = [
        {"name": "loss", "step": s, "value": 4.2 - s / 200, "time": 1_763_695_000 + 30 * s}
        for s in range(200, 400)
    ]
    metrics_2.append({"name": "grad_norm", "step": 399, "value": math.nan})
    status_1, _ = _post(
        f"{live_server.url}/api/v1/ingest",
        ingest_token,
        {"batch_id": "p-1", "run": "browser-run", "attempt": 1, "metrics": metrics_1,
         "events": [{"type": "interruption", "time": 1_763_700_000, "category": "faulty-gpu",
                     "step": 299, "hosts": ["h042"], "lost_steps": 99}]},
    )  # fmt: skip
    status_2, _ = _post(
        f"{live_server.url}/api/v1/ingest",
        ingest_token,
        {"batch_id": "p-2", "run": "browser-run", "attempt": 2, "metrics": metrics_2,
         "events": [{"type": "attempt_started", "time": 1_763_701_000, "attempt": 2,
                     "resumed_from_step": 200},
                    {"type": "checkpoint_saved", "time": 1_763_701_500, "step": 300}]},
    )  # fmt: skip
    assert (status_1, status_2) == (202, 202)
    wait(lambda: IngestBatch.objects.filter(status="done").count() == 2, what="the worker")

    # when on-call logs in and opens the run from the run list
    page = browser.new_page()
    login_page(page, live_server.url, "alice")
    row = page.locator("#run-list tbody tr", has_text="browser-run")
    assert row.count() == 1
    assert "Faulty" not in row.inner_text()  # the list shows counts, not categories
    row.locator("a").click()

    # then the charts are drawn with both attempts, and the tables show the story
    page.wait_for_function("() => performance.getEntriesByName('chronicle:all-charts').length")
    assert page.locator("#run-name").inner_text() == "browser-run"
    legend = page.locator('[data-metric="loss"] .legend').text_content() or ""
    assert "attempt 1" in legend and "attempt 2" in legend
    # the NaN grad norm is drawn as a marked point, not dropped
    traces = page.evaluate(
        "document.querySelector('[data-metric=grad_norm]').data.map(t => [t.name, t.text])"
    )
    assert ["attempt 2: non-finite", ["nan"]] in traces
    assert page.locator("#attempts tbody tr").count() == 2
    assert "Faulty GPU" in page.locator("#interruptions").inner_text()
    assert "h042" in page.locator("#interruptions").inner_text()
    assert "300" in page.locator("#checkpoints").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run-page.png"), full_page=True)

    # and the same charts switch to wall-clock time, with the downtime shaded
    errors = console_errors(page)
    page.click("#axis-switch a[data-axis=time]")
    page.wait_for_function(
        "() => document.querySelector('[data-metric=loss]').layout.xaxis.type === 'date'"
    )
    layout = page.evaluate("document.querySelector('[data-metric=loss]').layout")
    assert layout["xaxis"]["type"] == "date"
    assert any(shape["type"] == "rect" for shape in layout["shapes"])
    assert errors == []
    page.close()

    # and an outsider sees neither the run in the list nor the page
    other = browser.new_page()
    login_page(other, live_server.url, "charlie")
    assert "browser-run" not in other.locator("main").inner_text()
    run = Run.objects.get(name="browser-run")
    response = other.goto(f"{live_server.url}/runs/{run.pk}/")
    assert response is not None and response.status == 404
    other.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_login_is_required_and_wrong_password_is_explained(browser, live_server, alice):
    page = browser.new_page()

    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url

    page.fill("#id_username", "alice")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    assert "didn't match" in page.locator(".error").inner_text()
    page.close()
