"""Reads for the run list and the run page: runs with their interruption counts, the latest
attempts, interruptions and checkpoints of a run with how many there are, the quarantined
hardware it touched, and the annotations and logbook entries its charts mark. Each costs a
fixed number of queries whatever the run's size."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, IntegerField, Min, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from logbook.models import Annotation, Checkpoint, Interruption, LogbookEntry
from telemetry.models import Attempt, MetricPoint, MetricSeries, Run
from telemetry.selectors import User, projects_for_user


def runs_for_user(*, user: User) -> QuerySet[Run]:
    """The user's runs with what the run list shows, in a fixed number of queries."""
    latest_attempt = Attempt.objects.filter(run=OuterRef("pk")).order_by("-number")
    latest_loss_series = MetricSeries.objects.filter(run=OuterRef(OuterRef("pk")), name="loss")
    last_loss = (
        MetricPoint.objects.filter(
            series=Subquery(latest_loss_series.order_by("-attempt__number").values("pk")[:1])
        )
        .order_by("-step")
        .values("value")[:1]
    )
    interruption_count = (
        Run.objects.filter(pk=OuterRef("pk")).annotate(n=Count("interruptions")).values("n")[:1]
    )
    return (
        Run.objects.filter(project__in=projects_for_user(user=user))
        .select_related("project")
        .annotate(
            current_attempt=Subquery(latest_attempt.values("number")[:1]),
            current_status=Subquery(latest_attempt.values("status")[:1]),
            interruption_count=Subquery(interruption_count, output_field=IntegerField()),
            last_loss=Subquery(last_loss),
        )
        .order_by("-last_seen_at", "project__slug", "name")
    )


@dataclass(frozen=True)
class RunPageTables:
    attempts: list[Attempt]  # by number, each with host_count
    attempt_count: int
    interruptions: list[Interruption]  # newest first, with root cause, attempt and hosts
    interruption_count: int
    checkpoints: list[Checkpoint]  # highest step first, with attempt
    checkpoint_count: int

    @property
    def bounded(self) -> bool:
        """Whether a table leaves rows out."""
        return (
            len(self.attempts) < self.attempt_count
            or len(self.interruptions) < self.interruption_count
            or len(self.checkpoints) < self.checkpoint_count
        )


_COUNT_SQL = (
    f"SELECT (SELECT count(*) FROM {Attempt._meta.db_table} WHERE run_id = %s), "
    f"(SELECT count(*) FROM {Interruption._meta.db_table} WHERE run_id = %s), "
    f"(SELECT count(*) FROM {Checkpoint._meta.db_table} WHERE run_id = %s)"
)


def run_page_tables(*, run: Run, rows: int | None) -> RunPageTables:
    """The latest `rows` of each table (every row when rows is None). Six queries."""
    # A correlated count: only the rows shown pay for their hosts (a GROUP BY would count
    # every attempt's thousands of hosts before the LIMIT).
    hosts = (
        Attempt.hosts.through.objects.filter(attempt_id=OuterRef("pk"))
        .order_by()
        .values("attempt_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    attempts = run.attempts.annotate(
        host_count=Coalesce(Subquery(hosts, output_field=IntegerField()), 0)
    ).order_by("-number")
    interruptions = (
        Interruption.objects.filter(run=run)
        .select_related("root_cause", "attempt")
        .prefetch_related("hosts")
        .order_by("-occurred_at")
    )
    checkpoints = Checkpoint.objects.filter(run=run).select_related("attempt").order_by("-step")
    if rows is not None:
        attempts, interruptions, checkpoints = (
            attempts[:rows], interruptions[:rows], checkpoints[:rows]
        )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(_COUNT_SQL, [run.pk] * 3)
        attempt_count, interruption_count, checkpoint_count = cursor.fetchone()
    return RunPageTables(
        attempts=list(attempts)[::-1],
        attempt_count=attempt_count,
        interruptions=list(interruptions),
        interruption_count=interruption_count,
        checkpoints=list(checkpoints),
        checkpoint_count=checkpoint_count,
    )


def run_annotations(*, run: Run) -> list[Annotation]:
    """The run's annotations in chart order, with who wrote them."""
    return list(
        Annotation.objects.filter(run=run).select_related("created_by").order_by("step", "time")
    )


def run_chart_interruptions(*, run: Run) -> list[Interruption]:
    """The run's interruptions, newest first, with their root cause (the charts' labels)."""
    return list(
        Interruption.objects.filter(run=run).select_related("root_cause").order_by("-occurred_at")
    )


def run_chart_entries(*, run: Run) -> list[LogbookEntry]:
    """What the charts read of the run's logbook entries. With the run set on each row, so
    reading entry.run costs no query."""
    entries = list(
        LogbookEntry.objects.filter(run=run).only(
            "run", "occurred_at", "step", "step_end", "title", "kind"
        )
    )
    for entry in entries:
        entry.run = run
    return entries


def run_step_reached_at(*, run: Run) -> datetime | None:
    """When the run's latest step was first seen: the earliest wall time among its series'
    points at that step (one primary-key probe per series)."""
    if run.last_step is None:
        return None
    return MetricPoint.objects.filter(series__run=run, step=run.last_step).aggregate(
        at=Min("wall_time")
    )["at"]
