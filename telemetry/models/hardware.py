"""The hardware topology: sites, clusters, hosts, devices and accelerator types."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from telemetry.models.projects import Project

# --- Topology ----------------------------------------------------------------------------------


class Site(models.Model):
    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Cluster(models.Model):
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="clusters")
    name = models.CharField(max_length=100)

    class Meta:
        ordering = ["site__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="cluster_unique_name_in_site"),
        ]

    def __str__(self) -> str:
        return f"{self.site}/{self.name}"


class Host(models.Model):
    """A machine, named as the job reports it, in one project. Jobs may name hosts before
    anyone places them in a cluster, so the cluster is optional. A host belongs to the
    project whose data named it: another project naming the same machine gets its own record,
    never a view into this one (its devices, readings, events and quarantine). Project is
    null only for rows no project's data named when hardware stopped being shared (migration
    telemetry 0007): nobody sees those but the Django admin."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, null=True, blank=True, related_name="hosts"
    )
    name = models.CharField(max_length=255)
    # Where the host sits, host -> rack -> pod -> cluster -> site, as jobs, exporters and
    # admins said (telemetry.services.topology); "" / null where nobody has: unknown stays
    # unknown. A cluster is named within its site, so `cluster`, when set, is in `site`.
    rack = models.CharField(max_length=100, blank=True)
    pod = models.CharField(max_length=100, blank=True)
    cluster = models.ForeignKey(
        Cluster, on_delete=models.SET_NULL, null=True, blank=True, related_name="hosts"
    )
    site = models.ForeignKey(
        Site, on_delete=models.SET_NULL, null=True, blank=True, related_name="hosts"
    )
    quarantined_at = models.DateTimeField(null=True, blank=True)
    quarantine_reason = models.TextField(blank=True)
    quarantined_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="host_unique_name_in_project"),
        ]
        indexes = [
            # Incident groups read a project's hosts of some racks (a rack's size).
            models.Index(fields=["project", "rack"], name="host_project_rack_idx"),
        ]

    def __str__(self) -> str:
        return self.name


class Device(models.Model):
    """One accelerator, identified by its UUID or serial (what dcgm-exporter calls UUID), in
    one project, like its host (see Host)."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, null=True, blank=True, related_name="devices"
    )
    uuid = models.CharField(max_length=128)
    serial = models.CharField(max_length=128, blank=True)
    host = models.ForeignKey(
        Host, on_delete=models.SET_NULL, null=True, blank=True, related_name="devices"
    )
    index_on_host = models.PositiveSmallIntegerField(null=True, blank=True)
    # The PCI bus id dcgm-exporter labels the GPU with ("00000000:3B:00.0"): what a kernel log
    # names ("NVRM: Xid (PCI:0000:3b:00)"), shown beside the index and UUID on the host page.
    pci_bus_id = models.CharField(max_length=32, blank=True, default="")
    accelerator_type = models.CharField(max_length=64, blank=True)
    quarantined_at = models.DateTimeField(null=True, blank=True)
    quarantine_reason = models.TextField(blank=True)
    quarantined_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["uuid"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "uuid"], name="device_unique_uuid_in_project"
            ),
        ]

    def __str__(self) -> str:
        return self.uuid


class AcceleratorType(models.Model):
    """The catalog of peak throughputs MFU is measured against (admin-editable)."""

    name = models.CharField(max_length=64, unique=True)
    # Other spellings jobs use for the same part ("H100", "H100 SXM5"), comma-separated.
    aliases = models.CharField(max_length=300, blank=True)
    peak_flops_bf16 = models.FloatField(help_text="Dense BF16 peak, FLOP/s per accelerator.")
    source = models.CharField(max_length=500, help_text="Where the peak figure comes from.")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(peak_flops_bf16__gt=0), name="accelerator_peak_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def matches(self, label: str) -> bool:
        wanted = label.strip().lower()
        names = [self.name, *self.aliases.split(",")]
        return any(wanted == name.strip().lower() for name in names if name.strip())
