"""Grouped failures, the pure rule (logbook.incident_groups): which incidents become one
group, at which level, naming what."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from logbook.incident_groups import Incident, Placement, bursts_of, groups_find

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _fleet() -> dict[str, Placement]:
    """Two sites; site a: pod p1 with racks r1, r2 (six hosts each); site b: pod p9."""
    fleet = {}
    for rack in ("r1", "r2"):
        for n in range(6):
            fleet[f"{rack}-h{n}"] = Placement(rack=rack, pod="p1", cluster="c1", site="a")
    for n in range(6):
        fleet[f"b-h{n}"] = Placement(rack="r1", pod="p9", cluster="c9", site="b")
    fleet["lost"] = Placement()  # nobody said where it is
    return fleet


def _incidents(hosts: list[str], *, every: timedelta = timedelta(seconds=40), first: int = 1):
    return [Incident(first + i, T0 + i * every, (host,)) for i, host in enumerate(hosts)]


def test_five_hosts_of_one_rack_within_three_minutes_are_one_rack_group():
    incidents = _incidents([f"r1-h{n}" for n in range(5)])
    (group,) = groups_find(incidents, _fleet())
    assert group.level == "rack"
    assert group.name == "rack r1"
    assert group.key == ("a", "c1", "p1", "r1")
    assert group.incidents == [1, 2, 3, 4, 5]
    assert group.hosts == [f"r1-h{n}" for n in range(5)]
    assert "top-of-rack switch or PDU" in group.suggested_component
    assert group.started_at == T0 and group.ended_at == T0 + 4 * timedelta(seconds=40)


def test_the_same_incidents_spread_over_an_hour_are_no_group():
    incidents = _incidents([f"r1-h{n}" for n in range(5)], every=timedelta(minutes=15))
    assert groups_find(incidents, _fleet()) == []


def test_two_racks_of_one_pod_failing_together_are_the_pods_failure():
    hosts = [f"r1-h{n}" for n in range(3)] + [f"r2-h{n}" for n in range(3)]
    (group,) = groups_find(_incidents(hosts, every=timedelta(seconds=20)), _fleet())
    assert (group.level, group.name) == ("pod", "pod p1")
    assert len(group.incidents) == 6
    assert sorted(level for level, _ in group.absorbed) == ["rack", "rack"]


def test_a_stray_host_elsewhere_in_the_pod_leaves_the_rack_group_alone():
    hosts = [f"r1-h{n}" for n in range(4)] + ["r2-h0"]
    (group,) = groups_find(_incidents(hosts), _fleet())
    assert (group.level, group.name) == ("rack", "rack r1")
    assert "r2-h0" not in group.hosts


def test_hosts_of_two_sites_are_no_group_and_unknown_levels_join_none():
    hosts = ["r1-h0", "b-h0", "lost", "r2-h5"]
    assert groups_find(_incidents(hosts), _fleet()) == []
    # Racks named alike in two pods are two racks.
    assert groups_find(_incidents(["r1-h0", "r1-h1", "b-h0", "b-h1"]), _fleet()) == []


def test_a_rack_of_two_hosts_both_failing_is_a_group():
    fleet = {f"n{i}": Placement(rack="rk", site="s") for i in range(2)}
    (group,) = groups_find(_incidents(["n0", "n1"]), fleet)
    assert group.name == "rack rk"


def test_one_incident_naming_five_hosts_is_already_one_incident():
    one = [Incident(1, T0, tuple(f"r1-h{n}" for n in range(5)))]
    assert groups_find(one, _fleet()) == []


def test_bursts_chain_incidents_each_within_the_window_of_the_last():
    incidents = _incidents(["x"] * 4, every=timedelta(minutes=4))
    assert [len(one) for one in bursts_of(incidents, timedelta(minutes=5))] == [4]
    assert [len(one) for one in bursts_of(incidents, timedelta(minutes=3))] == [1, 1, 1, 1]
