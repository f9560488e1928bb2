"""Every link to a host says whose host it is (hosts are per project). A user of two projects
that both name the same machine must land on the host record of the project the link came
from: without `?project=` the host page falls back to the first project by slug."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from logbook.services import interruptions as interruption_services
from logbook.services import quarantine as quarantine_services
from telemetry.models import Host, Membership
from telemetry.services import attempt_ensure, run_upsert


def _links_to(html: str, host: str) -> list[str]:
    return re.findall(rf'href="(/fleet/hosts/{host}/[^"#]*)', html)


@pytest.mark.django_db
def test_host_links_on_the_triage_queue_incident_and_run_pages_name_the_project(
    client: Any, project: Any, other_project: Any, alice: Any
) -> None:
    # given alice is on-call in both projects, and both name a machine "node-x"; the other
    # project ("other-team") sorts first, so a link without the project would land there
    Membership.objects.create(project=other_project, user=alice, role="oncall")
    run = run_upsert(project=project, name="ours")
    attempt = attempt_ensure(
        run=run, number=1, started_at=datetime(2026, 11, 1, tzinfo=UTC), hosts=["node-x"]
    )
    theirs = run_upsert(project=other_project, name="theirs")
    attempt_ensure(
        run=theirs, number=1, started_at=datetime(2026, 11, 1, tzinfo=UTC), hosts=["node-x"]
    )
    interruption = interruption_services.interruption_record(
        run=run,
        source_key="test:1",
        occurred_at=datetime(2026, 11, 1, 6, tzinfo=UTC),
        attempt=attempt,
        hosts=["node-x"],
    )
    ours = Host.objects.get(name="node-x", project=project)
    quarantine_services.host_quarantine(host=ours, user=None, reason="ours-flapping-nvlink")
    client.force_login(alice)

    pages = {
        "triage queue": "/incidents/",
        "incident": f"/incidents/{interruption.pk}/",
        "run": f"/runs/{run.pk}/",
    }
    for label, url in pages.items():
        # when the page links to the host
        html = client.get(url).content.decode()
        links = _links_to(html, "node-x")
        assert links, f"{label}: no link to node-x"
        for link in links:
            # then the link names our project, and it leads to our record of the machine
            assert "project=pretrain" in link, f"{label}: {link}"
            host_page = client.get(link.replace("&amp;", "&")).content.decode()
            assert "ours-flapping-nvlink" in host_page, f"{label}: {link} shows another record"
