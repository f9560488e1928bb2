"""Lost steps are one number on every page: the goodput segments, the incident and the
logbook's restart draft all count last step - the step the next attempt resumed from
(DOMAIN.md: the steps computed twice), on the demo data and on a crash the client sent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ingest.models import IngestBatch
from logbook.models import Interruption, LogbookEntry
from telemetry import goodput as g
from telemetry.models import Run
from tests.telemetry.test_goodput import worked_example


def test_segment_lost_steps_count_the_steps_computed_twice():
    result = g.goodput(worked_example())

    assert result is not None
    first, second = result.segments
    # attempt 2 starts at step 7: steps 7, 8, 9 of attempt 1 are computed again
    assert (first.resumed_from_step, first.lost_steps, first.wasted_intervals) == (6, 3, 2)
    assert (second.resumed_from_step, second.lost_steps) == (None, 0)


@pytest.mark.django_db
def test_demo_goodput_segments_say_what_the_incidents_say(demo_data, client):
    # given the demo, loaded the way `make demo` loads it
    run = Run.objects.get(name="demo-70b-pretrain")
    client.login(username="demo", password="chronicle-demo")

    # when
    segments = client.get(f"/api/v1/runs/{run.pk}/goodput").json()["segments"]
    page = client.get(f"/runs/{run.pk}/goodput/").content.decode()

    # then every unexpected stop's lost steps are its attempt's segment's lost steps
    by_attempt = {s["attempt"]: s["lost_steps"] for s in segments}
    incidents = Interruption.objects.filter(run=run, lost_steps__isnull=False).select_related(
        "attempt"
    )
    assert incidents.exists()
    for incident in incidents:
        assert by_attempt[incident.attempt.number] == incident.lost_steps, incident.attempt.number
    assert 131 in by_attempt.values()  # attempt 1: steps 601-731 again (was shown as 130)
    assert '<td class="num lost-steps">131</td>' in page


def _client_batches() -> tuple[dict[str, Any], dict[str, Any]]:
    """What the client sends for a crash: attempt 1 reaches step 150 (a checkpoint at 140)
    and reports a Faulty GPU; attempt 2 starts, resumed from 140."""
    first = {
        "batch_id": "client-1",
        "run": "client-crash",
        "attempt": 1,
        "metrics": [
            {"name": name, "step": s, "value": 1.0, "time": T0 + s}
            for s in range(100, 151)
            for name in ("loss", "step_time_s")
        ],
        "events": [
            {"type": "attempt_started", "time": _iso(0)},
            {"type": "checkpoint_saved", "time": _iso(140), "step": 140, "uri": "ckpt/140"},
            {
                "type": "interruption",
                "time": _iso(151),
                "id": "crash-1",
                "category": "faulty-gpu",
                "hosts": ["h001"],
                "message": "Xid 79",
            },
        ],
    }
    second = {
        "batch_id": "client-2",
        "run": "client-crash",
        "attempt": 2,
        "metrics": [
            {"name": name, "step": s, "value": 1.0, "time": T0 + 900 + s}
            for s in range(141, 160)
            for name in ("loss", "step_time_s")
        ],
        "events": [
            {"type": "attempt_started", "time": _iso(900), "resumed_from_step": 140},
        ],
    }
    return first, second


T0 = 1_763_600_000  # 2025-11-20


def _iso(offset_s: int) -> str:
    return datetime.fromtimestamp(T0 + offset_s, UTC).isoformat().replace("+00:00", "Z")


@pytest.mark.django_db
@pytest.mark.parametrize("order", ["crash-first", "restart-first"])
def test_client_crash_has_one_lost_steps_everywhere(
    order, post_batch, process_batch, client, alice
):
    # given a crash and a resume as the client sends them, in either order of arrival
    batches = list(_client_batches())
    if order == "restart-first":
        batches.reverse()
    for document in batches:
        assert post_batch(document).status_code == 202
        process_batch(IngestBatch.objects.get(batch_id=document["batch_id"]).pk)
    run = Run.objects.get(name="client-crash")
    client.force_login(alice)

    # when
    incident = Interruption.objects.get(run=run)
    api = client.get(f"/api/v1/incidents/{incident.pk}").json()["incident"]
    segments = client.get(f"/api/v1/runs/{run.pk}/goodput").json()["segments"]
    queue = client.get("/incidents/").content.decode()
    draft = LogbookEntry.objects.get(run=run, kind=LogbookEntry.Kind.RESTART)

    # then 150 - 140 = 10 steps lost on the incident (API and list), the goodput segment of
    # attempt 1 and the restart draft; detected when attempt 1 ended, recovered at 2's start
    lost = {s["attempt"]: s["lost_steps"] for s in segments}[1]
    assert (api["lost_steps"], lost) == (10, 10)
    assert "10 steps lost" in draft.title
    assert 'data-label="Lost steps">10</td>' in queue
    assert datetime.fromisoformat(api["detected_at"]) == datetime.fromisoformat(_iso(151))
    assert datetime.fromisoformat(api["recovered_at"]) == datetime.fromisoformat(_iso(900))
