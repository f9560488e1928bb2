"""Reads for the run page's tables: the latest attempts, interruptions and checkpoints of a
run, with how many there are, in a fixed number of queries whatever the run's size.

Interruptions and checkpoints are logbook's, reached through the reverse relations it
declares (by name, without importing logbook), as telemetry.selectors does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from telemetry.models import Attempt, Run


@dataclass(frozen=True)
class RunPageTables:
    attempts: list[Attempt]  # by number, each with host_count
    attempt_count: int
    interruptions: list[Any]  # newest first, with root cause, attempt and hosts
    interruption_count: int
    checkpoints: list[Any]  # highest step first, with attempt
    checkpoint_count: int

    @property
    def bounded(self) -> bool:
        """Whether a table leaves rows out."""
        return (
            len(self.attempts) < self.attempt_count
            or len(self.interruptions) < self.interruption_count
            or len(self.checkpoints) < self.checkpoint_count
        )


def _count_sql() -> str:
    interruptions = Run._meta.get_field("interruptions").related_model._meta.db_table  # type: ignore[union-attr]
    checkpoints = Run._meta.get_field("checkpoints").related_model._meta.db_table  # type: ignore[union-attr]
    return (
        f"SELECT (SELECT count(*) FROM {Attempt._meta.db_table} WHERE run_id = %s), "
        f"(SELECT count(*) FROM {interruptions} WHERE run_id = %s), "
        f"(SELECT count(*) FROM {checkpoints} WHERE run_id = %s)"
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
        run.interruptions.select_related("root_cause", "attempt")  # type: ignore[attr-defined]
        .prefetch_related("hosts")
        .order_by("-occurred_at")
    )
    checkpoints = run.checkpoints.select_related("attempt").order_by("-step")  # type: ignore[attr-defined]
    if rows is not None:
        attempts, interruptions, checkpoints = (
            attempts[:rows], interruptions[:rows], checkpoints[:rows]
        )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(_count_sql(), [run.pk] * 3)
        attempt_count, interruption_count, checkpoint_count = cursor.fetchone()
    return RunPageTables(
        attempts=list(attempts)[::-1],
        attempt_count=attempt_count,
        interruptions=list(interruptions),
        interruption_count=interruption_count,
        checkpoints=list(checkpoints),
        checkpoint_count=checkpoint_count,
    )
