"""Taking hosts and devices out of service and returning them, with who did it and why.
Each change is audited under the project the hardware belongs to."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from logbook.audit import diff_fields
from logbook.models import AuditEvent
from logbook.services.audit import audit_record
from telemetry import services as telemetry_services
from telemetry.models import Device, Host

FIELDS = ("quarantined_at", "quarantine_reason", "quarantined_by")


def host_quarantine(*, host: Host, user: Any, reason: str) -> Host:
    """Take a host out of service, with who did it and why (the reason is required). A host
    already in quarantine keeps its original time; the reason and author are updated."""
    _quarantine(row=host, user=user, reason=reason)
    return host


def host_release(*, host: Host, user: Any) -> Host:
    """Return a host to service. `user` is who released it (the caller checked the right)."""
    _release(row=host, user=user)
    return host


def device_quarantine(*, device: Device, user: Any, reason: str) -> Device:
    _quarantine(row=device, user=user, reason=reason)
    return device


def device_release(*, device: Device, user: Any) -> Device:
    _release(row=device, user=user)
    return device


@transaction.atomic
def _quarantine(*, row: Host | Device, user: Any, reason: str) -> None:
    before = _snapshot(row)
    telemetry_services.hardware_quarantine(row=row, user=user, reason=reason)
    _audit(row=row, user=user, before=before)


@transaction.atomic
def _release(*, row: Host | Device, user: Any) -> None:
    before = _snapshot(row)
    telemetry_services.hardware_release(row=row)
    _audit(row=row, user=user, before=before)


def _snapshot(row: Host | Device) -> dict[str, Any]:
    by = row.quarantined_by
    return {
        "quarantined_at": row.quarantined_at,
        "quarantine_reason": row.quarantine_reason,
        "quarantined_by": by.get_username() if by is not None else None,
    }


def _audit(*, row: Host | Device, user: Any, before: dict[str, Any]) -> None:
    """One audit event per change (none when nothing changed, e.g. releasing twice)."""
    audit_record(
        project=row.project,
        entity=AuditEvent.Entity.HOST if isinstance(row, Host) else AuditEvent.Entity.DEVICE,
        object_id=row.pk,
        user=user,
        action="update",
        changes=diff_fields(before, _snapshot(row), FIELDS),
    )
