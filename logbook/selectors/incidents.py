"""Reads of the triage queue: the unexpected interruptions of the user's projects as
incidents, one incident with what its page needs, and its audit history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Case, Exists, OuterRef, Q, QuerySet, Value, When
from django.http import Http404

from logbook.models import AuditEvent, IncidentSource, Interruption, RootCause
from logbook.selectors.filters import FilterParams
from telemetry.models import Attempt, Run
from telemetry.selectors import User, projects_for_user, run_get_for_user

QUEUE_MAX_ROWS = 500
# What the queue shows when no status is asked for: the incidents still needing someone.
ACTIVE_STATUSES: tuple[str, ...] = (Interruption.Status.OPEN, Interruption.Status.TRIAGED)
ALL_STATUSES = "all"


@dataclass(frozen=True)
class IncidentFilters:
    """`run` is already checked against the user's projects; `statuses` is never empty."""

    run: Run | None = None
    statuses: tuple[str, ...] = ACTIVE_STATUSES
    category: str = ""  # a root-cause slug
    host: str = ""
    since: datetime | None = None  # occurred at or after
    until: datetime | None = None  # occurred before

    @property
    def status_param(self) -> str:
        """The status filter as the query string writes it ("" for the default)."""
        if self.statuses == ACTIVE_STATUSES:
            return ""
        if set(self.statuses) == set(Interruption.Status.values):
            return ALL_STATUSES
        return ",".join(self.statuses)

    def as_query(self) -> dict[str, str]:
        return {
            "run": str(self.run.pk) if self.run else "",
            "status": ",".join(self.statuses),
            "category": self.category,
            "host": self.host,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }


def filters_parse(*, user: User, params: Mapping[str, str]) -> IncidentFilters:
    """Read run, status ("open,triaged" by default; "all"; or a comma-separated list),
    category (root-cause slug), host (a name or its start) and the window since-until of
    when they occurred. A run the user may not see is a 404; an unreadable
    value raises FilterError."""
    reader = FilterParams(params)
    run_id = reader.run_id()
    run = run_get_for_user(user=user, run_id=run_id) if run_id is not None else None
    raw_status = reader.text("status")
    if not raw_status:
        statuses = ACTIVE_STATUSES
    elif raw_status == ALL_STATUSES:
        statuses = tuple(Interruption.Status.values)
    else:
        wanted = {part.strip() for part in raw_status.split(",") if part.strip()}
        unknown = sorted(wanted - set(Interruption.Status.values))
        if unknown:
            reader.fail(
                "status",
                f"must be {ALL_STATUSES} or any of {', '.join(Interruption.Status.values)}",
            )
        # In workflow order, so equal filters compare equal.
        statuses = tuple(s for s in Interruption.Status.values if s in wanted)
    category = reader.text("category", limit=64)
    host = reader.text("host", limit=255)
    since, until = reader.window("since", "until")
    reader.check()
    return IncidentFilters(
        run=run, statuses=statuses, category=category, host=host, since=since, until=until
    )


def incidents_for_user(*, user: User) -> QuerySet[Interruption]:
    """Every unexpected interruption of the user's projects, with what a row shows."""
    return (
        Interruption.objects.filter(run__project__in=projects_for_user(user=user), planned=False)
        .select_related(
            "run__project",
            "root_cause",
            "attempt",
            "triaged_by",
            "resolved_by",
            "suggestion__root_cause",
        )
        .prefetch_related("hosts__project", "devices")
        .order_by("-occurred_at", "-pk")
    )


@dataclass(frozen=True)
class IncidentQueue:
    incidents: list[Interruption]
    total: int
    truncated: bool


def incident_queue(
    *, user: User, filters: IncidentFilters, limit: int = QUEUE_MAX_ROWS
) -> IncidentQueue:
    """The triage queue, newest first, at most `limit` rows (four queries whatever the
    number of incidents: count, rows, hosts, devices)."""
    incidents = incidents_filtered(user=user, filters=filters)
    total = incidents.count()
    rows = list(incidents[:limit])
    return IncidentQueue(incidents=rows, total=total, truncated=total > len(rows))


