"""Seed the accelerator catalog with dense BF16 peaks and their sources."""

from django.db import migrations

from telemetry.accelerators import ACCELERATOR_SEEDS


def seed(apps, schema_editor):
    AcceleratorType = apps.get_model("telemetry", "AcceleratorType")
    existing = set(AcceleratorType.objects.values_list("name", flat=True))
    AcceleratorType.objects.bulk_create(
        [
            AcceleratorType(
                name=row.name,
                aliases=row.aliases,
                peak_flops_bf16=row.peak_flops_bf16,
                source=row.source,
            )
            for row in ACCELERATOR_SEEDS
            if row.name not in existing
        ]
    )


def unseed(apps, schema_editor):
    AcceleratorType = apps.get_model("telemetry", "AcceleratorType")
    AcceleratorType.objects.filter(name__in=[row.name for row in ACCELERATOR_SEEDS]).delete()


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0002_goodput_mfu_quarantine")]

    operations = [migrations.RunPython(seed, unseed)]
