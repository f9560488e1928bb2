"""GPU health from dcgm-exporter: samples, their summaries, health states and events."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from telemetry.dcgm import FIELDS as DCGM_FIELDS
from telemetry.models.hardware import Device, Host
from telemetry.models.projects import Project

# --- GPU health from dcgm-exporter -----------------------------------------------------------


class DeviceSample(models.Model):
    """One device's DCGM readings at one moment, as one push carried them: the value of each
    field at the field's position in telemetry.dcgm.FIELDS (append-only, as in the summaries;
    an older row's shorter array still lines up), NULL for a field the push lacked or left
    blank. A fleet pushes every 30 s, so a push is a row per GPU, not a row per field: the
    16 fields dcgm-exporter sends by default take one row header and one key entry instead of
    16 (a tenth of the bytes and of the insert's work:
    bench/results/history/2026-11-25-gpu-health-at-fleet-scale.md).

    The composite primary key (device, sampled_at) is the only index: a device's history (a
    range scan) reads it, and a re-sent timestamped push inserts nothing. The table is
    range-partitioned by day of `sampled_at` (migration 0015) and kept for
    DEVICE_SAMPLE_RETENTION_DAYS: whole partitions are dropped (telemetry.device_samples).
    What outlives them is DeviceSampleSummary."""

    pk = models.CompositePrimaryKey("device", "sampled_at")
    device = models.ForeignKey(
        Device, on_delete=models.CASCADE, related_name="samples", db_index=False
    )
    sampled_at = models.DateTimeField()
    readings = ArrayField(models.FloatField(null=True))

    class Meta:
        ordering = ["device", "sampled_at"]

    def __str__(self) -> str:
        return f"{self.device_id} readings @{self.sampled_at:%H:%M:%S}"

    def readings_by_field(self) -> dict[str, float]:
        """{field: value} of the readings this row holds."""
        return {
            name: value
            for name, value in zip(DCGM_FIELDS, self.readings, strict=False)
            if value is not None
        }


class DeviceSampleSummary(models.Model):
    """A device's readings over one DEVICE_SUMMARY_BUCKET_S bucket: per DCGM field, how many
    samples, their sum (the mean is sum / count) and their maximum. Kept after the raw
    samples' partitions are dropped, for as long as the device is, and updated by every push
    (telemetry.device_samples), from the raw rows that push actually inserted, so a re-sent
    push adds nothing.

    One row per device and bucket, with a value per field at the field's position in
    telemetry.dcgm.FIELDS (append-only; a field a bucket never saw is NULL, which costs a bit
    in the array's null bitmap): a fifth of the bytes of a row per field."""

    pk = models.CompositePrimaryKey("device", "bucket_start")
    device = models.ForeignKey(
        Device, on_delete=models.CASCADE, related_name="sample_summaries", db_index=False
    )
    bucket_start = models.DateTimeField()
    sample_counts = ArrayField(models.IntegerField(null=True))
    value_sums = ArrayField(models.FloatField(null=True))
    value_maxes = ArrayField(models.FloatField(null=True))

    class Meta:
        ordering = ["device", "bucket_start"]

    def __str__(self) -> str:
        return f"{self.device_id} summary @{self.bucket_start:%Y-%m-%d %H:%M}"


class DeviceHealthState(models.Model):
    """A device's newest DCGM readings: what the next push is compared with to find health
    events, and which fields its exporter sends (to warn about disabled health counters)."""

    device = models.OneToOneField(
        Device, on_delete=models.CASCADE, primary_key=True, related_name="health_state"
    )
    # The newest reading of each field at its position in telemetry.dcgm.FIELDS (NULL: never
    # read; empty: a state just made, the device never seen). Arrays, not a JSON object of
    # names: every push rewrites the row, and as JSON it was 1.3 KB a row (issue 38).
    last_readings = ArrayField(models.FloatField(null=True), default=list, blank=True)
    # The positions in telemetry.dcgm.FIELDS of the fields the newest push carried, blank
    # ones included: the exporter's configuration.
    sent_positions = ArrayField(models.SmallIntegerField(), default=list, blank=True)
    last_xid = models.IntegerField(default=0)
    last_xid_message = models.CharField(max_length=200, blank=True)
    last_xid_at = models.DateTimeField(null=True, blank=True)
    model_name = models.CharField(max_length=64, blank=True)
    last_push_at = models.DateTimeField()

    class Meta:
        ordering = ["device"]

    def __str__(self) -> str:
        return f"{self.device_id} health at {self.last_push_at:%Y-%m-%d %H:%M}"

    def last_values(self) -> dict[str, float]:
        """{field: value} of the newest reading of each field read."""
        return {
            name: value
            for name, value in zip(DCGM_FIELDS, self.last_readings, strict=False)
            if value is not None
        }

    def fields_sent(self) -> list[str]:
        """The fields the newest push carried, in telemetry.dcgm.FIELDS order."""
        names = list(DCGM_FIELDS)
        return [names[position] for position in sorted(self.sent_positions)]


class DeviceEvent(models.Model):
    """A GPU health signal from dcgm-exporter (a new XID, an uncorrectable memory error, a
    thermal limit). Shown in fleet health whether or not a run was using the device; the
    project is the one whose ingest token pushed it, which decides who may see it."""

    class Kind(models.TextChoices):
        XID = "xid", "XID error"
        ECC_UNCORRECTABLE = "ecc_uncorrectable", "Uncorrectable ECC error"
        ROW_REMAP = "row_remap", "Row remapped (uncorrectable)"
        ROW_REMAP_FAILURE = "row_remap_failure", "Row remapping failure"
        THERMAL = "thermal", "Thermal limit"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="device_events")
    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="events")
    host = models.ForeignKey(
        Host, on_delete=models.SET_NULL, null=True, blank=True, related_name="device_events"
    )
    kind = models.CharField(max_length=24, choices=Kind.choices)
    occurred_at = models.DateTimeField()
    field = models.CharField(max_length=64)
    previous_value = models.FloatField(null=True, blank=True)
    value = models.FloatField()
    xid = models.IntegerField(null=True, blank=True)
    # The reading may predate Chronicle's knowledge of the device (first push): no run is
    # blamed for it.
    first_sight = models.BooleanField(default=False)
    message = models.TextField(blank=True)
    # Runs an interruption was opened on for this event (logbook.services.gpu_health): fleet health
    # counts an event that opened none as an incident of its own, and the others through
    # their interruptions, so that nothing is counted twice.
    runs_interrupted = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occurred_at"]
        constraints = [
            # Two pushes racing with the same readings record one event.
            models.UniqueConstraint(
                fields=["device", "kind", "occurred_at"], name="device_event_unique_kind_time"
            ),
        ]
        indexes = [
            # Fleet health and the host page read a host's events newest first.
            models.Index(fields=["host", "-occurred_at"], name="device_event_host_time_idx"),
            # The fleet page reads a project's events in a time window.
            models.Index(fields=["project", "-occurred_at"], name="device_event_project_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.device_id} {self.kind} {self.occurred_at:%Y-%m-%d %H:%M}"
