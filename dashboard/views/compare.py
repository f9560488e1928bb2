"""The compare page: two or more runs overlaid on the run page's charts, their configs
side by side where they differ."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pandas as pd
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import mark_safe

from dashboard import charts as marks_charts
from dashboard import config_diff, metric_sections
from dashboard.selectors import runs as run_selectors
from dashboard.views.runs import CHART_MAX_POINTS
from telemetry import charts, configs, metric_charts, selectors
from telemetry.models import Run
from telemetry.selectors import attempts as attempt_selectors
from telemetry.selectors import series as series_selectors

MAX_COMPARED = 8


def _run_ids(raw: str) -> list[int] | str:
    """The ?runs= ids in order, duplicates dropped, or what is wrong with them."""
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if not all(part.isascii() and part.isdigit() and len(part) < 12 for part in parts):
        return "runs: give run ids separated by commas, e.g. ?runs=12,15."
    ids = list(dict.fromkeys(int(part) for part in parts))
    if not 2 <= len(ids) <= MAX_COMPARED:
        return f"runs: choose between 2 and {MAX_COMPARED} different runs to compare."
    return ids


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    # ?runs=1,2 (a link) or ?runs=1&runs=2 (the run list's checkboxes).
    chosen = ",".join(request.GET.getlist("runs"))
    ids = _run_ids(chosen)
    if isinstance(ids, str):
        # Bare /compare/ (a bookmark, the nav) or too few runs: the page to choose them, the
        # site's navigation around it; 400 when the link gave something to refuse.
        return render(
            request,
            "dashboard/compare_pick.html",
            {
                "error": ids if chosen.strip() else "",
                "choices": run_selectors.compare_choices(user=request.user, exclude=[]),
                "max_compared": MAX_COMPARED,
            },
            status=400 if chosen.strip() else 200,
        )
    # 404 for a run the user may not see, as the run page does.
    runs = [selectors.run_get_for_user(user=request.user, run_id=run_id) for run_id in ids]
    added, add_error = request.GET.get("add", "").strip(), ""
    if added:
        # The picker's "Add a run": back to the same view with that run's id appended.
        found = run_selectors.run_by_label_for_user(user=request.user, label=added)
        if found is None:
            add_error = f"None of your runs is named {added[:200]!r} (write project/run)."
        elif len(ids) >= MAX_COMPARED and found.pk not in ids:
            add_error = f"At most {MAX_COMPARED} runs at once: remove one first."
        else:
            params = request.GET.copy()
            params.pop("add")
            params.setlist("runs", [",".join(str(i) for i in dict.fromkeys([*ids, found.pk]))])
            return redirect(f"{request.path}?{params.urlencode()}")
    axis: charts.Axis = "time" if request.GET.get("axis") == "time" else "step"
    # Every run's metrics, the loss first as on the run page.
    names = sorted(
        {n for run in runs for n in series_selectors.run_metric_names(run=run)},
        key=lambda name: (name != "loss", name),
    )
    pinned = metric_sections.pinned_from_query(request.GET.get("metrics", ""))
    drawn = metric_sections.shown(names, pinned)
    figures = [_figure(runs, name, axis, f"chart-{index}") for index, name in enumerate(drawn)]
    return render(
        request,
        "dashboard/compare.html",
        {
            "runs": runs,
            # Each run with its "remove" link's ids (offered only while two would remain).
            "compared": [
                {
                    "run": run,
                    "colour": charts.attempt_colour(position),
                    "without": ",".join(str(o.pk) for o in runs if o.pk != run.pk)
                    if len(runs) > 2
                    else "",
                }
                for position, run in enumerate(runs)
            ],
            "choices": run_selectors.compare_choices(user=request.user, exclude=ids),
            "can_add": len(runs) < MAX_COMPARED,
            "add_error": add_error,
            "added": added,
            "axis": axis,
            "runs_param": ",".join(str(run.pk) for run in runs),
            "metric_count": len(names),
            "figures": figures,
            "attempt_changes": _attempt_changes(runs),
            "differences": config_diff.config_differences(
                config_diff.runs_settings([(run.config or {}, run.tags or []) for run in runs])
            ),
            # Escaped by charts_script.
            "charts_script": mark_safe(
                charts.charts_script([{"id": f["id"], "figure": f["figure"]} for f in figures])
            ),
        },
    )


def _attempt_changes(runs: list[Run]) -> list[dict[str, Any]]:
    """Config changes between consecutive attempts (that sent a config) of each run."""
    names = {run.pk: run.name for run in runs}
    rows = []
    for run_id, sent in attempt_selectors.attempt_configs(run_ids=list(names)).items():
        for (before_number, before), (number, after) in pairwise(sent):
            for key, old, new in configs.config_changes(before, after):
                rows.append(
                    {"run": names[run_id], "before_attempt": before_number, "attempt": number,
                     "key": key, "before": old, "after": new}
                )  # fmt: skip
    return rows


# Each line's key in the attempt column: the run's position times this plus the attempt
# number, so lines sort by the order the runs were chosen in, then by attempt.
_RUN_STRIDE = 10**7


def _figure(runs: list[Run], name: str, axis: charts.Axis, chart_id: str) -> dict[str, Any]:
    """One metric of every run, each run's attempts a line named "<run> · attempt N"."""
    frames = []
    lines: dict[int, dict[str, str]] = {}
    total = 0
    budget = CHART_MAX_POINTS // len(runs)
    for position, run in enumerate(runs):
        per_attempt = series_selectors.series_for_run(run=run, name=name, max_points=budget)
        total += sum(one.total_points for one in per_attempt)
        hue = charts.attempt_colour(position)
        for attempt, line in marks_charts.run_attempt_lines(
            hue, [one.attempt for one in per_attempt]
        ).items():
            lines[position * _RUN_STRIDE + attempt] = line
        frames.append(
            metric_charts.attempts_frame(
                per_attempt, axis, lambda a, p=position: p * _RUN_STRIDE + a
            )
        )
    figure = metric_charts.metric_figure_data(
        pd.concat(frames, ignore_index=True),
        title=name,
        axis=axis,
        y_title=metric_charts.metric_unit_title(name),
        # int(): a run without this metric adds an empty frame, and pandas then makes the
        # column float.
        attempt_name=lambda key: (
            f"{runs[int(key) // _RUN_STRIDE].name} · attempt {int(key) % _RUN_STRIDE}"
        ),
        # One hue per run (the page's list of runs is the legend), its attempts in shades.
        attempt_line=lambda key: lines[int(key)],
    )
    return {
        "id": chart_id,
        "name": name,
        "total_points": total,
        "figure": figure,
    }
