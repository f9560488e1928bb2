"""telemetry 0015 turns the DCGM samples table into a day-partitioned one without copying it:
the old table is attached whole as one partition, its rows summed into the 5-minute
summaries; reversed, the rows come back into one plain table."""

from __future__ import annotations

import importlib
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


ROWS_BEFORE = [("telemetry", "0017_step_start_chunks")]
ROWS_AFTER = [("telemetry", "0018_device_sample_rows")]


@pytest.mark.django_db(transaction=True)
def test_samples_become_a_row_per_device_and_moment_then_a_row_per_field_again(migrate_to):
    from django.utils import timezone

    # The fields as that migration packs them (frozen there; later fields append to the
    # live list, telemetry.device_samples.SUMMARY_FIELDS).
    SUMMARY_FIELDS = importlib.import_module(
        "telemetry.migrations.0018_device_sample_rows"
    ).SUMMARY_FIELDS

    apps = migrate_to(ROWS_BEFORE)
    try:
        # given (a row per field) two moments of one GPU in the window, one field missing from
        # the second, a value that needs all of a double's digits, and a sample from long ago
        now = timezone.now().replace(microsecond=0)
        Project = apps.get_model("telemetry", "Project")
        Device = apps.get_model("telemetry", "Device")
        Sample = apps.get_model("telemetry", "DeviceSample")
        gpu = Device.objects.create(
            project=Project.objects.create(slug="mig-rows", name="R"), uuid="GPU-rows"
        )
        power, temp = "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP"
        before = [
            (power, now - timedelta(minutes=1), 612.4570000000001),
            (temp, now - timedelta(minutes=1), 66.0),
            (temp, now, 67.0),
            (temp, now - timedelta(days=30), 50.0),
        ]
        with connection.cursor() as cursor:
            cursor.execute(  # the partition a push would have made for the old sample
                "CREATE TABLE telemetry_devicesample_pold PARTITION OF telemetry_devicesample"
                " FOR VALUES FROM (MINVALUE) TO (%s)",
                [now - timedelta(days=20)],
            )
        for day in {at.date() for _, at, _ in before[:3]}:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"CREATE TABLE IF NOT EXISTS telemetry_devicesample_p{day:%Y%m%d}"
                    " PARTITION OF telemetry_devicesample FOR VALUES FROM (%s) TO (%s)",
                    [day, day + timedelta(days=1)],
                )
        Sample.objects.bulk_create(
            Sample(device=gpu, field=field, sampled_at=at, value=value)
            for field, at, value in before
        )

        # when migrated
        apps = migrate_to(ROWS_AFTER)

        # then the window's samples are a row per moment, each field at its position
        rows = apps.get_model("telemetry", "DeviceSample").objects.order_by("sampled_at")
        got = [(row.sampled_at, row.readings) for row in rows]
        first = [None] * len(SUMMARY_FIELDS)
        first[SUMMARY_FIELDS.index(power)] = 612.4570000000001
        first[SUMMARY_FIELDS.index(temp)] = 66.0
        second = [None] * len(SUMMARY_FIELDS)
        second[SUMMARY_FIELDS.index(temp)] = 67.0
        assert got == [(now - timedelta(minutes=1), first), (now, second)]
        # and the partitions are days, named as the beat names them
        names = {name for name, _ in _partitions()}
        assert f"telemetry_devicesample_p{now:%Y%m%d}" in names
        assert "telemetry_devicesample_pold" not in names

        # when reversed
        apps = migrate_to(ROWS_BEFORE)

        # then a row per field again, with the same values
        restored = apps.get_model("telemetry", "DeviceSample").objects.order_by(
            "sampled_at", "field"
        )
        assert [(s.field, s.sampled_at, s.value) for s in restored] == sorted(
            before[:3], key=lambda row: (row[1], row[0])
        )
    finally:
        migrate_to(ROWS_BEFORE)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM telemetry_devicesample")
