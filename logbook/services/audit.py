"""The audit trail: who changed which fields of an incident, a logbook entry, an annotation,
an SDC verdict or a host's or device's quarantine, from what to what. Services call
audit_record in the transaction that makes the change (logbook.audit.diff_fields says what
changed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbook.models import AuditEvent
from telemetry.models import Project


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
