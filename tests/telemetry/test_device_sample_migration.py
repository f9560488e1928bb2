"""telemetry 0015 turns the DCGM samples table into a day-partitioned one without copying it:
the old table is attached whole as one partition, its rows summed into the 5-minute
summaries; reversed, the rows come back into one plain table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

BEFORE = [("telemetry", "0014_attempt_rank_timings_rolled_up_at")]
AFTER = [("telemetry", "0015_device_sample_partitions")]
T = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _partitions() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'telemetry_devicesample'::regclass"
        )
        return cursor.fetchall()


@pytest.mark.django_db(transaction=True)
def test_samples_table_is_partitioned_in_place_and_summarised_then_restored(migrate_to):
    apps = migrate_to(BEFORE)
    try:
        # given (before) twelve power readings 30 s apart: ten in one 5-minute bucket
        Project = apps.get_model("telemetry", "Project")
        Device = apps.get_model("telemetry", "Device")
        DeviceSample = apps.get_model("telemetry", "DeviceSample")
        project = Project.objects.create(slug="mig-dcgm", name="D")
        gpu = Device.objects.create(project=project, uuid="GPU-mig")
        values = [300.0 + 7 * (n % 4) for n in range(12)]
        DeviceSample.objects.bulk_create(
            DeviceSample(device=gpu, field="DCGM_FI_DEV_POWER_USAGE", value=value,
                         sampled_at=T + timedelta(seconds=30 * n))
            for n, value in enumerate(values)
        )  # fmt: skip

        # when migrated
        apps = migrate_to(AFTER)

        # then the old table is one partition, from MINVALUE to the end of today or later
        ((name, bound),) = _partitions()
        assert name == "telemetry_devicesample_unpartitioned"
        assert bound.startswith("FOR VALUES FROM (MINVALUE) TO (")
        assert apps.get_model("telemetry", "DeviceSample").objects.count() == 12
        # and the summaries hold each bucket's count, mean and max
        Summary = apps.get_model("telemetry", "DeviceSampleSummary")
        power = 2  # position of DCGM_FI_DEV_POWER_USAGE in telemetry.dcgm.FIELDS
        rows = [
            (s.sample_counts[power], s.value_sums[power], s.value_maxes[power])
            for s in Summary.objects.filter(device_id=gpu.pk).order_by("bucket_start")
        ]
        first, rest = values[:10], values[10:]
        assert rows == [(10, sum(first), max(first)), (2, sum(rest), max(rest))]

        # when reversed
        apps = migrate_to(BEFORE)

        # then one plain table holds the rows again
        with connection.cursor() as cursor:
            cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'telemetry_devicesample'")
            assert cursor.fetchone() == ("r",)
        restored = apps.get_model("telemetry", "DeviceSample").objects.order_by("sampled_at")
        assert list(restored.values_list("value", flat=True)) == values
    finally:
        # Back to the plain table, emptied, so that migrating forward leaves no partition
        # from MINVALUE behind for the tests that follow (flush does not drop partitions).
        migrate_to(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM telemetry_devicesample")
