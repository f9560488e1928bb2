"""Indexes the dashboard pages' queries need at Llama 3 scale.

Partial indexes on quarantined hosts and devices: the fleet page lists hardware with
incidents *or* in quarantine; with an index on the (few) quarantined rows PostgreSQL answers
that OR with a BitmapOr of two index scans instead of walking all 16,384 devices (~110 ms).

Raw SQL on telemetry's tables, kept out of the models' state on purpose: the index serves a
logbook read, and declaring it in telemetry.models would tie the two apps' migrations
together. CONCURRENTLY is not used: the tables are small (thousands of rows) and a
migration runs in a transaction."""

from django.db import migrations

INDEXES = [
    ("telemetry_host", "logbook_host_quarantined_idx"),
    ("telemetry_device", "logbook_device_quarantined_idx"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("logbook", "0004_triage_audit_annotations_webhooks"),
        ("telemetry", "0004_dcgm_gpu_health"),
    ]

    operations = [
        migrations.RunSQL(
            sql=f"CREATE INDEX IF NOT EXISTS {name} ON {table} (id) "
            "WHERE quarantined_at IS NOT NULL",
            reverse_sql=f"DROP INDEX IF EXISTS {name}",
        )
        for table, name in INDEXES
    ]
