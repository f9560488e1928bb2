"""The versioned, audited edit that incidents and logbook entries share: lock the row, refuse
an edit that started from an older version (StaleEdit, with the audit events written since),
write with UPDATE ... WHERE version, and audit the change with the version step it made.
Callers run these inside their own transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import F

from logbook.models import AuditEvent, Interruption, LogbookEntry
from logbook.services.audit import audit_record
from telemetry.models import Project

# The versioned models: each has a `version` column its edits step.
Row = Interruption | LogbookEntry


class StaleEdit(Exception):
    """The edit started from an older version than the stored one. `current` is the row as
    stored now; `their_changes` the audit events written since that version, oldest first,
    so the caller can show what the other person changed. Subclasses word the message
    (fields: pk, who, version)."""

    MESSAGE = "Changed by {who} (now version {version}) while you were editing."

    def __init__(self, current: Row, their_changes: list[AuditEvent]) -> None:
        names = sorted({event.username for event in their_changes})
        who = ", ".join(names) or "someone else"
        super().__init__(self.MESSAGE.format(pk=current.pk, who=who, version=current.version))
        self.current = current
        self.their_changes = their_changes


def fields_clean(
    *,
    changes: Mapping[str, Any],
    editable: Sequence[str],
    clean_one: Callable[[str, Any], Any],
) -> dict[str, Any]:
    """Validated model values for the given fields (`clean_one` raises ValueError with the
    message for a bad value); one ValidationError naming each bad or uneditable field."""
    unknown = sorted(set(changes) - set(editable))
    if unknown:
        raise ValidationError({name: "This field cannot be edited." for name in unknown})
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name, raw in changes.items():
        try:
            values[name] = clean_one(name, raw)
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        raise ValidationError(errors)
    return values


class VersionedEdits:
    """The edits of one model with a `version` column, audited as `entity`."""

    def __init__(
        self, *, model: type[Interruption] | type[LogbookEntry], entity: str, stale: type[StaleEdit]
    ) -> None:
        self.model = model
        self.entity = entity
        self.stale = stale

    def changes_since(self, *, object_id: int, version: int) -> list[AuditEvent]:
        """Audit events that moved the row past `version`, oldest first. Each write records
        the version step it made ({"version": [before, after]}), which is what is matched."""
        return list(
            AuditEvent.objects.filter(
                entity=self.entity, object_id=object_id, changes__version__0__gte=version
            ).order_by("at", "pk")
        )

    def stale_edit(self, *, current: Row, version: int) -> StaleEdit:
        return self.stale(current, self.changes_since(object_id=current.pk, version=version))

    def locked(self, *, pk: int, version: int | None, related: Sequence[str]) -> Row:
        """The stored row, locked until the transaction ends, with `related` joined;
        StaleEdit if `version` is given and the row moved past it. The lock keeps the
        snapshot the caller takes next consistent with the UPDATE after it."""
        current = (
            self.model.objects.select_for_update(of=("self",)).select_related(*related).get(pk=pk)
        )
        if version is not None and current.version != version:
            raise self.stale_edit(current=current, version=version)
        return current

    def bump(self, *, current: Row, version: int, values: Mapping[str, Any]) -> None:
        """UPDATE ... WHERE pk AND version: the optimistic lock itself (the row lock makes a
        miss here impossible, but the condition states the rule in the statement that
        writes). Sets `current.version` to the new version."""
        updated = self.model.objects.filter(pk=current.pk, version=version).update(
            version=F("version") + 1, **values
        )
        if updated != 1:
            current.refresh_from_db()
            raise self.stale_edit(current=current, version=version)
        current.version = version + 1

    def audit(
        self,
        *,
        project: Project,
        object_id: int,
        user: Any,
        version: int,
        diff: Mapping[str, list[Any]],
    ) -> None:
        """The audit event of one version step (what the stale check above matches)."""
        audit_record(
            project=project,
            entity=self.entity,
            object_id=object_id,
            user=user,
            action="update",
            changes={**diff, "version": [version, version + 1]},
        )
