"""Recording an interruption a job (or a GPU health signal) reports. Keyed by the run and
the source key, so recording the same event twice changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max

from logbook.choices import TimePrecision
from logbook.incident_windows import Signal, window_match
from logbook.models import IncidentSource, Interruption
from logbook.services import autotriage, incident_groups, webhooks
from logbook.services.taxonomy import root_cause_resolve
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run

# Signals of one attempt's failure this close together are one incident
# (logbook.incident_windows): a dcgm-exporter push and the job's crash report arrive seconds
# apart, and an NCCL watchdog ends a hang some minutes after hang detection noticed it.
MERGE_WINDOW = timedelta(minutes=10)

Kind = IncidentSource.Kind
# Whose word fills a field when several sources give it: the job knows its own step, its
# recovery and what it lost; a GPU's signal is evidence, a hang only a suspicion.
FIELD_PRIORITY = [Kind.JOB, Kind.MLFLOW, Kind.DCGM, Kind.HANG]
# Whose category names the incident until on-call triages it: the job's own (when it gives
# one), then a GPU's signal over a status without a reason, then hang detection's guess.
CATEGORY_PRIORITY = [Kind.JOB, Kind.DCGM, Kind.MLFLOW, Kind.HANG]
SEVERITY_ORDER = list(Interruption.Severity.values)
FILLED_FIELDS = ("step", "lost_steps", "reported_lost_s", "recovered_at")


def source_kind(source_key: str) -> str:
    """Which kind of source raised a signal, read from the key its recorder gave it."""
    if source_key.startswith("dcgm:"):
        return Kind.DCGM
    if source_key.startswith("hang:"):
        return Kind.HANG
    if source_key.startswith("mlflow-"):
        return Kind.MLFLOW
    return Kind.JOB


@transaction.atomic
def interruption_record(
    *,
    run: Run,
    source_key: str,
    occurred_at: datetime,
    attempt: Attempt | None = None,
    category: str = "",
    component: str = "",
    planned: bool | None = None,
    hosts: Sequence[str] = (),
    devices: Sequence[str] = (),
    message: str = "",
    detected_at: datetime | None = None,
    recovered_at: datetime | None = None,
    manual_intervention: bool = False,
    lost_steps: int | None = None,
    step: int | None = None,
    reported_lost_s: float | None = None,
    time_precision: str = TimePrecision.EXACT,
    occurred_until: datetime | None = None,
    local_time: str = "",
    ends_attempt: bool = True,
    severity: str | None = None,
) -> Interruption:
    """Record (once per source key) an interruption; unless `ends_attempt` is false (a hang
    is only suspected: the job may still be alive), the attempt it hit is ended.

    A signal of a failure already recorded (an unexpected interruption of the same attempt
    from another kind of source within MERGE_WINDOW) joins that interruption as one more
    IncidentSource instead: its times and steps are re-derived from all its sources, its
    webhooks are not paged again, and its suggestion is remade. Returns the interruption the
    signal is part of."""
    known = (
        IncidentSource.objects.filter(run=run, source_key=source_key)
        .select_related("interruption")
        .first()
    )
    if known is not None:
        return known.interruption
    existing = Interruption.objects.filter(run=run, source_key=source_key).first()
    if existing is not None:
        return existing
    # The run-local number is the next after the run's highest; the run row's lock makes two
    # concurrent recordings of one run take turns instead of colliding on the constraint, and
    # two signals of one failure take turns joining it.
    Run.objects.select_for_update().filter(pk=run.pk).first()
    root_cause = root_cause_resolve(category=category, project_id=run.project_id)
    is_planned = root_cause.is_planned if planned is None else planned
    # Times out of order (a detector clock behind the job's) would break the named
    # constraints; clamp to the occurrence rather than reject a real incident.
    if detected_at is not None and detected_at < occurred_at:
        detected_at = occurred_at
    if recovered_at is not None and recovered_at < occurred_at:
        recovered_at = occurred_at
    kind = source_kind(source_key)
    reported = _reported(
        category=category,
        component=component,
        hosts=hosts,
        devices=devices,
        step=step,
        lost_steps=lost_steps,
        reported_lost_s=reported_lost_s,
        recovered_at=recovered_at,
        manual_intervention=manual_intervention,
        severity=severity,
    )
    source = {
        "run": run,
        "source_key": source_key,
        "kind": kind,
        "occurred_at": occurred_at,
        "detected_at": detected_at,
        "message": message,
        "reported": reported,
    }
    if source_key and not is_planned and attempt is not None:
        same = _same_failure(
            run=run, attempt=attempt, kind=kind, occurred_at=occurred_at, detected_at=detected_at
        )
        if same is not None:
            IncidentSource.objects.create(interruption=same, **source)
            return _merged(
                interruption=same,
                attempt=attempt if ends_attempt else None,
                hosts=hosts,
                devices=devices,
            )
    number = (run.interruptions.aggregate(highest=Max("number"))["highest"] or 0) + 1
    # Only a window has an end, and one that ends before it starts is known to the minute at
    # best: keep the incident, as exact.
    if time_precision != TimePrecision.WINDOW or occurred_until is None:
        occurred_until = None
        if time_precision == TimePrecision.WINDOW:
            time_precision = TimePrecision.EXACT
    elif occurred_until < occurred_at:
        occurred_until, time_precision = None, TimePrecision.EXACT
    interruption = Interruption.objects.create(
        run=run,
        attempt=attempt,
        root_cause=root_cause,
        reported_category=category,
        component=component or root_cause.name,
        planned=is_planned,
        occurred_at=occurred_at,
        detected_at=detected_at,
        recovered_at=recovered_at,
        step=step,
        manual_intervention=manual_intervention,
        lost_steps=lost_steps,
        reported_lost_s=reported_lost_s,
        number=number,
        time_precision=time_precision,
        occurred_until=occurred_until,
        local_time=local_time[:64],
        message=message,
        source_key=source_key,
        **({"severity": severity} if severity else {}),
    )
    if source_key:
        IncidentSource.objects.create(interruption=interruption, **source)
    if ends_attempt and attempt is not None:
        _attempt_end(interruption=interruption, attempt=attempt)
    _hardware_link(interruption=interruption, hosts=hosts, devices=devices)
    if not interruption.planned:
        # Pages the project's webhooks after commit, once per interruption.
        webhooks.interruption_notify(interruption=interruption)
        # The worker reads its message and the evidence around it after commit.
        autotriage.suggestion_enqueue(interruption_id=interruption.pk)
        # Several hosts of one rack failing within minutes are one failure: the worker looks.
        incident_groups.incident_groups_enqueue(interruption_id=interruption.pk)
    telemetry_services.run_data_version_bump(run_id=run.pk)
    telemetry_services.fleet_version_bump(project_id=run.project_id)
    return interruption


def _attempt_end(*, interruption: Interruption, attempt: Attempt) -> None:
    # An interruption stops the job: the attempt it hit is over, whether or not the job
    # lived to send its own attempt_ended (which, sent before or after, has the last word).
    name = interruption.root_cause.name
    message = interruption.message
    telemetry_services.attempt_end_if_running(
        attempt=attempt,
        status=Attempt.Status.KILLED if interruption.planned else Attempt.Status.FAILED,
        ended_at=interruption.occurred_at,
        reason=f"Interrupted: {name}" + (f" ({message[:200]})" if message else ""),
    )


def _hardware_link(
    *, interruption: Interruption, hosts: Sequence[str], devices: Sequence[str]
) -> None:
    project_id = interruption.run.project_id
    host_rows = telemetry_services.hosts_ensure(project=project_id, names=hosts)
    device_rows = telemetry_services.devices_ensure(project=project_id, uuids=devices)
    interruption.hosts.add(*host_rows)
    interruption.devices.add(*device_rows)
    if len(host_rows) == 1 and device_rows:
        # A job naming one host and GPUs says they are on it, so the fleet page can show the
        # device's host; a device already placed (by dcgm-exporter, which knows) stays put.
        telemetry_services.devices_place_unplaced(devices=device_rows, host=host_rows[0])


def _reported(
    *,
    category: str,
    component: str,
    hosts: Sequence[str],
    devices: Sequence[str],
    step: int | None,
    lost_steps: int | None,
    reported_lost_s: float | None,
    recovered_at: datetime | None,
    manual_intervention: bool,
    severity: str | None,
) -> dict[str, Any]:
    """What a signal said, as JSON (None and empty left out): a merge re-derives the
    interruption's fields from these."""
    values: dict[str, Any] = {
        "category": category,
        "component": component,
        "hosts": sorted(set(hosts)),
        "devices": sorted(set(devices)),
        "step": step,
        "lost_steps": lost_steps,
        "reported_lost_s": reported_lost_s,
        "recovered_at": recovered_at.isoformat() if recovered_at is not None else None,
        "manual_intervention": manual_intervention or None,
        "severity": severity,
    }
    return {key: value for key, value in values.items() if value not in (None, "", [])}


