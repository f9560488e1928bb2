"""Writes for interruptions, checkpoints, SDC replays and logbook entries. Each is keyed so
that recording the same event twice changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from logbook.models import (
    Checkpoint,
    CheckpointRestore,
    Interruption,
    LogbookEntry,
    RootCause,
    SdcReplay,
)
from logbook.taxonomy import ROOT_CAUSE_SEEDS, UNKNOWN_SLUG
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run


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
    restore, _ = CheckpointRestore.objects.update_or_create(
        attempt=attempt,
        defaults={"checkpoint": checkpoint, "restored_at": restored_at, "restore_s": restore_s},
    )
    if attempt.resumed_from_step is None:
        attempt.resumed_from_step = step
        attempt.save(update_fields=["resumed_from_step"])
    for touched in Checkpoint.objects.filter(run=attempt.run, restores__isnull=False).distinct():
        count = touched.restores.count()
        if touched.restored_count != count:
            Checkpoint.objects.filter(pk=touched.pk).update(restored_count=count)
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
