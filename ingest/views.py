"""Project administration: ingest tokens (a new token is shown once) and dead ingest batches
(admins only); and where the run links MLflow prints lead."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from ingest import selectors, services
from ingest.mlflow_api import endpoint_not_found
from ingest.models import IngestToken
from telemetry.selectors import project_get_for_admin
from telemetry.views.posted import posted_id

# A page, not an archive: the newest dead batches (re-queue all reaches every one).
DEAD_BATCHES_SHOWN = 200


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
            token = get_object_or_404(IngestToken, project=project, pk=posted_id(request, "token"))
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


@login_required
def project_batches(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's dead ingest batches (processing kept failing), each with its last error,
    and a re-queue action for one or all of them once the cause is fixed."""
    project = project_get_for_admin(user=request.user, slug=slug)
    if request.method == "POST":
        # No `batch`: re-queue them all. "²".isdigit() is true and int("²") raises, so the
        # id goes through posted_id (a 400 naming the field).
        batch_pks = [posted_id(request, "batch")] if "batch" in request.POST else None
        count = services.batches_requeue(project=project, batch_pks=batch_pks)
        messages.success(request, f"Re-queued {count} batch(es); the worker processes them now.")
        return redirect("ingest:project-batches", slug=project.slug)
    dead = selectors.batches_dead(project=project)
    return render(
        request,
        "ingest/batches.html",
        {
            "project": project,
            "batches": dead[:DEAD_BATCHES_SHOWN],
            "dead_count": dead.count(),
            "max_attempts": settings.INGEST_MAX_PROCESS_ATTEMPTS,
        },
    )


def mlflow_landing(request: HttpRequest) -> HttpResponse:
    """/mlflow/ itself. MLflow prints each run's link as <tracking URI>/#/experiments/<id>/
    runs/<id>; the part after # never reaches a server, so a browser gets a page whose script
    reads it and opens the run's Chronicle page. An API client gets MLflow's JSON 404."""
    if "text/html" not in request.headers.get("Accept", ""):
        return endpoint_not_found(request)
    return render(request, "ingest/mlflow_landing.html")


@login_required
def mlflow_open(request: HttpRequest) -> HttpResponse:
    """The Chronicle page of an MLflow run (?run=<run id>), or the run list when the link
    names only an experiment. A run the user may not see is a 404, as a run page is."""
    run_uuid = request.GET.get("run", "")
    if not run_uuid:
        return redirect("dashboard:run-list")
    mlflow_run = selectors.mlflow_run_for_user(user=request.user, run_uuid=run_uuid)
    if mlflow_run is None:
        raise Http404("No MLflow run with this id in your projects.")
    return redirect("dashboard:run-detail", run_id=mlflow_run.run_id)
