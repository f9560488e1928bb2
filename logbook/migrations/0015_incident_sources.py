"""Incident sources: each signal of a failure (the job's report, a dcgm-exporter event, a hang,
an MLflow FAILED) as a row of the one interruption it is part of. Every interruption recorded
so far is its own first source, with what it reported."""

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
INSERT INTO logbook_incidentsource
    (interruption_id, run_id, source_key, kind, occurred_at, detected_at, message, reported,
     created_at)
SELECT id, run_id, source_key,
       CASE WHEN source_key LIKE 'dcgm:%' THEN 'dcgm'
            WHEN source_key LIKE 'hang:%' THEN 'hang'
            WHEN source_key LIKE 'mlflow-%' THEN 'mlflow'
            ELSE 'job' END,
       occurred_at, detected_at, message,
       jsonb_strip_nulls(jsonb_build_object(
           'category', NULLIF(reported_category, ''),
           'step', step,
           'lost_steps', lost_steps,
           'reported_lost_s', reported_lost_s,
           'recovered_at', to_char(recovered_at AT TIME ZONE 'UTC',
                                   'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
           'severity', severity)),
       created_at
FROM logbook_interruption
WHERE source_key <> ''
ON CONFLICT DO NOTHING
"""


class Migration(migrations.Migration):
    dependencies = [
        ("logbook", "0014_incident_groups"),
        ("telemetry", "0021_metricpoint_one_insert_trigger"),
    ]

    operations = [
        migrations.CreateModel(
            name="IncidentSource",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("source_key", models.CharField(max_length=200)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("job", "Job's report"),
                            ("dcgm", "dcgm-exporter"),
                            ("hang", "Hang detection"),
                            ("mlflow", "MLflow status"),
                        ],
                        default="job",
                        max_length=8,
                    ),
                ),
                ("occurred_at", models.DateTimeField()),
                ("detected_at", models.DateTimeField(blank=True, null=True)),
                ("message", models.TextField(blank=True)),
                ("reported", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "interruption",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sources",
                        to="logbook.interruption",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="telemetry.run",
                    ),
                ),
            ],
            options={
                "ordering": ["occurred_at", "pk"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "source_key"), name="incident_source_unique_key"
                    )
                ],
            },
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