def _same_failure(
    *,
    run: Run,
    attempt: Attempt,
    kind: str,
    occurred_at: datetime,
    detected_at: datetime | None,
) -> Interruption | None:
    """The unexpected interruption of `attempt` this signal is another report of, if any."""
    candidates = list(
        Interruption.objects.filter(run=run, attempt=attempt, planned=False)
        .prefetch_related("sources")
        .order_by("occurred_at", "pk")
    )
    if not candidates:
        return None
    key = frozenset({f"attempt:{attempt.pk}"})

    def signal(at: datetime, until: datetime | None, source_kind: str) -> Signal:
        # A hang covers the time from its last step to its detection.
        span_end = until if source_kind == Kind.HANG else None
        return Signal(at=at, keys=key, kind=source_kind, until=span_end)

    groups = [
        [signal(s.occurred_at, s.detected_at, s.kind) for s in candidate.sources.all()]
        or [signal(candidate.occurred_at, candidate.detected_at, source_kind(candidate.source_key))]
        for candidate in candidates
    ]
    index = window_match(
        signal(occurred_at, detected_at, kind), groups, window=MERGE_WINDOW, one_per_kind=True
    )
    return None if index is None else candidates[index]


def _first(sources: list[IncidentSource], name: str, order: list[Kind]) -> Any:
    for source in sorted(sources, key=lambda s: (order.index(Kind(s.kind)), s.occurred_at)):
        value = source.reported.get(name)
        if value not in (None, "", []):
            return value
    return None