def incidents_filtered(*, user: User, filters: IncidentFilters) -> QuerySet[Interruption]:
    """The user's incidents that `filters` keep, newest first (a page of it costs the same
    four queries as the queue)."""
    incidents = incidents_for_user(user=user).filter(status__in=filters.statuses)
    if filters.run is not None:
        incidents = incidents.filter(run=filters.run)
    if filters.category:
        incidents = incidents.filter(root_cause__slug=filters.category)
    if filters.since is not None:
        incidents = incidents.filter(occurred_at__gte=filters.since)
    if filters.until is not None:
        incidents = incidents.filter(occurred_at__lt=filters.until)
    if filters.host:
        # A prefix ("h00" finds h001...h009), through EXISTS: a join would repeat an
        # incident once per matching host.
        on_host = Interruption.hosts.through.objects.filter(
            interruption=OuterRef("pk"), host__name__startswith=filters.host
        )
        incidents = incidents.filter(Exists(on_host))
    return incidents


def unconfirmed_first(incidents: QuerySet[Interruption]) -> QuerySet[Interruption]:
    """The queue's order: incidents nobody has triaged yet (open) first, newest first within
    each, so on-call meets the unconfirmed suggestions before the settled ones."""
    return incidents.order_by(
        Case(When(status=Interruption.Status.OPEN, then=Value(0)), default=Value(1)),
        "-occurred_at",
        "-pk",
    )


def incident_get_for_user(*, user: User, pk: int) -> Interruption:
    """The interruption, if it belongs to a project the user may see; 404 otherwise (never
    403: do not confirm it exists). Planned interruptions have a page too (links from
    elsewhere), though the queue lists only unexpected ones."""
    incident = (
        Interruption.objects.filter(pk=pk, run__project__in=projects_for_user(user=user))
        .select_related(
            "run__project",
            "root_cause",
            "attempt",
            "triaged_by",
            "resolved_by",
            "suggestion__root_cause",
        )
        .prefetch_related("hosts__project", "devices")
        .first()
    )
    if incident is None:
        raise Http404("No such incident.")
    return incident


def incident_sources(*, incident: Interruption) -> QuerySet[IncidentSource]:
    """The signals this incident is made of (logbook.services.interruptions), earliest first."""
    return IncidentSource.objects.filter(interruption=incident).order_by("occurred_at", "pk")


def incident_history(*, incident: Interruption) -> QuerySet[AuditEvent]:
    """The incident's audit events, newest first."""
    return AuditEvent.objects.filter(
        entity=AuditEvent.Entity.INTERRUPTION, object_id=incident.pk
    ).order_by("-at", "-pk")


def root_causes(*, project_ids: Sequence[int] | QuerySet[Any] = ()) -> QuerySet[RootCause]:
    """The taxonomy the category menus list: the site-wide categories and those of the given
    projects (another project's own categories never show)."""
    return RootCause.objects.filter(
        Q(project__isnull=True) | Q(project_id__in=project_ids)
    ).order_by("group", "name")


def runs_for_menu(*, user: User) -> QuerySet[Run]:
    return (
        Run.objects.filter(project__in=projects_for_user(user=user))
        .select_related("project")
        .order_by("project__slug", "name")
    )


def restarts_in_steps(*, run: Run, first_step: int, last_step: int) -> list[tuple[int, int]]:
    """(attempt number, step it resumed from) of the run's attempts that resumed inside the
    steps, in order: the incident page marks where the next attempt picked up."""
    return list(
        Attempt.objects.filter(
            run=run, resumed_from_step__gte=first_step, resumed_from_step__lte=last_step
        )
        .exclude(number=1)
        .order_by("number")
        .values_list("number", "resumed_from_step")
    )
