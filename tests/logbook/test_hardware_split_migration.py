"""logbook 0007 splits hardware two projects shared into one record per project, repointing
each project's rows at its own copy, and merges them back when reversed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

BEFORE = [
    ("logbook", "0006_audit_sdc_verdicts_and_quarantine"),
    ("telemetry", "0006_run_data_version_project_fleet_version"),
]
AFTER = [("logbook", "0007_split_shared_hardware")]
T = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_shared_hosts_and_devices_are_split_per_project_and_merged_back(migrate_to):
    apps = migrate_to(BEFORE)
    # given (before) one host and one GPU on it that two projects' data both name
    Project = apps.get_model("telemetry", "Project")
    Run = apps.get_model("telemetry", "Run")
    Attempt = apps.get_model("telemetry", "Attempt")
    Host = apps.get_model("telemetry", "Host")
    Device = apps.get_model("telemetry", "Device")
    DeviceEvent = apps.get_model("telemetry", "DeviceEvent")
    DeviceHealthState = apps.get_model("telemetry", "DeviceHealthState")
    Interruption = apps.get_model("logbook", "Interruption")
    RootCause = apps.get_model("logbook", "RootCause")
    AuditEvent = apps.get_model("logbook", "AuditEvent")
    a = Project.objects.create(slug="mig-a", name="A")
    b = Project.objects.create(slug="mig-b", name="B")
    host = Host.objects.create(name="shared-h1", quarantine_reason="x", quarantined_at=T)
    lonely = Host.objects.create(name="nobody-names-me")
    gpu = Device.objects.create(uuid="GPU-shared", host=host)
    DeviceHealthState.objects.create(device=gpu, last_xid=79, last_push_at=T)
    for project in (a, b):
        run = Run.objects.create(project=project, name="r")
        Attempt.objects.create(run=run, number=1).hosts.add(host)
    cause = RootCause.objects.first()
    b_run = Run.objects.get(project=b)
    incident = Interruption.objects.create(
        run=b_run, occurred_at=T, root_cause=cause, source_key="i"
    )
    incident.devices.add(gpu)
    DeviceEvent.objects.create(
        project=b, device=gpu, host=host, kind="xid", occurred_at=T, field="f", value=79
    )
    AuditEvent.objects.create(entity="host", object_id=host.pk, changes={})

    # when
    apps = migrate_to(AFTER)
    Host = apps.get_model("telemetry", "Host")
    Device = apps.get_model("telemetry", "Device")
    Attempt = apps.get_model("telemetry", "Attempt")
    DeviceEvent = apps.get_model("telemetry", "DeviceEvent")
    DeviceHealthState = apps.get_model("telemetry", "DeviceHealthState")
    Interruption = apps.get_model("logbook", "Interruption")
    AuditEvent = apps.get_model("logbook", "AuditEvent")

    # then each project has its own host and GPU, and its rows point at them
    a_host = Host.objects.get(name="shared-h1", project_id=a.pk)
    b_host = Host.objects.get(name="shared-h1", project_id=b.pk)
    assert a_host.pk == host.pk and b_host.pk != host.pk
    assert b_host.quarantine_reason == "x"  # what B saw, B keeps
    assert Host.objects.get(name="nobody-names-me").project_id is None
    for project, own in ((a, a_host), (b, b_host)):
        attempt = Attempt.objects.get(run__project_id=project.pk)
        assert list(attempt.hosts.values_list("pk", flat=True)) == [own.pk]
        device = Device.objects.get(uuid="GPU-shared", project_id=project.pk)
        assert device.host_id == own.pk
        assert DeviceHealthState.objects.get(device=device).last_xid == 79
    b_gpu = Device.objects.get(uuid="GPU-shared", project_id=b.pk)
    assert list(Interruption.objects.get(pk=incident.pk).devices.all()) == [b_gpu]
    event = DeviceEvent.objects.get()
    assert (event.device_id, event.host_id) == (b_gpu.pk, b_host.pk)
    assert AuditEvent.objects.get(entity="host").project_id == a.pk

    # and reversed, one record per name again
    apps = migrate_to(BEFORE)
    Host = apps.get_model("telemetry", "Host")
    Device = apps.get_model("telemetry", "Device")
    assert Host.objects.filter(name="shared-h1").count() == 1
    assert Device.objects.filter(uuid="GPU-shared").count() == 1
    assert Host.objects.filter(pk=lonely.pk).exists()
