"""The automatic "restart" entry drafted when an attempt starts after an interruption."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from logbook import chronicles
from logbook.models import AuditEvent, Checkpoint, CheckpointRestore, Interruption, LogbookEntry
from logbook.services.entries import (
    ENTRY_ENTITY,
    RESTART_DRAFT_AUTHOR,
    logbook_entry_create,
    logbook_entry_update,
)
from logbook.taxonomy import UNKNOWN_SLUG
from telemetry.models import Attempt, MetricPoint

MINUS = "\u2212"


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
