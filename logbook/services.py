"""Writes for interruptions, checkpoints, SDC replays and logbook entries. Each is keyed so
that recording the same event twice changes nothing."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count, F, Max, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from logbook import chronicles, notifications, sdc
from logbook.audit import audit_record, diff_fields
from logbook.models import (
    AuditEvent,
    Checkpoint,
    CheckpointRestore,
    Interruption,
    LogbookEntry,
    RootCause,
    SdcReplay,
)
from logbook.taxonomy import ROOT_CAUSE_SEEDS, UNKNOWN_SLUG
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Device, Host, MetricPoint, MetricSeries, Run


def root_causes_seed() -> int:
    """Create the shipped taxonomy rows that are missing (the data migration and tests use
    it); rows admins edited are left alone. Returns how many were created."""
    existing = set(RootCause.objects.values_list("slug", flat=True))
    missing = [
        RootCause(
            slug=seed.slug,
            name=seed.name,
            group=seed.group,
            is_hardware=seed.is_hardware,
            is_planned=seed.is_planned,
        )
        for seed in ROOT_CAUSE_SEEDS
        if seed.slug not in existing
    ]
    RootCause.objects.bulk_create(missing, ignore_conflicts=True)
    return len(missing)


def root_cause_resolve(*, category: str) -> RootCause:
    """The taxonomy row a job's category names (slug or name, any case); "unknown" when it
    names none, so an interruption is never dropped for a taxonomy mismatch."""
    text = category.strip() or UNKNOWN_SLUG
    lookup = Q(slug__iexact=text) | Q(name__iexact=text)
    match = RootCause.objects.filter(lookup).first()
    if match is None and not RootCause.objects.filter(slug=UNKNOWN_SLUG).exists():
        # The shipped rows are gone (a flushed database): restore them rather than file
        # every interruption under a category that does not exist.
        root_causes_seed()
        match = RootCause.objects.filter(lookup).first()
    return match or RootCause.objects.get(slug=UNKNOWN_SLUG)


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
) -> Interruption:
    existing = Interruption.objects.filter(run=run, source_key=source_key).first()
    if existing is not None:
        return existing
    root_cause = root_cause_resolve(category=category)
    # Times out of order (a detector clock behind the job's) would break the named
    # constraints; clamp to the occurrence rather than reject a real incident.
    if detected_at is not None and detected_at < occurred_at:
        detected_at = occurred_at
    if recovered_at is not None and recovered_at < occurred_at:
        recovered_at = occurred_at
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
        message=message,
        source_key=source_key,
    )
    if attempt is not None and attempt.status == Attempt.Status.RUNNING:
        # An interruption stops the job: the attempt it hit is over, whether or not the job
        # lived to send its own attempt_ended (which, if it comes, has the last word).
        telemetry_services.attempt_end(
            attempt=attempt,
            status=Attempt.Status.KILLED if interruption.planned else Attempt.Status.FAILED,
            ended_at=occurred_at,
            reason=f"Interrupted: {root_cause.name}" + (f" ({message[:200]})" if message else ""),
        )
    if hosts:
        interruption.hosts.add(*telemetry_services.hosts_ensure(names=hosts))
    if devices:
        interruption.devices.add(*telemetry_services.devices_ensure(uuids=devices))
    if not interruption.planned:
        # Pages the project's webhooks after commit, once per interruption.
        notifications.interruption_notify(interruption=interruption)
    telemetry_services.run_data_version_bump(run_id=run.pk)
    telemetry_services.fleet_version_bump(project_id=run.project_id)
    return interruption


def checkpoint_record(
    *, run: Run, step: int, attempt: Attempt | None = None, **fields: Any
) -> Checkpoint:
    """Upsert the checkpoint of `run` at `step` with the fields given."""
    allowed = {
        "saved_at",
        "blocking_save_s",
        "async_save_s",
        "size_bytes",
        "tier",
        "uri",
        "checksum",
        "status",
    }
    values = {key: value for key, value in fields.items() if key in allowed and value is not None}
    if attempt is not None:
        values["attempt"] = attempt
    checkpoint, _ = Checkpoint.objects.update_or_create(run=run, step=step, defaults=values)
    telemetry_services.run_data_version_bump(run_id=run.pk)
    return checkpoint


@transaction.atomic
def checkpoint_restore_record(
    *,
    attempt: Attempt,
    step: int,
    restored_at: datetime | None = None,
    restore_s: float | None = None,
) -> CheckpointRestore:
    """Record that `attempt` resumed from the checkpoint at `step` (created as a placeholder
    if its save was never reported), and recount that checkpoint's restores."""
    checkpoint, _ = Checkpoint.objects.get_or_create(run=attempt.run, step=step)
    # The attempt's earlier restore may have named another checkpoint: recount both.
    previous = CheckpointRestore.objects.filter(attempt=attempt).values_list(
        "checkpoint_id", flat=True
    )
    touched = {checkpoint.pk, *previous}
    restore, _ = CheckpointRestore.objects.update_or_create(
        attempt=attempt,
        defaults={"checkpoint": checkpoint, "restored_at": restored_at, "restore_s": restore_s},
    )
    if attempt.resumed_from_step is None:
        attempt.resumed_from_step = step
        attempt.save(update_fields=["resumed_from_step"])
    # Recounted, not incremented, so a reprocessed event cannot count twice.
    restores = (
        CheckpointRestore.objects.filter(checkpoint=OuterRef("pk"))
        .values("checkpoint")
        .annotate(n=Count("pk"))
        .values("n")[:1]
    )
    Checkpoint.objects.filter(pk__in=touched).update(restored_count=Coalesce(Subquery(restores), 0))
    telemetry_services.run_data_version_bump(run_id=attempt.run_id)
    return restore


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
    device_row = telemetry_services.devices_ensure(uuids=[device])[0] if device else None
    host_row = telemetry_services.hosts_ensure(names=[host])[0] if host else None
    telemetry_services.run_data_version_bump(run_id=run.pk)
    telemetry_services.fleet_version_bump(project_id=run.project_id)
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


