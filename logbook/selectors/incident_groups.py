"""Reads of the incident groups (logbook.services.incident_groups keeps them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from logbook.models import IncidentGroup
from logbook.selectors.filters import FilterParams
from telemetry.models import Project

GROUPS_LISTED = 200


@dataclass(frozen=True)
class GroupRow:
    id: int
    project: str
    level: str
    name: str
    started_at: datetime
    ended_at: datetime
    incidents: list[int]
    incident_numbers: list[tuple[int, int, int]]  # (id, run id, number in its run)
    hosts: list[str]
    suggested_component: str

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "project": self.project,
            "level": self.level,
            "name": self.name,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "incidents": self.incidents,
            "hosts": self.hosts,
            "suggested_component": self.suggested_component,
        }


def group_filters_parse(params: Mapping[str, str]) -> tuple[str, datetime | None]:
    """(level, since) from query parameters; raises FilterError."""
    reader = FilterParams(params)
    level = reader.choice("level", IncidentGroup.Level.values)
    since = reader.time("since", end_of_day=False)
    reader.check()
    return level, since


def incident_groups_for_projects(
    *, projects: QuerySet[Project], level: str = "", since: datetime | None = None
) -> list[GroupRow]:
    """The projects' groups, newest first, with their members (two queries)."""
    groups = IncidentGroup.objects.filter(project__in=projects)
    if level:
        groups = groups.filter(level=level)
    if since is not None:
        groups = groups.filter(started_at__gte=since)
    rows = list(groups.select_related("project").prefetch_related("incidents")[:GROUPS_LISTED])
    return [
        GroupRow(
            id=group.pk,
            project=group.project.slug,
            level=group.level,
            name=group.name,
            started_at=group.started_at,
            ended_at=group.ended_at,
            incidents=sorted(one.pk for one in group.incidents.all()),
            incident_numbers=sorted(
                (one.pk, one.run_id, one.number) for one in group.incidents.all()
            ),
            hosts=list(group.hosts),
            suggested_component=group.suggested_component,
        )
        for group in rows
    ]
