"""The root-cause taxonomy: everyone signed in reads the site-wide categories and those of
their projects; superusers add site-wide ones here, project admins their project's own on
its auto-triage settings page (issue 42 finding 5: a project admin's category reached every
project's forms and captured another project's job reports)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from logbook.models import RootCause
from logbook.selectors import incidents as incident_selectors
from logbook.services import taxonomy as taxonomy_services
from telemetry.models import Membership
from telemetry.selectors import projects_for_user, projects_with_role


class RootCauseForm(forms.ModelForm):
    class Meta:
        model = RootCause
        fields = ["name", "slug", "group", "family", "is_hardware", "is_planned", "description"]


@login_required
def taxonomy(request: HttpRequest) -> HttpResponse:
    can_edit = bool(request.user.is_superuser)
    form = RootCauseForm()
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied(
                "Only site administrators extend the site-wide taxonomy; project admins add "
                "their project's own categories on its auto-triage settings page."
            )
        form = RootCauseForm(request.POST)
        if form.is_valid():
            try:
                cause = taxonomy_services.root_cause_create(
                    project=None, user=request.user, **form.cleaned_data
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"Category {cause.name} added.")
                return redirect("logbook:taxonomy")
    projects = projects_for_user(user=request.user)
    return render(
        request,
        "logbook/taxonomy.html",
        {
            "causes": incident_selectors.root_causes(project_ids=projects.values("pk"))
            .select_related("project")
            .order_by("project_id", "group", "name"),
            "form": form,
            "can_edit": can_edit,
            "admin_projects": projects_with_role(user=request.user, at_least=Membership.Role.ADMIN),
        },
    )
