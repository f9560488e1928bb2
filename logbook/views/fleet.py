"""Fleet health pages: hosts and devices with their incidents, repeat offenders, and one
host's history with the quarantine form."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

import pandas as pd
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from logbook import fleet_charts
from logbook.selectors import fleet as fleet_selectors
from logbook.selectors import offenders
from logbook.selectors import sdc as sdc_selectors
from logbook.selectors.at_risk import at_risk_cached
from logbook.selectors.filters import FilterError
from logbook.selectors.incident_groups import incident_groups_for_projects
from logbook.selectors.sdc import HardwareFilters
from logbook.selectors.sites import MTBF_FORMULA, site_health, site_window_edges
from logbook.services import quarantine as quarantine_services
from logbook.views.host_gpus import gpu_panel
from logbook.views.sdc import filter_menus
from telemetry import rank_charts, run_cache
from telemetry.charts import as_payload, charts_script
from telemetry.models import Device, Host, Membership, Run
from telemetry.paging import table_page
from telemetry.selectors import projects_for_user, projects_live_version, user_has_role
from telemetry.selectors.dcgm import (
    dcgm_missing_counters,
    device_events_for_user,
)
from telemetry.selectors.ranks import host_rank_scores
from telemetry.selectors.topology import topology_for_projects_by_host


def _filters(request: HttpRequest) -> tuple[HardwareFilters, offenders.OffenderRule, str]:
    try:
        filters = sdc_selectors.filters_parse(user=request.user, params=request.GET)
        rule = offenders.offender_rule_parse(params=request.GET, filters=filters)
        return filters, rule, ""
    except FilterError as exc:
        filters = HardwareFilters()
        rule = offenders.offender_rule_parse(params={}, filters=filters)
        return filters, rule, exc.in_page_words()


def hosts_frame(hosts: list[fleet_selectors.HardwareHealth]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "host": [one.name for one in hosts],
            "interruptions": [one.interruptions for one in hosts],
            "sdc": [one.sdc for one in hosts],
            "stragglers": [one.stragglers for one in hosts],
            "in_window": [one.in_window for one in hosts],
            "repeat_offender": [one.repeat_offender for one in hosts],
            "rank": list(range(len(hosts))),  # the selector's order: most suspect first
        }
    )


@login_required
def fleet_health(request: HttpRequest) -> HttpResponse:
    live_version = projects_live_version(user=request.user)  # before the data
    filters, rule, error = _filters(request)
    # Everything below the filters is drawn once per state of the fleet's data, filters and
    # offender rule, and kept while the sliding offender window holds the same incidents
    # (FleetHealth.holds_until): at Llama scale reading, counting and drawing 2,000 hosts'
    # rows cost ~45 ms a view, and ~150 ms of CPU once a minute while it was kept a minute.
    # What moves with the clock, the window's ends, is written on every view.
    key = fleet_selectors.fleet_health_key(user=request.user, filters=filters, rule=rule)
    body = run_cache.cached(
        run_cache.display_key(f"fleet-page:v2:{key}:{run_cache.query_key(request)}"),
        lambda: _fleet_body(request, filters, rule),
        fresh=lambda found: offenders.still_holds(found["holds_until"], at=rule.window_end),
    )
    return render(
        request,
        "logbook/fleet.html",
        {
            "live_version": live_version,
            "filters": filters,
            "rule": rule,
            "error": error,
            "facts": body["facts"],
            "body": mark_safe(body["html"]),
            "levels": _levels_body(request, filters, rule),
            "mtbf_formula": MTBF_FORMULA,
            "gpu_events": list(device_events_for_user(user=request.user)[:GPU_EVENTS_SHOWN]),
            **filter_menus(user=request.user),
        },
    )


def _fleet_body(
    request: HttpRequest, filters: HardwareFilters, rule: offenders.OffenderRule
) -> dict[str, Any]:
    """The page's tables and chart (HTML) and the counts above them, and until when they
    hold (a plain dict, as the cache keeps it)."""
    fleet = fleet_selectors.fleet_health(user=request.user, filters=filters, rule=rule)
    offenders_found = [one for one in fleet.hosts if one.repeat_offender]
    quarantined_hosts = [one for one in fleet.hosts if one.row.quarantined_at]
    html = run_cache.render_piece(
        "logbook/_fleet_body.html",
        {
            "rule": rule,
            "fleet": fleet,
            # The counts and the chart cover every host; the tables show a page each.
            "host_page": table_page(request, fleet.hosts, param="page"),
            "device_page": table_page(request, fleet.devices, param="devices_page"),
            "offenders": offenders_found,
            "quarantined_hosts": quarantined_hosts,
            "charts_script": _chart_script(fleet.hosts),
        },
    )
    facts = {
        "hosts": len(fleet.hosts),
        "offenders": len(offenders_found),
        "quarantined_hosts": len(quarantined_hosts),
        "quarantined_devices": sum(1 for one in fleet.devices if one.row.quarantined_at),
    }
    return {"html": html, "facts": facts, "holds_until": fleet.holds_until}


def _levels_body(
    request: HttpRequest, filters: HardwareFilters, rule: offenders.OffenderRule
) -> SafeString:
    """Sites side by side, the grouped failures and the at-risk list: drawn once per state of
    the fleet (its version, the at-risk list) and kept while the sliding window holds the
    same incidents and groups (the page writes the window's ends itself)."""
    projects = projects_for_user(user=request.user)
    now = timezone.now()
    at_risk = at_risk_cached(projects=projects, now=now)
    versions = sorted(projects.values_list("pk", "fleet_version"))
    where = repr((versions, rule.window_days, filters.until, at_risk))
    key = f"fleet-levels:v2:{hashlib.sha256(where.encode()).hexdigest()[:32]}"

    def draw() -> dict[str, Any]:
        since, until = rule.window_start, rule.window_end
        sites = site_health(projects=projects, since=since, until=until)
        hosts = [d["host"] for d in at_risk if d["host"]]
        place = dict(topology_for_projects_by_host(projects=projects, hosts=hosts)) if hosts else {}
        for site in sites:
            site.at_risk = sum(1 for d in at_risk if place.get(d["host"], "") == site.site)
        html = run_cache.render_piece(
            "logbook/_fleet_levels.html",
            {
                "sites": sites,
                "groups": incident_groups_for_projects(projects=projects)[:GROUPS_SHOWN],
                "at_risk": at_risk,
            },
        )
        edges = site_window_edges(projects=projects, since=since, until=until)
        return {"html": html, "holds_until": rule.holds_until(edges)}

    found = run_cache.cached(
        run_cache.display_key(key),
        draw,
        fresh=lambda found: offenders.still_holds(found["holds_until"], at=rule.window_end),
    )
    return mark_safe(found["html"])


GROUPS_SHOWN = 50


def _chart_script(hosts: list[fleet_selectors.HardwareHealth]) -> SafeString:
    figure = fleet_charts.incidents_per_host_figure(hosts_frame(hosts))
    return charts_script([{"id": "chart-host-incidents", "figure": as_payload(figure)}])


# GPU health events pushed from dcgm-exporter, newest first.
GPU_EVENTS_SHOWN = 50


class QuarantineForm(forms.Form):
    action = forms.ChoiceField(choices=[("quarantine", "Quarantine"), ("release", "Release")])
    # Empty: the host itself; otherwise the UUID of one of its devices.
    device = forms.CharField(required=False, max_length=128)
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("action") == "quarantine" and not (data.get("reason") or "").strip():
            self.add_error("reason", "Say why: a reason is required to quarantine.")
        return data


@login_required
def host_detail(request: HttpRequest, name: str) -> HttpResponse:
    host = fleet_selectors.host_get_for_user(
        user=request.user, name=name, project=request.GET.get("project")
    )
    # The host belongs to one project: its on-call engineers and admins may quarantine it.
    can_quarantine = user_has_role(
        user=request.user, at_least=Membership.Role.ONCALL, project_id=host.project_id
    )
    form = QuarantineForm()
    if request.method == "POST":
        if not can_quarantine:
            return HttpResponseForbidden("Only on-call engineers and admins may quarantine.")
        form = QuarantineForm(request.POST)
        if form.is_valid() and _quarantine_apply(request, host, form):
            target = reverse("logbook:host-detail", kwargs={"name": host.name})
            return redirect(f"{target}?{urlencode({'project': host.project.slug})}")
    filters, rule, error = _filters(request)
    # The host's incidents, devices and timeline: read and drawn once per state of the
    # fleet's data, filters and offender rule, and kept while the sliding window holds the
    # same incidents, as for /fleet/ (at Llama scale ~40 ms of CPU and 7 queries a view).
    key = fleet_selectors.fleet_health_key(user=request.user, filters=filters, rule=rule)
    found = run_cache.cached(
        f"host-page:{key}:{host.pk}",
        lambda: _host_health(request, filters, rule, host),
        fresh=lambda found: offenders.still_holds(found["holds_until"], at=rule.window_end),
    )
    health, payload = found["health"], list(found["timeline"])
    # --- ranks hook (issue 16): the relative scores over time of the ranks that ran here.
    visible_runs = Run.objects.filter(project_id=host.project_id)  # hosts are per project
    rank_scores = host_rank_scores(
        host_name=host.name, runs=list(visible_runs.values_list("pk", flat=True))
    )
    if rank_scores:
        scores = rank_charts.host_scores_figure(
            rank_scores, threshold=settings.RANK_STRAGGLER_THRESHOLD
        )
        payload.append({"id": "chart-host-rank-scores", "figure": as_payload(scores)})
    # --- end of ranks hook
    gpus = gpu_panel(host=host, params=request.GET)
    payload.extend(gpus.pop("gpu_payload"))
    return render(
        request,
        "logbook/host_detail.html",
        {
            "host": host,
            "health": health,
            "devices": found["devices"],
            "rule": rule,
            "filters": filters,
            "error": error,
            "runs": list(fleet_selectors.host_runs(user=request.user, host=host)),
            "form": form,
            "can_quarantine": can_quarantine,
            "dcgm_missing": dcgm_missing_counters(host=host),
            "gpu_events": list(
                device_events_for_user(user=request.user, host=host)[:GPU_EVENTS_SHOWN]
            ),
            "has_rank_scores": bool(rank_scores),
            "charts_script": charts_script(payload),
            **gpus,
        },
    )


def _host_health(
    request: HttpRequest, filters: HardwareFilters, rule: offenders.OffenderRule, host: Host
) -> dict[str, Any]:
    """The host's health and its devices', its incidents' timeline (a charts_script payload
    entry, none without incidents) and until when they hold (a plain dict, as cached)."""
    fleet = fleet_selectors.fleet_health(user=request.user, filters=filters, rule=rule, host=host)
    health = fleet.hosts[0] if fleet.hosts else fleet_selectors.HardwareHealth("host", host)
    timeline = pd.DataFrame(
        {
            "occurred_at": [one.occurred_at for one in health.incidents],
            "kind": [one.kind for one in health.incidents],
            "label": [one.label for one in health.incidents],
            "run": [one.run_name for one in health.incidents],
        }
    )
    # No incidents, no timeline: the page says so rather than drawing empty axes.
    figure = fleet_charts.host_timeline_figure(timeline) if health.incidents else None
    return {
        "health": health,
        "devices": fleet.devices,
        "timeline": [{"id": "chart-host-timeline", "figure": as_payload(figure)}] if figure else [],
        "holds_until": fleet.holds_until,
    }


def _quarantine_apply(request: HttpRequest, host: Host, form: QuarantineForm) -> bool:
    data = form.cleaned_data
    target: Host | Device = host
    if data["device"]:
        device = Device.objects.filter(uuid=data["device"], host=host).first()
        if device is None:
            form.add_error("device", "No such device on this host.")
            return False
        target = device
    try:
        if data["action"] == "release":
            if isinstance(target, Host):
                quarantine_services.host_release(host=target, user=request.user)
            else:
                quarantine_services.device_release(device=target, user=request.user)
            messages.success(request, f"{target} released.")
        else:
            if isinstance(target, Host):
                quarantine_services.host_quarantine(
                    host=target, user=request.user, reason=data["reason"]
                )
            else:
                quarantine_services.device_quarantine(
                    device=target, user=request.user, reason=data["reason"]
                )
            messages.success(request, f"{target} quarantined.")
    except ValidationError as exc:
        form.add_error("reason", exc.message_dict.get("reason", exc.messages))
        return False
    return True
