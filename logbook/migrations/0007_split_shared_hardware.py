"""Hardware stops being shared between projects (issue 14, §1): each host and device that
several projects' data named is split into one record per project, and every row that
pointed at the shared record (attempts' and incidents' hosts, SDC records, GPU health events,
a device's host) points at its own project's copy. The first project (lowest id) keeps the
original row; the others get copies with the same placement and quarantine state, so no
project loses what it saw. A device's readings are copied to every copy: the push that
stored them named no project. Quarantine audit events get the project of the row they are
about. Hardware no project's data names keeps a null project (admin only).

Reversed, the copies are merged back into the oldest record of each name."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import migrations


def _split(apps: Any, schema_editor: Any) -> None:
    Host = apps.get_model("telemetry", "Host")
    Device = apps.get_model("telemetry", "Device")
    Attempt = apps.get_model("telemetry", "Attempt")
    DeviceEvent = apps.get_model("telemetry", "DeviceEvent")
    DeviceSample = apps.get_model("telemetry", "DeviceSample")
    DeviceHealthState = apps.get_model("telemetry", "DeviceHealthState")
    Interruption = apps.get_model("logbook", "Interruption")
    SdcReplay = apps.get_model("logbook", "SdcReplay")
    AuditEvent = apps.get_model("logbook", "AuditEvent")

    attempt_hosts = Attempt.hosts.through.objects
    incident_hosts = Interruption.hosts.through.objects
    incident_devices = Interruption.devices.through.objects
    pair_hosts = SdcReplay.hosts.through.objects
    host_refs = [  # (queryset, host column, project path)
        (attempt_hosts, "host_id", "attempt__run__project_id"),
        (incident_hosts, "host_id", "interruption__run__project_id"),
        (pair_hosts, "host_id", "sdcreplay__run__project_id"),
        (SdcReplay.objects.exclude(host=None), "host_id", "run__project_id"),
        (DeviceEvent.objects.exclude(host=None), "host_id", "project_id"),
    ]
    device_refs = [
        (incident_devices, "device_id", "interruption__run__project_id"),
        (SdcReplay.objects.exclude(device=None), "device_id", "run__project_id"),
        (DeviceEvent.objects.all(), "device_id", "project_id"),
    ]

    device_projects: dict[int, set[int]] = defaultdict(set)
    for rows, column, path in device_refs:
        for device_id, project_id in rows.values_list(column, path).distinct():
            device_projects[device_id].add(project_id)
    host_projects: dict[int, set[int]] = defaultdict(set)
    for rows, column, path in host_refs:
        for host_id, project_id in rows.values_list(column, path).distinct():
            host_projects[host_id].add(project_id)
    # A project that saw a device saw its host too (fleet health listed it through it).
    for device_id, host_id in Device.objects.exclude(host=None).values_list("pk", "host_id"):
        host_projects[host_id] |= device_projects.get(device_id, set())

    device_host = dict(Device.objects.values_list("pk", "host_id"))
    # (original host id, project id) -> that project's host id.
    host_of: dict[tuple[int, int], int] = {}
    for host in Host.objects.filter(project=None, pk__in=list(host_projects)):
        owner, *others = sorted(host_projects[host.pk])
        host.project_id = owner
        host.save(update_fields=["project"])
        host_of[(host.pk, owner)] = host.pk
        for project_id in others:
            copy = Host.objects.create(
                project_id=project_id,
                name=host.name,
                cluster_id=host.cluster_id,
                quarantined_at=host.quarantined_at,
                quarantine_reason=host.quarantine_reason,
                quarantined_by_id=host.quarantined_by_id,
            )
            host_of[(host.pk, project_id)] = copy.pk
            for rows, column, path in host_refs:
                rows.filter(**{column: host.pk, path: project_id}).update(**{column: copy.pk})

    samples = DeviceSample._meta.db_table
    for device in Device.objects.filter(project=None):
        projects = set(device_projects.get(device.pk, set()))
        if device.host_id is not None:
            projects |= host_projects.get(device.host_id, set())
        if not projects:
            continue
        owner, *others = sorted(projects)
        original_host = device_host[device.pk]
        device.project_id = owner
        device.host_id = host_of.get((original_host, owner), original_host)
        device.save(update_fields=["project", "host"])
        state = DeviceHealthState.objects.filter(device_id=device.pk).first()
        for project_id in others:
            copy = Device.objects.create(
                project_id=project_id,
                uuid=device.uuid,
                serial=device.serial,
                host_id=host_of.get((original_host, project_id)),
                index_on_host=device.index_on_host,
                accelerator_type=device.accelerator_type,
                quarantined_at=device.quarantined_at,
                quarantine_reason=device.quarantine_reason,
                quarantined_by_id=device.quarantined_by_id,
            )
            if state is not None:
                DeviceHealthState.objects.create(
                    device_id=copy.pk,
                    last_values=state.last_values,
                    fields_sent=state.fields_sent,
                    last_xid=state.last_xid,
                    last_xid_message=state.last_xid_message,
                    last_xid_at=state.last_xid_at,
                    model_name=state.model_name,
                    last_push_at=state.last_push_at,
                )
            with schema_editor.connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {samples} (device_id, field, sampled_at, value) "  # noqa: S608
                    f"SELECT %s, field, sampled_at, value FROM {samples} WHERE device_id = %s",
                    [copy.pk, device.pk],
                )
            for rows, column, path in device_refs:
                rows.filter(**{column: device.pk, path: project_id}).update(**{column: copy.pk})

    # Events name the host their device was on: their project's copy of it.
    for (original, project_id), host_id in host_of.items():
        if host_id != original:
            DeviceEvent.objects.filter(host_id=original, project_id=project_id).update(
                host_id=host_id
            )

    for entity, model in (("host", Host), ("device", Device)):
        owners = dict(model.objects.exclude(project=None).values_list("pk", "project_id"))
        for event in AuditEvent.objects.filter(entity=entity, project=None):
            if event.object_id in owners:
                event.project_id = owners[event.object_id]
                event.save(update_fields=["project"])


def _merge(apps: Any, schema_editor: Any) -> None:
    """Each name's copies back into its oldest record, so names are unique again. Links and
    events the kept record already has are dropped with the copy."""
    Host = apps.get_model("telemetry", "Host")
    Device = apps.get_model("telemetry", "Device")
    Attempt = apps.get_model("telemetry", "Attempt")
    DeviceEvent = apps.get_model("telemetry", "DeviceEvent")
    DeviceSample = apps.get_model("telemetry", "DeviceSample")
    Interruption = apps.get_model("logbook", "Interruption")
    SdcReplay = apps.get_model("logbook", "SdcReplay")
    samples = DeviceSample._meta.db_table

    def moves(model: Any, key: str) -> dict[int, int]:
        keep: dict[str, int] = {}
        found: dict[int, int] = {}
        for pk, value in model.objects.order_by("pk").values_list("pk", key):
            found[pk] = keep.setdefault(value, pk)
        return {old: new for old, new in found.items() if old != new}

    def relink(rows: Any, column: str, other: str, old: int, new: int) -> None:
        taken = rows.filter(**{column: new}).values(other)
        rows.filter(**{column: old, f"{other}__in": taken}).delete()
        rows.filter(**{column: old}).update(**{column: new})

    for old, new in moves(Device, "uuid").items():
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {samples} (device_id, field, sampled_at, value) "  # noqa: S608
                f"SELECT %s, field, sampled_at, value FROM {samples} WHERE device_id = %s "
                "ON CONFLICT DO NOTHING",
                [new, old],
            )
        relink(Interruption.devices.through.objects, "device_id", "interruption_id", old, new)
        taken = DeviceEvent.objects.filter(device_id=new).values_list("kind", "occurred_at")
        for kind, at in taken:
            DeviceEvent.objects.filter(device_id=old, kind=kind, occurred_at=at).delete()
        DeviceEvent.objects.filter(device_id=old).update(device_id=new)
        SdcReplay.objects.filter(device_id=old).update(device_id=new)
        Device.objects.filter(pk=old).delete()
    for old, new in moves(Host, "name").items():
        relink(Attempt.hosts.through.objects, "host_id", "attempt_id", old, new)
        relink(Interruption.hosts.through.objects, "host_id", "interruption_id", old, new)
        relink(SdcReplay.hosts.through.objects, "host_id", "sdcreplay_id", old, new)
        for model in (SdcReplay, DeviceEvent, Device):
            model.objects.filter(host_id=old).update(host_id=new)
        Host.objects.filter(pk=old).delete()
    Host.objects.update(project=None)
    Device.objects.update(project=None)


class Migration(migrations.Migration):
    dependencies = [
        ("logbook", "0006_audit_sdc_verdicts_and_quarantine"),
        ("telemetry", "0007_per_project_hardware"),
    ]
    # Its SQL copies DCGM samples in the row-per-field shape of that time: it must run before
    # telemetry reshapes that table, whatever order the rest of the plan would pick (a
    # database upgraded from before this migration failed once later migrations were added).
    run_before = [("telemetry", "0015_device_sample_partitions")]

    operations = [migrations.RunPython(_split, _merge)]
