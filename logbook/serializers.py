"""What the logbook's JSON APIs answer, as output serializers: the OpenAPI schema documents
every field of every response, and every number follows one policy for NaN and infinities.

The policy (docs/ingest.md, "NaN and infinities in what Chronicle answers"): a value a job
measured (a metric point, an SDC observation) keeps its NaN or ±Infinity, as the strings
"NaN", "Infinity" and "-Infinity" that ingest accepts and MLflow writes, because a NaN loss
is a signal; a figure Chronicle derives that has no value (a rate without interruptions, a
ratio without time) is null.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from logbook import autotriage
from logbook.checkpoint_interval import ADVICE_FIELDS
from logbook.failure_maths import RATE_NAMES
from logbook.markdown import render_markdown
from logbook.models import Interruption, SdcReplay, TriageSuggestion
from telemetry.models import Device, Host
from telemetry.selectors import json_number
from telemetry.serializer_fields import DerivedNumber, FiniteJson, MeasuredNumber, Time


class RunRef(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.CharField(source="project.slug")


# --- Derived numbers, failures and the checkpoint advisor ---------------------------------------


class DerivedOut(serializers.Serializer):
    """A computed number with the formula and the inputs that produced it."""

    value = DerivedNumber(allow_null=True)
    unit = serializers.CharField()
    formula = serializers.CharField()
    inputs = FiniteJson()
    note = serializers.CharField(allow_blank=True)


class BreakdownGroupOut(serializers.Serializer):
    group = serializers.CharField()
    is_hardware = serializers.BooleanField()
    count = serializers.IntegerField()
    percent = DerivedNumber(allow_null=True)


class BreakdownRowOut(BreakdownGroupOut):
    component = serializers.CharField()


class BreakdownOut(serializers.Serializer):
    percent_formula = serializers.CharField()
    total = serializers.IntegerField()
    planned = serializers.IntegerField()
    unexpected = serializers.IntegerField()
    hardware = serializers.IntegerField()
    rows = BreakdownRowOut(many=True)
    groups = BreakdownGroupOut(many=True)
    planned_percent = DerivedOut()
    hardware_share = DerivedOut()


RatesOut = type(
    "RatesOut",
    (serializers.Serializer,),
    {
        **{name: DerivedOut() for name in RATE_NAMES},
        "manual_interventions": serializers.IntegerField(),
    },
)


class FailureFiltersOut(serializers.Serializer):
    run_id = serializers.IntegerField(allow_null=True)
    start = serializers.CharField(allow_null=True)
    end = serializers.CharField(allow_null=True)
    site = serializers.CharField(allow_blank=True)
    cluster = serializers.CharField(allow_blank=True)
    projection_accelerators = serializers.IntegerField()


class FailureBreakdownOut(serializers.Serializer):
    filters = FailureFiltersOut()
    breakdown = BreakdownOut()
    rates = RatesOut()
    projection = DerivedOut()


class WasteCurveOut(serializers.Serializer):
    interval_s = serializers.ListField(child=DerivedNumber())
    waste_fraction = serializers.ListField(child=DerivedNumber())


AdvisorOut = type(
    "AdvisorOut",
    (serializers.Serializer,),
    {
        **{name: DerivedOut() for name in ADVICE_FIELDS},
        "waste_curve": WasteCurveOut(allow_null=True),
    },
)


class CheckpointWindowOut(serializers.Serializer):
    start = serializers.CharField(allow_null=True)
    end = serializers.CharField(allow_null=True)


class CheckpointOut(serializers.Serializer):
    step = serializers.IntegerField()
    attempt = serializers.IntegerField(source="attempt_number", allow_null=True)
    saved_at = Time(allow_null=True)
    blocking_save_s = DerivedNumber(allow_null=True)
    async_save_s = DerivedNumber(allow_null=True)
    size_bytes = serializers.IntegerField(allow_null=True)
    tier = serializers.CharField()
    status = serializers.CharField()
    uri = serializers.CharField(allow_blank=True)
    restored_count = serializers.IntegerField()
    restored_by_attempts = serializers.SerializerMethodField()

    def get_restored_by_attempts(self, row: dict[str, Any]) -> list[int]:
        return row["restored_by"] or []


class RunCheckpointsOut(serializers.Serializer):
    run = serializers.IntegerField()
    window = CheckpointWindowOut()
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    checkpoints = CheckpointOut(many=True)
    advisor = AdvisorOut()


# --- Incidents ----------------------------------------------------------------------------------


class RootCauseRef(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    group = serializers.CharField()


class EvidenceOut(serializers.Serializer):
    kind = serializers.ChoiceField(choices=list(autotriage.EVIDENCE_KINDS))
    at = serializers.CharField(allow_null=True, help_text="ISO 8601, UTC")
    text = serializers.CharField()
    url = serializers.CharField(allow_blank=True)


class SuggestionOut(serializers.Serializer):
    """Auto-triage's suggestion (logbook.autotriage): not the incident's root cause until
    on-call confirms it."""

    category = serializers.CharField(source="root_cause.slug")
    category_name = serializers.CharField(source="root_cause.name")
    component = serializers.CharField()
    hosts = serializers.ListField(child=serializers.CharField())
    devices = serializers.ListField(child=serializers.CharField())
    confidence = serializers.FloatField(min_value=0, max_value=1)
    evidence = EvidenceOut(many=True)
    note = serializers.CharField()
    outcome = serializers.CharField()
    runbook_url = serializers.SerializerMethodField()

    def get_runbook_url(self, suggestion: TriageSuggestion) -> str:
        return reverse("logbook:taxonomy") + f"#{suggestion.root_cause.slug}"


class IncidentOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    url = serializers.SerializerMethodField()
    run = RunRef()
    attempt = serializers.IntegerField(source="attempt.number", allow_null=True)
    occurred_at = Time()
    detected_at = Time(allow_null=True)
    recovered_at = Time(allow_null=True)
    step = serializers.IntegerField(allow_null=True)
    planned = serializers.BooleanField()
    reported_category = serializers.CharField()
    root_cause = RootCauseRef()
    component = serializers.CharField()
    hosts = serializers.SerializerMethodField()
    devices = serializers.SerializerMethodField()
    severity = serializers.CharField()
    manual_intervention = serializers.BooleanField()
    lost_steps = serializers.IntegerField(allow_null=True)
    # The run-local number logbooks link by; the same after export and import elsewhere.
    number = serializers.IntegerField(allow_null=True)
    time_precision = serializers.CharField()
    occurred_until = Time(allow_null=True)
    local_time = serializers.CharField()
    reported_lost_s = serializers.FloatField(allow_null=True)
    downtime_s = serializers.FloatField(allow_null=True)
    message = serializers.CharField()
    notes = serializers.CharField()
    notes_html = serializers.SerializerMethodField()
    status = serializers.CharField()
    triaged_by = serializers.CharField(source="triaged_by.get_username", allow_null=True)
    triaged_at = Time(allow_null=True)
    resolved_by = serializers.CharField(source="resolved_by.get_username", allow_null=True)
    resolved_at = Time(allow_null=True)
    version = serializers.IntegerField()
    suggestion = serializers.SerializerMethodField()

    def get_url(self, incident: Interruption) -> str:
        return reverse("logbook:incident-detail", args=[incident.pk])

    @extend_schema_field(SuggestionOut(allow_null=True))
    def get_suggestion(self, incident: Interruption) -> dict[str, Any] | None:
        try:
            suggestion = incident.suggestion
        except TriageSuggestion.DoesNotExist:
            return None
        return dict(SuggestionOut(suggestion).data)

    def get_hosts(self, incident: Interruption) -> list[str]:
        return sorted(host.name for host in incident.hosts.all())

    def get_devices(self, incident: Interruption) -> list[str]:
        return sorted(device.uuid for device in incident.devices.all())

    def get_notes_html(self, incident: Interruption) -> str:
        return str(render_markdown(incident.notes))


class AuditEventOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    at = Time()
    user = serializers.CharField(source="username")
    action = serializers.CharField()
    changes = FiniteJson()


class IncidentFiltersOut(serializers.Serializer):
    run = serializers.CharField(allow_blank=True)
    status = serializers.CharField()
    category = serializers.CharField(allow_blank=True)
    host = serializers.CharField(allow_blank=True)


class IncidentListOut(serializers.Serializer):
    filters = IncidentFiltersOut(source="filters.as_query")
    total = serializers.IntegerField(source="queue.total")
    truncated = serializers.BooleanField(source="queue.truncated")
    incidents = IncidentOut(source="queue.incidents", many=True)


class IncidentDetailOut(serializers.Serializer):
    incident = IncidentOut()
    can_edit = serializers.BooleanField()
    history = AuditEventOut(many=True)


class IncidentUpdatedOut(serializers.Serializer):
    incident = IncidentOut()


class IncidentConflictOut(serializers.Serializer):
    detail = serializers.CharField()
    current = IncidentOut()
    their_changes = AuditEventOut(many=True)


# --- The SDC ledger and the fleet ---------------------------------------------------------------


class HardwareFiltersOut(serializers.Serializer):
    run = serializers.CharField(allow_blank=True)
    since = serializers.CharField(allow_blank=True)
    until = serializers.CharField(allow_blank=True)
    site = serializers.CharField(allow_blank=True)
    cluster = serializers.CharField(allow_blank=True)
    verdict = serializers.CharField(allow_blank=True)


class SdcRecordOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    run = RunRef()
    attempt = serializers.IntegerField(source="attempt.number", allow_null=True)
    compared_attempt = serializers.IntegerField(source="compared_attempt.number", allow_null=True)
    step = serializers.IntegerField()
    detected_at = Time()
    detection = serializers.CharField()
    detected_by = serializers.SerializerMethodField(
        help_text="Every way this one event was detected: its detection, and "
        "attempt_divergence when a replay of the step also disagreed."
    )
    metric_name = serializers.CharField()
    observed_value = MeasuredNumber(allow_null=True)
    expected_value = MeasuredNumber(allow_null=True)
    difference = serializers.SerializerMethodField()
    tolerance = serializers.FloatField(source="run.sdc_tolerance")
    device = serializers.CharField(source="device.uuid", allow_null=True)
    host = serializers.CharField(source="host.name", allow_null=True)
    hosts = serializers.SerializerMethodField()
    replay_hardware = serializers.CharField()
    replay_result = serializers.CharField()
    verdict = serializers.CharField()
    action = serializers.CharField()
    message = serializers.CharField()

    @extend_schema_field(MeasuredNumber)
    def get_difference(self, record: SdcReplay) -> float | str | None:
        if record.observed_value is None or record.expected_value is None:
            return None
        return json_number(abs(record.observed_value - record.expected_value))

    def get_hosts(self, record: SdcReplay) -> list[str]:
        return sorted(host.name for host in record.hosts.all())

    def get_detected_by(self, record: SdcReplay) -> list[str]:
        divergence = SdcReplay.Detection.ATTEMPT_DIVERGENCE
        also = record.compared_attempt_id is not None and record.detection != divergence
        return [record.detection, *([str(divergence)] if also else [])]


class WeeklyRateOut(serializers.Serializer):
    """Rendered from the ledger: the rate, and where its span comes from."""

    formula = serializers.CharField(source="rate.FORMULA")
    records = serializers.IntegerField(source="rate.records")
    span_start = Time(source="rate.span_start", allow_null=True)
    span_end = Time(source="rate.span_end", allow_null=True)
    span_source = serializers.CharField()
    span_days = DerivedNumber(source="rate.span_days")
    weeks = DerivedNumber(source="rate.weeks")
    per_week = DerivedNumber(source="rate.per_week", allow_null=True)


class WeekOut(serializers.Serializer):
    week_start = Time()
    count = serializers.IntegerField()


class SdcInterruptionOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    number = serializers.IntegerField(allow_null=True)
    run = serializers.CharField(source="run.name")
    run_id = serializers.IntegerField()
    attempt = serializers.IntegerField(source="attempt.number", allow_null=True, default=None)
    occurred_at = Time()
    step = serializers.IntegerField(allow_null=True)


class SdcLedgerOut(serializers.Serializer):
    filters = HardwareFiltersOut(source="filters.as_query")
    total = serializers.IntegerField(source="ledger.total")
    truncated = serializers.BooleanField(source="ledger.truncated")
    by_verdict = serializers.DictField(source="ledger.by_verdict", child=serializers.IntegerField())
    weekly_rate = WeeklyRateOut(source="ledger")
    weekly = WeekOut(many=True)
    records = SdcRecordOut(source="ledger.records", many=True)
    interruptions = SdcInterruptionOut(
        source="ledger.interruptions", many=True, help_text="Interruptions filed as Silent "
        "Data Corruption, counted in total and the weekly rate as the failure breakdown does.",
    )  # fmt: skip
    not_compared = serializers.ListField(
        source="ledger.not_compared", child=serializers.CharField(),
        help_text="Attempt pairs the divergence check skipped because a config change "
        "separates them, with the change.",
    )  # fmt: skip


class QuarantineOut(serializers.Serializer):
    quarantined_at = Time()
    reason = serializers.CharField(source="quarantine_reason")
    by = serializers.CharField(source="quarantined_by.get_username", allow_null=True)


def quarantine_or_null(row: Host | Device) -> dict[str, Any] | None:
    """The row's quarantine, or null when it is in service."""
    return None if row.quarantined_at is None else QuarantineOut(row).data


