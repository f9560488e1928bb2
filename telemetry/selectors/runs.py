"""Small reads of runs for the hot paths and the live pages: a run's name, an attempt's last
step, and the figure the live pages poll."""

from __future__ import annotations

from django.db import connection
from django.db.models import Count, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from telemetry.liveness import RUN_STALL_AFTER
from telemetry.models import MetricPoint, MetricSeries, Project, Run
from telemetry.selectors.access import User, projects_for_user


def run_name(*, run_id: int) -> str:
    """A run's name by its id: one small statement without a model instance, for ingest's
    per-request paths (the MLflow path reads it once a log-batch, ~0.1 ms where the ORM's
    `.get()` took ~0.35 ms of web CPU)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT name FROM {Run._meta.db_table} WHERE id = %s", [run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    return str(row[0])


def attempt_last_step(*, run_id: int, number: int) -> int | None:
    """The highest step attempt `number` of the run logged a metric for (None: none yet):
    each of its series' last step through the points' primary key (a backward scan each),
    never a scan of the points."""
    last = MetricPoint.objects.filter(series=OuterRef("pk")).order_by("-step").values("step")[:1]
    steps = (
        MetricSeries.objects.filter(run_id=run_id, attempt__number=number)
        .annotate(last=Subquery(last))
        .values_list("last", flat=True)
    )
    found = [step for step in steps if step is not None]
    return max(found) if found else None


def projects_live_version(*, user: User) -> str:
    """What the run list, triage queue and fleet health poll: one figure that changes when any
    run or the fleet of the user's projects changes (a new run adds to the count). Pages put
    it in their HTML, read before their data: a change committed between the page's drawing
    and its first poll then still moves it (the first poll used to take its figure as the
    starting point, and such a change was never shown)."""
    projects = projects_for_user(user=user).values("pk")
    fleet = Project.objects.filter(pk__in=projects).aggregate(v=Sum("fleet_version"))["v"]
    # Runs that went silent change what the lists show without any write: counted, so an
    # open list redraws when one crosses the stall threshold.
    quiet_before = timezone.now() - RUN_STALL_AFTER
    runs = Run.objects.filter(project__in=projects).aggregate(
        n=Count("pk"),
        v=Sum("data_version"),
        silent=Count("pk", filter=Q(last_seen_at__lt=quiet_before)),
    )
    return f"{fleet or 0}.{runs['n']}.{runs['v'] or 0}.{runs['silent']}"
