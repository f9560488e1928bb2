"""The run list and the run page."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

import pandas as pd
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from dashboard import charts as marks_charts
from dashboard import config_diff, diurnal, metric_sections, power_charts
from dashboard.selectors import runs as run_selectors
from diagnosis import slowdown_rules
from diagnosis.models import Slowdown
from diagnosis.selectors import slowdowns as slowdown_selectors
from logbook.selectors import failures as failure_selectors
from logbook.selectors import fleet as fleet_selectors
from telemetry import charts, liveness, metric_charts, run_cache, selectors
from telemetry.choices import experiment_of, labels_besides_experiment
from telemetry.liveness import RUN_STALL_AFTER
from telemetry.models import Attempt, Membership, Run
from telemetry.paging import table_page
from telemetry.selectors import dcgm as dcgm_selectors
from telemetry.selectors import series as series_selectors

CHART_MAX_POINTS = 1500


# The run list's columns besides the run's name, in order; ?cols= picks some.
RUN_COLUMNS = {
    "project": "Project",
    "tags": "Tags",
    "status": "Status",
    "attempt": "Attempt",
    "step": "Latest step",
    "interruptions": "Interruptions",
    "lost_interruptions": "Lost to interruptions",
    "slowdowns": "Lost to slowdowns",
    "loss": "Last loss",
    "last_seen": "Last seen",
}
RUN_LIST_PAGE_SIZE = 50
# Columns read for the page's rows only (not an order the list's query can take).
UNSORTED_COLUMNS = frozenset({"lost_interruptions", "slowdowns"})
_STATUS_LABELS = dict(Attempt.Status.choices)


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    error = ""
    live_version = selectors.projects_live_version(user=request.user)  # before the data
    try:
        query = run_selectors.RunListQuery.parse(request.GET)
    except run_selectors.RunListError as exc:
        query, error = run_selectors.RunListQuery(), str(exc)
    runs = run_selectors.runs_list(user=request.user, query=query)
    page = table_page(request, runs, size=RUN_LIST_PAGE_SIZE)
    now = timezone.now()
    for run in page.rows:
        # The run page's words for a running run gone quiet ("silent since ...") or stuck at
        # one step ("no progress since ..."), so the list does not call a run "running" that
        # the run page does not.
        run.live = _run_liveness(run, run.current_status, now, run.hung_since)
    # GPU-hours each run lost to interruptions (the logbook's figure, as the failure page
    # counts it) and below its own baseline (diagnosis's slowdowns): two queries a page.
    run_ids = [run.pk for run in page.rows]
    stopped = failure_selectors.interruption_gpu_hours_by_run(run_ids=run_ids)
    slowed = slowdown_selectors.gpu_hours_lost_by_run(run_ids=run_ids)
    for run in page.rows:
        run.interruption_gpu_hours = stopped.get(run.pk)
        run.slowdown_gpu_hours = slowed.get(run.pk)
    chosen = [c for c in request.GET.getlist("cols") if c in RUN_COLUMNS] or list(RUN_COLUMNS)
    return render(
        request,
        "dashboard/run_list.html",
        {
            "live_version": live_version,
            "page": page,
            "runs": page.rows,
            "query": query,
            "error": error,
            "statuses": run_selectors.RUN_STATUS_CHOICES,
            "tags_in_use": (tags_in_use := run_selectors.run_tags_in_use(user=request.user)),
            "experiments": [name for name in (experiment_of([tag]) for tag in tags_in_use) if name],
            "cols": {key: key in chosen for key in RUN_COLUMNS},
            "columns": [
                {
                    "key": key,
                    "label": label,
                    "shown": key in ("name", *chosen),
                    "sortable": key not in UNSORTED_COLUMNS,
                    **_sort_link(request, key),
                }
                for key, label in {"name": "Run", **RUN_COLUMNS}.items()
            ],
        },
    )


def _sort_link(request: HttpRequest, key: str) -> dict[str, str]:
    """The header link that sorts by `key` (descending first for numbers and times, then
    flipping), and the arrow showing the current order."""
    current = request.GET.get("sort") or "-last_seen"
    ascending_first = key in ("project", "name", "status")
    if current.lstrip("-") == key:
        target = key if current.startswith("-") else f"-{key}"
        arrow = " \u2193" if current.startswith("-") else " \u2191"
    else:
        target, arrow = (key if ascending_first else f"-{key}"), ""
    params = request.GET.copy()
    params["sort"] = target
    params.pop("page", None)
    return {"url": f"?{params.urlencode()}", "arrow": arrow}


# Tables of attempts, interruptions and checkpoints show the latest ones; ?rows=all shows
# every one (a Llama 3 scale run has hundreds of each, and thousands of checkpoints).
ROWS_SHOWN = 20
# Power and heat are read again once per DCGM summary bucket (below).
EXTRAS_BUCKET_S = 300


def extras_bucket() -> int:
    """The summary bucket the run page's power and heat figures are cached for, now."""
    return int(timezone.now().timestamp()) // EXTRAS_BUCKET_S


