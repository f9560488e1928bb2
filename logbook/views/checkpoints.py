"""A run's checkpoint history and the checkpoint interval advisor (Young/Daly)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from logbook import charts
from logbook.checkpoint_interval import ADVICE_FIELDS, advice_as_dict
from logbook.paging import Counted, table_page
from logbook.selectors import checkpoints as selectors
from logbook.selectors.failures import FailureFilters, FilterError, failure_filters_parse
from logbook.views.failures import derived_display
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
    errors: dict[str, str] = {}
    try:
        filters = failure_filters_parse(request.GET)
    except FilterError as exc:
        filters, errors = FailureFilters(), exc.errors
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
    # The chart and the advisor cover every checkpoint; the table shows a page of them.
    history = Counted(
        selectors.checkpoint_history(run=run, start=filters.start, end=filters.end), len(frame)
    )
    return render(
        request,
        "logbook/checkpoints.html",
        {
            "run": run,
            "filters": filters,
            "errors": errors,
            "history": table_page(request, history),
            "advice": {
                name: derived_display(body[name], ADVICE_LABELS[name]) for name in ADVICE_FIELDS
            },
            "charts_payload": payload,
        },
    )
