"""Lost steps are one number on every page: the goodput segments, the incident and the
logbook's restart draft all count last step - the step the next attempt resumed from
(DOMAIN.md: the steps computed twice), on the demo data."""

from __future__ import annotations

import pytest

from logbook.models import Interruption
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
