"""The triage queue and the incident page: on-call confirms or corrects an incident, writes
notes in Markdown and moves it open → triaged → resolved; everyone in the project reads it
and its audit history."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from logbook.models import AuditEvent, Interruption, RootCause, TriageSuggestion
from logbook.selectors import incidents as selectors
from logbook.selectors.filters import FilterError
from logbook.selectors.incidents import IncidentFilters
from logbook.selectors.stragglers import straggler_records_for_attempt
from logbook.services import autotriage as autotriage_services
from logbook.services import triage
from logbook.services.interruptions import MERGE_WINDOW
from telemetry import display, metric_charts, run_cache
from telemetry.charts import charts_script
from telemetry.models import Membership
from telemetry.paging import table_page
from telemetry.selectors import projects_for_user, projects_live_version, user_has_role
from telemetry.selectors import series as series_selectors

FIELD_LABELS = {
    "root_cause": "Root cause",
    "component": "Component",
    "hosts": "Hosts",
    "devices": "Devices",
    "severity": "Severity",
    "manual_intervention": "Manual intervention",
    "lost_steps": "Lost steps",
    "notes": "Notes",
    "status": "Status",
    "triaged_by": "Triaged by",
    "triaged_at": "Triaged at",
    "resolved_by": "Resolved by",
    "resolved_at": "Resolved at",
}
_NAME_SEPARATORS = re.compile(r"[\s,]+")


def _names(text: str) -> list[str]:
    return sorted({name for name in _NAME_SEPARATORS.split(text or "") if name})


class IncidentForm(forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)
    root_cause = forms.ChoiceField(label="Root cause")
    component = forms.CharField(max_length=triage.COMPONENT_MAX_LENGTH, required=False)
    hosts = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Host names, separated by commas, spaces or new lines.",
    )
    devices = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Device UUIDs, separated by commas, spaces or new lines.",
    )
    severity = forms.ChoiceField(choices=Interruption.Severity.choices)
    manual_intervention = forms.BooleanField(required=False, label="Needed manual intervention")
    lost_steps = forms.IntegerField(
        min_value=0, max_value=triage.LOST_STEPS_MAX, required=False, label="Lost steps"
    )
    notes = forms.CharField(
        required=False,
        max_length=triage.NOTES_MAX_LENGTH,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 10}),
        help_text="Markdown. Raw HTML is shown as text.",
    )

    def __init__(self, *args: Any, root_causes: list[RootCause], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        groups: dict[str, list[tuple[str, str]]] = {}
        for cause in root_causes:
            groups.setdefault(cause.group, []).append((cause.slug, cause.name))
        self.fields["root_cause"].choices = list(groups.items())

    def clean_notes(self) -> str:
        # Browsers send textarea lines as CRLF; store what the reader typed, not the transport.
        return self.cleaned_data["notes"].replace("\r\n", "\n")

    def changes(self) -> dict[str, Any]:
        """The edit in the service's (and the audit trail's) terms."""
        data = self.cleaned_data
        return {
            "root_cause": data["root_cause"],
            "component": data["component"].strip(),
            "hosts": _names(data["hosts"]),
            "devices": _names(data["devices"]),
            "severity": data["severity"],
            "manual_intervention": data["manual_intervention"],
            "lost_steps": data["lost_steps"],
            "notes": data["notes"],
        }


def _form_initial(values: dict[str, Any], version: int) -> dict[str, Any]:
    initial = {name: values[name] for name in triage.EDITABLE_FIELDS if name in values}
    initial["hosts"] = "\n".join(values.get("hosts", []))
    initial["devices"] = "\n".join(values.get("devices", []))
    return {**initial, "version": version}


def _shown(value: Any) -> str:
    if value is None or value == "" or value == []:
        return "\u2013"  # an en dash: "no value"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, str) and (moment := _iso_moment(value)) is not None:
        # The audit log keeps times as ISO strings; show them as every page does.
        return display.moment(moment, timezone.get_current_timezone(), seconds=True)
    return str(value)


def _iso_moment(text: str) -> datetime | None:
    if len(text) < 16 or text[4:5] != "-" or "T" not in text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


@dataclass(frozen=True)
class ChangeRow:
    field: str
    label: str
    before: str
    after: str


@dataclass(frozen=True)
class HistoryRow:
    event: AuditEvent
    version: int | None
    changes: list[ChangeRow]


def _field_order(item: tuple[str, Any]) -> int:
    # PostgreSQL's jsonb keeps keys in its own order; show fields in the form's order.
    order = list(FIELD_LABELS)
    return order.index(item[0]) if item[0] in order else len(order)


def history_rows(events: list[AuditEvent]) -> list[HistoryRow]:
    rows = []
    for event in events:
        version_step = event.changes.get("version")
        changes = [
            ChangeRow(name, FIELD_LABELS.get(name, name), _shown(before), _shown(after))
            for name, (before, after) in sorted(event.changes.items(), key=_field_order)
            if name != "version"
        ]
        rows.append(HistoryRow(event, version_step[1] if version_step else None, changes))
    return rows


QUEUE_PAGE_SIZE = 100


@login_required
def incident_queue(request: HttpRequest) -> HttpResponse:
    error = ""
    live_version = projects_live_version(user=request.user)  # before the data
    try:
        filters = selectors.filters_parse(user=request.user, params=request.GET)
    except FilterError as exc:
        # Show the default queue with the problem named rather than a bare 400 page.
        filters, error = IncidentFilters(), exc.in_page_words()
    # A page at a time: a Llama-3-scale run leaves hundreds of open incidents, and drawing
    # every row (with its hosts) cost 0.3-0.4 s on each view of the queue. The page is drawn
    # once per state of the incidents of the reader's projects (every change to one bumps its
    # project's fleet_version) and query string: drawing 100 rows took ~45 ms a view.
    projects = projects_for_user(user=request.user).only("pk", "fleet_version")
    version = run_cache.projects_version_key(projects=projects)

    def table() -> str:
        incidents = selectors.incidents_filtered(user=request.user, filters=filters)
        page = table_page(request, selectors.unconfirmed_first(incidents), size=QUEUE_PAGE_SIZE)
        queue = selectors.IncidentQueue(
            incidents=list(page.rows), total=page.count, truncated=False
        )
        return run_cache.render_piece(
            "logbook/_incident_table.html", {"page": page, "queue": queue}
        )

    return render(
        request,
        "logbook/incidents.html",
        {
            "live_version": live_version,
            "filters": filters,
            "error": error,
            "table": run_cache.cached_html(
                f"incident-queue:{version}:{run_cache.query_key(request)}", table
            ),
            "statuses": Interruption.Status.choices,
            "menu_runs": list(selectors.runs_for_menu(user=request.user)),
            "menu_root_causes": list(
                selectors.root_causes(project_ids=projects_for_user(user=request.user).values("pk"))
            ),
        },
    )


def _version(raw: str | None) -> int:
    try:
        return int(raw or "")
    except ValueError:
        return 0  # matches no stored version: answered as a stale edit, nothing written


@login_required
def incident_detail(request: HttpRequest, pk: int) -> HttpResponse:
    incident = selectors.incident_get_for_user(user=request.user, pk=pk)
    can_edit = user_has_role(
        user=request.user, at_least=Membership.Role.ONCALL, project_id=incident.run.project_id
    )
    root_causes = (
        list(selectors.root_causes(project_ids=[incident.run.project_id])) if can_edit else []
    )
    form: IncidentForm | None = None
    conflict: dict[str, Any] | None = None
    error = ""
    if request.method == "POST":
        if not can_edit:
            return HttpResponseForbidden("Only on-call engineers and admins may triage.")
        here = reverse("logbook:incident-detail", args=[incident.pk])
        try:
            if request.POST.get("action") == "confirm":
                autotriage_services.suggestion_confirm(
                    interruption=incident,
                    user=request.user,
                    version=_version(request.POST.get("version")),
                )
                return redirect(f"{here}#history")
            if request.POST.get("action") == "transition":
                triage.incident_transition(
                    interruption=incident,
                    user=request.user,
                    version=_version(request.POST.get("version")),
                    status=request.POST.get("status", ""),
                )
                return redirect(f"{here}#history")
            bound = IncidentForm(request.POST, root_causes=root_causes)
            form = bound
            if bound.is_valid():
                triage.incident_update(
                    interruption=incident,
                    user=request.user,
                    version=bound.cleaned_data["version"],
                    changes=bound.changes(),
                )
                return redirect(f"{here}#history")
        except triage.StaleEdit as stale:
            incident = selectors.incident_get_for_user(user=request.user, pk=pk)
            conflict = _conflict(stale, form)
            if form is not None and form.is_valid():
                form = IncidentForm(
                    initial=_form_initial(conflict["proposal"], incident.version),
                    root_causes=root_causes,
                )
        except ValidationError as exc:
            if form is not None and hasattr(exc, "error_dict"):
                for name, messages in exc.message_dict.items():
                    form.add_error(name if name in form.fields else None, messages)
            else:
                error = " ".join(exc.messages)
    if can_edit and form is None:
        snapshot = triage.incident_snapshot(incident)
        form = IncidentForm(
            initial=_form_initial(snapshot, incident.version), root_causes=root_causes
        )
    history = list(selectors.incident_history(incident=incident))
    return render(
        request,
        "logbook/incident_detail.html",
        {
            "incident": incident,
            "can_edit": can_edit,
            "form": form,
            "conflict": conflict,
            "error": error,
            "history": history_rows(history),
            "next_statuses": sorted(triage.TRANSITIONS.get(incident.status, ())),
            "run_at_step": _run_at_step(incident),
            "stragglers": _stragglers(incident),
            "suggestion": _suggestion(incident),
            "sources": list(selectors.incident_sources(incident=incident)),
            "merge_window_min": int(MERGE_WINDOW.total_seconds() // 60),
            **_charts_around(incident),
        },
    )


def _suggestion(incident: Any) -> Any:
    """The incident's auto-triage suggestion (None without one)."""
    try:
        return incident.suggestion
    except TriageSuggestion.DoesNotExist:
        return None


