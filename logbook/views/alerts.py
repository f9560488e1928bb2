"""A project's metric alert rules, for its admins: the rules in words, add one, enable,
disable or delete it (audited), and the recent firings with the runs they marked."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from logbook.models import AlertRule, WebhookEndpoint
from logbook.selectors import alerts as alert_selectors
from logbook.services import alerts as alert_services
from telemetry.selectors import project_get_for_admin
from telemetry.views.posted import posted_id


class RuleForm(forms.Form):
    name = forms.CharField(max_length=100)
    metric = forms.CharField(max_length=200, help_text="e.g. tokens_per_s, loss, grad_norm")
    runs = forms.CharField(
        max_length=200, required=False, help_text="Run names, shell-style (llama-*); empty: all."
    )
    comparison = forms.ChoiceField(choices=AlertRule.Comparison.choices)
    threshold_kind = forms.ChoiceField(choices=AlertRule.ThresholdKind.choices, label="than")
    threshold = forms.FloatField(
        initial=0.9, help_text="The value, or the fraction of the median (0.9 is 90%)."
    )
    baseline_s = forms.IntegerField(
        min_value=60, initial=3600, label="median over (s)", help_text="3600: its 1-hour median."
    )
    for_s = forms.IntegerField(min_value=0, initial=120, label="for (s)")
    severity = forms.ChoiceField(choices=AlertRule.Severity.choices, initial="warning")


@login_required
def project_alert_rules(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_admin(user=request.user, slug=slug)
    form = RuleForm()
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "add":
            form = RuleForm(request.POST)
            if form.is_valid():
                try:
                    rule = alert_services.alert_rule_create(
                        project=project, user=request.user, **form.cleaned_data
                    )
                except ValidationError as exc:
                    for field, errors in exc.message_dict.items():
                        form.add_error(field if field in form.fields else None, errors)
                else:
                    messages.success(request, f"Alert rule {rule.name} added.")
                    return redirect("logbook:alert-rules", slug=project.slug)
        elif action in ("enable", "disable", "delete"):
            rule = get_object_or_404(AlertRule, project=project, pk=posted_id(request, "rule"))
            if action == "delete":
                alert_services.alert_rule_delete(rule=rule, user=request.user)
            else:
                alert_services.alert_rule_set_enabled(
                    rule=rule, user=request.user, enabled=action == "enable"
                )
            messages.success(request, f"Alert rule {rule.name} {action}d.")
            return redirect("logbook:alert-rules", slug=project.slug)
        else:
            return HttpResponse("Unknown action.", status=400)
    rules = list(alert_selectors.alert_rules_for_project(project=project))
    return render(
        request,
        "logbook/alert_rules.html",
        {
            "project": project,
            "rules": [{"rule": rule, "text": alert_services.rule_text(rule)} for rule in rules],
            "firings": list(alert_selectors.alert_firings_for_project(project=project)),
            "form": form,
            "alert_endpoints": [
                endpoint
                for endpoint in WebhookEndpoint.objects.filter(project=project, enabled=True)
                if not endpoint.events or WebhookEndpoint.Event.ALERT in endpoint.events
            ],
        },
    )
