"""One statement trigger after an insert into telemetry_metricpoint, in place of three.

The rollups (0005), the throughput sums (0016) and the series check (0019) each had their
own AFTER INSERT ... FOR EACH STATEMENT trigger over the same transition table: three
PL/pgSQL calls, and three passes over the statement's rows to find its few series
(DISTINCT series_id in the series check twice and in the throughput sums once). One
function now does the three, in the order the triggers fired (by name): it finds the
statement's series once, KEY SHARE-locks them and fails on a missing one, upserts the
rollups, then the throughput sums. Measured on 1,000-point batches of the bench's columns
form in-process, the three triggers against this one alternating, four rounds of 150
batches (load average 3-5): PostgreSQL's CPU 10.57 -> 9.93 ms a batch (docs/performance.md).

A statement that inserted nothing (every point already stored) now returns at once.

The SQL of each part is the earlier migrations' own (imported from them: a migration does
not change once applied, so this one keeps doing what it did). Their functions
telemetry_metricrollup_add, telemetry_throughputsum_add and telemetry_metricpoint_series_check
are dropped with their triggers; the rebuild functions and the series' delete check stay.
"""

import importlib

from django.db import migrations

_rollups = importlib.import_module("telemetry.migrations.0005_metric_rollups")
_sums = importlib.import_module("telemetry.migrations.0016_throughput_sums")
_check = importlib.import_module("telemetry.migrations.0019_metricpoint_series_check_per_statement")

# 0016's function body (lock the attempts' rows, then add in a new snapshot), over the
# series ids found once instead of DISTINCT over the transition table.
_SUMS_BODY = _sums.INSTALL.split("BEGIN\n", 1)[1].split("END $$;", 1)[0]
assert _SUMS_BODY.count(_sums_from := "(SELECT DISTINCT series_id FROM new_points) d") == 2
_SUMS_BODY = _SUMS_BODY.replace(_sums_from, "unnest(ids) d(series_id)")

INSTALL = f"""
DROP TRIGGER telemetry_metricpoint_rollup ON telemetry_metricpoint;
DROP TRIGGER telemetry_metricpoint_series_check ON telemetry_metricpoint;
DROP TRIGGER telemetry_metricpoint_throughputsum ON telemetry_metricpoint;
DROP FUNCTION telemetry_metricrollup_add();
DROP FUNCTION telemetry_metricpoint_series_check();
DROP FUNCTION telemetry_throughputsum_add();

CREATE FUNCTION telemetry_metricpoint_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    found bigint;
    missing bigint;
    touched bigint;
BEGIN
    SELECT array_agg(DISTINCT series_id) INTO ids FROM new_points;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    -- The series check (0019): lock the series as the foreign key did, fail on a missing one.
    SELECT count(*) INTO found FROM (
        SELECT 1 FROM telemetry_metricseries WHERE id = ANY(ids) ORDER BY id FOR KEY SHARE
    ) s;
    IF found < cardinality(ids) THEN
        SELECT i INTO missing FROM unnest(ids) i
        WHERE NOT EXISTS (SELECT 1 FROM telemetry_metricseries s WHERE s.id = i)
        LIMIT 1;
        RAISE EXCEPTION USING
            ERRCODE = 'foreign_key_violation',
            MESSAGE = format('telemetry_metricpoint: series %s is not present in '
                             'telemetry_metricseries', missing);
    END IF;
    -- The rollups (0005).
    INSERT INTO telemetry_metricrollup AS r ({_rollups.COLUMNS})
    {_rollups._aggregate("new_points")}
    {_rollups._MERGE};
    -- The throughput sums (0016).
{_SUMS_BODY}END $$;

CREATE TRIGGER telemetry_metricpoint_added AFTER INSERT ON telemetry_metricpoint
    REFERENCING NEW TABLE AS new_points
    FOR EACH STATEMENT EXECUTE FUNCTION telemetry_metricpoint_added();
"""


def _restored(install: str, until: str | None = None) -> str:
    """An earlier migration's INSTALL (up to `until`), its functions replaced where they
    still exist."""
    if until is not None:
        install = install[: install.index(until)]
    return install.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")


UNINSTALL = (
    "DROP TRIGGER telemetry_metricpoint_added ON telemetry_metricpoint;"
    "DROP FUNCTION telemetry_metricpoint_added();"
    + _restored(_rollups.INSTALL)
    + _restored(_sums.INSTALL)
    + _restored(_check.INSTALL, until="CREATE FUNCTION telemetry_metricseries_points_check")
)


def _on_postgresql(sql: str):
    """A RunPython step executing `sql` (no other vendor has the triggers)."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            with schema_editor.connection.cursor() as cursor:
                cursor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0020_run_data_until"),
    ]

    operations = [
        migrations.RunPython(_on_postgresql(INSTALL), _on_postgresql(UNINSTALL)),
    ]
