"""Operator pages: MFU (or HFU) of a run, and its goodput with every badput bucket."""

from __future__ import annotations

from typing import Any

import pandas as pd
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render

from dashboard.query import (
    BadQuery,
    Window,
    axis_from_query,
    exclude_planned_from_query,
    window_from_query,
)
from dashboard.selectors import goodput as goodput_selectors
from dashboard.selectors import mfu as mfu_selectors
from telemetry import charts as telemetry_charts
from telemetry import efficiency_charts, goodput, goodput_slowdowns, run_cache, selectors

# Tables of one row per attempt show the latest ones; ?rows=all shows every one (a Llama 3
# scale run has hundreds of attempts; the JSON has them all).
ROWS_SHOWN = 50


def rows_bounded(rows: list[Any], params: QueryDict) -> tuple[list[Any], int, bool]:
    """The last ROWS_SHOWN rows (all with ?rows=all), how many there are, and whether some
    are left out."""
    if params.get("rows") == "all" or len(rows) <= ROWS_SHOWN:
        return rows, len(rows), False
    return rows[-ROWS_SHOWN:], len(rows), True


@login_required
def run_mfu(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    error = ""
    try:
        window = window_from_query(request.GET)
        axis = axis_from_query(request.GET)
    except BadQuery as exc:
        error, window, axis = exc.in_page_words(), Window(), "step"
    report, key = mfu_selectors.run_mfu_cached(run=run, window=window)
    label = report.inputs.label.value if report.inputs else "MFU"

    def draw() -> list[dict[str, Any]]:
        if report.inputs is None or not report.total_points:
            return []
        figure = efficiency_charts.mfu_figure_data(
            report.points,
            axis=axis,
            label=label,
            restarts=report.restarts,
            interruptions=report.interruptions,
        )
        return [{"id": "chart-mfu", "figure": figure}]

    charts = run_cache.cached(f"{key}:chart:v2:{axis}", draw)
    per_attempt, attempt_count, bounded = rows_bounded(
        report.per_attempt.to_dict("records"), request.GET
    )
    return render(
        request,
        "dashboard/mfu.html",
        {
            "run": run,
            "report": report,
            "label": label,
            "axis": axis,
            "error": error,
            "mean_pct": report.mean * 100,
            "per_attempt": [{**row, "mean_pct": row["mean"] * 100} for row in per_attempt],
            "attempt_count": attempt_count,
            "rows_bounded": bounded,
            "peak_tflops": report.inputs.peak_flops / 1e12 if report.inputs else None,
            "charts_payload": charts,
            "charts_script": telemetry_charts.charts_script(charts),
        },
    )


@login_required
def run_goodput(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    error = ""
    try:
        window = window_from_query(request.GET)
    except BadQuery as exc:
        error, window = exc.in_page_words(), Window()
    exclude_planned = exclude_planned_from_query(request.GET)
    report, key = goodput_selectors.run_goodput_cached(
        run=run, window=window, exclude_planned=exclude_planned
    )
    result = report.result
    buckets: list[dict[str, Any]] = []
    if result is not None and result.elapsed_s > 0:
        rows = [("productive", result.productive_s), *result.badput_s.items()]
        buckets = [
            {
                "bucket": name,
                "label": goodput.bucket_label(name),
                "seconds": seconds,
                "pct": 100 * seconds / result.elapsed_s,
                # "not reported" rather than 0.000 s / 0.00% when no input fed the bucket
                "reported": result.reported(name)
                and not (result.not_computable and name == goodput.OTHER),
            }
            for name, seconds in rows
        ]

    def draw() -> list[dict[str, Any]]:
        if result is None or result.elapsed_s <= 0:
            return []
        if result.not_computable:
            return []
        frame = pd.DataFrame([(b["bucket"], b["seconds"]) for b in buckets if b["seconds"] > 0],
                             columns=["bucket", "seconds"])  # fmt: skip
        charts = [{"id": "chart-buckets", "figure": efficiency_charts.buckets_figure_data(frame)}]
        if not report.rolling.empty:
            figure = efficiency_charts.goodput_over_time_figure_data(
                report.rolling, width_s=report.rolling_width_s
            )
            charts.append({"id": "chart-goodput-time", "figure": figure})
        return charts

    charts = run_cache.cached(f"{key}:charts", draw)
    per_attempt, attempt_count, bounded = rows_bounded(
        report.per_attempt.to_dict("records"), request.GET
    )
    segments, _, _ = rows_bounded(result.segments if result else [], request.GET)
    return render(
        request,
        "dashboard/goodput.html",
        {
            "run": run,
            "report": report,
            "result": result,
            "error": error,
            "buckets": buckets,
            # What the restarts cost (the time between the job stopping and training at pace
            # again) beside what running below the baseline cost (telemetry.goodput_slowdowns).
            "lost_to_interruptions_s": sum(
                result.badput_s.get(name, 0.0) for name in goodput.INTERRUPTION_BUCKETS
            )
            if result
            else 0.0,
            "lost_to_slowdowns_s": goodput_slowdowns.slowdown_seconds(result) if result else 0.0,
            "window_start": goodput_selectors.as_datetime(result.window_start) if result else None,
            "window_end": goodput_selectors.as_datetime(result.window_end) if result else None,
            "per_attempt": [{**row, "goodput_pct": row["goodput"] * 100} for row in per_attempt],
            "segments": segments,
            "attempt_count": attempt_count,
            "rows_bounded": bounded,
            "charts_payload": charts,
            # Only the figures drawn get a frame: a run with no steps has none, not two blanks.
            "chart_ids": {chart["id"] for chart in charts},
            "charts_script": telemetry_charts.charts_script(charts),
        },
    )
