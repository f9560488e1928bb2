"""Reads of a run's logbook: its entries with their links in one query, one entry for an
edit, its audit history, and the entries as chronicle records for the Markdown export."""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from django.http import Http404

from logbook.chronicles import ChronicleEntry, CorrectionRef
from logbook.models import AuditEvent, Checkpoint, Interruption, LogbookEntry, SdcReplay
from telemetry.models import Attempt, Run
from telemetry.selectors import User, run_get_for_user

# The edit form offers the latest entries as corrections; a logbook has hundreds at most,
# this keeps the page bounded if one has more.
CORRECTION_CHOICES_LIMIT = 300


def run_logbook_entries(*, run: Run) -> QuerySet[LogbookEntry]:
    """The run's entries, newest first, with every link the page shows (one query)."""
    return (
        LogbookEntry.objects.filter(run=run)
        .select_related("attempt", "checkpoint", "interruption", "sdc_replay", "corrected_by")
        .order_by("-occurred_at", "-pk")
    )


def logbook_entry_get_for_user(*, user: User, run_id: int, pk: int) -> LogbookEntry:
    """The entry of a run the user may see; 404 otherwise (never 403)."""
    run = run_get_for_user(user=user, run_id=run_id)
    entry = run_logbook_entries(run=run).select_related("run__project").filter(pk=pk).first()
    if entry is None:
        raise Http404("No such logbook entry.")
    return entry


def logbook_entry_history(*, entry: LogbookEntry) -> QuerySet[AuditEvent]:
    """Every recorded change to the entry, newest first."""
    return AuditEvent.objects.filter(
        entity=AuditEvent.Entity.LOGBOOK_ENTRY, object_id=entry.pk
    ).order_by("-at", "-pk")


def correction_choices(*, run: Run, after: LogbookEntry | None = None) -> QuerySet[LogbookEntry]:
    """Entries that may correct `after` (later ones), or any recent entry of the run."""
    entries = LogbookEntry.objects.filter(run=run).order_by("-occurred_at", "-pk")
    if after is not None:
        entries = entries.filter(occurred_at__gte=after.occurred_at).exclude(pk=after.pk)
    return entries.only("pk", "occurred_at", "time_precision", "occurred_until", "kind", "title")[
        :CORRECTION_CHOICES_LIMIT
    ]


def chronicle_entry(entry: LogbookEntry) -> ChronicleEntry:
    """The entry as the pure export reads it (links as attempt number, checkpoint step, ids).
    Expects the links selected with the entry (run_logbook_entries)."""
    target = entry.corrected_by
    return ChronicleEntry(
        occurred_at=entry.occurred_at,
        author_name=entry.author_name,
        role=entry.role,
        kind=entry.kind,
        title=entry.title,
        body=entry.body,
        is_automatic=entry.is_automatic,
        attempt=entry.attempt.number if entry.attempt is not None else None,
        step=entry.step,
        step_end=entry.step_end,
        checkpoint_step=entry.checkpoint.step if entry.checkpoint is not None else None,
        interruption_number=entry.interruption.number if entry.interruption is not None else None,
        sdc_replay_id=entry.sdc_replay_id,
        config_changes=list(entry.config_changes or []),
        time_precision=entry.time_precision,
        occurred_until=entry.occurred_until,
        local_time=entry.local_time,
        count=entry.count,
        count_approximate=entry.count_approximate,
        count_unit=entry.count_unit,
        hosts_out=list(entry.hosts_out or []),
        hosts_in=list(entry.hosts_in or []),
        corrected_by=(
            CorrectionRef(kind=target.kind, occurred_at=target.occurred_at, title=target.title)
            if target is not None
            else None
        ),
    )


def run_chronicle(*, run: Run) -> list[ChronicleEntry]:
    return [chronicle_entry(entry) for entry in run_logbook_entries(run=run)]


def entry_links_find(
    *,
    run: Run,
    attempt: int | None,
    checkpoint: int | None,
    incident: int | None,
    sdc_record: int | None,
) -> dict[str, tuple[str, Any]]:
    """The records an entry form's numbers name, each only if it is this run's: by form
    field, (the entry's field, the record or None). An attempt by its number, a checkpoint by
    its step, an incident and an SDC record by the number the site shows. A query per number
    given."""
    lookups: dict[str, tuple[str, type[Model], str, int | None]] = {
        "attempt": ("attempt", Attempt, "number", attempt),
        "checkpoint": ("checkpoint", Checkpoint, "step", checkpoint),
        # The number the site shows (/incidents/ and its URLs), one of this run's incidents.
        "incident": ("interruption", Interruption, "pk", incident),
        "sdc_record": ("sdc_replay", SdcReplay, "pk", sdc_record),
    }
    found: dict[str, tuple[str, Any]] = {}
    for field, (name, model, key, value) in lookups.items():
        row = None if value is None else model.objects.filter(run=run, **{key: value}).first()
        found[field] = (name, row)
    return found


def run_entry_find(*, run: Run, pk: int | None) -> LogbookEntry | None:
    """The run's entry with this id, or None (also for no id, or another run's)."""
    return LogbookEntry.objects.filter(run=run, pk=pk).first() if pk else None
