"""Project administration: members and their roles (admins only)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from telemetry import selectors, services
from telemetry.models import Membership
from telemetry.views.posted import posted_id


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Membership.Role.choices)


def _may_add_users(request: HttpRequest) -> bool:
    """Whether this admin may add any user of the site to the project. A project admin
    adding someone gives them the project (as admin, even) without their say: multi-team
    sites keep that to site administrators (PROJECT_ADMINS_ADD_EXISTING_USERS off)."""
    return bool(request.user.is_superuser or settings.PROJECT_ADMINS_ADD_EXISTING_USERS)


@login_required
def project_members(request: HttpRequest, slug: str) -> HttpResponse:
    project = selectors.project_get_for_admin(user=request.user, slug=slug)
    form = MemberForm()
    if request.method == "POST":
        try:
            if request.POST.get("action") == "remove":
                membership = get_object_or_404(
                    Membership, project=project, pk=posted_id(request, "membership")
                )
                services.membership_remove(membership=membership)
                messages.success(request, f"{membership.user.get_username()} removed.")
                return redirect("telemetry:project-members", slug=project.slug)
            form = MemberForm(request.POST)
            if form.is_valid():
                membership = services.membership_set(
                    project=project, may_add=_may_add_users(request), **form.cleaned_data
                )
                messages.success(
                    request,
                    f"{membership.user.get_username()} is {membership.get_role_display()}.",
                )
                return redirect("telemetry:project-members", slug=project.slug)
        except ValidationError as exc:
            if not form.is_bound:  # a removal: there is no form to put the error on
                messages.error(request, " ".join(exc.messages))
            for field, errors in exc.message_dict.items() if form.is_bound else ():
                form.add_error(field if field in form.fields else None, errors)
    return render(
        request,
        "telemetry/members.html",
        {
            "project": project,
            "members": selectors.project_members(project=project),
            "form": form,
            "roles": Membership.Role.choices,
            "may_add": _may_add_users(request),
        },
    )
