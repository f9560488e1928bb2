"""How good auto-triage's suggestions are: per suggested category, confirmed against
overridden, and the median time from detection to triage with and without a suggestion
(JSON twin: /api/v1/triage/accuracy); what on-call's decisions teach: each rule's precision,
the overrides no rule explained, and each project's classifier."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from logbook.selectors import triage as triage_selectors
from logbook.selectors import triage_learning as learning_selectors


@login_required
def triage_accuracy(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "logbook/triage_accuracy.html",
        {
            "accuracy": triage_selectors.triage_accuracy(user=request.user),
            "learning": learning_selectors.triage_learning(user=request.user),
        },
    )