class HostQuarantineOut(serializers.Serializer):
    host = serializers.CharField(source="name")
    quarantine = serializers.SerializerMethodField()

    @extend_schema_field(QuarantineOut(allow_null=True))
    def get_quarantine(self, host: Host) -> dict[str, Any] | None:
        return quarantine_or_null(host)


class OffenderRuleOut(serializers.Serializer):
    formula = serializers.CharField(source="FORMULA")
    k = serializers.IntegerField()
    window_days = serializers.IntegerField()
    window_start = Time()
    window_end = Time()


class FleetIncidentOut(serializers.Serializer):
    kind = serializers.CharField()
    id = serializers.IntegerField(source="pk")
    occurred_at = Time()
    run = serializers.SerializerMethodField()
    label = serializers.CharField()
    status = serializers.CharField()
    step = serializers.IntegerField(allow_null=True)
    via = serializers.CharField()

    @extend_schema_field(RunRef)
    def get_run(self, incident: Any) -> dict[str, Any]:
        return {"id": incident.run_id, "name": incident.run_name, "project": incident.project}


class HardwareHealthOut(serializers.Serializer):
    name = serializers.CharField()
    host = serializers.CharField(source="host.name", allow_null=True)
    place = serializers.SerializerMethodField()
    interruptions = serializers.IntegerField()
    sdc = serializers.IntegerField()
    stragglers = serializers.IntegerField(help_text="Straggler records naming it.")
    incidents = serializers.SerializerMethodField(
        help_text="interruptions + sdc + stragglers: every record its history lists."
    )
    in_window = serializers.IntegerField()
    repeat_offender = serializers.BooleanField()
    last_incident_at = Time(allow_null=True)
    quarantine = serializers.SerializerMethodField()
    history = FleetIncidentOut(source="incidents", many=True)

    def get_place(self, one: Any) -> str | None:
        return one.place or None

    def get_incidents(self, one: Any) -> int:
        return len(one.incidents)

    @extend_schema_field(QuarantineOut(allow_null=True))
    def get_quarantine(self, one: Any) -> dict[str, Any] | None:
        return quarantine_or_null(one.row)


