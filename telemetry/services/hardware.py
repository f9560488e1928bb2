"""Writes for hardware: hosts and devices created on first sight, placed, quarantined and
released; and the shipped accelerator catalog."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from telemetry.models import Device, Host, Project
from telemetry.services.versions import fleet_version_bump


def hosts_ensure(*, project: Project | int, names: Iterable[str]) -> list[Host]:
    """The project's hosts of these names, created on first sight. Only the project's own:
    a name another project uses is a new record here (hardware is not shared)."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    project_id = project if isinstance(project, int) else project.pk
    return _named_ensure(Host, project_id, "name", wanted)


def devices_ensure(*, project: Project | int, uuids: Iterable[str]) -> list[Device]:
    """The project's devices of these UUIDs, created on first sight (see hosts_ensure)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return []
    project_id = project if isinstance(project, int) else project.pk
    return _named_ensure(Device, project_id, "uuid", wanted)


_Hardware = TypeVar("_Hardware", Host, Device)


def _named_ensure(
    model: type[_Hardware], project_id: int, key: str, wanted: list[str]
) -> list[_Hardware]:
    """Read first and insert only what is missing: a fleet's every push names hardware that
    exists already (a DCGM push names 8 GPUs 2,880 times a day)."""
    found = list(model.objects.filter(project_id=project_id, **{f"{key}__in": wanted}))
    if len(found) == len(wanted):
        return found
    have = {getattr(row, key) for row in found}
    model.objects.bulk_create(
        [model(project_id=project_id, **{key: name}) for name in wanted if name not in have],
        ignore_conflicts=True,  # another request may create the same ones meanwhile
    )
    return list(model.objects.filter(project_id=project_id, **{f"{key}__in": wanted}))


def devices_place_unplaced(*, devices: Sequence[Device], host: Host) -> None:
    """Devices not yet on a host go on `host` (a job that names one host and some GPUs says
    they are on it); a device already placed stays put (dcgm-exporter, which knows, placed
    it). The fleet page shows each device's host."""
    placed = Device.objects.filter(pk__in=[d.pk for d in devices], host=None).update(host=host)
    if placed:
        fleet_version_bump(project_id=host.project_id)


QUARANTINE_FIELDS = ("quarantined_at", "quarantine_reason", "quarantined_by")


@transaction.atomic
def hardware_quarantine(*, row: Host | Device, user: Any, reason: str) -> None:
    """Take a host or device out of service, with who did it and why (required). Already in
    quarantine, it keeps its original time; the reason and author are updated. The caller
    audits the change."""
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "A reason is required to quarantine hardware."})
    row.quarantined_at = row.quarantined_at or timezone.now()
    row.quarantine_reason = reason
    row.quarantined_by = user if getattr(user, "is_authenticated", False) else None
    row.save(update_fields=list(QUARANTINE_FIELDS))
    fleet_version_bump(project_id=row.project_id)


@transaction.atomic
def hardware_release(*, row: Host | Device) -> None:
    """Return a host or device to service. The caller audits the change."""
    row.quarantined_at = None
    row.quarantine_reason = ""
    row.quarantined_by = None
    row.save(update_fields=list(QUARANTINE_FIELDS))
    fleet_version_bump(project_id=row.project_id)


def accelerators_seed() -> int:
    """Create the shipped catalog rows that are missing (the data migration and tests use
    it); rows admins edited are left alone. Returns how many were created."""
    from telemetry.accelerators import ACCELERATOR_SEEDS
    from telemetry.models import AcceleratorType

    existing = set(AcceleratorType.objects.values_list("name", flat=True))
    missing = [
        AcceleratorType(
            name=seed.name,
            aliases=seed.aliases,
            peak_flops_bf16=seed.peak_flops_bf16,
            source=seed.source,
        )
        for seed in ACCELERATOR_SEEDS
        if seed.name not in existing
    ]
    AcceleratorType.objects.bulk_create(missing, ignore_conflicts=True)
    return len(missing)