def logbook_entry_record(
    *,
    run: Run,
    title: str,
    occurred_at: datetime,
    source_key: str = "",
    attempt: Attempt | None = None,
    body: str = "",
    kind: str = LogbookEntry.Kind.NOTE,
    step: int | None = None,
    role: str = LogbookEntry.Role.AUTOMATION,
    author_name: str = "",
    is_automatic: bool = False,
) -> LogbookEntry:
    if source_key:
        existing = LogbookEntry.objects.filter(run=run, source_key=source_key).first()
        if existing is not None:
            return existing
    telemetry_services.run_data_version_bump(run_id=run.pk)
    return LogbookEntry.objects.create(
        run=run,
        attempt=attempt,
        title=title,
        occurred_at=occurred_at,
        body=body,
        kind=kind,
        step=step,
        role=role,
        author_name=author_name,
        is_automatic=is_automatic,
        source_key=source_key,
    )


# --- SDC suspicion from attempt-vs-attempt divergence (helper 3) --------------------------------


def sdc_divergence_check(
    *, run: Run, attempt: Attempt, steps_by_metric: dict[str, list[int]] | None = None
) -> list[SdcReplay]:
    """Compare `attempt`'s values of the run's deterministic metrics with every other attempt
    that reported the same steps, and open an `attempt_divergence` SDC record for each
    (metric, step, other attempt) whose values differ (see logbook.sdc.values_differ).

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
    if not found:
        return []
    return _divergence_records_open(run=run, found=found)


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


def _divergences(
    *, run: Run, attempt: Attempt, metric: str, steps: list[int] | None
) -> list[_Divergence]:
    """One join of the attempt's points with the other attempts' points of the same metric
    at the same steps. Both sides are read through the (series, step) primary key."""
    own_series = (
        MetricSeries.objects.filter(run=run, attempt=attempt, name=metric)
        .values_list("pk", flat=True)
        .first()
    )
    if own_series is None:
        return []
    point = MetricPoint._meta.db_table
    series = MetricSeries._meta.db_table
    attempt_table = Attempt._meta.db_table
    sql = (
        f"SELECT mine.step, mine.value, mine.wall_time, other.id, other.number, "
        f"theirs.value, theirs.wall_time "
        f"FROM {point} mine "
        f"JOIN {series} other_series ON other_series.run_id = %s AND other_series.name = %s "
        f"AND other_series.attempt_id <> %s "
        f"JOIN {attempt_table} other ON other.id = other_series.attempt_id "
        f"JOIN {point} theirs ON theirs.series_id = other_series.id AND theirs.step = mine.step "
        f"WHERE mine.series_id = %s"
    )
    params: list[Any] = [run.pk, metric, attempt.pk, own_series]
    wanted: set[int] | None = None
    if steps is not None:
        if connection.vendor == "postgresql":
            sql += " AND mine.step = ANY(%s)"
            params.append(sorted(set(steps)))
        else:
            # No arrays elsewhere (SQLite, the demo): a range, then the exact steps below.
            sql += " AND mine.step BETWEEN %s AND %s"
            params += [min(steps), max(steps)]
            wanted = set(steps)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = []
    for step, mine, mine_at, other_id, other_number, theirs, theirs_at in rows:
        if wanted is not None and step not in wanted:
            continue
        if not sdc.values_differ(mine, theirs, tolerance=run.sdc_tolerance):
            continue
        # The later attempt is the replay of the earlier one, whichever is checked first, so
        # the record reads the same when the two attempts arrive in either order.
        if attempt.number > other_number:
            replay = (attempt.pk, mine, mine_at)
            original = (other_id, theirs, theirs_at)
        else:
            replay = (other_id, theirs, theirs_at)
            original = (attempt.pk, mine, mine_at)
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
                source_key=sdc.divergence_source_key(
                    metric=metric, step=step, attempt_a=attempt.number, attempt_b=other_number
                ),
            )
        )
    return found


def _as_float(value: float | None) -> float:
    # NULL is SQLite's NaN.
    return math.nan if value is None else float(value)


def _aware(moment: datetime | str) -> datetime:
    # Raw SQL on SQLite returns text; PostgreSQL returns aware datetimes.
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


def _divergence_records_open(*, run: Run, found: list[_Divergence]) -> list[SdcReplay]:
    by_key = {one.source_key: one for one in found}
    existing = set(
        SdcReplay.objects.filter(run=run, source_key__in=list(by_key)).values_list(
            "source_key", flat=True
        )
    )
    new = [one for key, one in by_key.items() if key not in existing]
    if not new:
        return []
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
                detected_at=one.detected_at,
                detection=SdcReplay.Detection.ATTEMPT_DIVERGENCE,
                metric_name=one.metric,
                observed_value=one.replay_value,
                compared_attempt_id=one.original_attempt_id,
                expected_value=one.original_value,
                verdict=SdcReplay.Verdict.PENDING,
                message=(
                    f"{one.metric} at step {one.step}: attempt "
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
    return opened


# --- Quarantine of hosts and devices (helper 3) -------------------------------------------------


def host_quarantine(*, host: Host, user: Any, reason: str) -> Host:
    """Take a host out of service, with who did it and why (the reason is required). A host
    already in quarantine keeps its original time; the reason and author are updated."""
    _quarantine(row=host, user=user, reason=reason)
    return host


def host_release(*, host: Host, user: Any) -> Host:
    """Return a host to service. `user` is who released it (the caller checked the right)."""
    _release(row=host)
    return host


def device_quarantine(*, device: Device, user: Any, reason: str) -> Device:
    _quarantine(row=device, user=user, reason=reason)
    return device


def device_release(*, device: Device, user: Any) -> Device:
    _release(row=device)
    return device


def _quarantine(*, row: Host | Device, user: Any, reason: str) -> None:
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "A reason is required to quarantine hardware."})
    row.quarantined_at = row.quarantined_at or timezone.now()
    row.quarantine_reason = reason
    row.quarantined_by = user if getattr(user, "is_authenticated", False) else None
    row.save(update_fields=["quarantined_at", "quarantine_reason", "quarantined_by"])
    telemetry_services.fleet_version_bump(project_id=None)


def _release(*, row: Host | Device) -> None:
    row.quarantined_at = None
    row.quarantine_reason = ""
    row.quarantined_by = None
    row.save(update_fields=["quarantined_at", "quarantine_reason", "quarantined_by"])
    telemetry_services.fleet_version_bump(project_id=None)


# --- The logbook: entries written by on-call, drafted by automation, imported (issue 4) -----

ENTRY_ENTITY = AuditEvent.Entity.LOGBOOK_ENTRY
# What an edit may change; the author and the automatic flag stay as first written.
ENTRY_EDITABLE_FIELDS: tuple[str, ...] = (
    "kind",
    "role",
    "title",
    "body",
    "occurred_at",
    "step",
    "step_end",
    "attempt",
    "checkpoint",
    "interruption",
    "sdc_replay",
    "corrected_by",
    "config_changes",
)
ENTRY_BODY_MAX_LENGTH = 100_000
CONFIG_VALUE_MAX_LENGTH = 500
RESTART_DRAFT_AUTHOR = "Chronicle"
MINUS = "\u2212"


class LogbookStaleEdit(Exception):
    """The edit started from an older version of the entry than the stored one. `current` is
    the entry as stored now, `their_changes` the audit events written since, oldest first."""

    def __init__(self, current: LogbookEntry, their_changes: list[AuditEvent]) -> None:
        names = sorted({event.username for event in their_changes})
        super().__init__(
            f"This entry was changed by {', '.join(names) or 'someone else'} (now version "
            f"{current.version}) while you were editing it. Nothing was saved: review their "
            "change below and apply yours again."
        )
        self.current = current
        self.their_changes = their_changes


def logbook_entry_snapshot(entry: LogbookEntry) -> dict[str, Any]:
    """The editable fields in the readable form the audit trail stores: the attempt by number,
    the checkpoint by step, the other links by id."""
    return {
        "kind": entry.kind,
        "role": entry.role,
        "title": entry.title,
        "body": entry.body,
        "occurred_at": entry.occurred_at,
        "step": entry.step,
        "step_end": entry.step_end,
        "attempt": entry.attempt.number if entry.attempt_id else None,
        "checkpoint": entry.checkpoint.step if entry.checkpoint_id else None,
        "interruption": entry.interruption_id,
        "sdc_replay": entry.sdc_replay_id,
        "corrected_by": entry.corrected_by_id,
        "config_changes": list(entry.config_changes or []),
    }


def _entry_changes_since(*, entry: LogbookEntry, version: int) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(
            entity=ENTRY_ENTITY, object_id=entry.pk, changes__version__0__gte=version
        ).order_by("at", "pk")
    )


def _config_changes_clean(raw: Any) -> list[dict[str, str]]:
    if not isinstance(raw, list | tuple):
        raise ValueError("Config changes are a list of {key, before, after}.")
    rows: list[dict[str, str]] = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise ValueError("Each config change has a key, a before and an after value.")
        # One line each: the chronicle table has one row per change.
        row = {name: " ".join(str(item.get(name) or "").split()) for name in ("key", "before")}
        row["after"] = " ".join(str(item.get("after") or "").split())
        if not row["key"] and not row["before"] and not row["after"]:
            continue  # an empty form row
        if not row["key"]:
            raise ValueError("Each config change names the setting it changes.")
        if any(len(value) > CONFIG_VALUE_MAX_LENGTH for value in row.values()):
            raise ValueError(f"Config values are at most {CONFIG_VALUE_MAX_LENGTH} characters.")
        if row["before"] == row["after"]:
            raise ValueError(f"{row['key']}: before and after are the same.")
        rows.append(row)
    return rows


def _entry_values_clean(*, run: Run, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Validated model values for the given fields; ValidationError naming each bad one."""
    unknown = sorted(set(changes) - set(ENTRY_EDITABLE_FIELDS))
    if unknown:
        raise ValidationError({name: "This field cannot be edited." for name in unknown})
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name, raw in changes.items():
        try:
            values[name] = _entry_value_clean(run=run, name=name, raw=raw)
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        raise ValidationError(errors)
    return values


