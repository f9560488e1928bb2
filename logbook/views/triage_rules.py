"""A project's auto-triage settings, for its admins: every rule its suggestions weigh (the
shipped built-ins, site-wide additions, its own) with this project's switch and weight for
each, a form to add a rule of its own (a message pattern, an XID code, a DCGM event kind), a
form to add a category of its own, and the audit trail of those changes. Other projects read
their own settings; site-wide rows are changed by superusers in the admin."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from logbook.models import RootCause, TriageRule
from logbook.safe_patterns import pattern_problem
from logbook.selectors import triage as triage_selectors
from logbook.services import taxonomy as taxonomy_services
from logbook.services import triage_rules as rule_services
from telemetry.models import Project
from telemetry.selectors import project_get_for_admin
from telemetry.views.posted import posted_id

HISTORY_SHOWN = 30


class RuleForm(forms.Form):
    kind = forms.ChoiceField(choices=TriageRule.Kind.choices)
    name = forms.SlugField(max_length=64, help_text="A short name, unique in the project.")
    pattern = forms.CharField(
        max_length=500, required=False, help_text="RE2 syntax, searched case-insensitively."
    )
    xid = forms.IntegerField(min_value=0, max_value=65_535, required=False, label="XID")
    dcgm_kind = forms.CharField(max_length=32, required=False, label="DCGM event kind")
    root_cause = forms.ModelChoiceField(queryset=RootCause.objects.none(), label="Category")
    component = forms.CharField(max_length=200, required=False)
    weight = forms.FloatField(min_value=0.01, max_value=1.0, initial=0.7)
    source = forms.CharField(max_length=500, required=False, help_text="Where it comes from.")

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["root_cause"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = triage_selectors.root_causes_visible(project_id=project.pk).order_by(
            "group", "name"
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind == TriageRule.Kind.MESSAGE and (
            problem := pattern_problem(data.get("pattern") or "")
        ):
            self.add_error("pattern", problem)
        if kind == TriageRule.Kind.XID and data.get("xid") is None:
            self.add_error("xid", "An XID rule names its code.")
        if kind == TriageRule.Kind.DCGM and not data.get("dcgm_kind"):
            self.add_error("dcgm_kind", "A DCGM rule names the event kind.")
        return data


class CategoryForm(forms.Form):
    name = forms.CharField(max_length=100)
    slug = forms.SlugField(max_length=64)
    group = forms.CharField(max_length=64)
    family = forms.ChoiceField(choices=RootCause.Family.choices)
    is_hardware = forms.BooleanField(required=False, label="Hardware")
    is_planned = forms.BooleanField(required=False, label="Planned")
    runbook = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)


def _posted_bool(request: HttpRequest, field: str) -> bool:
    return request.POST.get(field, "") in ("on", "1", "true")


@login_required
def project_triage_rules(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_admin(user=request.user, slug=slug)
    rule_form = RuleForm(project=project)
    category_form = CategoryForm()
    if request.method == "POST":
        action = request.POST.get("action", "")
        try:
            if action == "configure":
                rule = rule_services.triage_rule_configure(
                    project=project,
                    rule_id=posted_id(request, "rule"),
                    enabled=_posted_bool(request, "enabled"),
                    weight=request.POST.get("weight", "").strip()[:32],
                    user=request.user,
                )
                messages.success(request, f"Rule {rule.name} saved for {project.slug}.")
                return redirect("logbook:triage-rules", slug=project.slug)
            if action == "delete":
                rule_services.triage_rule_delete(
                    project=project, rule_id=posted_id(request, "rule"), user=request.user
                )
                messages.success(request, "Rule removed.")
                return redirect("logbook:triage-rules", slug=project.slug)
            if action == "add-rule":
                rule_form = RuleForm(request.POST, project=project)
                if rule_form.is_valid():
                    data = rule_form.cleaned_data
                    rule = rule_services.triage_rule_create(
                        project=project,
                        user=request.user,
                        kind=data["kind"],
                        name=data["name"],
                        root_cause=data["root_cause"],
                        weight=data["weight"],
                        pattern=data.get("pattern") or "",
                        xid=data.get("xid"),
                        dcgm_kind=data.get("dcgm_kind") or "",
                        component=data.get("component") or "",
                        source=data.get("source") or "",
                    )
                    messages.success(request, f"Rule {rule.name} added to {project.slug}.")
                    return redirect("logbook:triage-rules", slug=project.slug)
            elif action == "add-category":
                category_form = CategoryForm(request.POST)
                if category_form.is_valid():
                    cause = taxonomy_services.root_cause_create(
                        project=project, user=request.user, **category_form.cleaned_data
                    )
                    messages.success(request, f"Category {cause.name} added to {project.slug}.")
                    return redirect("logbook:triage-rules", slug=project.slug)
            elif action not in ("add-rule", "add-category"):
                raise BadRequest("Unknown action.")
        except ValidationError as exc:
            form: forms.Form = category_form if action == "add-category" else rule_form
            if form.is_bound and hasattr(exc, "error_dict"):
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.error(request, " ".join(exc.messages))
    return render(
        request,
        "logbook/triage_rules.html",
        {
            "project": project,
            "rows": triage_selectors.triage_rules_for_project(project_id=project.pk),
            "own_categories": triage_selectors.root_causes_of_project(project_id=project.pk),
            "rule_form": rule_form,
            "category_form": category_form,
            "history": triage_selectors.triage_settings_history(
                project_id=project.pk, limit=HISTORY_SHOWN
            ),
        },
    )
