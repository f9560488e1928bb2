"""The logbook's part of the failure breakdown page (the Llama 3 Table 5 view): what broke, how
often, how fast it was fixed, and what that means at another scale; and how the logbook's
pages write a derived number. The page is served by dashboard.views.failures."""

from __future__ import annotations

from typing import Any

import pandas as pd
from django.http import HttpRequest

from logbook import charts, spares
from logbook.failure_maths import RATE_NAMES, failure_report_as_dict
from logbook.selectors import failures as selectors
from logbook.selectors.failures import FailureFilters
from logbook.selectors.filters import FilterError
from telemetry import display, run_cache
from telemetry.charts import charts_script

RATE_LABELS = {
    "observed_days": "Observed time",
    "accelerator_days": "Accelerator-days",
    "interruptions_per_day": "Interruptions per day (all)",
    "unexpected_per_day": "Unexpected interruptions per day",
    "job_mtbf_h": "Job MTBF",
    "mttr_min": "MTTR",
    "time_to_detect_min": "Mean time to detect",
    "failure_rate_per_1000_accelerator_days": "Failure rate per accelerator",
}


number_text = display.number


def _hundredths(value: float) -> str:
    """Two decimals at most, trailing zeros dropped: 622.08 stays 622.08 (a save time cut
    to whole or tenth seconds misreports the measured cost), 622.10 reads 622.1."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def derived_display(derived: dict[str, Any], label: str) -> dict[str, Any]:
    """A Derived (as a dict) with its value, unit and inputs as text, for the templates.
    Durations in the unit that fits (so MTBF reads the same on every page, whatever unit it
    was computed in) and fractions as percent, the units people think in."""
    value, unit = derived["value"], derived["unit"]
    text = number_text(value)
    if value is not None and unit in display.TIME_UNITS_S:
        text = display.duration(value * display.TIME_UNITS_S[unit])
        if unit == "s" and value >= 120:
            # Measured seconds (save and restore times) keep their hundredths beside the
            # readable unit: 622.08 s is not 10.4 min's rounding.
            text = f"{text} ({_hundredths(value)} s)"
    elif value is not None and unit == "fraction":
        text = f"{100 * value:.2f}%"
    elif value is not None and unit:
        text = f"{text} {unit}" if unit != "%" else f"{value:.1f}%"
    return {
        "label": label,
        "text": text,
        "formula": derived["formula"],
        "inputs": [(name, number_text(v)) for name, v in derived["inputs"].items()],
        "note": derived["note"],
    }


def page_context(request: HttpRequest) -> tuple[FailureFilters, dict[str, Any]]:
    """The page's filters and what its template shows of the logbook's: the filter form, and
    the breakdown, rates, projection and spares as one rendered piece. The page itself is
    dashboard.views.failures, which sets the slowdowns' loss beside the interruptions'."""
    error = ""
    try:
        filters = selectors.failure_filters_parse(request.GET)
    except FilterError as exc:
        # Show everything with the problem named rather than a bare 400 page.
        filters, error = FailureFilters(), exc.in_page_words()
    # The breakdown, its chart and its tables are drawn once per state of the incidents in
    # scope and minute (see failure_report_key): ~40 ms a view at Llama scale.
    key = selectors.failure_report_key(user=request.user, filters=filters)
    body = run_cache.cached_html(
        f"failures-page:{key}:{run_cache.query_key(request)}",
        lambda: _breakdown_body(request, filters),
    )
    return filters, {
        "filters": filters,
        "error": error,
        "options": selectors.filter_options(user=request.user),
        "body": body,
    }


def _breakdown_body(request: HttpRequest, filters: FailureFilters) -> str:
    report = selectors.failure_report_for_user(user=request.user, filters=filters)
    data = failure_report_as_dict(report)
    table = data["breakdown"]
    payload = []
    if table["rows"]:
        figure = charts.breakdown_figure(pd.DataFrame(table["rows"]))
        payload.append({"id": "chart-breakdown", "figure": figure})
    rates = [derived_display(data["rates"][name], RATE_LABELS[name]) for name in RATE_NAMES]
    return run_cache.render_piece(
        "logbook/_failures_body.html",
        {
            "filters": filters,
            "data": data,
            "rates": rates,
            "planned_percent": derived_display(table["planned_percent"], "Planned share"),
            "hardware_share": derived_display(table["hardware_share"], "Hardware share"),
            "projection": derived_display(data["projection"], "Projected job MTBF"),
            "spares": _spares(request, filters, data),
            "has_chart": bool(payload),
            "charts_script": charts_script(payload),
        },
    )


# The spares calculator's inputs (?spare_days, ?repair_h, ?wait_h) and their bounds.
SPARE_INPUTS = {"spare_days": (30, 1, 3650), "repair_h": (48, 1, 8760), "wait_h": (1, 0, 8760)}


def _spares(
    request: HttpRequest, filters: FailureFilters, data: dict[str, Any]
) -> dict[str, Any] | None:
    """Expected failures in the next days and the spare hosts that keep the restart wait
    under a target, for a job of the projection's size at the measured failure rate
    (logbook.spares); None without a measured rate."""
    rate = data["rates"]["failure_rate_per_1000_accelerator_days"]["value"]
    if not rate:
        return None
    values = {}
    for name, (default, low, high) in SPARE_INPUTS.items():
        raw = request.GET.get(name, "")
        ok = raw.isascii() and raw.isdigit() and low <= int(raw) <= high
        values[name] = int(raw) if ok else default
    accelerators = filters.projection_accelerators
    expected = spares.expected_failures(
        accelerators=accelerators, rate_per_1000_days=rate, days=values["spare_days"]
    )
    hosts = spares.spare_hosts(
        accelerators=accelerators,
        rate_per_1000_days=rate,
        repair_hours=values["repair_h"],
        wait_target_hours=values["wait_h"],
    )
    return {
        **values,
        "accelerators": accelerators,
        "expected": derived_display(expected.as_dict(), "Expected failures"),
        "hosts": derived_display(hosts.as_dict(), "Spare hosts"),
        "miss": spares.DEFAULT_MISS,
        # The page's other filters, kept by the calculator's form.
        "keep": [(k, v) for k, v in request.GET.items() if k not in SPARE_INPUTS],
    }
