"""Reads for metric alert rules: the rules to evaluate, the runs each watches, a run's recent
points of a metric, the open firings, and the rules and firings the pages list."""

from __future__ import annotations

from datetime import datetime
from fnmatch import fnmatchcase

from django.db.models import OuterRef, QuerySet, Subquery

from logbook.models import AlertFiring, AlertRule
from telemetry.liveness import RUN_STALL_AFTER
from telemetry.models import Attempt, MetricPoint, MetricSeries, Project, Run

# The most points one evaluation reads of a series (newest first, through its primary key):
# an hour of a step a second. A faster job's baseline is its last POINTS_READ points.
POINTS_READ = 4000


def alert_rules_enabled() -> QuerySet[AlertRule]:
    return AlertRule.objects.filter(enabled=True).select_related("project").order_by("pk")


def alert_rule_runs(*, rule: AlertRule, now: datetime) -> list[tuple[Run, int]]:
    """The runs `rule` watches now, with their latest attempt's id: the project's runs whose
    name matches its pattern, whose latest attempt is running and that reported within
    RUN_STALL_AFTER (a silent run is the stall notification's business)."""
    latest = Attempt.objects.filter(run=OuterRef("pk")).order_by("-number")
    runs = (
        Run.objects.filter(project_id=rule.project_id, last_seen_at__gte=now - RUN_STALL_AFTER)
        .annotate(
            latest_status=Subquery(latest.values("status")[:1]),
            latest_pk=Subquery(latest.values("pk")[:1]),
        )
        .filter(latest_status=Attempt.Status.RUNNING)
        .select_related("project")
        .order_by("pk")
    )
    return [
        (run, run.latest_pk) for run in runs if not rule.runs or fnmatchcase(run.name, rule.runs)
    ]


def recent_points(
    *, run_id: int, attempt_id: int, metric: str, since: datetime
) -> list[tuple[datetime, float, int]]:
    """(wall time, value, step) of the attempt's `metric` measured since `since`, newest step
    first, at most POINTS_READ. Points without a wall time are left out (alert durations are
    times); a NULL value is NaN."""
    series = MetricSeries.objects.filter(run_id=run_id, attempt_id=attempt_id, name=metric)
    series = series.values("pk")[:1]
    rows = (
        MetricPoint.objects.filter(series_id=Subquery(series))
        .order_by("-step")
        .values_list("wall_time", "value", "step")[:POINTS_READ]
    )
    return [
        (at, float("nan") if value is None else value, step)
        for at, value, step in rows
        if at is not None and at >= since
    ]


def alert_firing_open(*, rule: AlertRule, run: Run) -> AlertFiring | None:
    return AlertFiring.objects.filter(rule=rule, run=run, resolved_at__isnull=True).first()


def alert_rules_for_project(*, project: Project) -> QuerySet[AlertRule]:
    return AlertRule.objects.filter(project=project).order_by("name")


def alert_firings_for_project(*, project: Project, limit: int = 50) -> QuerySet[AlertFiring]:
    return (
        AlertFiring.objects.filter(rule__project=project)
        .select_related("rule", "run")
        .order_by("-fired_at")[:limit]
    )