@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    axis: charts.Axis = "time" if request.GET.get("axis") == "time" else "step"
    # Read per state of the run's data, as the charts are: these two reads were half of a
    # warm Llama-scale run page's database time (the reached step's MIN over every series).
    version = run_cache.run_version_key(run=run)
    names = run_cache.cached(
        f"run-metric-names:{version}", lambda: series_selectors.run_metric_names(run=run)
    )
    pinned = metric_sections.pinned_from_query(request.GET.get("metrics", ""))
    drawn = metric_sections.shown(names, pinned)
    drawn_key = hashlib.sha1("\n".join(drawn).encode()).hexdigest()[:16]
    shown = None if request.GET.get("rows") == "all" else ROWS_SHOWN
    # The tables and what touched quarantined hardware are read and drawn once per state of
    # the run's data (and, for quarantines, of its project's fleet): ~40 ms of a warm
    # Llama-scale view, for rows that change when the run does.
    tables = run_cache.cached_html(
        f"run-page-tables:{version}:{axis}:{shown}",
        lambda: _tables_html(run, axis, run_selectors.run_page_tables(run=run, rows=shown)),
    )
    counts = run_cache.cached(
        f"run-table-counts:{version}", lambda: run_selectors.run_table_counts(run=run)
    )
    latest = _latest_attempt(run)
    quarantined = run_cache.cached(
        f"run-quarantined:{version}:{run.project.fleet_version}",
        lambda: fleet_selectors.quarantined_hardware_for_run(run=run),
    )
    annotations = run_selectors.run_annotations(run=run)
    can_annotate = selectors.user_has_role(
        user=request.user, at_least=Membership.Role.ONCALL, project_id=run.project_id
    )
    # Cached as the <script> element itself: a megabyte of figures costs tens of
    # milliseconds to unpickle and encode again on every request, a string almost nothing.
    charts_block = run_cache.cached(
        f"run-page-charts:v3:{version}:{axis}:{drawn_key}",
        lambda: _charts_block(_figures(run, axis, annotations, drawn)),
    )
    # Apart from the metrics': DCGM pushes do not change the run's data version, so power and
    # heat are read again once per 5-minute summary bucket, whatever the run's data does (a
    # live run changes version with every batch).
    extras = run_cache.cached(
        f"run-page-extras:v2:{run.pk}:{extras_bucket()}",
        lambda: _extra_figures(run),
    )
    live = _liveness(run, latest)
    # Not cached: its confirm form carries the reader's CSRF token (a few rows, two queries).
    slowdowns = mark_safe(_slowdowns_html(request, run, names, can_decide=can_annotate))
    return render(
        request,
        "dashboard/run_detail.html",
        {
            "run": run,
            "axis": axis,
            "live": live,
            "live_version": _live_version(run, live),
            "live_url": reverse("dashboard:run-version", args=[run.pk]),
            "metric_count": len(names),
            "metric_sections": metric_sections.sections(names),
            "drawn": drawn,
            "pinned": ",".join(drawn) if pinned else "",
            "tables": tables,
            "slowdowns": slowdowns,
            "attempt_count": counts[0],
            "interruption_count": counts[1],
            "quarantined": quarantined,
            "annotations": annotations,
            "can_annotate": can_annotate,
            "figures": charts_block["figures"],
            # Escaped by charts_script when it was cached.
            "charts_script": mark_safe(charts_block["script"]),
            "extra_figures": [{"id": one["id"], "name": one["name"]} for one in extras],
            "extra_charts_script": charts.charts_script(
                [{"id": one["id"], "figure": one["figure"]} for one in extras],
                element_id="charts-data-more",
            ),
            # What the job said about itself (MLflow params land here), one row per setting.
            "config_rows": sorted(config_diff.flatten(run.config or {}).items()),
            # The experiment has its own line, so the tag list leaves its label out.
            "experiment": experiment_of(run.tags or []),
            "tags": labels_besides_experiment(run.tags or []),
        },
    )


