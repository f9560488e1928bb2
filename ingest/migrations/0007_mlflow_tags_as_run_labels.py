"""MLflow runs logged before their own tags became run labels: give their runs the labels
(`owner=alice`) that new runs get (ingest.mlflow_tags.run_labels, copied here as it was)."""

from django.db import migrations

TAG_MAX_LENGTH = 64
TAGS_MAX = 32


def labels_add(apps, schema_editor):
    MlflowRun = apps.get_model("ingest", "MlflowRun")
    Run = apps.get_model("telemetry", "Run")
    for run_id, tags in MlflowRun.objects.values_list("run_id", "tags").iterator():
        own = {k: v for k, v in (tags or {}).items() if not k.startswith("mlflow.")}
        if not own:
            continue
        run = Run.objects.get(pk=run_id)
        kept = [label for label in run.tags if label.split("=", 1)[0] not in own]
        added = [
            label
            for label in (f"{k}={v}" for k, v in sorted(own.items()))
            if len(label) <= TAG_MAX_LENGTH
        ]
        labels = list(dict.fromkeys(kept + added))[:TAGS_MAX]
        if labels != run.tags:
            Run.objects.filter(pk=run_id).update(tags=labels)


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0006_batch_dead_idx"),
    ]

    # Backwards: the labels stay (they are the runs' tags now, maybe edited since).
    operations = [migrations.RunPython(labels_add, migrations.RunPython.noop)]
