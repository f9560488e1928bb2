"""The failure breakdown page: the logbook's breakdown of what stopped the runs
(logbook.views.failures), with the GPU-hours the runs lost to interruptions beside those lost
running below their own baseline (diagnosis's slowdowns). It joins the two apps, so it is
assembled here (docs/architecture.md, "Where explanations live")."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard.selectors import failures as failure_selectors
from logbook.views import failures as failure_page


@login_required
def failure_breakdown(request: HttpRequest) -> HttpResponse:
    filters, context = failure_page.page_context(request)
    # Not cached with the breakdown (a minute at most): two small queries, and confirming or
    # dismissing a slowdown shows at once.
    lost = failure_selectors.lost_for_user(user=request.user, filters=filters)
    return render(
        request,
        "logbook/failures.html",
        {
            **context,
            "lost_interruptions": failure_page.derived_display(
                lost.interruptions.as_dict(), "Lost to interruptions"
            ),
            "lost_slowdowns": failure_page.derived_display(
                lost.slowdowns.as_dict(), "Lost to slowdowns"
            ),
        },
    )
