"""Diagnosis pages: the open slowdowns of every run the user sees, and on-call's decision on
one (posted from the run page's Slowdowns section)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from diagnosis.models import Slowdown
from diagnosis.selectors import slowdowns as slowdown_selectors
from diagnosis.services import slowdowns as slowdown_services
from telemetry import selectors
from telemetry.models import Membership


@login_required
def slowdown_list(request: HttpRequest) -> HttpResponse:
    slowdowns = slowdown_selectors.with_words(
        slowdown_selectors.open_slowdowns_for_user(user=request.user)
    )
    return render(
        request,
        "diagnosis/slowdowns.html",
        {
            "slowdowns": slowdowns,
            "total_gpu_hours": sum(s.gpu_hours_lost or 0.0 for s in slowdowns),
        },
    )


@login_required
@require_POST
def slowdown_decide(request: HttpRequest, slowdown_id: int) -> HttpResponse:
    slowdown = slowdown_selectors.slowdown_get_for_user(user=request.user, slowdown_id=slowdown_id)
    if slowdown is None:
        raise Http404("No such slowdown.")
    if not selectors.user_has_role(
        user=request.user, at_least=Membership.Role.ONCALL, project_id=slowdown.run.project_id
    ):
        raise PermissionDenied("Only on-call or admins of the project decide slowdowns.")
    status = request.POST.get("status", "")
    kinds = {value for value, _ in Slowdown.Kind.choices}
    cause_kind = request.POST.get("cause_kind", "")
    if status not in {value for value, _ in Slowdown.Status.choices} or (
        cause_kind and cause_kind not in kinds
    ):
        return HttpResponse("Choose confirmed, dismissed or open, and a known cause.", status=400)
    slowdown_services.slowdown_decide(
        slowdown=slowdown,
        user=request.user,
        status=status,
        cause_kind=cause_kind,
        note=request.POST.get("note", ""),
    )
    return redirect(
        reverse("dashboard:run-detail", args=[slowdown.run_id]) + f"#slowdown-{slowdown.pk}"
    )
