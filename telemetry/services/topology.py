"""Writes of the fleet's topology: where each host of a project sits (rack, pod, cluster, site),
from what jobs and exporters send (an attempt_started event's `placement`, labels on a DCGM
push) and from a project admin's CSV import. Hosts are per project, so their places are too.

A level nobody names stays unknown and a level named before stays as it was: a job that
knows only its hosts' racks never clears a site an exporter sent. A cluster is named within
its site (telemetry.models.Cluster), so a cluster is kept only when the host's site is known,
sent with it or stored before; a host moved to another site loses a cluster of the old one.
Only an admin's import with `replace` clears levels (an empty cell there is "unknown").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.db import transaction

from telemetry.models import Cluster, Host, Project, Site
from telemetry.services import fleet_version_bump, hosts_ensure

LEVELS = ("rack", "pod", "cluster", "site")
# Host.rack / Host.pod, Cluster.name and Site.name widths.
LEVEL_MAX_LENGTH = 100


@dataclass
class PlacementOutcome:
    changed: int = 0
    # Hosts whose cluster was not kept: no site known for it.
    clusters_without_site: list[str] = field(default_factory=list)


def host_placements_set(
    *,
    project: Project | int,
    placements: Mapping[str, Mapping[str, str]],
    replace: bool = False,
) -> PlacementOutcome:
    """Place each named host (created on first sight) at the levels its mapping names; see
    the module for what is kept. Values are checked by the caller (names of at most
    LEVEL_MAX_LENGTH characters). Bumps the project's fleet version when a host moved.

    Read first and write only what moved: a labelled fleet's every DCGM push places hosts
    that are where they were, which costs this one read."""
    outcome = PlacementOutcome()
    if not placements:
        return outcome
    project_id = project if isinstance(project, int) else project.pk
    hosts = _hosts(project_id, placements, lock=False)
    moves = _moves(hosts, placements, replace=replace, outcome=outcome)
    if not moves:
        return outcome
    with transaction.atomic():
        # Again under the rows' locks, taken in one order: two imports take turns.
        outcome = PlacementOutcome()
        hosts = _hosts(project_id, moves, lock=True)
        for name, wanted in _moves(hosts, placements, replace=replace, outcome=outcome).items():
            _place(hosts[name], wanted)
            outcome.changed += 1
        if outcome.changed:
            fleet_version_bump(project_id=project_id)
    return outcome


def _hosts(project_id: int, names: Iterable[str], *, lock: bool) -> dict[str, Host]:
    wanted = sorted(set(names))
    found = Host.objects.filter(project_id=project_id, name__in=wanted)
    if lock:
        found = found.select_for_update(of=("self",)).order_by("pk")
    hosts = {host.name: host for host in found.select_related("site", "cluster")}
    if len(hosts) < len(wanted):
        hosts_ensure(project=project_id, names=[name for name in wanted if name not in hosts])
        return _hosts(project_id, wanted, lock=lock)
    return hosts


def _moves(
    hosts: Mapping[str, Host],
    placements: Mapping[str, Mapping[str, str]],
    *,
    replace: bool,
    outcome: PlacementOutcome,
) -> dict[str, dict[str, str]]:
    """{host: its levels after} for the hosts that move."""
    moves = {}
    for name, host in sorted(hosts.items()):
        levels = placements[name]
        said = {level: (levels.get(level) or "").strip() for level in LEVELS}
        stored = _stored(host)
        wanted = said if replace else {level: said[level] or stored[level] for level in LEVELS}
        if not replace and wanted["site"] != stored["site"] and not said["cluster"]:
            wanted["cluster"] = ""  # the old cluster was of the old site
        if wanted["cluster"] and not wanted["site"]:
            outcome.clusters_without_site.append(name)
            wanted["cluster"] = ""
        if wanted != stored:
            moves[name] = wanted
    return moves


def _place(host: Host, wanted: Mapping[str, str]) -> None:
    site = Site.objects.get_or_create(name=wanted["site"])[0] if wanted["site"] else None
    cluster = None
    if site is not None and wanted["cluster"]:
        cluster = Cluster.objects.get_or_create(site=site, name=wanted["cluster"])[0]
    host.rack, host.pod, host.site, host.cluster = wanted["rack"], wanted["pod"], site, cluster
    host.save(update_fields=["rack", "pod", "site", "cluster"])


def _stored(host: Host) -> dict[str, str]:
    return {
        "rack": host.rack,
        "pod": host.pod,
        "cluster": host.cluster.name if host.cluster else "",
        "site": host.site.name if host.site else "",
    }
