"""Read API behind the failure breakdown and checkpoint pages (session auth): the same
numbers the pages show, each derived one with its formula and inputs. The failure breakdown's
endpoint is dashboard.api.FailureBreakdownApi (it adds the slowdowns' loss); its logbook part
is built here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from logbook.checkpoint_interval import advice_as_dict
from logbook.failure_maths import failure_report_as_dict
from logbook.selectors import checkpoints as checkpoint_selectors
from logbook.selectors import failures as failure_selectors
from logbook.selectors.failures import FailureFilters
from logbook.selectors.filters import FilterError
from logbook.serializers import FailureBreakdownOut, RunCheckpointsOut
from telemetry import run_cache
from telemetry.models import Run
from telemetry.paging import PAGE_PARAMETERS, RUN_FILTER_PARAMETER, Counted, paginate
from telemetry.query_time import TIME_WINDOW_PARAMETERS, optional_integer_parameter
from telemetry.selectors import User, run_get_for_user


def failure_filters(request: Request) -> FailureFilters:
    """The failure breakdown's filters from the query string; bad ones are a 400."""
    try:
        return failure_selectors.failure_filters_parse(request.query_params)
    except FilterError as exc:
        raise ValidationError(exc.errors) from exc


# The query parameters of the failure breakdown's JSON (dashboard.api.FailureBreakdownApi).
FAILURE_PARAMETERS = [
    RUN_FILTER_PARAMETER,
    *TIME_WINDOW_PARAMETERS,
    OpenApiParameter("site", OpenApiTypes.STR, description="Site name."),
    OpenApiParameter("cluster", OpenApiTypes.STR, description="<site>/<cluster>."),
    optional_integer_parameter(
        "accelerators", "Accelerator count to project the MTBF to (100,000 by default)."
    ),
]


def failure_breakdown_data(*, user: User, filters: FailureFilters) -> dict[str, Any]:
    """The breakdown, rates and projection as the page shows them (FailureBreakdownOut's
    data), built once per state of the incidents in scope and minute, as the page."""
    key = failure_selectors.failure_report_key(user=user, filters=filters)

    def build() -> dict[str, Any]:
        report = failure_selectors.failure_report_for_user(user=user, filters=filters)
        body = {"filters": filters.as_dict(), **failure_report_as_dict(report)}
        return dict(FailureBreakdownOut(body).data)

    return run_cache.cached(f"failures-api:{key}", build)


class RunCheckpointsApi(APIView):
    @extend_schema(
        operation_id="run_checkpoints",
        parameters=[*TIME_WINDOW_PARAMETERS, *PAGE_PARAMETERS],
        description=(
            "A run's checkpoints in the window, newest step first, a page at a time, and the "
            "interval advisor over all of them. count is every checkpoint in the window; next "
            "and previous are the URLs of the neighbouring pages, null at either end."
        ),
        responses={200: RunCheckpointsOut},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = run_get_for_user(user=request.user, run_id=run_id)
        filters = failure_filters(request)
        # The advisor over every checkpoint in the window, and their count, once per state of
        # the run's data.
        count, advisor = checkpoint_selectors.run_checkpoints_cached(
            run=run,
            start=filters.start,
            end=filters.end,
            name="api",
            compute=lambda: _advisor(run, filters.start, filters.end),
        )
        history = checkpoint_selectors.checkpoint_history(
            run=run, start=filters.start, end=filters.end
        )
        # Every checkpoint in the window is in the advisor's frame: no COUNT query needed.
        rows, paging = paginate(Counted(history, count), request)
        window = filters.as_dict()
        body = {
            "run": run.pk,
            "window": {"start": window["start"], "end": window["end"]},
            **paging,
            "checkpoints": rows,
            "advisor": advisor,
        }
        return Response(RunCheckpointsOut(body).data)


def _advisor(run: Run, start: datetime | None, end: datetime | None) -> tuple[int, dict[str, Any]]:
    """How many checkpoints the window holds, and the advisor over them as JSON."""
    result = checkpoint_selectors.run_checkpoints(run=run, start=start, end=end)
    return len(result.checkpoints), advice_as_dict(result.advice)