def _entry_value_clean(*, run: Run, name: str, raw: Any) -> Any:
    if name == "kind":
        if raw not in LogbookEntry.Kind.values:
            raise ValueError(f"Unknown kind {raw!r}.")
        return raw
    if name == "role":
        if raw not in LogbookEntry.Role.values:
            raise ValueError(f"Unknown role {raw!r}.")
        return raw
    if name == "title":
        title = " ".join(str(raw or "").split())
        if not title:
            raise ValueError("A title is required.")
        if len(title) > LogbookEntry._meta.get_field("title").max_length:
            raise ValueError("The title is too long (300 characters at most).")
        return title
    if name == "body":
        body = str(raw or "").replace("\r\n", "\n").strip("\n")
        if len(body) > ENTRY_BODY_MAX_LENGTH:
            raise ValueError(f"The body is too long ({ENTRY_BODY_MAX_LENGTH} characters at most).")
        return body
    if name == "occurred_at":
        if not isinstance(raw, datetime) or timezone.is_naive(raw):
            raise ValueError("A time with its time zone is required.")
        return raw
    if name in ("step", "step_end"):
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise ValueError("A step is a whole number ≥ 0.")
        return raw
    if name == "config_changes":
        return _config_changes_clean(raw)
    # Links: an object of this run, or None.
    if raw is not None and getattr(raw, "run_id", None) != run.pk:
        raise ValueError("Link only to records of this run.")
    return raw