def _slowdowns_html(request: HttpRequest, run: Run, names: list[str], *, can_decide: bool) -> str:
    """The Slowdowns section (diagnosis's): each window with its ranked causes, and on-call's
    confirm / correct form."""
    return render_to_string(
        "diagnosis/_run_slowdowns.html",
        {
            "run": run,
            "slowdowns": slowdown_selectors.with_words(slowdown_selectors.run_slowdowns(run=run)),
            "can_decide": can_decide,
            "kinds": Slowdown.Kind.choices,
            "min_drop_pct": round(slowdown_rules.MIN_DROP * 100),
            "min_steps": slowdown_rules.MIN_STEPS,
            "has_throughput": any(name in slowdown_selectors.THROUGHPUT_METRICS for name in names),
        },
        request=request,
    )


def _tables_html(run: Run, axis: charts.Axis, tables: run_selectors.RunPageTables) -> str:
    return run_cache.render_piece(
        "dashboard/_run_tables.html",
        {
            "run": run,
            "axis": axis,
            "tables": tables,
            "attempts": tables.attempts,
            "interruptions": tables.interruptions,
            "checkpoints": tables.checkpoints,
        },
    )


def _liveness(run: Run, latest: Attempt | None) -> liveness.Liveness:
    hung_since = run_cache.cached(
        f"run-hung-since:{run_cache.run_version_key(run=run)}",
        lambda: (run_selectors.run_hung_since(run=run, attempt=latest),),
    )[0]
    return _run_liveness(run, latest.status if latest else None, timezone.now(), hung_since)


def _run_liveness(
    run: Run, status: str | None, now: datetime, hung_since: datetime | None = None
) -> liveness.Liveness:
    """The run list's and the run page's one reading of a run: its latest attempt's status
    (in the page's words), hung (an open hang incident), or silent, or stuck at one step
    (Run.last_step_at)."""
    return liveness.liveness(
        hung_since=hung_since,
        status=status,
        status_label=_STATUS_LABELS.get(status or "", "no attempt yet"),
        last_seen_at=run.last_seen_at,
        step_reached_at=run.last_step_at,
        now=now,
        stall_after=RUN_STALL_AFTER,
    )


