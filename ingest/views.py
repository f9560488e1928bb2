"""Project administration: ingest tokens (admins only). A new token is shown once."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from ingest import services
from ingest.models import IngestToken
from telemetry.selectors import project_get_for_admin


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100)
    expires_days = forms.IntegerField(
        min_value=1, max_value=3650, required=False, label="Expires after (days)"
    )


@login_required
def project_tokens(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_admin(user=request.user, slug=slug)
    form = TokenForm()
    plaintext = None
    if request.method == "POST":
        if request.POST.get("action") == "revoke":
            token = get_object_or_404(
                IngestToken, project=project, pk=request.POST.get("token") or 0
            )
            services.token_revoke(token=token)
            return redirect("ingest:project-tokens", slug=project.slug)
        form = TokenForm(request.POST)
        if form.is_valid():
            days = form.cleaned_data["expires_days"]
            _, plaintext = services.token_create(
                project=project,
                name=form.cleaned_data["name"],
                created_by=request.user,
                expires_at=timezone.now() + timedelta(days=days) if days else None,
            )
            form = TokenForm()
    response = render(
        request,
        "ingest/tokens.html",
        {
            "project": project,
            "tokens": project.ingest_tokens.select_related("created_by").order_by("-created_at"),
            "form": form,
            "plaintext": plaintext,
        },
    )
    if plaintext:
        # The only time the secret exists outside the job: never cache this page.
        response["Cache-Control"] = "no-store"
    return response
