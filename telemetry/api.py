"""Read API for a run's metric series (session auth; ingest tokens are refused here)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from telemetry import selectors
from telemetry.query_time import optional_integer_parameter
from telemetry.selectors import series as series_selectors
from telemetry.selectors.sites import attempt_sites

MAX_POINTS_DEFAULT = 2000
MAX_POINTS_LIMIT = 20_000


class _AttemptSeriesDoc(serializers.Serializer):
    attempt = serializers.IntegerField()
    total_points = serializers.IntegerField()
    steps = serializers.ListField(child=serializers.IntegerField())
    values = serializers.ListField(child=serializers.JSONField())
    times = serializers.ListField(child=serializers.CharField(allow_null=True))


class _SeriesDoc(serializers.Serializer):
    run = serializers.IntegerField()
    name = serializers.CharField()
    max_points = serializers.IntegerField()
    total_points = serializers.IntegerField()
    returned_points = serializers.IntegerField()
    downsampled = serializers.BooleanField()
    attempts = _AttemptSeriesDoc(many=True)


class SeriesApi(APIView):
    @extend_schema(
        operation_id="run_series",
        parameters=[
            OpenApiParameter("name", OpenApiTypes.STR, required=True, description="Metric name."),
            optional_integer_parameter(
                "max_points",
                f"At most this many points in all ({MAX_POINTS_DEFAULT} by default, "
                f"{MAX_POINTS_LIMIT} at most); each bucket's min and max are kept.",
            ),
        ],
        responses={200: _SeriesDoc},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get_for_user(user=request.user, run_id=run_id)
        name = request.query_params.get("name", "")
        if not name:
            raise ValidationError({"name": "is required: the metric to read, e.g. ?name=loss"})
        if "\x00" in name:
            # PostgreSQL text cannot hold NUL: compared with a column it is a database error.
            raise ValidationError({"name": "must not contain a NUL character"})
        max_points = _max_points(request.query_params.get("max_points"))
        per_attempt = series_selectors.series_for_run(run=run, name=name, max_points=max_points)
        total = sum(one.total_points for one in per_attempt)
        returned = sum(int(one.steps.size) for one in per_attempt)
        return Response(
            {
                "run": run.pk,
                "name": name,
                "max_points": max_points,
                "total_points": total,
                "returned_points": returned,
                "downsampled": returned < total,
                "attempts": [
                    {
                        "attempt": one.attempt,
                        "total_points": one.total_points,
                        "steps": one.steps.tolist(),
                        "values": [selectors.json_number(v) for v in one.values.tolist()],
                        "times": _rfc3339(one.wall_times),
                    }
                    for one in per_attempt
                ],
            }
        )


def _rfc3339(times: npt.NDArray[np.datetime64]) -> list[str | None]:
    # One vectorised conversion: per element, numpy's scalar path costs ~4 µs a point.
    text = np.datetime_as_string(times.astype("datetime64[ms]"), unit="ms").tolist()
    return [None if moment == "NaT" else f"{moment}Z" for moment in text]


def _max_points(raw: str | None) -> int:
    if raw is None or raw == "":
        return MAX_POINTS_DEFAULT
    if not (raw.isascii() and raw.isdigit()) or not 10 <= int(raw) <= MAX_POINTS_LIMIT:
        raise ValidationError(
            {"max_points": f"must be an integer from 10 to {MAX_POINTS_LIMIT}, got {raw[:20]!r}"}
        )
    return int(raw)


class _SiteShareDoc(serializers.Serializer):
    site = serializers.CharField(help_text='"" for hosts no one placed.')
    hosts = serializers.ListField(child=serializers.CharField())
    ranks = serializers.IntegerField()
    sections = serializers.DictField(child=serializers.FloatField(), help_text="Mean s/step.")
    share = serializers.DictField(
        child=serializers.FloatField(), help_text="Each section's share of the step."
    )


class _RunSitesDoc(serializers.Serializer):
    run = serializers.IntegerField()
    attempt = serializers.IntegerField()
    sites = _SiteShareDoc(many=True)
    note = serializers.CharField()


class RunSitesApi(APIView):
    @extend_schema(
        operation_id="run_sites",
        parameters=[optional_integer_parameter("attempt", "The attempt (its latest if omitted).")],
        description="An attempt's hosts by site and each site's share of the step's time "
        "from its ranks' timings (the newest six hours of heat-map buckets).",
        responses={200: _RunSitesDoc},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get_for_user(user=request.user, run_id=run_id)
        raw = request.query_params.get("attempt", "")
        attempts = run.attempts.order_by("-number")
        if raw:
            if not (raw.isascii() and raw.isdigit() and len(raw) < 10):
                raise ValidationError({"attempt": f"must be an attempt number, got {raw[:20]!r}"})
            attempts = attempts.filter(number=int(raw))
        attempt = attempts.first()
        if attempt is None:
            raise NotFound("No such attempt.")
        found = attempt_sites(attempt=attempt)
        return Response(
            {
                "run": run.pk,
                "attempt": found.attempt,
                "sites": [
                    {
                        "site": one.site,
                        "hosts": one.hosts,
                        "ranks": one.ranks,
                        "sections": one.sections,
                        "share": one.share,
                    }
                    for one in found.sites
                ],
                "note": found.note,
            }
        )
