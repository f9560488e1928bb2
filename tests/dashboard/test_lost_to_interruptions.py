"""What interruptions cost in GPU-hours (the GPUs an interruption held, times its downtime and
the time of the steps its restart ran again) on the failure breakdown, beside the slowdowns'
loss, and in the run list's column: the same figure for the same run, over the page's runs and
window."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Run

T0 = datetime(2026, 6, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


Stop = tuple[float, float, bool, int, list[float]]


def _stopped(project, name: str, gpus: int, stops: list[Stop]) -> Run:
    """A run on `gpus` GPUs with an attempt per stop (start hour, hours down, planned, lost
    steps, the attempt's step times)."""
    run = telemetry_services.run_upsert(project=project, name=name,
                                        info={"accelerator_count": gpus})  # fmt: skip
    for number, (at_h, down_h, planned, lost, step_times) in enumerate(stops, start=1):
        began = T0 + (at_h - 1) * HOUR
        attempt = telemetry_services.attempt_ensure(run=run, number=number, started_at=began)
        times = [("step_time_s", step, seconds, began) for step, seconds in enumerate(step_times)]
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=times)
        interruption_services.interruption_record(
            run=run, attempt=attempt, source_key=f"{name}-{number}",
            occurred_at=T0 + at_h * HOUR, detected_at=T0 + at_h * HOUR,
            recovered_at=T0 + (at_h + down_h) * HOUR, lost_steps=lost,
            category="planned-maintenance" if planned else "faulty-gpu", planned=planned,
        )  # fmt: skip
    return run


@pytest.mark.django_db
def test_interruptions_gpu_hours_on_the_failure_page_and_the_run_list(client, alice, charlie):
    # given a 64-GPU run down 1 h after a fault, its restart running 600 steps of 3 s again
    # (its step times: 2 s and 4 s), then 0.5 h for planned maintenance (the GPUs are held
    # all the same); and an 8-GPU run down 2 h, whose 100 lost steps have no step time
    project = alice.memberships.get().project
    big = _stopped(project, "lost-big", 64, [(2, 1.0, False, 600, [2.0, 4.0]),
                                             (10, 0.5, True, 0, [])])  # fmt: skip
    _stopped(project, "lost-small", 8, [(4, 2.0, False, 100, [])])
    client.force_login(alice)

    # when the failure breakdown is read for everything, for one run, and up to a moment
    everything = client.get("/api/v1/failures").json()["lost"]["interruptions"]
    one = client.get("/api/v1/failures", {"run": big.pk}).json()["lost"]["interruptions"]
    cut = (T0 + 4.5 * HOUR).isoformat()
    early = client.get("/api/v1/failures", {"end": cut}).json()["lost"]["interruptions"]

    # then each is GPUs · (downtime + steps run again): 64 · (1 + 0.5) + 64 · 0.5 + 8 · 2
    assert everything["value"] == pytest.approx(144.0) and everything["unit"] == "GPU-hours"
    assert everything["inputs"] == {"interruptions": 3, "planned": 1,
                                    "downtime_h": pytest.approx(3.5),
                                    "recomputed_h": pytest.approx(0.5)}  # fmt: skip
    assert "1 counted without the steps run again" in everything["note"]
    assert one["value"] == pytest.approx(128.0)
    # the window keeps the interruptions it counts, downtime cut at its end: 96 + 8 · 0.5
    assert early["value"] == pytest.approx(100.0)
    # and the page shows them beside the slowdowns' (none here)
    html = client.get("/failures/", {"run": big.pk}).content.decode()
    assert re.search(r'id="lost-interruptions">128 GPU-hours<', html)
    assert re.search(r'id="lost-slowdowns"><a [^>]*>0 GPU-hours</a>', html)

    # the run list's column is the same figure, each run's alone
    html = client.get("/").content.decode()
    cells = dict(re.findall(r'href="/runs/\d+/">(lost-\w+)</a>.*?data-label="Lost to '
                            r'interruptions">(?:<a [^>]*>)?([^<]*)<', html, re.S))  # fmt: skip
    assert cells == {"lost-big": "128.0 GPU-h", "lost-small": "16.0 GPU-h"}

    # another project's reader sees none of it
    client.force_login(charlie)
    assert client.get("/api/v1/failures").json()["lost"]["interruptions"]["value"] == 0
    assert "lost-big" not in client.get("/").content.decode()