def _entry_invariants_check(entry: LogbookEntry) -> None:
    errors: dict[str, str] = {}
    if entry.step_end is not None and (entry.step is None or entry.step_end < entry.step):
        errors["step_end"] = "The step range ends before it starts (or has no start)."
    target = entry.corrected_by
    if target is not None:
        if entry.pk is not None and target.pk == entry.pk:
            errors["corrected_by"] = "An entry cannot correct itself."
        elif target.occurred_at < entry.occurred_at:
            errors["corrected_by"] = "The correcting entry must be a later one."
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def logbook_entry_create(
    *,
    run: Run,
    user: Any,
    title: str,
    kind: str = LogbookEntry.Kind.NOTE,
    body: str = "",
    occurred_at: datetime | None = None,
    role: str = LogbookEntry.Role.ONCALL,
    author_name: str | None = None,
    step: int | None = None,
    step_end: int | None = None,
    attempt: Attempt | None = None,
    checkpoint: Checkpoint | None = None,
    interruption: Interruption | None = None,
    sdc_replay: SdcReplay | None = None,
    corrected_by: LogbookEntry | None = None,
    config_changes: Sequence[Mapping[str, Any]] = (),
    is_automatic: bool = False,
    source_key: str = "",
) -> LogbookEntry:
    """Write one entry and its "create" audit event. `user` is the author (None: automation);
    `author_name` overrides the name shown (imports keep the file's author). With a
    `source_key` already used in the run, returns that entry and writes nothing."""
    if source_key:
        existing = LogbookEntry.objects.filter(run=run, source_key=source_key).first()
        if existing is not None:
            return existing
    values = _entry_values_clean(
        run=run,
        changes={
            "kind": kind,
            "role": role,
            "title": title,
            "body": body,
            "occurred_at": occurred_at or timezone.now(),
            "step": step,
            "step_end": step_end,
            "attempt": attempt,
            "checkpoint": checkpoint,
            "interruption": interruption,
            "sdc_replay": sdc_replay,
            "corrected_by": corrected_by,
            "config_changes": list(config_changes),
        },
    )
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    if author_name is None:
        author_name = user.get_username() if authenticated else RESTART_DRAFT_AUTHOR
    entry = LogbookEntry(
        run=run,
        author=user if authenticated else None,
        author_name=author_name[:150],
        is_automatic=is_automatic,
        source_key=source_key,
        **values,
    )
    _entry_invariants_check(entry)
    entry.save()
    telemetry_services.run_data_version_bump(run_id=run.pk)
    audit_record(
        project=run.project,
        entity=ENTRY_ENTITY,
        object_id=entry.pk,
        user=user,
        action="create",
        changes=diff_fields({}, logbook_entry_snapshot(entry), ENTRY_EDITABLE_FIELDS),
    )
    return entry


