"""Seed a short runbook for each Table 5 category (logbook.runbooks); runbooks admins have
already written are left alone."""

from django.db import migrations

from logbook.runbooks import RUNBOOKS


def seed(apps, schema_editor):
    RootCause = apps.get_model("logbook", "RootCause")
    for slug, text in RUNBOOKS.items():
        RootCause.objects.filter(slug=slug, runbook="").update(runbook=text)


def unseed(apps, schema_editor):
    RootCause = apps.get_model("logbook", "RootCause")
    for slug, text in RUNBOOKS.items():
        RootCause.objects.filter(slug=slug, runbook=text).update(runbook="")


class Migration(migrations.Migration):
    dependencies = [("logbook", "0012_triage_suggestions")]

    operations = [migrations.RunPython(seed, unseed)]