def _stragglers(incident: Any) -> list[tuple[Any, bool, list[str]]]:
    """The straggler records of the incident's attempt, each with whether its host or device
    is one the incident names (a slow rank on the hardware that then failed is the lead),
    and, for a record whose rank's GPU was not reported, the GPUs the incident names on its
    host: those known to be there, or all it names when it names only that host."""
    if incident.attempt_id is None:
        return []
    hosts = {host.pk for host in incident.hosts.all()}
    devices = list(incident.devices.all())

    def incident_gpus(host_id: int | None) -> list[str]:
        on_host = [d.uuid for d in devices if host_id is not None and d.host_id == host_id]
        if not on_host and host_id is not None and hosts == {host_id}:
            on_host = [d.uuid for d in devices if d.host_id is None]
        return on_host

    return [
        (
            record,
            record.host_id in hosts or record.device_id in {d.pk for d in devices},
            [] if record.device_id else incident_gpus(record.host_id),
        )
        for record in straggler_records_for_attempt(attempt_id=incident.attempt_id)
    ]


# The run page's charts around an interruption: this many steps either side of it, or the
# steps it lost when that is more.
AROUND_STEPS = 200


# The first metrics of the run (the loss first) are drawn around the interruption.
AROUND_METRICS = 3
AROUND_MAX_POINTS = 1500


