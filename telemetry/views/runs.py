"""Dashboard pages: the run list and the run page."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from telemetry import charts, selectors

CHART_MAX_POINTS = 1500
MAX_CHARTS = 12


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = selectors.runs_for_user(user=request.user)
    return render(request, "telemetry/run_list.html", {"runs": runs})


@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    axis: charts.Axis = "time" if request.GET.get("axis") == "time" else "step"
    attempts = list(selectors.run_attempts(run=run))
    # Reverse relations declared by logbook (see telemetry.selectors' docstring).
    interruptions = list(
        run.interruptions.select_related("root_cause", "attempt")  # type: ignore[attr-defined]
        .prefetch_related("hosts")
        .order_by("-occurred_at")
    )
    checkpoints = list(run.checkpoints.select_related("attempt").order_by("-step"))  # type: ignore[attr-defined]
    marks = _chart_marks(attempts, interruptions, axis)
    annotations = list(run.annotations.select_related("created_by").order_by("step", "time"))  # type: ignore[attr-defined]
    entries = list(
        run.logbook_entries.only("occurred_at", "step", "step_end", "title", "kind")  # type: ignore[attr-defined]
    )
    notes = charts.chart_marks(annotations, entries, axis)
    can_annotate = (
        selectors.projects_for_user(user=request.user, roles=selectors.OPERATOR_ROLES)
        .filter(pk=run.project_id)
        .exists()
    )
    figures = []
    for name in selectors.run_metric_names(run=run)[:MAX_CHARTS]:
        per_attempt = selectors.series_for_run(run=run, name=name, max_points=CHART_MAX_POINTS)
        frame = pd.DataFrame(
            {
                "attempt": np.concatenate(
                    [np.full(one.steps.size, one.attempt) for one in per_attempt] or [[]]
                ),
                "x": np.concatenate(
                    [one.steps if axis == "step" else one.wall_times for one in per_attempt] or [[]]
                ),
                "value": np.concatenate([one.values for one in per_attempt] or [[]]),
            }
        )
        if axis == "time":
            frame = frame[frame["x"].notna()]
        figure = charts.metric_figure(
            frame,
            title=name,
            axis=axis,
            restarts=marks.restarts,
            interruptions=marks.interruptions if name == "loss" else None,
            downtime=marks.downtime,
            notes=notes,
        )
        figures.append(
            {
                "id": f"chart-{len(figures)}",
                "name": name,
                "total_points": sum(one.total_points for one in per_attempt),
                # Through plotly's encoder: it turns numpy arrays into lists.
                "figure": json.loads(figure.to_json()),
            }
        )
    return render(
        request,
        "telemetry/run_detail.html",
        {
            "run": run,
            "axis": axis,
            "attempts": attempts,
            "interruptions": interruptions,
            "checkpoints": checkpoints,
            "quarantined": selectors.run_quarantined_hardware(run=run),
            "annotations": annotations,
            "can_annotate": can_annotate,
            "figures": figures,
            "charts_payload": [{"id": f["id"], "figure": f["figure"]} for f in figures],
        },
    )


@dataclass(frozen=True)
class _Marks:
    restarts: pd.DataFrame
    interruptions: pd.DataFrame
    downtime: pd.DataFrame | None


def _chart_marks(attempts: list[Any], interruptions: list[Any], axis: charts.Axis) -> _Marks:
    """Where attempts resumed, where the job was interrupted and (on the time axis) the
    downtime between one attempt's end and the next one's start."""
    if axis == "step":
        restarts = [(a.number, a.resumed_from_step) for a in attempts if a.resumed_from_step]
        stops = [(i.step, i.root_cause.name) for i in interruptions if i.step is not None]
        return _Marks(
            pd.DataFrame(restarts, columns=["attempt", "x"]),
            pd.DataFrame(stops, columns=["x", "label"]),
            None,
        )
    restarts = [(a.number, charts.naive_utc(a.started_at)) for a in attempts[1:] if a.started_at]
    stops = [(charts.naive_utc(i.occurred_at), i.root_cause.name) for i in interruptions]
    downtime = [
        (charts.naive_utc(previous.ended_at), charts.naive_utc(following.started_at))
        for previous, following in pairwise(attempts)
        if previous.ended_at and following.started_at and previous.ended_at < following.started_at
    ]
    return _Marks(
        pd.DataFrame(restarts, columns=["attempt", "x"]),
        pd.DataFrame(stops, columns=["x", "label"]),
        pd.DataFrame(downtime, columns=["x0", "x1"]),
    )
