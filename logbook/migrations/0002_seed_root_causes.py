"""Seed the root-cause taxonomy: Llama 3 Table 5's 18 components and the extra categories."""

from django.db import migrations

from logbook.taxonomy import ROOT_CAUSE_SEEDS


def seed(apps, schema_editor):
    RootCause = apps.get_model("logbook", "RootCause")
    existing = set(RootCause.objects.values_list("slug", flat=True))
    RootCause.objects.bulk_create(
        [
            RootCause(
                slug=row.slug,
                name=row.name,
                group=row.group,
                is_hardware=row.is_hardware,
                is_planned=row.is_planned,
            )
            for row in ROOT_CAUSE_SEEDS
            if row.slug not in existing
        ]
    )


def unseed(apps, schema_editor):
    RootCause = apps.get_model("logbook", "RootCause")
    RootCause.objects.filter(slug__in=[row.slug for row in ROOT_CAUSE_SEEDS]).delete()


class Migration(migrations.Migration):
    dependencies = [("logbook", "0001_initial")]

    operations = [migrations.RunPython(seed, unseed)]