@transaction.atomic
def logbook_entry_update(
    *, entry: LogbookEntry, user: Any, version: int, changes: Mapping[str, Any]
) -> LogbookEntry:
    """Apply `changes` (field -> value; links as model instances) to the entry if it is still
    at `version`, bump the version and record the before/after of each changed field.
    Raises LogbookStaleEdit (nothing written) or ValidationError (before any write)."""
    values = _entry_values_clean(run=entry.run, changes=changes)
    current = (
        LogbookEntry.objects.select_for_update(of=("self",))
        .select_related("run__project", "attempt", "checkpoint", "corrected_by")
        .get(pk=entry.pk)
    )
    if current.version != version:
        raise LogbookStaleEdit(current, _entry_changes_since(entry=current, version=version))
    before = logbook_entry_snapshot(current)
    for name, value in values.items():
        setattr(current, name, value)
    _entry_invariants_check(current)
    diff = diff_fields(before, logbook_entry_snapshot(current), ENTRY_EDITABLE_FIELDS)
    if not diff:
        return current
    # The optimistic lock, stated in the statement that writes (the row lock above makes a
    # miss impossible today, but the rule must not depend on it).
    updated = LogbookEntry.objects.filter(pk=current.pk, version=version).update(
        version=F("version") + 1,
        updated_at=timezone.now(),
        **{name: getattr(current, name) for name in values},
    )
    if updated != 1:
        current.refresh_from_db()
        raise LogbookStaleEdit(current, _entry_changes_since(entry=current, version=version))
    current.version = version + 1
    telemetry_services.run_data_version_bump(run_id=current.run_id)
    audit_record(
        project=current.run.project,
        entity=ENTRY_ENTITY,
        object_id=current.pk,
        user=user,
        action="update",
        changes={**diff, "version": [version, version + 1]},
    )
    return current


