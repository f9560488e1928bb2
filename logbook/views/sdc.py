"""The SDC ledger page: every SDC replay record of the user's runs, with its weekly rate."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString

from logbook import fleet_charts
from logbook.models import SdcReplay
from logbook.selectors import sdc as sdc_selectors
from logbook.selectors.filters import FilterError
from logbook.selectors.sdc import HardwareFilters
from telemetry import run_cache
from telemetry.charts import as_payload, charts_script
from telemetry.models import Run
from telemetry.selectors import User, projects_for_user


def filter_menus(*, user: User) -> dict[str, Any]:
    """The runs, sites and clusters the filter bar offers (two queries)."""
    clusters = sdc_selectors.clusters_for_user(user=user)
    return {
        "menu_runs": list(
            Run.objects.filter(project__in=projects_for_user(user=user))
            .select_related("project")
            .order_by("project__slug", "name")
        ),
        "menu_clusters": [f"{c.site.name}/{c.name}" for c in clusters],
        "menu_sites": sorted({c.site.name for c in clusters}),
    }


@login_required
def sdc_ledger(request: HttpRequest) -> HttpResponse:
    error = ""
    try:
        filters = sdc_selectors.filters_parse(user=request.user, params=request.GET)
    except FilterError as exc:
        # Show everything with the problem named, rather than a bare 400 page.
        filters, error = HardwareFilters(), exc.in_page_words()
    # The ledger, its chart and its tables are drawn once per state of the records and the
    # runs' span (to the minute): at Llama scale they cost ~30 ms a view.
    key = sdc_selectors.sdc_ledger_key(user=request.user, filters=filters)
    body = run_cache.cached_html(
        f"sdc-ledger:{key}:{run_cache.query_key(request)}",
        lambda: _ledger_body(request, filters),
    )
    return render(
        request,
        "logbook/sdc.html",
        {
            "filters": filters,
            "error": error,
            "body": body,
            "verdicts": SdcReplay.Verdict.choices,
            **filter_menus(user=request.user),
        },
    )


def _ledger_body(request: HttpRequest, filters: HardwareFilters) -> str:
    ledger = sdc_selectors.sdc_ledger(user=request.user, filters=filters)
    return run_cache.render_piece(
        "logbook/_sdc_body.html",
        {
            "ledger": ledger,
            "rows": [{"record": record, **divergence_numbers(record)} for record in ledger.records],
            "charts_script": _chart_script(ledger),
        },
    )


def _chart_script(ledger: sdc_selectors.SdcLedger) -> SafeString:
    figure = fleet_charts.weekly_sdc_figure(
        ledger.weekly, per_week=ledger.rate.per_week, span_end=ledger.rate.span_end
    )
    return charts_script([{"id": "chart-weekly-sdc", "figure": as_payload(figure)}])


def divergence_numbers(record: SdcReplay) -> dict[str, Any]:
    """|observed - expected| and the run's tolerance, for records that compare two values."""
    if record.observed_value is None or record.expected_value is None:
        return {"difference": None, "tolerance": None}
    return {
        "difference": abs(record.observed_value - record.expected_value),
        "tolerance": record.run.sdc_tolerance,
    }
