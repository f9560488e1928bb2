from datetime import UTC, datetime

import pytest

from logbook.models import Interruption, RootCause


@pytest.mark.django_db
def test_the_incident_page_links_to_the_run_page_around_its_step(client, alice, run):
    # given an interruption at step 1000 that lost 300 steps
    incident = Interruption.objects.create(
        run=run, occurred_at=datetime(2026, 11, 1, tzinfo=UTC), step=1000, lost_steps=300,
        root_cause=RootCause.objects.first(),
    )  # fmt: skip
    client.force_login(alice)

    # when on-call opens it
    response = client.get(f"/incidents/{incident.pk}/")

    # then it links to the run page zoomed on steps 700..1200 (back by the lost steps, on by
    # 200: the window the incident page charts), where the run page marks it
    assert response.status_code == 200
    assert f'href="/runs/{run.pk}/?x0=700&amp;x1=1200"' in response.content.decode()
