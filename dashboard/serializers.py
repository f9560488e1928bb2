"""What the MFU and goodput APIs answer, as output serializers: the OpenAPI schema documents
every field, and every derived figure without a finite value is null (the NaN policy,
docs/ingest.md)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from logbook.serializers import DerivedOut, FailureBreakdownOut
from telemetry.serializer_fields import DerivedNumber


def _derived(*, required: bool = True) -> DerivedNumber:
    return DerivedNumber(allow_null=True, required=required)


def _time() -> serializers.CharField:
    # ISO 8601 as Python's isoformat writes it; null for an open end.
    return serializers.CharField(allow_null=True)


class WindowOut(serializers.Serializer):
    start = _time()
    end = _time()


class MfuInputsOut(serializers.Serializer):
    flops_per_token = _derived()
    flops_source = serializers.CharField(allow_null=True)
    flops_formula = serializers.CharField()
    parameter_count = serializers.IntegerField(allow_null=True)
    n_layers = serializers.IntegerField(allow_null=True)
    n_heads = serializers.IntegerField(allow_null=True)
    head_dim = serializers.IntegerField(allow_null=True)
    seq_len = serializers.IntegerField(allow_null=True)
    accelerator = serializers.CharField(allow_null=True)
    accelerator_source = serializers.CharField(allow_null=True)
    peak_flops = _derived()
    n_accelerators = serializers.IntegerField(allow_null=True)
    tokens_per_step = serializers.IntegerField(allow_null=True)
    counts_recomputation = serializers.BooleanField()
    throughput_source = serializers.CharField(allow_null=True)


class MfuAttemptOut(serializers.Serializer):
    attempt = serializers.IntegerField()
    steps = serializers.IntegerField()
    first_step = serializers.IntegerField()
    last_step = serializers.IntegerField()
    mean = _derived()


class MfuPointsOut(serializers.Serializer):
    """Columns of the returned points, one list per column, all of the same length."""

    attempt = serializers.ListField(child=serializers.IntegerField())
    step = serializers.ListField(child=serializers.IntegerField())
    wall_time = serializers.ListField(child=_time())
    tokens_per_s = serializers.ListField(child=_derived())
    mfu = serializers.ListField(child=_derived())


class MfuOut(serializers.Serializer):
    run = serializers.IntegerField()
    label = serializers.CharField()
    available = serializers.BooleanField()
    missing = serializers.ListField(child=serializers.CharField())
    formula = serializers.CharField()
    inputs = MfuInputsOut()
    window = WindowOut()
    total_points = serializers.IntegerField()
    returned_points = serializers.IntegerField()
    mean = _derived()
    attempts = MfuAttemptOut(many=True)
    points = MfuPointsOut()


class GoodputSegmentOut(serializers.Serializer):
    attempt = serializers.IntegerField()
    first_step = serializers.IntegerField()
    last_step = serializers.IntegerField()
    resume_step = serializers.IntegerField(help_text="r: the next attempt's first step.")
    resumed_from_step = serializers.IntegerField(
        allow_null=True, help_text="The checkpoint step the next attempt resumed from (r - 1)."
    )
    lost_steps = serializers.IntegerField(
        help_text="last_step - resumed_from_step: as the logbook and the incident count them."
    )
    kept_intervals = serializers.IntegerField()
    wasted_intervals = serializers.IntegerField()
    first_step_s = _derived()
    typical_step_s = _derived()
    program_startup_s = _derived()


class GoodputAttemptOut(serializers.Serializer):
    attempt = serializers.IntegerField()
    start = _time()
    end = _time()
    elapsed_s = _derived()
    productive_s = _derived()
    goodput = _derived()


class GoodputRollingOut(serializers.Serializer):
    start = _time()
    end = _time()
    goodput = _derived()


class GoodputOut(serializers.Serializer):
    """The goodput ledger of a run; the figures after `available` are present only when it
    is true (a run with no job start or step start has none)."""

    run = serializers.IntegerField()
    window = WindowOut()
    exclude_planned = serializers.BooleanField()
    exclusions = WindowOut(many=True)
    step_source = serializers.CharField()
    as_of = _time()
    formula = serializers.CharField()
    notes = serializers.ListField(child=serializers.CharField())
    available = serializers.BooleanField()
    elapsed_s = _derived(required=False)
    excluded_s = _derived(required=False)
    productive_s = _derived(required=False)
    goodput = _derived(required=False)
    not_computable_reason = serializers.CharField(
        required=False, allow_blank=True, help_text="Why goodput is null ('' when computed)."
    )
    not_reported = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Buckets with no input at all: null in badput_s, not a measured 0.",
    )
    badput_s = serializers.DictField(child=_derived(), required=False)
    badput_labels = serializers.DictField(child=serializers.CharField(), required=False)
    data_loading_async_s = _derived(required=False)
    disruptions = serializers.IntegerField(required=False)
    warnings = serializers.ListField(child=serializers.CharField(), required=False)
    segments = GoodputSegmentOut(many=True, required=False)
    attempts = GoodputAttemptOut(many=True, required=False)
    rolling_width_s = _derived(required=False)
    rolling = GoodputRollingOut(many=True, required=False)

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        # Without a ledger the answer stops at `available`, as it always has (the nullable
        # fields after it would otherwise read as null).
        body: dict[str, Any] = super().to_representation(instance)
        return {key: value for key, value in body.items() if key in instance}


class FailureLostOut(serializers.Serializer):
    interruptions = DerivedOut()
    slowdowns = DerivedOut()


class FailuresOut(FailureBreakdownOut):
    """The failure breakdown (the logbook's) with what the runs in scope lost: GPU-hours to
    interruptions (downtime) and to slowdowns (below their own baseline)."""

    lost = FailureLostOut()
