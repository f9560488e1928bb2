"""Dashboard pages: the run list and the run page."""

from __future__ import annotations

import json

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
    attempts = list(selectors.run_attempts(run=run))
    restarts = pd.DataFrame(
        [
            {"attempt": a.number, "step": a.resumed_from_step}
            for a in attempts
            if a.resumed_from_step is not None
        ],
        columns=["attempt", "step"],
    )
    # Reverse relations declared by logbook (see telemetry.selectors' docstring).
    interruptions = list(
        run.interruptions.select_related("root_cause", "attempt")  # type: ignore[attr-defined]
        .prefetch_related("hosts")
        .order_by("-occurred_at")
    )
    checkpoints = list(run.checkpoints.select_related("attempt").order_by("-step"))  # type: ignore[attr-defined]
    interruption_marks = pd.DataFrame(
        [{"step": i.step, "label": i.root_cause.name} for i in interruptions if i.step is not None],
        columns=["step", "label"],
    )
    figures = []
    for name in selectors.run_metric_names(run=run)[:MAX_CHARTS]:
        per_attempt = selectors.series_for_run(run=run, name=name, max_points=CHART_MAX_POINTS)
        frame = pd.DataFrame(
            {
                "attempt": [one.attempt for one in per_attempt for _ in range(one.steps.size)],
                "step": [s for one in per_attempt for s in one.steps.tolist()],
                "value": [v for one in per_attempt for v in one.values.tolist()],
            }
        )
        figure = charts.metric_figure(
            frame,
            title=name,
            restarts=restarts,
            interruptions=interruption_marks if name == "loss" else None,
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
            "attempts": attempts,
            "interruptions": interruptions,
            "checkpoints": checkpoints,
            "figures": figures,
            "charts_payload": [{"id": f["id"], "figure": f["figure"]} for f in figures],
        },
    )