@transaction.atomic
def logbook_entry_delete(*, entry: LogbookEntry, user: Any, version: int | None = None) -> None:
    """Delete the entry (entries it corrected lose the link), recording what it held. With
    `version`, refuses with LogbookStaleEdit if someone changed it since."""
    current = (
        LogbookEntry.objects.select_for_update(of=("self",))
        .select_related("run__project", "attempt", "checkpoint")
        .get(pk=entry.pk)
    )
    if version is not None and current.version != version:
        raise LogbookStaleEdit(current, _entry_changes_since(entry=current, version=version))
    snapshot = logbook_entry_snapshot(current)
    audit_record(
        project=current.run.project,
        entity=ENTRY_ENTITY,
        object_id=current.pk,
        user=user,
        action="delete",
        changes={
            name: [pair[1], None]
            for name, pair in diff_fields({}, snapshot, ENTRY_EDITABLE_FIELDS).items()
        },
    )
    current.delete()
    telemetry_services.run_data_version_bump(run_id=current.run_id)


# --- Restart drafts -----------------------------------------------------------------------


def _duration_text(seconds: float) -> str:
    minutes = seconds / 60
    if minutes < 120:
        return f"{round(minutes):,} min"
    return f"{minutes / 60:.1f} h"


def _hosts_text(names: list[str]) -> str:
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f" on host{'s' if len(names) > 1 else ''} {shown}"


def _attempt_last_step(attempt: Attempt) -> int | None:
    """The highest step the attempt reported a metric for (through the (series, step) key)."""
    return MetricPoint.objects.filter(series__attempt=attempt).aggregate(top=Max("step"))["top"]


def _restart_interruption(*, attempt: Attempt, previous: Attempt) -> Interruption | None:
    """The interruption that ended `previous` before `attempt` started: one filed against
    `previous`, else an unattributed one between the two starts."""
    unattributed = Q(attempt__isnull=True)
    if previous.started_at is not None:
        unattributed &= Q(occurred_at__gte=previous.started_at)
    if attempt.started_at is not None:
        unattributed &= Q(occurred_at__lte=attempt.started_at)
    return (
        Interruption.objects.filter(Q(attempt=previous) | unattributed, run=attempt.run_id)
        .select_related("root_cause")
        .order_by("-occurred_at", "-pk")
        .first()
    )


