"""Writes of the SDC ledger: a suspicion a job reports, and the suspicions opened when two
attempts disagree at the same step of a deterministic metric."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from logbook import sdc_maths
from logbook.audit import diff_fields
from logbook.models import AuditEvent, SdcReplay
from logbook.selectors import sdc as sdc_selectors
from logbook.selectors import triage as triage_selectors
from logbook.services import autotriage, quarantine, webhooks
from logbook.services.audit import audit_record
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run
from telemetry.selectors import packed


def sdc_record(
    *,
    run: Run,
    source_key: str,
    step: int,
    detected_at: datetime,
    attempt: Attempt | None = None,
    device: str = "",
    host: str = "",
    detection: str = SdcReplay.Detection.OTHER,
    observed_value: float | None = None,
    message: str = "",
) -> SdcReplay:
    existing = SdcReplay.objects.filter(run=run, source_key=source_key).first()
    if existing is not None:
        return existing
    device_row = (
        telemetry_services.devices_ensure(project=run.project_id, uuids=[device])[0]
        if device
        else None
    )
    host_row = (
        telemetry_services.hosts_ensure(project=run.project_id, names=[host])[0] if host else None
    )
    telemetry_services.run_data_version_bump(run_id=run.pk)
    telemetry_services.fleet_version_bump(project_id=run.project_id)
    # Interruptions up to SDC_WINDOW_BEFORE after the detection read it as evidence.
    autotriage.run_evidence_arrived(
        run_id=run.pk,
        since=triage_selectors.shifted(detected_at, -triage_selectors.WINDOW_AFTER),
        until=triage_selectors.shifted(detected_at, triage_selectors.SDC_WINDOW_BEFORE),
    )
    return SdcReplay.objects.create(
        run=run,
        attempt=attempt,
        step=step,
        detected_at=detected_at,
        device=device_row,
        host=host_row,
        detection=detection,
        observed_value=observed_value,
        message=message,
        source_key=source_key,
    )


def sdc_divergence_check(
    *, run: Run, attempt: Attempt, steps_by_metric: dict[str, list[int]] | None = None
) -> list[SdcReplay]:
    """Compare `attempt`'s values of the run's deterministic metrics with every other attempt
    that reported the same steps, and open an `attempt_divergence` SDC record for each
    (metric, step, other attempt) whose values differ (see logbook.sdc_maths.values_differ).

    With `steps_by_metric`, only those steps are checked (the ingest worker passes the
    batch's points); without it, every step of the attempt. Records are keyed by metric,
    step and the attempt pair, so a repeated check, or the check of the other attempt later,
    opens nothing new. Returns the records this call opened."""
    metrics = [name for name in run.deterministic_metrics or [] if isinstance(name, str)]
    if steps_by_metric is not None:
        metrics = [name for name in metrics if steps_by_metric.get(name)]
    found: list[_Divergence] = []
    for metric in metrics:
        steps = None if steps_by_metric is None else steps_by_metric[metric]
        found += _divergences(run=run, attempt=attempt, metric=metric, steps=steps)
    if found:
        # Attempts that ran different configs (a lowered LR, a new data mix) are expected
        # to differ: that is not corruption. Read only once something differs.
        changes = sdc_selectors.config_changes(run=run)
        found = [
            one
            for one in found
            if sdc_maths.config_change_between(changes, one.replay_number, one.original_number)
            is None
        ]
    if not found:
        return []
    return _divergence_records_open(run=run, found=found)


def sdc_divergences_withdraw(*, run: Run) -> int:
    """Delete the run's pending attempt-divergence records whose two attempts a config change
    (recorded after them) separates: those attempts were never meant to agree. A record
    someone has judged (a verdict) is left alone. Returns how many were deleted."""
    changes = sdc_selectors.config_changes(run=run)
    if not changes:
        return 0
    withdrawn = [
        pk
        for pk, replay, original in SdcReplay.objects.filter(
            run=run,
            detection=SdcReplay.Detection.ATTEMPT_DIVERGENCE,
            verdict=SdcReplay.Verdict.PENDING,
            attempt__isnull=False,
            compared_attempt__isnull=False,
        ).values_list("pk", "attempt__number", "compared_attempt__number")
        if sdc_maths.config_change_between(changes, replay, original) is not None
    ]
    if withdrawn:
        SdcReplay.objects.filter(pk__in=withdrawn).delete()
        telemetry_services.run_data_version_bump(run_id=run.pk)
        telemetry_services.fleet_version_bump(project_id=run.project_id)
    return len(withdrawn)


@dataclass(frozen=True)
class _Divergence:
    metric: str
    step: int
    replay_attempt_id: int
    replay_value: float
    original_attempt_id: int
    original_value: float
    detected_at: datetime
    source_key: str
    replay_number: int
    original_number: int


def _divergences(
    *, run: Run, attempt: Attempt, metric: str, steps: list[int] | None
) -> list[_Divergence]:
    """The attempt's points joined with the other attempts' points of the same metric at the
    same steps. Both sides are read through the (series, step) primary key."""
    # First the metric's series in every attempt of the run, a small keyed read: most
    # batches come from a run's only attempt, and stop here. The join of the points runs
    # only when another attempt has the metric (the five-table join it replaced cost ~1 ms
    # of planning on every batch, more than running it).
    series = packed.metric_series_attempts(run=run, metric=metric)
    own: list[int] = []
    others: list[int] = []
    for series_id, (attempt_id, _) in series.items():
        (own if attempt_id == attempt.pk else others).append(series_id)
    if not own or not others:
        return []
    rows = [
        (step, mine, mine_at, *series[other_series], theirs, theirs_at)
        for step, mine, mine_at, other_series, theirs, theirs_at in packed.points_at_shared_steps(
            series_id=own[0], other_series_ids=others, steps=steps
        )
    ]
    found = []
    for step, mine, mine_at, other_id, other_number, theirs, theirs_at in rows:
        if not sdc_maths.values_differ(mine, theirs, tolerance=run.sdc_tolerance):
            continue
        # The later attempt is the replay of the earlier one, whichever is checked first, so
        # the record reads the same when the two attempts arrive in either order.
        if attempt.number > other_number:
            replay = (attempt.pk, mine, mine_at)
            original = (other_id, theirs, theirs_at)
            numbers = (attempt.number, other_number)
        else:
            replay = (other_id, theirs, theirs_at)
            original = (attempt.pk, mine, mine_at)
            numbers = (other_number, attempt.number)
        times = [moment for moment in (mine_at, theirs_at) if moment is not None]
        found.append(
            _Divergence(
                metric=metric,
                step=step,
                replay_attempt_id=replay[0],
                replay_value=_as_float(replay[1]),
                original_attempt_id=original[0],
                original_value=_as_float(original[1]),
                # When the second value of the pair existed: the earliest it could be seen.
                detected_at=_aware(max(times)) if times else timezone.now(),
                source_key=sdc_maths.divergence_source_key(
                    metric=metric, step=step, attempt_a=attempt.number, attempt_b=other_number
                ),
                replay_number=numbers[0],
                original_number=numbers[1],
            )
        )
    return found


def _as_float(value: float | None) -> float:
    # A NULL value reads as NaN, as everywhere else.
    return math.nan if value is None else float(value)


def _aware(moment: datetime) -> datetime:
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


_PairKey = tuple[str, int, int]  # (metric, replay attempt id, original attempt id)


@transaction.atomic
def _divergence_records_open(*, run: Run, found: list[_Divergence]) -> list[SdcReplay]:
    """Open records for `found`, one per run of consecutive steps of one metric and attempt
    pair (a divergence over steps 3150-3155 is one suspicion with a step range, not six). A
    step inside a record's range opens nothing; a step right after one extends it. Returns
    the records opened or extended."""
    by_key = {one.source_key: one for one in found}
    existing = set(
        SdcReplay.objects.filter(run=run, source_key__in=list(by_key)).values_list(
            "source_key", flat=True
        )
    )
    new = [one for key, one in by_key.items() if key not in existing]
    if not new:
        return []
    # The pairs' records, locked: two workers extending one range take turns. (Two opening
    # a pair's first record at once may leave two adjacent ranges; fleet health reads
    # adjacent ranges as one.)
    ranges: dict[_PairKey, list[SdcReplay]] = {}
    for record in (
        SdcReplay.objects.select_for_update()
        .filter(
            run=run,
            detection=SdcReplay.Detection.ATTEMPT_DIVERGENCE,
            metric_name__in={one.metric for one in new},
            attempt_id__in={one.replay_attempt_id for one in new},
        )
        .order_by("step")
    ):
        key = (record.metric_name, record.attempt_id or 0, record.compared_attempt_id or 0)
        ranges.setdefault(key, []).append(record)
    new = [
        one
        for one in new
        if not any(
            record.step <= one.step <= (record.last_step or record.step)
            for record in ranges.get(_pair_key(one), [])
        )
    ]
    if not new:
        return []
    extended: list[SdcReplay] = []
    firsts: list[tuple[_Divergence, int]] = []  # (first step's divergence, last step)
    for key, steps in _consecutive(new):
        first, last = steps[0], steps[-1].step
        before = next(
            (r for r in ranges.get(key, []) if (r.last_step or r.step) == first.step - 1), None
        )
        if before is not None:
            before.last_step = last
            extended.append(before)
        else:
            firsts.append((first, last))
    if extended:
        SdcReplay.objects.bulk_update(extended, ["last_step"])
    firsts, folded = _fold_into_reported(run=run, firsts=firsts)
    extended += folded
    new = [first for first, _ in firsts]
    last_steps = {first.source_key: last for first, last in firsts}
    if not new:
        telemetry_services.run_data_version_bump(run_id=run.pk)
        telemetry_services.fleet_version_bump(project_id=run.project_id)
        return extended
    attempt_numbers = dict(
        Attempt.objects.filter(
            pk__in={one.replay_attempt_id for one in new} | {one.original_attempt_id for one in new}
        ).values_list("pk", "number")
    )
    tolerance = run.sdc_tolerance
    # Conflicts are ignored: a worker checking the other attempt at the same moment may have
    # opened the same key; the unique (run, source_key) constraint keeps one.
    SdcReplay.objects.bulk_create(
        [
            SdcReplay(
                run=run,
                attempt_id=one.replay_attempt_id,
                step=one.step,
                last_step=last_steps[one.source_key]
                if last_steps[one.source_key] > one.step
                else None,
                detected_at=one.detected_at,
                detection=SdcReplay.Detection.ATTEMPT_DIVERGENCE,
                metric_name=one.metric,
                observed_value=one.replay_value,
                compared_attempt_id=one.original_attempt_id,
                expected_value=one.original_value,
                verdict=SdcReplay.Verdict.PENDING,
                message=(
                    (
                        f"From step {one.step} through {last_steps[one.source_key]}; "
                        if last_steps[one.source_key] > one.step
                        else ""
                    )
                    + f"{one.metric} at step {one.step}: attempt "
                    f"{attempt_numbers[one.replay_attempt_id]} gave {one.replay_value!r}, "
                    f"attempt {attempt_numbers[one.original_attempt_id]} gave "
                    f"{one.original_value!r} (tolerance {tolerance!r})."
                ),
                source_key=one.source_key,
            )
            for one in new
        ],
        ignore_conflicts=True,
    )
    opened = list(SdcReplay.objects.filter(run=run, source_key__in=[one.source_key for one in new]))
    attempt_hosts: dict[int, set[int]] = {}
    for attempt_id, host_id in Attempt.hosts.through.objects.filter(
        attempt_id__in=attempt_numbers
    ).values_list("attempt_id", "host_id"):
        attempt_hosts.setdefault(attempt_id, set()).add(host_id)
    links = []
    for record in opened:
        hosts = attempt_hosts.get(record.attempt_id or 0, set()) | attempt_hosts.get(
            record.compared_attempt_id or 0, set()
        )
        links += [SdcReplay.hosts.through(sdcreplay_id=record.pk, host_id=h) for h in hosts]
    SdcReplay.hosts.through.objects.bulk_create(links, ignore_conflicts=True)
    telemetry_services.run_data_version_bump(run_id=run.pk)
    telemetry_services.fleet_version_bump(project_id=run.project_id)
    return opened + extended


def _fold_into_reported(
    *, run: Run, firsts: list[tuple[_Divergence, int]]
) -> tuple[list[tuple[_Divergence, int]], list[SdcReplay]]:
    """One event is one record: a divergence at a step where the job (or a detector) already
    reported a suspicion on one of the two attempts (a loss spike, say) is that suspicion
    seen a second way. It fills the record's comparison (metric, the other attempt and its
    value) instead of opening a second record. Returns the divergences still to open, and
    the records that took one."""
    if not firsts:
        return firsts, []
    attempts = {one.replay_attempt_id for one, _ in firsts}
    attempts |= {one.original_attempt_id for one, _ in firsts}
    reported = list(
        SdcReplay.objects.select_for_update()
        .filter(run=run, attempt_id__in=attempts, compared_attempt__isnull=True)
        .exclude(detection=SdcReplay.Detection.ATTEMPT_DIVERGENCE)
        .filter(step__gte=min(one.step for one, _ in firsts))
        .filter(step__lte=max(last for _, last in firsts))
        .order_by("step", "pk")
    )
    remaining: list[tuple[_Divergence, int]] = []
    folded: list[SdcReplay] = []
    for one, last in firsts:
        record = next(
            (
                r
                for r in reported
                if r not in folded
                and one.step <= r.step <= last
                and r.attempt_id in (one.replay_attempt_id, one.original_attempt_id)
            ),
            None,
        )
        if record is None:
            remaining.append((one, last))
            continue
        # The record's own attempt is the suspect; the other attempt's value is the one it
        # was compared with.
        if record.attempt_id == one.replay_attempt_id:
            record.compared_attempt_id, record.expected_value = (
                one.original_attempt_id,
                one.original_value,
            )
        else:
            record.compared_attempt_id, record.expected_value = (
                one.replay_attempt_id,
                one.replay_value,
            )
        record.metric_name = one.metric
        folded.append(record)
    if folded:
        SdcReplay.objects.bulk_update(
            folded, ["compared_attempt_id", "expected_value", "metric_name"]
        )
    return remaining, folded


def _pair_key(one: _Divergence) -> _PairKey:
    return (one.metric, one.replay_attempt_id, one.original_attempt_id)


def _consecutive(found: list[_Divergence]) -> list[tuple[_PairKey, list[_Divergence]]]:
    """Runs of consecutive steps of one metric and attempt pair, in step order."""
    groups: list[tuple[_PairKey, list[_Divergence]]] = []
    for one in sorted(found, key=lambda one: (*_pair_key(one), one.step)):
        key = _pair_key(one)
        if groups and groups[-1][0] == key and groups[-1][1][-1].step == one.step - 1:
            groups[-1][1].append(one)
        else:
            groups.append((key, [one]))
    return groups


def _quarantine_named_hardware(*, record: SdcReplay, user: Any) -> None:
    """ "Device quarantined" decided on an SDC record is the fleet's quarantine, not a second
    state beside it: the device the record names (its host when it names none) goes out of
    service, through the quarantine service (audited, shown on the fleet page). A record
    naming no hardware has nothing to quarantine yet."""
    reason = f"SDC record {record.pk} (step {record.step}): {record.get_verdict_display()}"
    if record.device is not None and record.device.quarantined_at is None:
        quarantine.device_quarantine(device=record.device, user=user, reason=reason)
    elif record.device is None and record.host is not None and record.host.quarantined_at is None:
        quarantine.host_quarantine(host=record.host, user=user, reason=reason)


# What a verdict decision may change (the rest of a record is what the job reported).
VERDICT_FIELDS = ("verdict", "action", "replay_hardware", "replay_result")


@transaction.atomic
def sdc_verdict_set(
    *,
    replay: SdcReplay,
    user: Any,
    verdict: str,
    action: str | None = None,
    replay_hardware: str | None = None,
    replay_result: str | None = None,
) -> SdcReplay:
    """Record the replay's outcome: the verdict, and where given the action taken and the
    replay's hardware and result. Audits the fields that changed; a confirmed verdict pages
    the project's webhooks after commit, once however often it is set. Raises
    ValidationError for a value the columns do not take, before any write. `replay` is
    updated to match what is stored."""
    given = {
        "verdict": verdict,
        "action": action,
        "replay_hardware": replay_hardware,
        "replay_result": replay_result,
    }
    values = {name: value for name, value in given.items() if value is not None}
    errors: dict[str, str] = {}
    if verdict not in SdcReplay.Verdict.values:
        errors["verdict"] = f"One of {', '.join(SdcReplay.Verdict.values)}."
    if action is not None and action not in SdcReplay.Action.values:
        errors["action"] = f"One of {', '.join(SdcReplay.Action.values)}."
    for name in ("replay_hardware", "replay_result"):
        limit = SdcReplay._meta.get_field(name).max_length
        if name in values and len(values[name]) > limit:
            errors[name] = f"At most {limit} characters."
    if errors:
        raise ValidationError(errors)
    # Locked: two people deciding at once each see the other's decision in the audit trail.
    current = (
        SdcReplay.objects.select_for_update(of=("self",))
        .select_related("run__project", "device", "host")
        .get(pk=replay.pk)
    )
    before = {name: getattr(current, name) for name in VERDICT_FIELDS}
    for name, value in values.items():
        setattr(current, name, value)
    diff = diff_fields(
        before, {name: getattr(current, name) for name in VERDICT_FIELDS}, VERDICT_FIELDS
    )
    if diff:
        current.save(update_fields=list(diff))
        # The verdict shows on the run's pages and in the fleet's SDC counts.
        telemetry_services.run_data_version_bump(run_id=current.run_id)
        telemetry_services.fleet_version_bump(project_id=current.run.project_id)
        audit_record(
            project=current.run.project,
            entity=AuditEvent.Entity.SDC_REPLAY,
            object_id=current.pk,
            user=user,
            action="update",
            changes=diff,
        )
    if "action" in diff and current.action == SdcReplay.Action.QUARANTINED:
        _quarantine_named_hardware(record=current, user=user)
    # Every time, as the admin did before this service: the delivery key makes it page once.
    webhooks.sdc_confirmed_notify(current)
    for name in VERDICT_FIELDS:
        setattr(replay, name, getattr(current, name))
    return current
