"""DCGM samples become a row per device and moment (issue 17): the readings of one push's GPU
as an array in telemetry.dcgm.FIELDS order, instead of a row per field. A push of 8 GPUs x 16
fields inserts 8 rows instead of 128, and the raw window takes about a tenth of the disk.

The samples still in the raw window (from telemetry.device_samples.raw_kept_since) are
converted into a new day-partitioned table, which then takes the old one's name; older ones
are not: no reader reads raw samples before that moment (the summaries hold them, see
telemetry.selectors.dcgm.device_field_history) and the beat would drop their partitions within
the hour. Today's and the next two days' partitions are made as the beat would. Reversed, every
row is split back into a row per field, in day partitions of the old shape."""

from datetime import UTC, datetime, timedelta
from typing import Any

import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# telemetry.device_samples.SUMMARY_FIELDS as this migration was written (frozen here: the
# live list may grow; what this migration converts must not change with it).
SUMMARY_FIELDS = [
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_RETIRED_SBE",
    "DCGM_FI_DEV_RETIRED_DBE",
    "DCGM_FI_DEV_RETIRED_PENDING",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_POWER_VIOLATION",
]

TABLE = "telemetry_devicesample"
NEXT = "telemetry_devicesample_next"
# Django's names for the original table's key and foreign key, kept on the new table.
PKEY = "telemetry_devicesample_pkey"
FKEY = "telemetry_devicesamp_device_id_eb239a3e_fk_telemetry"
DAY = timedelta(days=1)

ROWS_COLUMNS = """
    device_id bigint NOT NULL,
    sampled_at timestamptz NOT NULL,
    readings double precision[] NOT NULL"""
ROWS_KEY = "(device_id, sampled_at)"
# A row per (device, moment): each field's value at its position in SUMMARY_FIELDS. jsonb
# keeps a double's shortest exact text, so the values come back bit for bit.
TO_ROWS = f"""
INSERT INTO {NEXT} (device_id, sampled_at, readings)
SELECT device_id, sampled_at,
    ARRAY(SELECT (m ->> f.name)::float8 FROM unnest(%s::text[]) WITH ORDINALITY AS f(name, i)
          ORDER BY i)
FROM (SELECT device_id, sampled_at, jsonb_object_agg(field, value) AS m FROM {TABLE}
      WHERE sampled_at >= %s GROUP BY device_id, sampled_at) AS per_moment
"""

FIELDS_COLUMNS = """
    field varchar(64) NOT NULL,
    sampled_at timestamptz NOT NULL,
    value double precision NOT NULL,
    device_id bigint NOT NULL"""
FIELDS_KEY = "(device_id, field, sampled_at)"
TO_FIELDS = f"""
INSERT INTO {NEXT} (field, sampled_at, value, device_id)
SELECT f.name, s.sampled_at, r.v, s.device_id
FROM {TABLE} s CROSS JOIN unnest(s.readings) WITH ORDINALITY AS r(v, i)
JOIN unnest(%s::text[]) WITH ORDINALITY AS f(name, i) ON f.i = r.i
WHERE r.v IS NOT NULL AND s.sampled_at >= %s
"""


def _rebuild(cursor: Any, *, columns: str, key: str, copy: str, since: datetime) -> None:
    """Make NEXT in the new shape, partitioned by day, copy TABLE's rows from `since` into it,
    then drop TABLE and give NEXT (its key and partitions) TABLE's names and foreign key."""
    cursor.execute(
        f"CREATE TABLE {NEXT} ({columns}, CONSTRAINT {NEXT}_pkey PRIMARY KEY {key})"
        " PARTITION BY RANGE (sampled_at)"
    )
    cursor.execute(
        f"SELECT DISTINCT date_bin('1 day', sampled_at, timestamptz 'epoch') FROM {TABLE}"
        " WHERE sampled_at >= %s",
        [since],
    )
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days = {row[0] for row in cursor.fetchall()} | {today + n * DAY for n in range(3)}
    for day in sorted(days):
        cursor.execute(
            f"CREATE TABLE {NEXT}_p{day:%Y%m%d} PARTITION OF {NEXT}"
            f" FOR VALUES FROM ('{day.isoformat()}') TO ('{(day + DAY).isoformat()}')"
        )
    cursor.execute(copy, [SUMMARY_FIELDS, since])
    cursor.execute(f"DROP TABLE {TABLE}")
    cursor.execute(f"ALTER TABLE {NEXT} RENAME TO {TABLE}")
    cursor.execute(f"ALTER TABLE {TABLE} RENAME CONSTRAINT {NEXT}_pkey TO {PKEY}")
    for day in sorted(days):
        old, new = f"{NEXT}_p{day:%Y%m%d}", f"{TABLE}_p{day:%Y%m%d}"
        cursor.execute(f"ALTER TABLE {old} RENAME TO {new}")
        cursor.execute(f"ALTER INDEX {old}_pkey RENAME TO {new}_pkey")
    # After the copy: one check of every row, and no deferred check pending on a table the
    # statements above alter (PostgreSQL refuses that).
    cursor.execute(
        f"ALTER TABLE {TABLE} ADD CONSTRAINT {FKEY} FOREIGN KEY (device_id)"
        " REFERENCES telemetry_device (id) DEFERRABLE INITIALLY DEFERRED"
    )


def _kept_since() -> datetime:
    """telemetry.device_samples.raw_kept_since, as of now and this migration."""
    oldest = datetime.now(UTC) - timedelta(days=settings.DEVICE_SAMPLE_RETENTION_DAYS)
    return oldest.replace(hour=0, minute=0, second=0, microsecond=0)


def _to_rows(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        _rebuild(cursor, columns=ROWS_COLUMNS, key=ROWS_KEY, copy=TO_ROWS, since=_kept_since())


def _to_fields(apps: Any, schema_editor: Any) -> None:
    since = datetime(1, 1, 1, tzinfo=UTC)
    with schema_editor.connection.cursor() as cursor:
        _rebuild(cursor, columns=FIELDS_COLUMNS, key=FIELDS_KEY, copy=TO_FIELDS, since=since)


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0017_step_start_chunks"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(_to_rows, _to_fields)],
            state_operations=[
                migrations.DeleteModel(name="DeviceSample"),
                migrations.CreateModel(
                    name="DeviceSample",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "device",
                                "sampled_at",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("sampled_at", models.DateTimeField()),
                        (
                            "readings",
                            django.contrib.postgres.fields.ArrayField(
                                base_field=models.FloatField(null=True), size=None
                            ),
                        ),
                        (
                            "device",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="samples",
                                to="telemetry.device",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["device", "sampled_at"],
                    },
                ),
            ],
        ),
    ]
