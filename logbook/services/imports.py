"""Import of an exported chronicle file into a run."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q

from logbook import chronicles
from logbook.chronicles import CorrectionRef
from logbook.models import LogbookEntry
from logbook.services.entries import ENTRY_DEFAULTS, logbook_entry_create, logbook_entry_update
from telemetry.models import Run

# The line an unresolved link leaves in the entry's body, so nothing the file said is lost.
UNLINKED_PREFIX = "Not linked on import:"


@dataclass(frozen=True)
class ImportResult:
    """How many entries were new, and one line per link the run could not resolve
    ("entry 12: checkpoint at step 17,235 not found; kept as text")."""

    created: int
    unlinked: list[str] = field(default_factory=list)


def _import_key(data: Mapping[str, Any]) -> str:
    identity = "|".join(
        [data["occurred_at"].isoformat(), data["kind"], data["title"], data["author_name"]]
    )
    return "import:" + hashlib.sha256(identity.encode()).hexdigest()[:40]


def _missing_links(
    data: Mapping[str, Any],
    attempts: Mapping[int, Any],
    checkpoints: Mapping[int, Any],
    incidents: Mapping[int, Any],
    sdcs: Mapping[int, Any],
) -> list[str]:
    missing = []
    if data["attempt"] is not None and data["attempt"] not in attempts:
        missing.append(f"attempt {data['attempt']} not found")
    if data["checkpoint_step"] is not None and data["checkpoint_step"] not in checkpoints:
        missing.append(f"checkpoint at step {data['checkpoint_step']:,} not found")
    if data["interruption_number"] is not None and data["interruption_number"] not in incidents:
        missing.append(f"incident #{data['interruption_number']} not found")
    if data["sdc_replay_id"] is not None and data["sdc_replay_id"] not in sdcs:
        missing.append(f"SDC record #{data['sdc_replay_id']} not found")
    return missing


def _with_unlinked(body: str, missing: list[str]) -> str:
    line = f"*{UNLINKED_PREFIX}* {'; '.join(missing)}."
    return f"{body}\n\n{line}" if body else line


@transaction.atomic
def logbook_import(*, run: Run, user: Any, text: str) -> ImportResult:
    """Create the entries of an exported logbook file in `run`; returns how many were new and
    the links it could not resolve. An entry already in the run (same time, kind and title,
    or imported before) is skipped, so importing the same file twice creates nothing the
    second time. Links are kept where the run has the record (attempt number, checkpoint
    step, run-local incident number, SDC id); one the run lacks is reported per entry and
    written into the entry's body, never dropped silently. A "Corrected by" reference is
    linked to the matching entry (or reported likewise). Raises ChronicleError (the file) or
    ValidationError (an entry), writing nothing."""
    parsed = chronicles.markdown_to_entries(text)
    for number, data in enumerate(parsed, start=1):
        if data["kind"] not in LogbookEntry.Kind.values:
            raise chronicles.ChronicleError(f"entry {number}: unknown kind {data['kind']!r}.")
    attempts = {a.number: a for a in run.attempts.filter(number__in=_wanted(parsed, "attempt"))}
    checkpoints = {
        c.step: c for c in run.checkpoints.filter(step__in=_wanted(parsed, "checkpoint_step"))
    }
    incidents = {
        i.number: i
        for i in run.interruptions.filter(number__in=_wanted(parsed, "interruption_number"))
    }
    sdcs = {s.pk: s for s in run.sdc_replays.filter(pk__in=_wanted(parsed, "sdc_replay_id"))}
    created: list[tuple[int, LogbookEntry, Mapping[str, Any]]] = []
    unlinked: list[str] = []
    for number, data in enumerate(parsed, start=1):
        key = _import_key(data)
        duplicate = LogbookEntry.objects.filter(run=run).filter(
            Q(source_key=key)
            | Q(occurred_at=data["occurred_at"], kind=data["kind"], title=data["title"])
        )
        if duplicate.exists():
            continue
        missing = _missing_links(data, attempts, checkpoints, incidents, sdcs)
        unlinked += [f"entry {number}: {problem}; kept as text" for problem in missing]
        entry = logbook_entry_create(
            run=run,
            user=user,
            title=data["title"],
            kind=data["kind"],
            body=_with_unlinked(data["body"], missing) if missing else data["body"],
            occurred_at=data["occurred_at"],
            role=data["role"],
            author_name=data["author_name"],
            step=data["step"],
            step_end=data["step_end"],
            attempt=attempts.get(data["attempt"]),
            checkpoint=checkpoints.get(data["checkpoint_step"]),
            interruption=incidents.get(data["interruption_number"]),
            sdc_replay=sdcs.get(data["sdc_replay_id"]),
            config_changes=data["config_changes"],
            is_automatic=data["is_automatic"],
            source_key=key,
            **{name: data[name] for name in ENTRY_DEFAULTS},
        )
        created.append((number, entry, data))
    # Corrections last: the correcting entry is usually above in the file, but need not be.
    for number, entry, data in created:
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
        if target is None:
            missing = [
                f"correcting entry '{chronicles.correction_text(CorrectionRef(**ref))}' not found"
            ]
            unlinked.append(f"entry {number}: {missing[0]}; kept as text")
            changes: dict[str, Any] = {"body": _with_unlinked(entry.body, missing)}
        else:
            changes = {"corrected_by": target}
        logbook_entry_update(entry=entry, user=user, version=entry.version, changes=changes)
    return ImportResult(created=len(created), unlinked=unlinked)


def _wanted(parsed: list[dict[str, Any]], name: str) -> set[int]:
    return {data[name] for data in parsed if data[name] is not None}