def _merged(
    *,
    interruption: Interruption,
    attempt: Attempt | None,
    hosts: Sequence[str],
    devices: Sequence[str],
) -> Interruption:
    """Re-derive a merged interruption's fields from all its sources: the earliest occurrence
    and detection, the job's step, losses and recovery over the others', the best-placed
    category while nobody has triaged it, every source's hosts and devices, the highest
    severity. A field no source gave keeps its value (a restart may have filled it)."""
    # Read afresh: the candidate came with its sources prefetched, before this one was added.
    sources = list(IncidentSource.objects.filter(interruption=interruption))
    changes: dict[str, Any] = {"occurred_at": min(s.occurred_at for s in sources)}
    detected = [s.detected_at for s in sources if s.detected_at is not None]
    if detected:
        changes["detected_at"] = max(changes["occurred_at"], min(detected))
    for name in FILLED_FIELDS:
        value = _first(sources, name, FIELD_PRIORITY)
        if value is not None:
            changes[name] = datetime.fromisoformat(value) if name == "recovered_at" else value
    if any(s.reported.get("manual_intervention") for s in sources):
        changes["manual_intervention"] = True
    if interruption.status == Interruption.Status.OPEN:
        category = _first(sources, "category", CATEGORY_PRIORITY)
        if category:
            root_cause = root_cause_resolve(
                category=category, project_id=interruption.run.project_id
            )
            changes["root_cause"] = root_cause
            changes["reported_category"] = category
            changes["component"] = (
                _first(sources, "component", CATEGORY_PRIORITY) or root_cause.name
            )
    severities = [interruption.severity] + [
        s.reported["severity"] for s in sources if s.reported.get("severity") in SEVERITY_ORDER
    ]
    changes["severity"] = max(severities, key=SEVERITY_ORDER.index)
    ordered = sorted(sources, key=lambda s: (FIELD_PRIORITY.index(Kind(s.kind)), s.occurred_at))
    changes["message"] = "\n".join(dict.fromkeys(s.message for s in ordered if s.message))
    if changes.get("recovered_at") is not None and changes["recovered_at"] < changes["occurred_at"]:
        changes["recovered_at"] = changes["occurred_at"]
    if (
        interruption.occurred_until is not None
        and interruption.occurred_until < changes["occurred_at"]
    ):
        changes["occurred_until"] = None
        changes["time_precision"] = TimePrecision.EXACT
    for name, value in changes.items():
        setattr(interruption, name, value)
    interruption.save(update_fields=sorted(changes))
    if attempt is not None:
        _attempt_end(interruption=interruption, attempt=attempt)
    _hardware_link(interruption=interruption, hosts=hosts, devices=devices)
    # The merged message and evidence may point elsewhere than the first source alone did.
    autotriage.suggestion_enqueue(interruption_id=interruption.pk)
    # Its time and hosts may place it in another rack's group.
    incident_groups.incident_groups_enqueue(interruption_id=interruption.pk)
    telemetry_services.run_data_version_bump(run_id=interruption.run_id)
    telemetry_services.fleet_version_bump(project_id=interruption.run.project_id)
    return interruption


def interruption_restart_fill(
    *,
    interruption: Interruption,
    previous: Attempt,
    attempt: Attempt,
    resume_step: int | None,
    last_step: int | None,
) -> Interruption:
    """Fill what the job left out of the interruption that ended `previous`, from the restart
    that followed it (`attempt`): lost steps = the last step `previous` reached - the step
    `attempt` resumed from (the steps computed twice, as goodput counts them), detected at
    when `previous` ended (the job saw its own crash), recovered at when `attempt` started.
    A field the job (or on-call) gave is kept. Idempotent, whatever the order the
    interruption and the restart arrived in."""
    changes: dict[str, object] = {}
    if interruption.lost_steps is None and last_step is not None and resume_step is not None:
        changes["lost_steps"] = max(0, last_step - resume_step)
    occurred = interruption.occurred_at
    recovered = interruption.recovered_at
    if recovered is None and attempt.started_at is not None and attempt.started_at >= occurred:
        recovered = changes["recovered_at"] = attempt.started_at
    if interruption.detected_at is None:
        detected = max(occurred, previous.ended_at or occurred)
        # Never after the recovery: time to recover (MTTR) is recovered - detected.
        changes["detected_at"] = min(detected, recovered) if recovered is not None else detected
    if not changes:
        return interruption
    Interruption.objects.filter(pk=interruption.pk).update(**changes)
    for name, value in changes.items():
        setattr(interruption, name, value)
    telemetry_services.run_data_version_bump(run_id=interruption.run_id)
    telemetry_services.fleet_version_bump(project_id=previous.run.project_id)
    return interruption
