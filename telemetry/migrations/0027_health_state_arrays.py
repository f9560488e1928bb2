"""A device's health state keeps its newest readings and the fields its exporter sends as arrays
by position in telemetry.dcgm.FIELDS (issue 38): `last_readings` float8[] for the JSON object
`last_values` ({field: value}) and `sent_positions` smallint[] for the JSON list `fields_sent`
(field names). Every DCGM push rewrites the row of each of its GPUs; as JSON it was 1.3 KB, and
parsing and writing it was a sixth of a remote-write request's PostgreSQL CPU. The table is
also left a fifth of each page free, so that the next push's row fits beside the old one (an
update that needs no new index entry).

Forwards, each object and list is converted by name; reversed, the arrays are turned back into
the object (numbers as PostgreSQL's float8 prints them) and the sorted list of names."""

import django.contrib.postgres.fields
from django.db import migrations, models

# telemetry.dcgm.FIELDS's names as this migration was written (frozen here: the live list may
# grow; what this migration converts must not change with it).
FIELDS = [
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
    "DCGM_FI_DEV_ROW_REMAP_PENDING",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
]
NAMES = "ARRAY[" + ", ".join(f"'{name}'" for name in FIELDS) + "]::text[]"
TABLE = "telemetry_devicehealthstate"

# An empty object stays an empty array (a state just made: the device never seen).
TO_ARRAYS = f"""
UPDATE {TABLE} SET
    last_readings = CASE WHEN last_values = '{{}}'::jsonb THEN '{{}}'::float8[] ELSE ARRAY(
        SELECT (last_values ->> f.name)::float8
        FROM unnest({NAMES}) WITH ORDINALITY AS f(name, i) ORDER BY f.i) END,
    sent_positions = ARRAY(
        SELECT (f.i - 1)::smallint
        FROM unnest({NAMES}) WITH ORDINALITY AS f(name, i)
        WHERE fields_sent ? f.name ORDER BY f.i)
"""
TO_JSON = f"""
UPDATE {TABLE} SET
    last_values = coalesce((
        SELECT jsonb_object_agg(({NAMES})[r.i], r.v)
        FROM unnest(last_readings) WITH ORDINALITY AS r(v, i)
        WHERE r.v IS NOT NULL AND r.i <= {len(FIELDS)}), '{{}}'::jsonb),
    fields_sent = coalesce((
        SELECT jsonb_agg(({NAMES})[p + 1] ORDER BY ({NAMES})[p + 1])
        FROM unnest(sent_positions) AS p
        WHERE p < {len(FIELDS)}), '[]'::jsonb)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0026_metric_hour_sums"),
    ]

    operations = [
        migrations.AddField(
            model_name="devicehealthstate",
            name="last_readings",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.FloatField(null=True), blank=True, default=list, size=None
            ),
        ),
        migrations.AddField(
            model_name="devicehealthstate",
            name="sent_positions",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.SmallIntegerField(), blank=True, default=list, size=None
            ),
        ),
        migrations.RunSQL(TO_ARRAYS, TO_JSON),
        migrations.RemoveField(model_name="devicehealthstate", name="last_values"),
        migrations.RemoveField(model_name="devicehealthstate", name="fields_sent"),
        migrations.RunSQL(
            f"ALTER TABLE {TABLE} SET (fillfactor = 80)", f"ALTER TABLE {TABLE} RESET (fillfactor)"
        ),
    ]