def around_steps(incident: Any) -> tuple[int, int] | None:
    """The steps the incident page charts: AROUND_STEPS after the interruption, and before it
    AROUND_STEPS or the steps it lost, whichever is more; None without a step. After it, no
    further than a little past the run's last step: a run that ended at the interruption
    shows its end, not 200 empty steps."""
    if incident.step is None:
        return None
    first = max(incident.step - max(AROUND_STEPS, incident.lost_steps or 0), 0)
    last = incident.step + AROUND_STEPS
    run_last = incident.run.last_step
    if run_last is not None and run_last < last:
        # A tenth of the window's first part past the end, so the marker is off the edge.
        last = max(run_last, incident.step) + max((incident.step - first) // 10, 5)
    return first, min(last, incident.step + AROUND_STEPS)


def _charts_around(incident: Any) -> dict[str, Any]:
    """The run page's charts for the steps around the interruption, the interruption marked
    (the same dotted line and ▼ marker as on the run page) and where the next attempts
    resumed (the run page's dashed "attempt N" lines)."""
    window = around_steps(incident)
    if window is None:
        return {"figures": [], "charts_script": ""}
    run = incident.run
    marks = pd.DataFrame([(incident.step, incident.root_cause.name)], columns=["x", "label"])
    restarts = pd.DataFrame(
        selectors.restarts_in_steps(run=run, first_step=window[0], last_step=window[1]),
        columns=["attempt", "x"],
    )
    figures = []
    for name in series_selectors.run_metric_names(run=run)[:AROUND_METRICS]:
        per_attempt = series_selectors.series_for_run_in_steps(
            run=run, name=name, first_step=window[0], last_step=window[1],
            max_points=AROUND_MAX_POINTS,
        )  # fmt: skip
        figure = metric_charts.metric_figure(
            metric_charts.attempts_frame(per_attempt, "step"),
            title=name,
            y_title=metric_charts.metric_unit_title(name),
            interruptions=marks,
            restarts=restarts,
        )
        # The whole window, even where the run sent no points (after a crash, nothing).
        figure.update_xaxes(range=list(window))
        figures.append(
            {
                "id": f"chart-{len(figures)}",
                "name": name,
                "total_points": sum(one.total_points for one in per_attempt),
                "figure": json.loads(figure.to_json()),
            }
        )
    payload = [{"id": f["id"], "figure": f["figure"]} for f in figures]
    # Escaped by charts_script.
    return {
        "around": window,
        "figures": figures,
        "charts_script": mark_safe(charts_script(payload)),
    }


def _run_at_step(incident: Any) -> str:
    """A link to the run page zoomed on the interruption's step (the charts mark it)."""
    here = reverse("dashboard:run-detail", args=[incident.run_id])
    window = around_steps(incident)
    if window is None:
        return here
    return f"{here}?x0={window[0]}&x1={window[1]}"


def _conflict(stale: triage.StaleEdit, form: IncidentForm | None) -> dict[str, Any]:
    """What the page tells someone whose edit arrived after another one."""
    events = stale.their_changes
    mine = form.changes() if form is not None and form.is_valid() else {}
    proposal, conflicts = triage.merge_proposal(stale=stale, mine=mine)
    return {
        "who": ", ".join(sorted({event.username for event in events})) or "someone else",
        "at": events[-1].at if events else None,
        "history": history_rows(list(reversed(events))),
        "proposal": proposal,
        "conflicts": [FIELD_LABELS.get(name, name) for name in conflicts],
        "mine": {FIELD_LABELS.get(name, name): _shown(mine[name]) for name in conflicts},
    }
