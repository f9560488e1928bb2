"""Grouped failures, stored: the worker's pass after each interruption makes one group of the
incidents that hit several hosts of one rack within minutes, names the rack, links the
members, and auto-triage's suggestion for each member says so; GET
/api/v1/fleet/incident-groups lists them per project."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from logbook.models import IncidentGroup
from logbook.services import autotriage
from logbook.services.incident_groups import incident_groups_refresh
from logbook.services.interruptions import interruption_record
from telemetry import services as telemetry_services
from telemetry.services.topology import host_placements_set

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
GROUPS = "/api/v1/fleet/incident-groups"


def _rack(project: Any, rack: str, hosts: int, *, pod: str = "p1") -> list[str]:
    names = [f"{rack}-n{i}" for i in range(hosts)]
    host_placements_set(
        project=project,
        placements={
            name: {"rack": rack, "pod": pod, "cluster": "c1", "site": "sjc"} for name in names
        },
    )
    return names


def _interrupted(project: Any, hosts: list[str], *, start: datetime = T0, every_s: int = 35):
    """One small job per host, each interrupted in turn (a shared fleet's jobs)."""
    recorded = []
    for i, host in enumerate(hosts):
        run = telemetry_services.run_upsert(project=project, name=f"job-{host}")
        attempt = telemetry_services.attempt_ensure(
            run=run, number=1, started_at=start - timedelta(hours=1), hosts=[host]
        )
        recorded.append(
            interruption_record(
                run=run, attempt=attempt, source_key=f"k-{host}",
                occurred_at=start + timedelta(seconds=every_s * i),
                message="NET/IB: transport retry counter exceeded", hosts=[host],
            )
        )  # fmt: skip
    return recorded


@pytest.mark.django_db
def test_five_hosts_of_one_rack_within_three_minutes_become_one_group_naming_the_rack(project, bob):
    # given five hosts of rack r07 (and two more of it that stay up)
    hosts = _rack(project, "r07", 7)
    # when five of them report interruptions within three minutes
    incidents = _interrupted(project, hosts[:5])
    for one in incidents:
        incident_groups_refresh(interruption_id=one.pk)

    # then there is one group, naming the rack, with the five incidents linked
    (group,) = IncidentGroup.objects.all()
    assert (group.level, group.name) == ("rack", "rack r07")
    assert sorted(group.incidents.values_list("pk", flat=True)) == sorted(i.pk for i in incidents)
    assert group.hosts == sorted(hosts[:5])
    assert group.suggested_component == "rack r07: top-of-rack switch or PDU"
    # and again changes nothing
    assert incident_groups_refresh(interruption_id=incidents[0].pk) == [group]
    assert IncidentGroup.objects.count() == 1

    # and auto-triage's suggestion for each member says so
    suggestion = autotriage.suggestion_make(interruption_id=incidents[2].pk)
    assert suggestion is not None
    assert suggestion.note.startswith("One failure with 4 other incident(s) on 5 hosts of rack r07")
    assert suggestion.root_cause.slug == "network-switch-cable"
    assert suggestion.component == "rack r07: top-of-rack switch or PDU"
    assert any(item["url"].endswith(f"#incident-group-{group.pk}") for item in suggestion.evidence)

    # and the API lists it
    client = Client()
    client.force_login(bob)
    body = client.get(GROUPS).json()
    assert body["groups"] == [{
        "id": group.pk, "project": project.slug, "level": "rack", "name": "rack r07",
        "started_at": "2026-12-01T03:00:00Z", "ended_at": "2026-12-01T03:02:20Z",
        "incidents": sorted(i.pk for i in incidents), "hosts": sorted(hosts[:5]),
        "suggested_component": "rack r07: top-of-rack switch or PDU",
    }]  # fmt: skip
    assert client.get(GROUPS, {"level": "pod"}).json() == {"groups": []}
    assert client.get(GROUPS, {"level": "row"}).status_code == 400


@pytest.mark.django_db
def test_a_second_rack_of_the_pod_failing_with_it_makes_it_the_pods_failure(project):
    first = _interrupted(project, _rack(project, "r01", 4)[:3])
    incident_groups_refresh(interruption_id=first[-1].pk)
    assert list(IncidentGroup.objects.values_list("name", flat=True)) == ["rack r01"]
    second = _interrupted(project, _rack(project, "r02", 4)[:3], start=T0 + timedelta(seconds=100))
    incident_groups_refresh(interruption_id=second[-1].pk)
    (group,) = IncidentGroup.objects.all()
    assert (group.level, group.name, group.incidents.count()) == ("pod", "pod p1", 6)


@pytest.mark.django_db
def test_planned_work_and_hosts_without_a_rack_make_no_group(project):
    unplaced = [f"loose-{i}" for i in range(5)]
    incidents = _interrupted(project, unplaced)
    incident_groups_refresh(interruption_id=incidents[-1].pk)
    assert not IncidentGroup.objects.exists()


@pytest.mark.django_db
def test_groups_are_per_project(project, other_project, bob, charlie):
    incidents = _interrupted(project, _rack(project, "secret-rack", 5))
    incident_groups_refresh(interruption_id=incidents[-1].pk)
    assert IncidentGroup.objects.count() == 1
    outsider = Client()
    outsider.force_login(charlie)
    assert outsider.get(GROUPS).json() == {"groups": []}
    assert outsider.get(GROUPS, {"project": project.slug}).status_code == 404
    member = Client()
    member.force_login(bob)
    assert len(member.get(GROUPS, {"project": project.slug}).json()["groups"]) == 1
