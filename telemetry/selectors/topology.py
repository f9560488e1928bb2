"""Reads of the fleet's topology: where each host of the user's projects sits, and the
projects a `project` filter names."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.http import Http404

from telemetry.models import Host, Project
from telemetry.selectors.access import User, projects_for_user


@dataclass(frozen=True)
class HostPlace:
    project: str
    host: str
    rack: str
    pod: str
    cluster: str
    site: str

    def as_dict(self) -> dict[str, str | None]:
        """The API's row: a level nobody named is null."""
        return {
            "project": self.project,
            "host": self.host,
            "rack": self.rack or None,
            "pod": self.pod or None,
            "cluster": self.cluster or None,
            "site": self.site or None,
        }


def projects_filtered(*, user: User, slug: str | None) -> QuerySet[Project]:
    """The user's projects, or the one `slug` names: 404 when it is none of them (an
    outsider learns nothing of whether it exists)."""
    projects = projects_for_user(user=user)
    if slug:
        if "\x00" in slug:
            raise Http404("No such project.")
        projects = projects.filter(slug=slug)
        if not projects.exists():
            raise Http404("No such project.")
    return projects


def _places(hosts: QuerySet[Host]) -> list[HostPlace]:
    rows = hosts.annotate(site_name=Coalesce("site__name", "cluster__site__name")).values_list(
        "project__slug", "name", "rack", "pod", "cluster__name", "site_name"
    )
    return [
        HostPlace(project, name, rack, pod, cluster or "", site or "")
        for project, name, rack, pod, cluster, site in rows.order_by("project__slug", "name")
    ]


def topology_for_projects(*, projects: QuerySet[Project]) -> list[HostPlace]:
    """Every host of the projects, with its levels ("" where unknown)."""
    return _places(Host.objects.filter(project__in=projects))


def placements_of(
    *,
    project_id: int,
    names: Iterable[str] | None = None,
    racks: Iterable[str] | None = None,
) -> dict[str, HostPlace]:
    """The project's hosts by name: only `names`, or only those in `racks`, when given."""
    hosts = Host.objects.filter(project_id=project_id)
    if names is not None:
        hosts = hosts.filter(name__in=sorted(set(names)))
    if racks is not None:
        hosts = hosts.filter(rack__in=sorted(set(racks)))
    return {place.host: place for place in _places(hosts)}


def topology_for_projects_by_host(
    *, projects: QuerySet[Project], hosts: Iterable[str]
) -> list[tuple[str, str]]:
    """(host, site) of the named hosts of the projects ("" for an unknown site)."""
    found = Host.objects.filter(project__in=projects, name__in=sorted(set(hosts)))
    return [(place.host, place.site) for place in _places(found)]