def restart_entry_draft(*, attempt: Attempt) -> LogbookEntry | None:
    """Draft the automatic "restart" entry of an attempt that started after an interruption
    ("Attempt 12 resumed from checkpoint at step 12,000 after NCCL Watchdog Timeouts on host
    h123; 345 steps lost, 14 min downtime"). None when no interruption precedes it.

    Idempotent (keyed "draft:restart:<attempt pk>"): called again, e.g. when the restore or
    the interruption arrives in a later batch, it refreshes the draft while no person has
    edited it, and leaves it alone once someone has."""
    run = attempt.run
    previous = run.attempts.filter(number__lt=attempt.number).order_by("-number").first()
    if previous is None:
        return None
    interruption = _restart_interruption(attempt=attempt, previous=previous)
    if interruption is None:
        return None
    restore = CheckpointRestore.objects.filter(attempt=attempt).select_related("checkpoint").first()
    checkpoint = restore.checkpoint if restore is not None else None
    resume_step = checkpoint.step if checkpoint is not None else attempt.resumed_from_step
    if checkpoint is None and resume_step is not None:
        checkpoint = Checkpoint.objects.filter(run=run, step=resume_step).first()
    hosts = sorted(interruption.hosts.values_list("name", flat=True))
    cause = interruption.root_cause.name
    if interruption.root_cause.slug == UNKNOWN_SLUG and interruption.reported_category:
        cause = interruption.reported_category

    facts = [
        f"- **Interruption:** {cause} at {chronicles.heading_time(interruption.occurred_at)} "
        f"({'planned' if interruption.planned else 'unexpected'}), incident "
        f"#{interruption.pk}" + (f": {interruption.message}" if interruption.message else ""),
    ]
    if hosts:
        facts.append(f"- **Hosts:** {', '.join(hosts)}")
    if resume_step is None:
        resumed = f"Attempt {attempt.number} started"
        facts.append("- **Resumed from:** no checkpoint restore reported")
    elif checkpoint is not None:
        resumed = f"Attempt {attempt.number} resumed from checkpoint at step {resume_step:,}"
        facts.append(
            f"- **Resumed from:** checkpoint at step {resume_step:,}"
            + (f" (`{checkpoint.uri}`)" if checkpoint.uri else "")
        )
    else:
        resumed = f"Attempt {attempt.number} resumed from step {resume_step:,}"
        facts.append(f"- **Resumed from:** step {resume_step:,}")

    costs: list[str] = []
    last_step = interruption.step
    if last_step is None:
        last_step = _attempt_last_step(previous)
    lost = interruption.lost_steps
    if lost is not None:
        facts.append(f"- **Steps lost:** {lost:,} (as reported with the interruption)")
    elif last_step is not None and resume_step is not None:
        lost = max(0, last_step - resume_step)
        facts.append(
            f"- **Steps lost:** {lost:,} = last step attempt {previous.number} reached "
            f"({last_step:,}) {MINUS} resume step ({resume_step:,})"
        )
    if lost is not None:
        costs.append(f"{lost:,} step{'' if lost == 1 else 's'} lost")
    if attempt.started_at is not None:
        downtime_s = max(0.0, (attempt.started_at - interruption.occurred_at).total_seconds())
        downtime = _duration_text(downtime_s)
        costs.append(f"{downtime} downtime")
        facts.append(
            f"- **Downtime:** {downtime} = attempt {attempt.number} start "
            f"({chronicles.heading_time(attempt.started_at)}) {MINUS} interruption "
            f"({chronicles.heading_time(interruption.occurred_at)})"
        )
    title = f"{resumed} after {cause}{_hosts_text(hosts)}"
    if costs:
        title += "; " + ", ".join(costs)
    body = "\n".join(
        [
            *facts,
            "",
            "*Drafted automatically from the attempt's start, restore and interruption "
            "records; on-call may edit it.*",
        ]
    )
    draft = {
        "title": title[:300],
        "body": body,
        "occurred_at": attempt.started_at or interruption.recovered_at or timezone.now(),
        "step": resume_step,
        # The lost range: from the resume step to the last step reached before the stop.
        "step_end": last_step if lost and resume_step is not None and last_step else None,
        "attempt": attempt,
        "checkpoint": checkpoint,
        "interruption": interruption,
    }
    source_key = f"draft:restart:{attempt.pk}"
    with transaction.atomic():
        existing = (
            LogbookEntry.objects.select_for_update(of=("self",))
            .select_related("run__project", "attempt", "checkpoint")
            .filter(run=run, source_key=source_key)
            .first()
        )
        if existing is None:
            return logbook_entry_create(
                run=run,
                user=None,
                kind=LogbookEntry.Kind.RESTART,
                role=LogbookEntry.Role.AUTOMATION,
                author_name=RESTART_DRAFT_AUTHOR,
                is_automatic=True,
                source_key=source_key,
                **draft,
            )
        touched_by_people = AuditEvent.objects.filter(
            entity=ENTRY_ENTITY, object_id=existing.pk, user__isnull=False
        ).exists()
        if touched_by_people:
            return existing
        return logbook_entry_update(
            entry=existing, user=None, version=existing.version, changes=draft
        )


