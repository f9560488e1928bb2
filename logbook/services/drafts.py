"""The automatic "restart" entry drafted when an attempt starts after an interruption, and
when, in a batch of a job's events, it is drafted."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from logbook.models import AuditEvent, Checkpoint, CheckpointRestore, Interruption, LogbookEntry
from logbook.restart_drafts import RestartFacts, restart_text
from logbook.services.entries import (
    ENTRY_ENTITY,
    RESTART_DRAFT_AUTHOR,
    logbook_entry_create,
    logbook_entry_update,
)
from logbook.services.interruptions import interruption_restart_fill
from logbook.taxonomy import UNKNOWN_SLUG
from telemetry import configs
from telemetry.models import Attempt, MetricPoint

# The job events after which an attempt's restart draft may read differently.
DRAFTING_EVENTS = ("attempt_started", "checkpoint_restored")


class JobEvent(Protocol):
    type: str


def restart_drafts_refresh(
    *, events: Iterable[JobEvent], attempt_of: Callable[[JobEvent], Attempt]
) -> None:
    """Draft (or refresh) the restart entry of each attempt a batch's events start or restore.
    Call it after every other record of the batch is written: a draft reads the batch's
    restore and interruption, which may come after the attempt_started event in the batch.
    `attempt_of` gives an event's attempt (the ingest worker's per-batch cache)."""
    for event in events:
        if event.type in DRAFTING_EVENTS:
            restart_entry_draft(attempt=attempt_of(event))
        elif event.type == "interruption":
            # Arriving after the restart it caused: that attempt's draft (and the incident's
            # lost steps) read it now.
            after = _attempt_after(attempt_of(event))
            if after is not None:
                restart_entry_draft(attempt=after)


def _attempt_after(attempt: Attempt) -> Attempt | None:
    return (
        Attempt.objects.filter(run=attempt.run_id, number__gt=attempt.number)
        .select_related("run")
        .order_by("number")
        .first()
    )


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


def _config_changes(*, previous: Attempt, attempt: Attempt) -> list[dict[str, str]]:
    if previous.config is None or attempt.config is None:
        return []
    return [
        {"key": key, "before": before, "after": after}
        for key, before, after in configs.config_changes(previous.config, attempt.config)
    ]


def restart_entry_draft(*, attempt: Attempt) -> LogbookEntry | None:
    """Draft the automatic "restart" entry of an attempt that started after an interruption
    (the text: logbook.restart_drafts). None when no interruption precedes it.

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
    last_step = interruption.step
    if last_step is None:
        last_step = _attempt_last_step(previous)
    # The incident carries the same lost steps and times as this draft and the goodput page.
    interruption_restart_fill(
        interruption=interruption,
        previous=previous,
        attempt=attempt,
        resume_step=resume_step,
        last_step=last_step,
    )
    text = restart_text(
        RestartFacts(
            attempt_number=attempt.number,
            attempt_started_at=attempt.started_at,
            previous_number=previous.number,
            cause=cause,
            interrupted_at=interruption.occurred_at,
            planned=interruption.planned,
            incident_id=interruption.pk,
            message=interruption.message,
            hosts=hosts,
            resume_step=resume_step,
            checkpoint_found=checkpoint is not None,
            checkpoint_uri=checkpoint.uri if checkpoint is not None else "",
            lost_steps=interruption.lost_steps,
            last_step=last_step,
        )
    )
    draft = {
        "title": text.title,
        "body": text.body,
        # The config the attempt ran against the one before it (run_info.config per attempt):
        # the entry's before → after table.
        "config_changes": _config_changes(previous=previous, attempt=attempt),
        "occurred_at": attempt.started_at or interruption.recovered_at or timezone.now(),
        "step": resume_step,
        "step_end": text.step_end,
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
