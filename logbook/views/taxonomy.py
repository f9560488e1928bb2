"""The root-cause taxonomy: everyone signed in reads it; project admins add categories."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from logbook.models import RootCause
from logbook.services import taxonomy as taxonomy_services
from telemetry.models import Membership
from telemetry.selectors import user_has_role


class RootCauseForm(forms.ModelForm):
    class Meta:
        model = RootCause
        fields = ["name", "slug", "group", "is_hardware", "is_planned", "description"]


@login_required
def taxonomy(request: HttpRequest) -> HttpResponse:
    can_edit = user_has_role(user=request.user, at_least=Membership.Role.ADMIN)
    form = RootCauseForm()
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied("Only project admins extend the taxonomy.")
        form = RootCauseForm(request.POST)
        if form.is_valid():
            cause = taxonomy_services.root_cause_create(**form.cleaned_data)
            messages.success(request, f"Category {cause.name} added.")
            return redirect("logbook:taxonomy")
    return render(
        request,
        "logbook/taxonomy.html",
        {"causes": RootCause.objects.order_by("group", "name"), "form": form, "can_edit": can_edit},
    )
