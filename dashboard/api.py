"""Read API of the dashboard (session auth; ingest tokens are refused here): the run list, and
the numbers behind the MFU, goodput and failure breakdown pages as JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.query import (
    BadQuery,
    Window,
    axis_from_query,
    exclude_planned_from_query,
    window_from_query,
)
from dashboard.selectors import failures as failure_selectors
from dashboard.selectors import goodput as goodput_selectors
from dashboard.selectors import mfu as mfu_selectors
from dashboard.selectors.runs import RunListError, RunListQuery, runs_list
from dashboard.serializers import FailureLostOut, FailuresOut, GoodputOut, MfuOut
from logbook import api as logbook_api
from telemetry import goodput, selectors
from telemetry.models import Run
from telemetry.paging import ListPagination
from telemetry.query_time import TIME_WINDOW_PARAMETERS


class RunSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug")
    current_attempt = serializers.IntegerField(allow_null=True)
    status = serializers.CharField(source="current_status", allow_null=True)
    interruption_count = serializers.IntegerField(allow_null=True)
    last_loss = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "project",
            "name",
            "tags",
            "status",
            "current_attempt",
            "last_step",
            "last_seen_at",
            "interruption_count",
            "last_loss",
            "parameter_count",
            "accelerator_type",
            "accelerator_count",
        ]

    def get_last_loss(self, run: Run) -> float | str | None:
        value = getattr(run, "last_loss", None)
        return None if value is None else selectors.json_number(value)


class RunListApi(generics.ListAPIView):
    """The user's runs, searched, filtered and sorted as the run list page does (?q, ?status,
    ?tag, ?since, ?until, ?sort). With ?page or ?page_size the answer is one page in the usual
    envelope (count, next, previous, results); without, the whole list as before."""

    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[Run]:
        try:
            query = RunListQuery.parse(self.request.query_params)
        except RunListError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return runs_list(user=self.request.user, query=query)

    def paginate_queryset(self, queryset: QuerySet[Run]) -> list[Run] | None:
        params = self.request.query_params
        if "page" not in params and "page_size" not in params:
            return None
        self._paginator = ListPagination()
        return self._paginator.paginate_queryset(queryset, self.request, view=self)

    def get_paginated_response(self, data: Any) -> Response:
        return Response({**self._paginator.links(), "results": data})


def _number(value: float | None) -> float | None:
    # Non-finite values are left to the output serializers' DerivedNumber: null.
    return None if value is None else float(value)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _window(window: Window) -> dict[str, str | None]:
    return {"start": _time(window.start), "end": _time(window.end)}


def mfu_payload(report: mfu_selectors.MfuReport) -> dict[str, Any]:
    inputs = report.inputs
    run = report.run
    points = report.points
    return {
        "run": run.pk,
        "label": inputs.label.value if inputs else "MFU",
        "available": inputs is not None and report.total_points > 0,
        "missing": report.missing,
        "formula": "tokens_per_s * flops_per_token / (n_accelerators * peak_flops)",
        "inputs": {
            "flops_per_token": inputs.flops_per_token if inputs else None,
            "flops_source": inputs.flops_source if inputs else None,
            "flops_formula": "6*N + 12*L*H*Q*T",
            "parameter_count": run.parameter_count,
            "n_layers": run.n_layers,
            "n_heads": run.n_heads,
            "head_dim": run.head_dim,
            "seq_len": run.seq_len,
            "accelerator": inputs.accelerator if inputs else run.accelerator_type or None,
            "accelerator_source": report.accelerator_source or None,
            "peak_flops": inputs.peak_flops if inputs else None,
            "n_accelerators": run.accelerator_count,
            "tokens_per_step": report.tokens_per_step,
            "counts_recomputation": run.counts_recomputation,
            "throughput_source": report.throughput_source or None,
        },
        "window": _window(report.window),
        "total_points": report.total_points,
        "returned_points": len(points),
        "mean": _number(report.mean),
        "attempts": [
            {
                "attempt": int(row["attempt"]),
                "steps": int(row["steps"]),
                "first_step": int(row["first_step"]),
                "last_step": int(row["last_step"]),
                "mean": _number(row["mean"]),
            }
            for row in report.per_attempt.to_dict("records")
        ],
        "points": {
            "attempt": [int(v) for v in points["attempt"].tolist()],
            "step": [int(v) for v in points["step"].tolist()],
            "wall_time": [
                None if pd.isna(v) else pd.Timestamp(v).isoformat()
                for v in points["wall_time"].tolist()
            ],
            "tokens_per_s": [_number(v) for v in points["tokens_per_s"].tolist()],
            "mfu": [_number(v) for v in points["mfu"].tolist()],
        },
    }


def goodput_payload(report: goodput_selectors.GoodputReport) -> dict[str, Any]:
    result = report.result
    body: dict[str, Any] = {
        "run": report.run.pk,
        "window": _window(report.window),
        "exclude_planned": report.exclude_planned,
        "exclusions": [{"start": _time(a), "end": _time(b)} for a, b in report.exclusions],
        "step_source": report.step_source,
        "as_of": _time(report.as_of),
        "formula": "goodput = productive_s / elapsed_s",
        "notes": report.notes,
        "available": result is not None,
    }
    if result is None:
        return body
    blank = result.not_reported | ({goodput.OTHER} if result.not_computable else set())
    body |= {
        "elapsed_s": result.elapsed_s,
        "excluded_s": result.excluded_s,
        # null, with the reason beside it, where nothing was reported: never a fake 0
        "productive_s": None if result.not_computable else result.productive_s,
        "goodput": _number(result.goodput),
        "not_computable_reason": result.not_computable,
        "not_reported": sorted(result.not_reported),
        "badput_s": {
            name: None if name in blank else seconds for name, seconds in result.badput_s.items()
        },
        "badput_labels": {name: goodput.bucket_label(name) for name in result.badput_s},
        "data_loading_async_s": result.data_loading_async_s,
        "disruptions": result.disruptions,
        "warnings": result.warnings,
        "segments": [
            {
                "attempt": s.attempt,
                "first_step": s.first_step,
                "last_step": s.last_step,
                "resume_step": s.resume_step,
                "resumed_from_step": s.resumed_from_step,
                "lost_steps": s.lost_steps,
                "kept_intervals": s.kept_intervals,
                "wasted_intervals": s.wasted_intervals,
                "first_step_s": _number(s.first_step_s),
                "typical_step_s": _number(s.typical_step_s),
                "program_startup_s": s.program_startup_s,
            }
            for s in result.segments
        ],
        "attempts": [
            {
                "attempt": int(row["attempt"]),
                "start": _time(row["start"]),
                "end": _time(row["end"]),
                "elapsed_s": row["elapsed_s"],
                "productive_s": row["productive_s"],
                "goodput": _number(row["goodput"]),
            }
            for row in report.per_attempt.to_dict("records")
        ],
        "rolling_width_s": report.rolling_width_s,
        "rolling": [
            {
                "start": _time(row["start"]),
                "end": _time(row["end"]),
                "goodput": _number(row["goodput"]),
            }
            for row in report.rolling.to_dict("records")
        ],
    }
    return body


class RunMfuApi(APIView):
    @extend_schema(
        operation_id="run_mfu",
        parameters=[
            *TIME_WINDOW_PARAMETERS,
            OpenApiParameter(
                "axis", OpenApiTypes.STR, description="step or time (the page's chart only)."
            ),
        ],
        responses={200: MfuOut},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get_for_user(user=request.user, run_id=run_id)
        try:
            window = window_from_query(request.query_params)
            axis_from_query(request.query_params)
        except BadQuery as exc:
            raise ValidationError({exc.name: exc.message}) from exc
        report, _ = mfu_selectors.run_mfu_cached(run=run, window=window)
        return Response(MfuOut(mfu_payload(report)).data)


class RunGoodputApi(APIView):
    @extend_schema(
        operation_id="run_goodput",
        parameters=[
            *TIME_WINDOW_PARAMETERS,
            OpenApiParameter(
                "exclude_planned",
                OpenApiTypes.BOOL,
                description="1 to remove planned-maintenance windows from every number.",
            ),
        ],
        responses={200: GoodputOut},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get_for_user(user=request.user, run_id=run_id)
        try:
            window = window_from_query(request.query_params)
        except BadQuery as exc:
            raise ValidationError({exc.name: exc.message}) from exc
        report, _ = goodput_selectors.run_goodput_cached(
            run=run, window=window, exclude_planned=exclude_planned_from_query(request.query_params)
        )
        return Response(GoodputOut(goodput_payload(report)).data)


class FailureBreakdownApi(APIView):
    @extend_schema(
        operation_id="failure_breakdown",
        parameters=logbook_api.FAILURE_PARAMETERS,
        responses={200: FailuresOut},
    )
    def get(self, request: Request) -> Response:
        filters = logbook_api.failure_filters(request)
        body = logbook_api.failure_breakdown_data(user=request.user, filters=filters)
        # As on the page: the loss is read on every request, the breakdown cached a minute.
        lost = failure_selectors.lost_for_user(user=request.user, filters=filters)
        lost_body = {"interruptions": lost.interruptions.as_dict(),
                     "slowdowns": lost.slowdowns.as_dict()}  # fmt: skip
        return Response({**body, "lost": FailureLostOut(lost_body).data})
