"""Import of an exported chronicle file into a run."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q

from logbook import chronicles
from logbook.models import LogbookEntry
from logbook.services.entries import logbook_entry_create, logbook_entry_update
from telemetry.models import Run


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
