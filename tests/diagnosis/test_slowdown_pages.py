"""Where an operator meets slowdowns: the run page's Slowdowns section (the window shaded on
its charts), the fleet-wide list of open ones, goodput's slowdown bucket adding up with the
others, the run list's column, and on-call's confirm form."""

from __future__ import annotations

import re
import time

import pytest

from diagnosis.models import Slowdown
from telemetry import display
from telemetry.models import Run
from tests.diagnosis import slowdown_job


@pytest.fixture
def slowed(send, passes) -> Run:
    run = send(slowdown_job.build("thermal", "page-run", end_s=time.time()))
    passes()
    assert Slowdown.objects.filter(run=run).count() == 1
    return run


@pytest.mark.django_db
def test_the_run_page_shows_the_section_and_marks_the_window(client, alice, slowed):
    client.force_login(alice)
    html = client.get(f"/runs/{slowed.pk}/").content.decode()
    section = html[html.index('<section id="slowdowns"') :]
    section = section[: section.index("</section>")]
    assert "Thermal throttling" in section and "page-run-n1" in section
    assert "GPU-hours lost" in section
    # on-call may confirm or correct it
    assert 'name="status" value="confirmed"' in section
    # the window is a shaded range of the charts' marks, named as a slowdown
    assert "slowdown: \\u2212" in html or "slowdown: \u2212" in html


@pytest.mark.django_db
def test_viewers_see_the_section_without_the_form_and_outsiders_see_nothing(
    client, bob, charlie, slowed
):
    client.force_login(bob)
    html = client.get(f"/runs/{slowed.pk}/").content.decode()
    assert 'id="slowdowns"' in html and 'value="confirmed"' not in html
    client.force_login(charlie)
    assert client.get(f"/runs/{slowed.pk}/").status_code == 404
    assert "page-run" not in client.get("/slowdowns/").content.decode()


@pytest.mark.django_db
def test_the_fleet_list_goodput_and_run_list_show_it_until_it_is_dismissed(
    client, alice, slowed, django_assert_max_num_queries
):
    client.force_login(alice)
    # goodput's slowdown bucket, adding up with the others
    body = client.get(f"/api/v1/runs/{slowed.pk}/goodput").json()
    slowdown = Slowdown.objects.get(run=slowed)
    assert slowdown.lost_s > 0
    assert body["badput_s"]["slowdown:thermal"] == pytest.approx(slowdown.lost_s, rel=1e-6)
    total = body["productive_s"] + sum(v or 0 for v in body["badput_s"].values())
    assert total == pytest.approx(body["elapsed_s"], rel=1e-9)
    html = client.get(f"/runs/{slowed.pk}/goodput/").content.decode()
    assert 'id="lost-slowdowns"' in html and "Slowdown: thermal" in html
    # the run list's column
    html = client.get("/").content.decode()
    row = re.search(r'data-label="Lost to slowdowns">(.*?)</td>', html, re.S)
    assert row and f"{slowdown.gpu_hours_lost:.1f} GPU-h" in row[1]
    # the fleet-wide list
    with django_assert_max_num_queries(12):
        html = client.get("/slowdowns/").content.decode()
    assert "page-run" in html and "Thermal throttling" in html
    response = client.post(
        f"/slowdowns/{slowdown.pk}/decide/", {"status": "dismissed", "cause_kind": "thermal"}
    )
    assert response.status_code == 302
    assert "page-run" not in client.get("/slowdowns/").content.decode()
    assert client.post(f"/slowdowns/{slowdown.pk}/decide/", {"status": "x"}).status_code == 400


