"""Grouped failures, kept: after an unexpected interruption is stored, the worker remakes the
incident groups around it (logbook.incident_groups has the rule) and has auto-triage
remake the suggestion of every incident whose group changed, so each member's suggestion
names the shared part."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import connection, transaction

from logbook import incident_groups as rule
from logbook.models import IncidentGroup, Interruption
from logbook.services import autotriage
from telemetry import services as telemetry_services
from telemetry.selectors.topology import placements_of

logger = logging.getLogger(__name__)

# How far around an incident its burst is looked for: a burst is a chain of incidents each
# within rule.DEFAULT_WINDOW of the last, far shorter than this in any real failure.
REACH = timedelta(hours=6)
# pg_advisory_xact_lock's first key: this service's, the second is the project id.
_LOCK_CLASS = 36


def incident_groups_refresh(*, interruption_id: int) -> list[IncidentGroup]:
    """Remake the project's groups among the unexpected interruptions within REACH of this
    one; returns the groups now holding it (none, or one). Idempotent: the same incidents
    and topology leave the same groups. Groups of one project are remade one at a time (an
    advisory lock), so two workers never make the same group twice."""
    with transaction.atomic():
        interruption = Interruption.objects.select_related("run").filter(pk=interruption_id).first()
        if interruption is None:
            return []
        project_id = interruption.run.project_id
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, project_id])
        at = interruption.occurred_at
        near = list(
            Interruption.objects.filter(
                run__project_id=project_id,
                planned=False,
                occurred_at__gte=at - REACH,
                occurred_at__lte=at + REACH,
            ).prefetch_related("hosts")
        )
        incidents = [
            rule.Incident(one.pk, one.occurred_at, tuple(host.name for host in one.hosts.all()))
            for one in near
        ]
        names = {host for one in incidents for host in one.hosts}
        places = placements_of(project_id=project_id, names=names)
        placements = {
            name: rule.Placement(place.rack, place.pod, place.cluster, place.site)
            for name, place in places.items()
        }
        # A component's size (how many hosts of a rack there are) needs the whole rack.
        placements |= _component_neighbours(project_id, placements)
        found = rule.groups_find(incidents, placements)
        changed = _reconcile(project_id, {one.pk for one in near}, found)
        if changed:
            for member in sorted(changed):
                autotriage.suggestion_enqueue(interruption_id=member)
            telemetry_services.fleet_version_bump(project_id=project_id)
        return list(IncidentGroup.objects.filter(incidents=interruption))


def _component_neighbours(
    project_id: int, placements: dict[str, rule.Placement]
) -> dict[str, rule.Placement]:
    """The other hosts of the racks the incidents' hosts are in: a rack of two both failing
    is a group (see rule.groups_find), which takes knowing that it has two."""
    racks = {place.rack for place in placements.values() if place.rack}
    if not racks:
        return {}
    return {
        name: rule.Placement(place.rack, place.pod, place.cluster, place.site)
        for name, place in placements_of(project_id=project_id, racks=racks).items()
        if name not in placements
    }


def _reconcile(project_id: int, in_reach: set[int], found: list[rule.Group]) -> set[int]:
    """Store `found` over the groups of these incidents: a stored group of the same component
    sharing an incident is updated, the rest made; a stored group wholly within reach that
    was not found again (absorbed by a group above, or its topology changed) is removed.
    Returns the incidents whose group changed."""
    stored = list(
        IncidentGroup.objects.filter(project_id=project_id, incidents__in=in_reach)
        .distinct()
        .prefetch_related("incidents")
    )
    members = {group.pk: {one.pk for one in group.incidents.all()} for group in stored}
    changed: set[int] = set()
    kept: set[int] = set()
    for group in found:
        ids = set(group.incidents)
        match = next(
            (
                one
                for one in stored
                if one.pk not in kept
                and one.level == group.level
                and list(one.key) == list(group.key)
                and members[one.pk] & ids
            ),
            None,
        )
        values = {
            "level": group.level,
            "key": list(group.key),
            "name": group.name[:120],
            "suggested_component": group.suggested_component[:200],
            "started_at": group.started_at,
            "ended_at": group.ended_at,
            "hosts": group.hosts,
        }
        if match is None:
            match = IncidentGroup.objects.create(project_id=project_id, **values)
            changed |= ids
        else:
            kept.add(match.pk)
            if any(getattr(match, name) != value for name, value in values.items()):
                IncidentGroup.objects.filter(pk=match.pk).update(**values)
            changed |= ids ^ members[match.pk]
        if members.get(match.pk) != ids:
            match.incidents.set(sorted(ids))
    for one in stored:
        if one.pk not in kept and members[one.pk] <= in_reach:
            changed |= members[one.pk]
            one.delete()
    return changed


def incident_groups_enqueue(*, interruption_id: int) -> None:
    """After the current transaction commits, have the worker remake the groups around the
    interruption (never in the request or batch that stored it)."""

    def publish() -> None:
        from logbook import tasks  # tasks import this module

        try:
            tasks.incident_groups_refresh_task.delay(interruption_id)
        except Exception:
            logger.exception("could not enqueue the incident groups of %s", interruption_id)

    transaction.on_commit(publish)
