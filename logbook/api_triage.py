"""JSON twin of the auto-triage accuracy page: per suggested category, how many suggestions
on-call confirmed and overrode, and the median time from detection to triage with and
without a suggestion, over the reader's projects."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from logbook.selectors import triage as triage_selectors
from logbook.serializers import TriageAccuracyOut


class TriageAccuracyApi(APIView):
    @extend_schema(operation_id="triage_accuracy", responses={200: TriageAccuracyOut})
    def get(self, request: Request) -> Response:
        accuracy = triage_selectors.triage_accuracy(user=request.user)
        return Response(TriageAccuracyOut(accuracy).data)
