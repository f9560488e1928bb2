"""Reads of the MLflow tracking API: a run by its MLflow id (only the token's project's), its
latest metrics and a metric's history across attempts, a page at a time."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery

from ingest.mlflow_checks import (
    DEFAULT_EXPERIMENT_ID,
    DEFAULT_EXPERIMENT_NAME,
    MAX_HISTORY_PAGE,
    MlflowError,
    datetime_ms,
    invalid,
    json_float,
)
from ingest.models import MlflowExperiment, MlflowRun
from telemetry.models import MetricPoint, MetricSeries, Project
from telemetry.selectors import projects_for_user


def experiment_public_id(experiment: MlflowExperiment) -> str:
    if experiment.name == DEFAULT_EXPERIMENT_NAME:
        return DEFAULT_EXPERIMENT_ID
    return str(experiment.pk)


def mlflow_run_find(queryset: QuerySet[MlflowRun], project: Project, run_id: Any) -> MlflowRun:
    if not isinstance(run_id, str) or not run_id:
        raise invalid("Missing value for required parameter 'run_id'.")
    # Another project's run does not exist for this token (never a 403).
    mlflow_run = (
        queryset.select_related("experiment", "run")
        .filter(run_uuid=run_id, experiment__project=project)
        .first()
    )
    if mlflow_run is None:
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Run with id={run_id} not found")
    return mlflow_run


def mlflow_run_get(*, project: Project, run_id: Any) -> MlflowRun:
    return mlflow_run_find(MlflowRun.objects.all(), project, run_id)


def run_latest_metrics(*, mlflow_run: MlflowRun) -> list[dict[str, Any]]:
    """MLflow's run.data.metrics: per name, the point at the highest step (the later attempt
    on a tie). One query: three index lookups per series, none over all points."""
    latest = MetricPoint.objects.filter(series=OuterRef("pk")).order_by("-step")
    rows = (
        MetricSeries.objects.filter(run_id=mlflow_run.run_id)
        .annotate(
            last_step=Subquery(latest.values("step")[:1]),
            last_value=Subquery(latest.values("value")[:1]),
            last_time=Subquery(latest.values("wall_time")[:1]),
        )
        .filter(last_step__isnull=False)
        .values_list("name", "attempt__number", "last_step", "last_value", "last_time")
    )
    best: dict[str, tuple[int, int, float | None, datetime | None]] = {}
    for name, number, step, value, moment in rows:
        if name not in best or (step, number) > best[name][:2]:
            best[name] = (step, number, value, moment)
    return [
        {
            "key": name,
            "value": json_float(value),
            "timestamp": datetime_ms(moment) or 0,
            "step": step,
        }
        for name, (step, _, value, moment) in sorted(best.items())
    ]


def metric_history(
    *, mlflow_run: MlflowRun, key: str, max_results: int | None, page_token: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """All points of one metric across the run's attempts, in (attempt, step) order, a page
    at a time. The page token is the last (attempt, step) returned (a keyset, so a page costs
    the same however deep it is)."""
    limit = MAX_HISTORY_PAGE if not max_results else min(max_results, MAX_HISTORY_PAGE)
    points = MetricPoint.objects.filter(
        series__run_id=mlflow_run.run_id, series__name=key
    ).order_by("series__attempt__number", "step")
    if page_token:
        match = re.fullmatch(r"(\d+):(\d+)", page_token)
        if match is None:
            raise invalid(f"Invalid page token {page_token!r:.60}.")
        number, step = int(match[1]), int(match[2])
        points = points.filter(
            Q(series__attempt__number__gt=number) | Q(series__attempt__number=number, step__gt=step)
        )
    rows = list(
        points.values_list("series__attempt__number", "step", "value", "wall_time")[: limit + 1]
    )
    next_token = f"{rows[limit - 1][0]}:{rows[limit - 1][1]}" if len(rows) > limit else None
    metrics = [
        {
            "key": key,
            "value": json_float(value),
            "timestamp": datetime_ms(moment) or 0,
            "step": step,
            "run_id": mlflow_run.run_uuid,
        }
        for _, step, value, moment in rows[:limit]
    ]
    return metrics, next_token


def mlflow_run_for_user(*, user: Any, run_uuid: str) -> MlflowRun | None:
    """The MLflow run of this id in one of the user's projects, with its Chronicle run."""
    return (
        MlflowRun.objects.filter(run_uuid=run_uuid, run__project__in=projects_for_user(user=user))
        .select_related("run")
        .first()
    )
