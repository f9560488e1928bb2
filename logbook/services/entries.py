"""Logbook entries: written by on-call, recorded from a job's note events, drafted by
automation. Every edit is optimistic-locked on LogbookEntry.version and audited."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from logbook.audit import diff_fields
from logbook.choices import TimePrecision
from logbook.models import AuditEvent, Checkpoint, Interruption, LogbookEntry, SdcReplay
from logbook.services import autotriage as autotriage_services
from logbook.services import versioned
from logbook.services.audit import audit_record
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run

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
    "time_precision",
    "occurred_until",
    "local_time",
    "count",
    "count_approximate",
    "count_unit",
    "hosts_out",
    "hosts_in",
)
# Written by create when not given (an entry known to the minute, not counted, no swap).
ENTRY_DEFAULTS: dict[str, Any] = {
    "time_precision": TimePrecision.EXACT,
    "occurred_until": None,
    "local_time": "",
    "count": None,
    "count_approximate": False,
    "count_unit": "",
    "hosts_out": [],
    "hosts_in": [],
}
HOSTS_PER_SWAP_MAX = 1_000
ENTRY_BODY_MAX_LENGTH = 100_000
CONFIG_VALUE_MAX_LENGTH = 500
RESTART_DRAFT_AUTHOR = "Chronicle"


class LogbookStaleEdit(versioned.StaleEdit):
    """The edit started from an older version of the entry than the stored one (see
    versioned.StaleEdit for `current` and `their_changes`)."""

    MESSAGE = (
        "This entry was changed by {who} (now version {version}) while you were editing it. "
        "Nothing was saved: review their change below and apply yours again."
    )


EDITS = versioned.VersionedEdits(model=LogbookEntry, entity=ENTRY_ENTITY, stale=LogbookStaleEdit)


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
        "time_precision": entry.time_precision,
        "occurred_until": entry.occurred_until,
        "local_time": entry.local_time,
        "count": entry.count,
        "count_approximate": entry.count_approximate,
        "count_unit": entry.count_unit,
        "hosts_out": list(entry.hosts_out or []),
        "hosts_in": list(entry.hosts_in or []),
    }


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
    return versioned.fields_clean(
        changes=changes,
        editable=ENTRY_EDITABLE_FIELDS,
        clean_one=lambda name, raw: _entry_value_clean(run=run, name=name, raw=raw),
    )


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
    if name == "occurred_until":
        if raw is not None and (not isinstance(raw, datetime) or timezone.is_naive(raw)):
            raise ValueError("The window's end needs its time zone.")
        return raw
    if name == "time_precision":
        if raw not in TimePrecision.values:
            raise ValueError(f"Unknown time precision {raw!r}: exact, day or window.")
        return raw
    if name in ("local_time", "count_unit"):
        text = " ".join(str(raw or "").split())
        limit = LogbookEntry._meta.get_field(name).max_length or 0
        if len(text) > limit:
            raise ValueError(f"At most {limit} characters.")
        return text
    if name == "count":
        if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 0):
            raise ValueError("A count is a whole number ≥ 0.")
        return raw
    if name == "count_approximate":
        return bool(raw)
    if name in ("hosts_out", "hosts_in"):
        names = [" ".join(str(host).split()) for host in (raw or [])]
        names = [host for host in names if host]
        if len(names) > HOSTS_PER_SWAP_MAX or any(len(host) > 255 for host in names):
            raise ValueError(f"At most {HOSTS_PER_SWAP_MAX} host names of 255 characters.")
        return names
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
    if entry.time_precision == TimePrecision.WINDOW:
        if entry.occurred_until is None:
            errors["occurred_until"] = "A time window needs its end."
        elif entry.occurred_until < entry.occurred_at:
            errors["occurred_until"] = "The time window ends before it starts."
    elif entry.occurred_until is not None:
        entry.occurred_until = None  # only a window has an end
    if entry.time_precision == TimePrecision.DAY:
        # A day is stored as its 00:00 UTC, so sorting and the export agree on it.
        day = entry.occurred_at.astimezone(UTC)
        entry.occurred_at = day.replace(hour=0, minute=0, second=0, microsecond=0)
    if entry.count is None:
        entry.count_approximate = False
    target = entry.corrected_by
    if target is not None:
        if entry.pk is not None and target.pk == entry.pk:
            errors["corrected_by"] = "An entry cannot correct itself."
        elif target.occurred_at < entry.occurred_at:
            errors["corrected_by"] = "The correcting entry must be a later one."
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def logbook_entry_create_correcting(
    *, run: Run, user: Any, corrects: LogbookEntry | None, **fields: Any
) -> LogbookEntry:
    """logbook_entry_create; and when the entry corrects an earlier one, the earlier entry
    points at it ("see the debrief of 12-02"), in the same transaction."""
    entry = logbook_entry_create(run=run, user=user, **fields)
    if corrects is not None:
        logbook_entry_update(
            entry=corrects, user=user, version=corrects.version, changes={"corrected_by": entry}
        )
    return entry


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
    **chronicle: Any,
) -> LogbookEntry:
    """Write one entry and its "create" audit event. `user` is the author (None: automation);
    `author_name` overrides the name shown (imports keep the file's author). `chronicle`
    takes the fields of ENTRY_DEFAULTS (time precision and window end, local time label,
    count, hosts of a swap). With a `source_key` already used in the run, returns that entry
    and writes nothing."""
    unknown = set(chronicle) - set(ENTRY_DEFAULTS)
    if unknown:
        raise TypeError(f"logbook_entry_create: unexpected {', '.join(sorted(unknown))}")
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
            **{**ENTRY_DEFAULTS, **chronicle},
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
    _config_evidence_arrived(entry)
    audit_record(
        project=run.project,
        entity=ENTRY_ENTITY,
        object_id=entry.pk,
        user=user,
        action="create",
        changes=diff_fields({}, logbook_entry_snapshot(entry), ENTRY_EDITABLE_FIELDS),
    )
    return entry


def _config_evidence_arrived(entry: LogbookEntry) -> None:
    """An entry that records a config change of an attempt is auto-triage evidence of the
    attempt's interruptions (logbook.selectors.triage): remake their pending suggestions."""
    records_change = entry.kind == LogbookEntry.Kind.CONFIG_CHANGE or bool(entry.config_changes)
    if entry.attempt is None or not records_change:
        return
    since = entry.attempt.started_at or entry.occurred_at
    autotriage_services.run_evidence_arrived(run_id=entry.run_id, since=since)


def _locked(entry: LogbookEntry, *, version: int | None, related: tuple[str, ...]) -> LogbookEntry:
    current = EDITS.locked(pk=entry.pk, version=version, related=related)
    assert isinstance(current, LogbookEntry)
    return current


@transaction.atomic
def logbook_entry_update(
    *, entry: LogbookEntry, user: Any, version: int, changes: Mapping[str, Any]
) -> LogbookEntry:
    """Apply `changes` (field -> value; links as model instances) to the entry if it is still
    at `version`, bump the version and record the before/after of each changed field.
    Raises LogbookStaleEdit (nothing written) or ValidationError (before any write)."""
    values = _entry_values_clean(run=entry.run, changes=changes)
    current = _locked(
        entry, version=version, related=("run__project", "attempt", "checkpoint", "corrected_by")
    )
    before = logbook_entry_snapshot(current)
    for name, value in values.items():
        setattr(current, name, value)
    _entry_invariants_check(current)
    diff = diff_fields(before, logbook_entry_snapshot(current), ENTRY_EDITABLE_FIELDS)
    if not diff:
        return current
    EDITS.bump(
        current=current,
        version=version,
        values={"updated_at": timezone.now(), **{name: getattr(current, name) for name in values}},
    )
    EDITS.audit(
        project=current.run.project, object_id=current.pk, user=user, version=version, diff=diff
    )
    telemetry_services.run_data_version_bump(run_id=current.run_id)
    _config_evidence_arrived(current)
    return current


@transaction.atomic
def logbook_entry_delete(*, entry: LogbookEntry, user: Any, version: int | None = None) -> None:
    """Delete the entry (entries it corrected lose the link), recording what it held. With
    `version`, refuses with LogbookStaleEdit if someone changed it since."""
    current = _locked(entry, version=version, related=("run__project", "attempt", "checkpoint"))
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
