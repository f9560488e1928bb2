"""The fleet by site, side by side: each site's hosts, incidents, MTBF, quarantined hardware
and incident groups over a window; and where a run's attempt ran, by site."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min, Q, QuerySet
from django.db.models.functions import Coalesce

from logbook.models import IncidentGroup, Interruption
from telemetry.models import Device, Host, Project

UNKNOWN_SITE = ""
MTBF_FORMULA = "window hours / unexpected incidents on the site's hosts"


@dataclass
class SiteHealth:
    site: str  # "" for hosts no one has placed
    hosts: int = 0
    quarantined_hosts: int = 0
    quarantined_devices: int = 0
    incidents: int = 0
    groups: int = 0
    window_hours: float = 0.0
    at_risk: int = 0  # filled by the page from the at-risk list

    @property
    def mtbf_hours(self) -> float | None:
        return self.window_hours / self.incidents if self.incidents else None


def _site_of(prefix: str = "") -> Coalesce:
    return Coalesce(f"{prefix}site__name", f"{prefix}cluster__site__name")


def site_health(
    *, projects: QuerySet[Project], since: datetime, until: datetime
) -> list[SiteHealth]:
    """Every site of the projects' hosts (and "" for the unplaced), by name. Four queries."""
    hours = (until - since).total_seconds() / 3600
    sites: dict[str, SiteHealth] = {}

    def one(name: str | None) -> SiteHealth:
        key = name or UNKNOWN_SITE
        return sites.setdefault(key, SiteHealth(key, window_hours=hours))

    hosts = Host.objects.filter(project__in=projects).annotate(place=_site_of())
    for name, count, quarantined in (
        hosts.values("place")
        .annotate(n=Count("pk"), q=Count("pk", filter=Q(quarantined_at__isnull=False)))
        .values_list("place", "n", "q")
    ):
        row = one(name)
        row.hosts, row.quarantined_hosts = count, quarantined
    devices = Device.objects.filter(project__in=projects, quarantined_at__isnull=False)
    for name, count in (
        devices.annotate(place=_site_of("host__")).values("place").annotate(n=Count("pk"))
        .values_list("place", "n")
    ):  # fmt: skip
        one(name).quarantined_devices = count
    incidents = Interruption.objects.filter(
        run__project__in=projects, planned=False, occurred_at__gte=since, occurred_at__lt=until
    )
    for name, count in (
        incidents.annotate(place=_site_of("hosts__")).values("place")
        .annotate(n=Count("pk", distinct=True)).values_list("place", "n")
    ):  # fmt: skip
        one(name).incidents = count
    groups = IncidentGroup.objects.filter(
        project__in=projects, started_at__gte=since, started_at__lt=until
    )
    for key in groups.values_list("key", flat=True):
        one(key[0] if key else None).groups += 1
    return sorted(sites.values(), key=lambda row: (row.site == UNKNOWN_SITE, row.site))


def site_window_edges(
    *, projects: QuerySet[Project], since: datetime, until: datetime
) -> list[datetime]:
    """The moments of site_health's incidents and groups nearest the window's edges: the
    earliest in [since, until) (the first to leave as the window slides) and the earliest
    at or after `until` (the first to enter), each that exists. Two queries."""
    edges: list[datetime | None] = []
    for rows, field in (
        (Interruption.objects.filter(run__project__in=projects, planned=False), "occurred_at"),
        (IncidentGroup.objects.filter(project__in=projects), "started_at"),
    ):
        found = rows.filter(**{f"{field}__gte": since}).aggregate(
            inside=Min(field, filter=Q(**{f"{field}__lt": until})),
            ahead=Min(field, filter=Q(**{f"{field}__gte": until})),
        )
        edges += [found["inside"], found["ahead"]]
    return [edge for edge in edges if edge is not None]
