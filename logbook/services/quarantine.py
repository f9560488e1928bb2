"""Taking hosts and devices out of service and returning them, with who did it and why."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from telemetry.models import Device, Host


def host_quarantine(*, host: Host, user: Any, reason: str) -> Host:
    """Take a host out of service, with who did it and why (the reason is required). A host
    already in quarantine keeps its original time; the reason and author are updated."""
    _quarantine(row=host, user=user, reason=reason)
    return host


def host_release(*, host: Host, user: Any) -> Host:
    """Return a host to service. `user` is who released it (the caller checked the right)."""
    _release(row=host)
    return host


def device_quarantine(*, device: Device, user: Any, reason: str) -> Device:
    _quarantine(row=device, user=user, reason=reason)
    return device


def device_release(*, device: Device, user: Any) -> Device:
    _release(row=device)
    return device


def _quarantine(*, row: Host | Device, user: Any, reason: str) -> None:
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "A reason is required to quarantine hardware."})
    row.quarantined_at = row.quarantined_at or timezone.now()
    row.quarantine_reason = reason
    row.quarantined_by = user if getattr(user, "is_authenticated", False) else None
    row.save(update_fields=["quarantined_at", "quarantine_reason", "quarantined_by"])


def _release(*, row: Host | Device) -> None:
    row.quarantined_at = None
    row.quarantine_reason = ""
    row.quarantined_by = None
    row.save(update_fields=["quarantined_at", "quarantine_reason", "quarantined_by"])