class FleetHostsOut(serializers.Serializer):
    filters = HardwareFiltersOut(source="filters.as_query")
    rule = OffenderRuleOut()
    hosts_count = serializers.IntegerField()
    devices_count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    hosts = HardwareHealthOut(many=True)
    devices = HardwareHealthOut(many=True)


class CategoryAccuracyOut(serializers.Serializer):
    category = serializers.CharField(source="slug")
    category_name = serializers.CharField(source="name")
    suggested = serializers.IntegerField()
    confirmed = serializers.IntegerField()
    overridden = serializers.IntegerField()
    pending = serializers.IntegerField()
    confirmed_share = serializers.FloatField(allow_null=True)
    culprit_hosts_named = serializers.IntegerField(source="hosts_named")
    culprit_hosts_right = serializers.IntegerField(source="hosts_right")
    culprit_hosts_right_share = serializers.FloatField(source="hosts_right_share", allow_null=True)


class TriageAccuracyOut(serializers.Serializer):
    categories = CategoryAccuracyOut(many=True)
    confirmed = serializers.IntegerField()
    overridden = serializers.IntegerField()
    median_to_triage_with_suggestion_s = serializers.FloatField(
        source="median_to_triage_with_s", allow_null=True
    )
    median_to_triage_without_suggestion_s = serializers.FloatField(
        source="median_to_triage_without_s", allow_null=True
    )
    triaged_with_suggestion = serializers.IntegerField(source="triaged_with")
    triaged_without_suggestion = serializers.IntegerField(source="triaged_without")
