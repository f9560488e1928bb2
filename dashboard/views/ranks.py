"""The run's per-rank timings page: heat map, per-step spread and straggler ledger."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe

from dashboard.query import BadQuery, Window, window_from_query
from dashboard.views.runs import run_live_version
from logbook.selectors.stragglers import straggler_records_for_run
from telemetry import rank_charts, run_cache, selectors
from telemetry.charts import as_payload, charts_script
from telemetry.models import Membership
from telemetry.selectors import ranks as rank_selectors


def draw_nothing() -> dict[str, Any]:
    return {"ids": [], "script": str(charts_script([])), "heat_bucket_s": None}


@login_required
def run_ranks(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    sections = rank_selectors.rank_sections(run=run)
    section = request.GET.get("section") or (sections[0] if sections else "step")
    error = ""
    if sections and section not in sections:
        error = f"Section: {section[:64]!r} is not one this run reported ({', '.join(sections)})"
        section = sections[0]
    try:
        window = window_from_query(request.GET)
    except BadQuery as exc:
        error, window = error or exc.in_page_words(), Window()
    status = 400 if error else 200

    def draw() -> dict[str, Any]:
        payload = []
        heatmap = rank_selectors.rank_heatmap(
            run=run, section=section, since=window.start, until=window.end
        )
        if heatmap is not None:
            figure = rank_charts.heatmap_figure(heatmap, section=section)
            payload.append({"id": "chart-rank-heatmap", "figure": as_payload(figure)})
        spread = rank_selectors.rank_spread(run=run, section=section)
        if spread:
            figure = rank_charts.spread_figure(spread, section=section)
            payload.append({"id": "chart-rank-spread", "figure": as_payload(figure)})
        # The script is cached escaped and serialised: at 16,384 ranks the heat map is 55,000
        # cells, and escaping them took longer than drawing them.
        return {
            "ids": [chart["id"] for chart in payload],
            "script": str(charts_script(payload)),
            "heat_bucket_s": heatmap.bucket_s if heatmap else None,
        }

    key = (
        f"{run_cache.run_version_key(run=run)}:ranks:{section}"
        f":{window.start and window.start.timestamp()}:{window.end and window.end.timestamp()}"
    )
    drawn = run_cache.cached(key, draw) if sections else draw_nothing()
    ids = set(drawn["ids"])
    return render(
        request,
        "dashboard/run_ranks.html",
        {
            "run": run,
            # Live: the straggler ledger redraws when a periodic pass names a rank.
            "live_url": reverse("dashboard:run-version", args=[run.pk]),
            "live_version": run_live_version(run),
            "sections": sections,
            "section": section,
            "error": error,
            "has_heatmap": "chart-rank-heatmap" in ids,
            "has_spread": "chart-rank-spread" in ids,
            "heat_bucket_s": drawn["heat_bucket_s"],
            "window": window,
            "records": list(straggler_records_for_run(run=run)[:500]),
            "can_quarantine": selectors.user_has_role(
                user=request.user, at_least=Membership.Role.ONCALL, project_id=run.project_id
            ),
            "threshold": settings.RANK_STRAGGLER_THRESHOLD,
            "windows": settings.RANK_STRAGGLER_WINDOWS,
            "bucket_s": settings.RANK_BUCKET_S,
            # Escaped by charts_script before it was cached.
            "charts_script": mark_safe(drawn["script"]),
        },
        status=status,
    )
