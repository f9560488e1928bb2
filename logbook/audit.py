"""The audit trail: who changed which fields of an incident, a logbook entry, an annotation,
an SDC verdict or a host's or device's quarantine, from what to what. Services call
audit_record in the transaction that makes the change."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from logbook.models import AuditEvent
from telemetry.models import Project


def _plain(value: Any) -> Any:
    """A JSON-friendly, readable form of a field value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple | set):
        return (
            sorted(_plain(item) for item in value)
            if isinstance(value, set)
            else [_plain(item) for item in value]
        )
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value)


def diff_fields(
    before: Mapping[str, Any], after: Mapping[str, Any], fields: Iterable[str]
) -> dict[str, list[Any]]:
    """{"field": [before, after]} for each of `fields` whose value changed."""
    changes: dict[str, list[Any]] = {}
    for name in fields:
        old, new = _plain(before.get(name)), _plain(after.get(name))
        if old != new:
            changes[name] = [old, new]
    return changes


def audit_record(
    *,
    project: Project | None,
    entity: str,
    object_id: int,
    user: Any,
    action: str = "update",
    changes: Mapping[str, list[Any]] | None = None,
) -> AuditEvent | None:
    """Record one change; an update that changed nothing records nothing."""
    if action == "update" and not changes:
        return None
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    return AuditEvent.objects.create(
        project=project,
        entity=entity,
        object_id=object_id,
        action=action,
        user=user if authenticated else None,
        username=user.get_username() if authenticated else "automation",
        changes=dict(changes or {}),
    )
