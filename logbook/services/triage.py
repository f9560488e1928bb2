"""Triage writes: on-call edits an incident (an unexpected interruption) and moves it through
open → triaged → resolved. Every write is optimistic-locked on Interruption.version and
records one AuditEvent in the same transaction, so nothing is silently overwritten and the
incident page can show who changed what."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, Q, Value, When
from django.utils import timezone

from logbook.audit import diff_fields
from logbook.models import AuditEvent, Interruption, RootCause, TriageSuggestion
from logbook.services import triage_learning, versioned
from telemetry import services as telemetry_services
from telemetry.hardware_names import hardware_name_problem

ENTITY = AuditEvent.Entity.INTERRUPTION
EDITABLE_FIELDS: tuple[str, ...] = (
    "root_cause",
    "component",
    "hosts",
    "devices",
    "severity",
    "manual_intervention",
    "lost_steps",
    "notes",
)
STATUS_FIELDS: tuple[str, ...] = (
    "status",
    "triaged_by",
    "triaged_at",
    "resolved_by",
    "resolved_at",
)
# Which status may follow which: forward one step at a time, and reopen from either.
TRANSITIONS: dict[str, frozenset[str]] = {
    Interruption.Status.OPEN: frozenset({Interruption.Status.TRIAGED}),
    Interruption.Status.TRIAGED: frozenset(
        {Interruption.Status.RESOLVED, Interruption.Status.OPEN}
    ),
    Interruption.Status.RESOLVED: frozenset({Interruption.Status.OPEN}),
}
COMPONENT_MAX_LENGTH = 200
NOTES_MAX_LENGTH = 50_000
LOST_STEPS_MAX = 2**63 - 1  # the column is a bigint


class StaleEdit(versioned.StaleEdit):
    """The incident edit started from an older version than the stored one (see
    versioned.StaleEdit for `current` and `their_changes`)."""

    MESSAGE = "Incident {pk} was changed by {who} (now version {version}) while you were editing."


EDITS = versioned.VersionedEdits(model=Interruption, entity=ENTITY, stale=StaleEdit)


def incident_snapshot(interruption: Interruption) -> dict[str, Any]:
    """The incident's editable and status fields in the JSON-friendly form the audit trail
    stores (root cause as slug, hosts and devices as sorted names, users as usernames)."""
    return {
        "root_cause": interruption.root_cause.slug,
        "component": interruption.component,
        "hosts": sorted(host.name for host in interruption.hosts.all()),
        "devices": sorted(device.uuid for device in interruption.devices.all()),
        "severity": interruption.severity,
        "manual_intervention": interruption.manual_intervention,
        "lost_steps": interruption.lost_steps,
        "notes": interruption.notes,
        "status": interruption.status,
        "triaged_by": interruption.triaged_by.get_username() if interruption.triaged_by else None,
        "triaged_at": interruption.triaged_at,
        "resolved_by": interruption.resolved_by.get_username()
        if interruption.resolved_by
        else None,
        "resolved_at": interruption.resolved_at,
    }


def changes_since(*, interruption: Interruption, version: int) -> list[AuditEvent]:
    """Audit events that moved the incident past `version`, oldest first."""
    return EDITS.changes_since(object_id=interruption.pk, version=version)


def _locked(interruption: Interruption, version: int) -> Interruption:
    current = EDITS.locked(
        pk=interruption.pk,
        version=version,
        related=("root_cause", "triaged_by", "resolved_by", "run__project"),
    )
    assert isinstance(current, Interruption)
    return current


def _clean_one(name: str, raw: Any, *, project_id: int | None = None) -> Any:
    if name == "root_cause":
        # The site-wide taxonomy and the incident's project's own categories, no other's.
        visible = RootCause.objects.filter(Q(project__isnull=True) | Q(project_id=project_id))
        if isinstance(raw, RootCause):
            if raw.project_id not in (None, project_id):
                raise ValueError(f"No root cause {raw.slug!r} in this project's taxonomy.")
            return raw
        root_cause = visible.filter(slug=str(raw or "")).order_by("project_id").first()
        if root_cause is None:
            raise ValueError(f"No root cause {str(raw)[:64]!r} in the taxonomy.")
        return root_cause
    if name in ("component", "notes"):
        text = "" if raw is None else str(raw)
        limit = COMPONENT_MAX_LENGTH if name == "component" else NOTES_MAX_LENGTH
        if len(text) > limit:
            raise ValueError(f"At most {limit} characters.")
        return text.strip() if name == "component" else text
    if name in ("hosts", "devices"):
        if isinstance(raw, str) or not isinstance(raw, Sequence | set):
            raise ValueError("A list of names.")
        names = sorted({str(item).strip() for item in raw if str(item).strip()})
        if any(len(item) > (255 if name == "hosts" else 128) for item in names):
            raise ValueError("A name is too long.")
        for item in names:
            if problem := hardware_name_problem(item):
                raise ValueError(problem[0].upper() + problem[1:] + ".")
        return names
    if name == "severity":
        if raw not in Interruption.Severity.values:
            raise ValueError(f"One of {', '.join(Interruption.Severity.values)}.")
        return raw
    if name == "manual_intervention":
        if not isinstance(raw, bool):
            raise ValueError("true or false.")
        return raw
    if name == "lost_steps":
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= LOST_STEPS_MAX:
            raise ValueError("A whole number of steps, 0 or more, or empty.")
        return raw
    raise ValueError("This field cannot be edited.")  # pragma: no cover - guarded above


@transaction.atomic
def incident_update(
    *, interruption: Interruption, user: Any, version: int, changes: Mapping[str, Any]
) -> Interruption:
    """Apply `changes` (a subset of EDITABLE_FIELDS: root_cause as slug or RootCause, hosts as
    names, devices as UUIDs) to the incident if it is still at `version`; bump the version and
    audit the fields that changed. Unknown hosts and devices are created. An edit that changes
    nothing writes nothing. Raises StaleEdit or ValidationError (before any write)."""
    clean_one = partial(_clean_one, project_id=interruption.run.project_id)
    values = versioned.fields_clean(changes=changes, editable=EDITABLE_FIELDS, clean_one=clean_one)
    current = _locked(interruption, version)
    before = incident_snapshot(current)
    after = dict(before)
    for name, value in values.items():
        after[name] = value.slug if isinstance(value, RootCause) else value
    diff = diff_fields(before, after, EDITABLE_FIELDS)
    if not diff:
        return current
    scalars = {
        name: values[name]
        for name in diff
        if name not in ("hosts", "devices")  # many-to-many: set below
    }
    EDITS.bump(current=current, version=version, values=scalars)
    if "hosts" in diff:
        current.hosts.set(
            telemetry_services.hosts_ensure(project=current.run.project_id, names=values["hosts"])
        )
    if "devices" in diff:
        current.devices.set(
            telemetry_services.devices_ensure(
                project=current.run.project_id, uuids=values["devices"]
            )
        )
    EDITS.audit(
        project=current.run.project, object_id=current.pk, user=user, version=version, diff=diff
    )
    telemetry_services.run_data_version_bump(run_id=current.run_id)
    telemetry_services.fleet_version_bump(project_id=current.run.project_id)
    return _reloaded(current)


@transaction.atomic
def incident_transition(
    *, interruption: Interruption, user: Any, version: int, status: str
) -> Interruption:
    """Move the incident to `status` (open → triaged → resolved, or back to open), recording
    who and when: triaging sets triaged_by/at, resolving resolved_by/at, reopening clears the
    stamps of the steps it undoes (the audit keeps them). Raises StaleEdit, or
    ValidationError for a move TRANSITIONS does not allow."""
    current = _locked(interruption, version)
    allowed = TRANSITIONS.get(current.status, frozenset())
    if status not in allowed:
        raise ValidationError(
            {"status": f"An incident that is {current.status} cannot become {status or '?'}."}
        )
    now = timezone.now()
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    actor = user if authenticated else None
    values: dict[str, Any] = {"status": status}
    if status == Interruption.Status.TRIAGED:
        values.update(triaged_by=actor, triaged_at=now)
    elif status == Interruption.Status.RESOLVED:
        values.update(resolved_by=actor, resolved_at=now)
    else:  # reopened: it is neither resolved nor, from triaged, triaged any more
        values.update(resolved_by=None, resolved_at=None)
        if current.status == Interruption.Status.TRIAGED:
            values.update(triaged_by=None, triaged_at=None)
    before = incident_snapshot(current)
    after = {
        **before,
        **{
            name: (value.get_username() if hasattr(value, "get_username") else value)
            for name, value in values.items()
        },
    }
    EDITS.bump(current=current, version=version, values=values)
    EDITS.audit(
        project=current.run.project,
        object_id=current.pk,
        user=user,
        version=version,
        diff=diff_fields(before, after, STATUS_FIELDS),
    )
    if status == Interruption.Status.TRIAGED:
        _suggestion_decide(current=current, actor=actor, now=now)
        # A triaged incident is a labelled example: the project's classifier learns it.
        triage_learning.classifier_enqueue(project_id=current.run.project_id)
    telemetry_services.run_data_version_bump(run_id=current.run_id)
    telemetry_services.fleet_version_bump(project_id=current.run.project_id)
    return _reloaded(current)


def _suggestion_decide(*, current: Interruption, actor: Any, now: Any) -> None:
    """The first triage decides the auto-triage suggestion: confirmed when the incident is
    filed under the suggested category, overridden otherwise (the accuracy page counts
    both). A reopened and re-triaged incident keeps its first decision."""
    TriageSuggestion.objects.filter(
        interruption_id=current.pk, outcome=TriageSuggestion.Outcome.PENDING
    ).update(
        outcome=Case(
            When(root_cause_id=current.root_cause_id, then=Value("confirmed")),
            default=Value("overridden"),
        ),
        decided_root_cause_id=current.root_cause_id,
        decided_by=actor,
        decided_at=now,
    )


def _reloaded(current: Interruption) -> Interruption:
    return (
        Interruption.objects.select_related(
            "run__project", "root_cause", "attempt", "triaged_by", "resolved_by"
        )
        .prefetch_related("hosts", "devices")
        .get(pk=current.pk)
    )


def merge_proposal(
    *, stale: StaleEdit, mine: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """After a StaleEdit: the values to put back in the form so a second save loses nobody's
    work, and the fields both people changed. `mine` holds the submitted values in snapshot
    form (root cause slug, sorted host/device names). A field I left as I found it takes
    their value; a field I changed keeps mine; one we both changed to different values is a
    conflict, shown with my value kept for me to decide."""
    current = incident_snapshot(stale.current)
    # What I started from: the stored value with their changes undone, oldest first wins.
    base = dict(current)
    for event in reversed(stale.their_changes):
        for name, (old, _new) in event.changes.items():
            base[name] = old
    proposal: dict[str, Any] = {}
    conflicts: list[str] = []
    for name, value in mine.items():
        if value == base.get(name):
            proposal[name] = current.get(name)
        else:
            proposal[name] = value
            if current.get(name) != base.get(name) and current.get(name) != value:
                conflicts.append(name)
    return proposal, conflicts
