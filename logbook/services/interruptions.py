"""Recording an interruption a job (or a GPU health signal) reports. Keyed by the run and
the source key, so recording the same event twice changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import Max

from logbook.choices import TimePrecision
from logbook.models import Interruption
from logbook.services import autotriage, incident_groups, webhooks
from logbook.services.taxonomy import root_cause_resolve
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run


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
) -> Interruption:
    """Record (once per source key) an interruption; unless `ends_attempt` is false (a hang
    is only suspected: the job may still be alive), the attempt it hit is ended."""
    existing = Interruption.objects.filter(run=run, source_key=source_key).first()
    if existing is not None:
        return existing
    # The run-local number is the next after the run's highest; the run row's lock makes two
    # concurrent recordings of one run take turns instead of colliding on the constraint.
    Run.objects.select_for_update().filter(pk=run.pk).first()
    number = (run.interruptions.aggregate(highest=Max("number"))["highest"] or 0) + 1
    root_cause = root_cause_resolve(category=category)
    # Times out of order (a detector clock behind the job's) would break the named
    # constraints; clamp to the occurrence rather than reject a real incident.
    if detected_at is not None and detected_at < occurred_at:
        detected_at = occurred_at
    if recovered_at is not None and recovered_at < occurred_at:
        recovered_at = occurred_at
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
        planned=root_cause.is_planned if planned is None else planned,
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
    )
    if ends_attempt and attempt is not None:
        # An interruption stops the job: the attempt it hit is over, whether or not the job
        # lived to send its own attempt_ended (which, sent before or after, has the last word).
        telemetry_services.attempt_end_if_running(
            attempt=attempt,
            status=Attempt.Status.KILLED if interruption.planned else Attempt.Status.FAILED,
            ended_at=occurred_at,
            reason=f"Interrupted: {root_cause.name}" + (f" ({message[:200]})" if message else ""),
        )
    host_rows = telemetry_services.hosts_ensure(project=run.project_id, names=hosts)
    device_rows = telemetry_services.devices_ensure(project=run.project_id, uuids=devices)
    interruption.hosts.add(*host_rows)
    interruption.devices.add(*device_rows)
    if len(host_rows) == 1 and device_rows:
        # A job naming one host and GPUs says they are on it, so the fleet page can show the
        # device's host; a device already placed (by dcgm-exporter, which knows) stays put.
        telemetry_services.devices_place_unplaced(devices=device_rows, host=host_rows[0])
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
