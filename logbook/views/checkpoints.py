"""A run's checkpoint history and the checkpoint interval advisor (Young/Daly)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from logbook import charts
from logbook.checkpoint_interval import ADVICE_FIELDS, advice_as_dict
from logbook.selectors import checkpoints as selectors
from logbook.selectors.failures import FailureFilters, failure_filters_parse
from logbook.selectors.filters import FilterError
from logbook.views.failures import derived_display
from telemetry.charts import charts_script
from telemetry.models import Run
from telemetry.paging import Counted, table_page
from telemetry.selectors import run_get_for_user

ADVICE_LABELS = {
    "mtbf_s": "Measured job MTBF (M)",
    "delta_s": "Measured blocking save cost (δ)",
    "restart_cost_s": "Restart cost (R)",
    "young_s": "Young's interval",
    "daly_s": "Daly's interval (recommended)",
    "actual_period_s": "Actual time between saves (τ + δ)",
    "actual_tau_s": "Actual interval (τ_actual)",
    "median_step_gap": "Actual step gap between saves",
    "waste_at_actual": "Expected waste at the actual interval",
    "waste_at_daly": "Expected waste at Daly's interval",
}


@login_required
def run_checkpoints(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_get_for_user(user=request.user, run_id=run_id)
    error = ""
    try:
        filters = failure_filters_parse(request.GET)
    except FilterError as exc:
        filters, error = FailureFilters(), exc.in_page_words()
    # The advisor, the charts and the count cover every checkpoint in the window and cost
    # most of the page: computed once per state of the run's data (see the selector).
    summary = selectors.run_checkpoints_cached(
        run=run,
        start=filters.start,
        end=filters.end,
        name="page",
        compute=lambda: _summary(run, filters),
    )
    # The table shows a page of them.
    history = Counted(
        selectors.checkpoint_history(run=run, start=filters.start, end=filters.end),
        summary["count"],
    )
    return render(
        request,
        "logbook/checkpoints.html",
        {
            "run": run,
            "filters": filters,
            "error": error,
            "history": table_page(request, history),
            "advice": summary["advice"],
            "chart_ids": summary["chart_ids"],
            "charts_script": summary["charts_script"],
        },
    )


def _summary(run: Run, filters: FailureFilters) -> dict[str, Any]:
    """The advisor's rows, the checkpoint count, the charts' ids and their script tag."""
    result = selectors.run_checkpoints(run=run, start=filters.start, end=filters.end)
    advice = result.advice
    body = advice_as_dict(advice)
    frame = result.checkpoints
    payload = []
    if frame["saved_at"].notna().any():
        payload.append({"id": "chart-save-cost", "figure": charts.save_cost_figure(frame)})
    if advice.curve is not None:
        figure = charts.waste_curve_figure(
            advice.curve,
            recommended_s=advice.daly_s.value,
            actual_s=advice.actual_tau_s.value,
            young_s=advice.young_s.value,
        )
        payload.append({"id": "chart-waste", "figure": figure})
    return {
        "count": len(frame),
        "advice": {
            name: derived_display(body[name], ADVICE_LABELS[name]) for name in ADVICE_FIELDS
        },
        "chart_ids": [chart["id"] for chart in payload],
        "charts_script": charts_script(payload),
    }