def _charts_block(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """The charts' <figure> facts and the escaped #charts-data script the page embeds."""
    payload = [{"id": f["id"], "figure": f["figure"]} for f in figures]
    return {
        "figures": [{k: f[k] for k in ("id", "name", "total_points")} for f in figures],
        "script": str(charts.charts_script(payload)),
    }


def _figures(
    run: Run, axis: charts.Axis, annotations: list[Any], names: list[str]
) -> list[dict[str, Any]]:
    """Every chart of the run page (computed when the run's data changed: see run_cache)."""
    attempts = list(run.attempts.order_by("number"))
    interruptions = run_selectors.run_chart_interruptions(run=run)
    marks = _chart_marks(attempts, interruptions, axis)
    entries = run_selectors.run_chart_entries(run=run)
    notes = marks_charts.chart_marks(annotations, entries, axis)
    slowed = marks_charts.slowdown_marks(slowdown_selectors.run_slowdowns(run=run), axis)
    if not slowed.empty:
        notes = slowed if notes.empty else pd.concat([notes, slowed], ignore_index=True)
    figures: list[dict[str, Any]] = []
    read = series_selectors.series_for_run_by_name(
        run=run, names=names, max_points=CHART_MAX_POINTS
    )
    for name in names:
        per_attempt = read[name]
        frame = metric_charts.attempts_frame(per_attempt, axis)
        figure = metric_charts.metric_figure_data(
            frame,
            title=name,
            axis=axis,
            y_title=metric_charts.metric_unit_title(name),
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
                # JSON data already: no Plotly objects to build and encode.
                "figure": figure,
            }
        )
    return figures


def _extra_figures(run: Run) -> list[dict[str, Any]]:
    """The charts under the metrics: the run's GPUs' power and heat, when its hosts sent DCGM
    readings, and its throughput by hour of day, when that data spans diurnal.MIN_SPAN_HOURS
    (from the hour sums: a row per hour the run ran, no point read)."""
    found = []
    power = pd.DataFrame(
        dcgm_selectors.run_power_heat(run=run), columns=["at", "power_w", "temp_max_c"]
    )
    if not power.empty:
        figure = power_charts.power_heat_figure(power)
        found.append({"id": "chart-power-heat", "name": "Power and heat", "figure": figure})
    metric = slowdown_selectors.throughput_metric(run=run)
    sums = series_selectors.run_hour_sums(run=run, metric=metric) if metric else []
    hours = [hour for hour, count, _ in sums if count]
    if metric and diurnal.spans_long_enough(hours):
        # Step time as a pace (steps per second), so that up is faster on every run's chart.
        inverted = metric in slowdown_selectors.INVERTED
        by_hour = diurnal.by_hour_of_day(*zip(*sums, strict=True), inverted=inverted)
        label = f"steps/s (1 / mean {metric})" if inverted else f"mean {metric}"
        figure = power_charts.hour_of_day_figure(by_hour, label=label)
        found.append({"id": "chart-hour-of-day", "name": "Throughput by hour of day",
                      "figure": figure})  # fmt: skip
    return [{**one, "figure": charts.as_payload(one["figure"])} for one in found]


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


@login_required
def run_version(request: HttpRequest, run_id: int) -> JsonResponse:
    """What the run page polls: the run's data version (bumped in the transaction of every
    change to what the page shows) and its liveness, which changes with no write at all (a
    run goes silent when nothing arrives), so an open page learns that too. An unchanged
    page costs one small query and two cache reads."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    return JsonResponse({"version": run_live_version(run)})


def run_live_version(run: Run) -> str:
    """The version run_version answers now: for the run's other live pages (ranks) to start
    their polls from."""
    return _live_version(run, _liveness(run, _latest_attempt(run)))


def _latest_attempt(run: Run) -> Attempt | None:
    # In a tuple: the cache takes None for "not cached".
    return run_cache.cached(
        f"run-latest-attempt:{run_cache.run_version_key(run=run)}",
        lambda: (run_selectors.run_latest_attempt(run=run),),
    )[0]


def _live_version(run: Run, live: liveness.Liveness) -> str:
    return f"{run.data_version}.{live.state}"


@login_required
def projects_version(request: HttpRequest) -> JsonResponse:
    """What the run list, triage queue and fleet health poll (selectors.projects_live_version)."""
    return JsonResponse({"version": selectors.projects_live_version(user=request.user)})
