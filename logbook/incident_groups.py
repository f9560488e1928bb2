"""Grouped failures: incidents that hit several hosts of one rack, pod, cluster or site within a
short window are one failure of the part those hosts share (a top-of-rack switch or PDU, a
pod's spine, a site's power or inter-site link), not several. Pure: incidents and topology
in, groups out; no ORM.

The rule, level by level from the rack up: within one burst of incidents (each within
`window` of the one before), a component whose hosts reported at least `min_hosts` of them
(or all of its hosts, when it has fewer: Llama 3's racks hold two) from at least two
incidents becomes a group, unless a group below it already explains them: it forms when it
contains two groups below it (two racks of one pod failing together are the pod's failure,
and absorb the racks' groups) or when the hosts no group below holds are enough on their
own (five hosts of one rack and a stray host elsewhere in the pod stay the rack's).
A host whose level is unknown takes no part at that level: unknown stays unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from logbook.incident_windows import Signal, window_groups

LEVELS = ("rack", "pod", "cluster", "site")
DEFAULT_WINDOW = timedelta(minutes=5)
DEFAULT_MIN_HOSTS = 3

# What each level's group suggests failed (the "shared component"), and the Table 5
# category (logbook.taxonomy) auto-triage files a member under. A site's shared parts are
# power and its links to other sites, neither of which Table 5 names: no category.
SHARED_PART = {
    "rack": "top-of-rack switch or PDU",
    "pod": "pod network (spine)",
    "cluster": "cluster fabric",
    "site": "site power or inter-site link",
}
SHARED_CATEGORY = {
    "rack": "network-switch-cable",
    "pod": "network-switch-cable",
    "cluster": "network-switch-cable",
    "site": "",
}


@dataclass(frozen=True)
class Placement:
    """Where a host sits; "" for a level nobody has said."""

    rack: str = ""
    pod: str = ""
    cluster: str = ""
    site: str = ""

    def key(self, level: str) -> tuple[str, ...] | None:
        """The component at `level` this host is in, named by its path from the site down
        (rack "r1" of pod "p1" is not rack "r1" of pod "p2"); None when that level is
        unknown."""
        path = {"site": (self.site,), "cluster": (self.site, self.cluster)}
        path["pod"] = (*path["cluster"], self.pod)
        path["rack"] = (*path["pod"], self.rack)
        if not getattr(self, level):
            return None
        return path[level]


@dataclass(frozen=True)
class Incident:
    id: int
    at: datetime
    hosts: tuple[str, ...]


@dataclass
class Group:
    level: str
    key: tuple[str, ...]
    incidents: list[int]
    hosts: list[str]
    started_at: datetime
    ended_at: datetime
    absorbed: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.level} {self.key[-1]}"

    @property
    def suggested_component(self) -> str:
        return f"{self.name}: {SHARED_PART[self.level]}"


# Every incident of the project is a candidate for a burst with every other.
BURST_KEY = frozenset({"project"})

Bursts = Callable[[Sequence[Incident], timedelta], list[list[Incident]]]


def bursts_of(incidents: Sequence[Incident], window: timedelta) -> list[list[Incident]]:
    """Incidents split where the gap to the previous one exceeds `window` (a chain, so a
    burst can outlast the window while every step of it stays within): the window matching
    every level shares (logbook.incident_windows), all of the project's incidents near each
    other by one key; which component they share is the rule's business, level by level."""
    signals = [Signal(at=one.at, keys=BURST_KEY, ref=one) for one in incidents]
    return [
        sorted((signal.ref for signal in group), key=lambda one: (one.at, one.id))
        for group in window_groups(signals, window=window)
    ]


def groups_find(
    incidents: Sequence[Incident],
    placements: Mapping[str, Placement],
    *,
    window: timedelta = DEFAULT_WINDOW,
    min_hosts: int = DEFAULT_MIN_HOSTS,
    bursts: Bursts = bursts_of,
) -> list[Group]:
    """The groups among `incidents` (see the module's rule). `placements` maps a host name to
    where it is; a host missing from it is placed nowhere."""
    sizes = _component_sizes(placements)
    found: list[Group] = []
    for burst in bursts(incidents, window):
        found.extend(_burst_groups(burst, placements, sizes, min_hosts))
    return found


def _component_sizes(placements: Mapping[str, Placement]) -> dict[tuple[str, tuple[str, ...]], int]:
    sizes: dict[tuple[str, tuple[str, ...]], int] = {}
    for placement in placements.values():
        for level in LEVELS:
            key = placement.key(level)
            if key is not None:
                sizes[(level, key)] = sizes.get((level, key), 0) + 1
    return sizes


def _burst_groups(
    burst: Sequence[Incident],
    placements: Mapping[str, Placement],
    sizes: Mapping[tuple[str, tuple[str, ...]], int],
    min_hosts: int,
) -> list[Group]:
    formed: list[Group] = []
    for level in LEVELS:
        members: dict[tuple[str, ...], dict[str, set[int]]] = {}
        for incident in burst:
            for host in incident.hosts:
                placement = placements.get(host)
                key = placement.key(level) if placement else None
                if key is not None:
                    members.setdefault(key, {}).setdefault(host, set()).add(incident.id)
        for key, by_host in sorted(members.items()):
            ids = set().union(*by_host.values())
            needed = max(2, min(min_hosts, sizes.get((level, key), 0)))
            if len(by_host) < needed or len(ids) < 2:
                continue
            hosts = set(by_host)
            below = [group for group in formed if set(group.hosts) <= hosts]
            explained = set().union(*(group.hosts for group in below))
            if len(below) < 2 and len(hosts - explained) < needed:
                continue  # one part below already names this failure
            times = [one.at for one in burst if one.id in ids]
            group = Group(
                level=level,
                key=key,
                incidents=sorted(ids),
                hosts=sorted(hosts),
                started_at=min(times),
                ended_at=max(times),
                absorbed=[(one.level, one.key) for one in below],
            )
            formed = [one for one in formed if one not in below] + [group]
    return formed