@pytest.mark.django_db
def test_a_completed_runs_last_stretch_is_not_called_ongoing(client, alice, slowed):
    # given the thermal run, whose slowdown lasts to its last step, and whose attempt ended
    slowdown = Slowdown.objects.select_related("attempt").get(run=slowed)
    assert slowdown.ongoing and slowdown.attempt.status == "completed"
    client.force_login(alice)

    # when its run page and the open slowdowns are read
    html = client.get(f"/runs/{slowed.pk}/").content.decode()
    section = html[html.index('<section id="slowdowns"') :]
    section = section[: section.index("</section>")]
    listed = client.get("/slowdowns/").content.decode()

    # then neither calls the window ongoing: it ended with the attempt
    assert ">ongoing<" not in section and ">ongoing<" not in listed
    # and while the attempt runs, it is
    slowed.attempts.update(status="running")
    assert ">ongoing<" in client.get(f"/runs/{slowed.pk}/").content.decode()


def _slowdown_bucket_s(client, run: Run, **window: str) -> float:
    body = client.get(f"/api/v1/runs/{run.pk}/goodput", window).json()
    return sum(v for k, v in body["badput_s"].items() if k.startswith("slowdown:"))


@pytest.mark.django_db
def test_the_failure_page_sets_the_slowdowns_loss_beside_the_interruptions(
    client, alice, charlie, slowed
):
    # given the thermal run's slowdown (the pass found it), on the job's 16 GPUs
    client.force_login(alice)
    slowdown = Slowdown.objects.get(run=slowed)
    gpus = slowdown_job.RANKS
    bucket_s = _slowdown_bucket_s(client, slowed)
    assert bucket_s > 0

    # when the failure breakdown of that run is read, as JSON and as the page
    lost = client.get("/api/v1/failures", {"run": slowed.pk}).json()["lost"]
    html = client.get("/failures/", {"run": slowed.pk}).content.decode()

    # then its slowdown GPU-hours are goodput's slowdown bucket times the run's GPUs
    assert lost["slowdowns"]["value"] == pytest.approx(bucket_s * gpus / 3600, abs=1e-3)
    assert lost["slowdowns"]["inputs"]["thermal_gpu_h"] == lost["slowdowns"]["value"]
    assert lost["slowdowns"]["inputs"]["below_baseline_h"] == pytest.approx(bucket_s / 3600)
    shown = re.search(r'id="lost-slowdowns"><a [^>]*>(.*?)</a>', html)
    assert shown and shown[1] == f"{display.number(lost['slowdowns']['value'])} GPU-hours"
    # beside the interruptions' (this job had none: nothing lost, not "unknown")
    assert lost["interruptions"]["value"] == 0
    assert re.search(r'id="lost-interruptions">0 GPU-hours<', html)

    # when the window ends half way through the slowdown, both count half of it alike
    middle = slowdown.start_time + (slowdown.end_time - slowdown.start_time) / 2
    end = middle.isoformat()
    half = client.get("/api/v1/failures", {"run": slowed.pk, "end": end}).json()["lost"]
    assert half["slowdowns"]["value"] == pytest.approx(lost["slowdowns"]["value"] / 2, rel=0.01)
    half_s = _slowdown_bucket_s(client, slowed, end=end)
    assert half["slowdowns"]["value"] == pytest.approx(half_s * gpus / 3600, abs=1e-3)
    # and a window before it, none
    before = slowdown.start_time.isoformat()
    none = client.get("/api/v1/failures", {"run": slowed.pk, "end": before}).json()["lost"]
    assert none["slowdowns"]["value"] == 0 and none["slowdowns"]["inputs"]["slowdowns"] == 0

    # another project's reader sees none of it
    client.force_login(charlie)
    assert client.get("/api/v1/failures").json()["lost"]["slowdowns"]["value"] == 0
    # and once on-call dismisses it, it is lost no more
    client.force_login(alice)
    assert client.get("/api/v1/failures").json()["lost"]["slowdowns"]["value"] > 0
    decided = {"status": "dismissed", "cause_kind": "thermal"}
    assert client.post(f"/slowdowns/{slowdown.pk}/decide/", decided).status_code == 302
    assert client.get("/api/v1/failures").json()["lost"]["slowdowns"]["value"] == 0