# --- Import of a chronicle file -------------------------------------------------------------


def _import_key(data: Mapping[str, Any]) -> str:
    identity = "|".join(
        [data["occurred_at"].isoformat(), data["kind"], data["title"], data["author_name"]]
    )
    return "import:" + hashlib.sha256(identity.encode()).hexdigest()[:40]


@transaction.atomic
def logbook_import(*, run: Run, user: Any, text: str) -> int:
    """Create the entries of an exported logbook file in `run`; returns how many were new.
    An entry already in the run (same time, kind and title, or imported before) is skipped,
    so importing the same file twice creates nothing the second time. Links are kept where
    the run has the record (attempt number, checkpoint step, incident and SDC ids); a
    "Corrected by" reference is linked to the matching entry. Raises ChronicleError (the file)
    or ValidationError (an entry), writing nothing."""
    parsed = chronicles.markdown_to_entries(text)
    for number, data in enumerate(parsed, start=1):
        if data["kind"] not in LogbookEntry.Kind.values:
            raise chronicles.ChronicleError(f"entry {number}: unknown kind {data['kind']!r}.")
    attempts = {a.number: a for a in run.attempts.filter(number__in=_wanted(parsed, "attempt"))}
    checkpoints = {
        c.step: c for c in run.checkpoints.filter(step__in=_wanted(parsed, "checkpoint_step"))
    }
    incidents = {
        i.pk: i for i in run.interruptions.filter(pk__in=_wanted(parsed, "interruption_id"))
    }
    sdcs = {s.pk: s for s in run.sdc_replays.filter(pk__in=_wanted(parsed, "sdc_replay_id"))}
    created: list[tuple[LogbookEntry, Mapping[str, Any]]] = []
    for data in parsed:
        key = _import_key(data)
        duplicate = LogbookEntry.objects.filter(run=run).filter(
            Q(source_key=key)
            | Q(occurred_at=data["occurred_at"], kind=data["kind"], title=data["title"])
        )
        if duplicate.exists():
            continue
        entry = logbook_entry_create(
            run=run,
            user=user,
            title=data["title"],
            kind=data["kind"],
            body=data["body"],
            occurred_at=data["occurred_at"],
            role=data["role"],
            author_name=data["author_name"],
            step=data["step"],
            step_end=data["step_end"],
            attempt=attempts.get(data["attempt"]),
            checkpoint=checkpoints.get(data["checkpoint_step"]),
            interruption=incidents.get(data["interruption_id"]),
            sdc_replay=sdcs.get(data["sdc_replay_id"]),
            config_changes=data["config_changes"],
            is_automatic=data["is_automatic"],
            source_key=key,
        )
        created.append((entry, data))
    # Corrections last: the correcting entry is usually above in the file, but need not be.
    for entry, data in created:
        ref = data["corrected_by"]
        if not ref:
            continue
        minute = ref["occurred_at"]
        target = (
            LogbookEntry.objects.filter(
                run=run,
                kind=ref["kind"],
                title=ref["title"],
                occurred_at__gte=minute,
                occurred_at__lt=minute + timedelta(minutes=1),
            )
            .order_by("occurred_at", "pk")
            .first()
        )
        if target is not None:
            logbook_entry_update(
                entry=entry, user=user, version=entry.version, changes={"corrected_by": target}
            )
    return len(created)


def _wanted(parsed: list[dict[str, Any]], name: str) -> set[int]:
    return {data[name] for data in parsed if data[name] is not None}


def root_cause_create(
    *,
    name: str,
    slug: str,
    group: str,
    is_hardware: bool = False,
    is_planned: bool = False,
    description: str = "",
) -> RootCause:
    """Add a category to the taxonomy (admins extend it beyond the shipped rows)."""
    return RootCause.objects.create(
        name=name,
        slug=slug,
        group=group,
        is_hardware=is_hardware,
        is_planned=is_planned,
        description=description,
    )
