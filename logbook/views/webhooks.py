"""A project's webhooks, for its admins: endpoints, add/disable, and recent deliveries with
their outcome (status, HTTP code, attempts, last error)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from logbook.models import WebhookDelivery, WebhookEndpoint
from logbook.selectors import webhooks as webhook_selectors
from logbook.services import webhooks as webhook_services
from telemetry.liveness import RUN_STALL_AFTER
from telemetry.models import Membership, Project
from telemetry.selectors import User, project_get_for_admin, projects_with_role
from telemetry.views.posted import posted_id

RECENT_DELIVERIES = 50


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=100)
    url = forms.URLField(max_length=1000, assume_scheme="https")
    events = forms.MultipleChoiceField(
        choices=WebhookEndpoint.Event.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every event.",
    )
    format = forms.ChoiceField(
        choices=WebhookEndpoint.Format.choices,
        initial=WebhookEndpoint.Format.SLACK,
        required=False,
    )
    secret = forms.CharField(
        max_length=200,
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="PagerDuty: the integration (routing) key. Opsgenie: the API key.",
    )

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValidationError("Webhooks are sent over http or https only.")
        return url


def _admin_projects(user: User) -> list[Project]:
    return list(projects_with_role(user=user, at_least=Membership.Role.ADMIN))


def _project_for_admin(user: User, slug: str) -> Project:
    return project_get_for_admin(user=user, slug=slug)


@login_required
def webhooks_index(request: HttpRequest) -> HttpResponse:
    """The projects whose webhooks the user manages (straight to the one, if only one)."""
    projects = _admin_projects(request.user)
    if len(projects) == 1:
        return redirect("logbook:webhooks", slug=projects[0].slug)
    return render(request, "logbook/webhooks.html", {"project": None, "projects": projects})


@login_required
def project_webhooks(request: HttpRequest, slug: str) -> HttpResponse:
    project = _project_for_admin(request.user, slug)
    form = EndpointForm()
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "add":
            form = EndpointForm(request.POST)
            if form.is_valid():
                try:
                    endpoint = webhook_services.webhook_endpoint_create(
                        project=project,
                        name=form.cleaned_data["name"],
                        url=form.cleaned_data["url"],
                        events=form.cleaned_data["events"],
                        format=form.cleaned_data["format"] or WebhookEndpoint.Format.SLACK,
                        secret=form.cleaned_data["secret"],
                    )
                except ValidationError as exc:
                    for field, errors in exc.message_dict.items():
                        form.add_error(field if field in form.fields else None, errors)
                else:
                    messages.success(request, f"Webhook {endpoint.name} added.")
                    return redirect("logbook:webhooks", slug=project.slug)
        elif action in ("enable", "disable"):
            endpoint = get_object_or_404(
                WebhookEndpoint, project=project, pk=posted_id(request, "endpoint")
            )
            webhook_services.webhook_endpoint_set_enabled(
                endpoint=endpoint, enabled=action == "enable"
            )
            messages.success(request, f"Webhook {endpoint.name} {action}d.")
            return redirect("logbook:webhooks", slug=project.slug)
        else:
            return HttpResponse("Unknown action.", status=400)
    endpoints = list(WebhookEndpoint.objects.filter(project=project).order_by("name"))
    last_delivered = webhook_selectors.last_delivery_times(project=project)
    deliveries = list(
        WebhookDelivery.objects.filter(endpoint__project=project)
        .select_related("endpoint")
        .order_by("-created_at", "-pk")[:RECENT_DELIVERIES]
    )
    return render(
        request,
        "logbook/webhooks.html",
        {
            "project": project,
            "endpoints": [
                {"endpoint": endpoint, "last_delivered": last_delivered.get(endpoint.pk)}
                for endpoint in endpoints
            ],
            "deliveries": deliveries,
            "form": form,
            "event_labels": dict(WebhookEndpoint.Event.choices),
            "max_attempts": webhook_services.MAX_ATTEMPTS,
            "backoff_s": webhook_services.RETRY_BACKOFF_S,
            "stall_after_min": int(RUN_STALL_AFTER.total_seconds() // 60),
        },
    )
