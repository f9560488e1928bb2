"""Host Maintenance (unplanned) is not a hardware root cause: Llama 3's "about 78%" hardware
share counts the GPU, Host and Network groups only (324 / 419 = 77.3%)."""

from django.db import migrations


def not_hardware(apps, schema_editor):
    RootCause = apps.get_model("logbook", "RootCause")
    RootCause.objects.filter(slug="host-maintenance").update(is_hardware=False)


def hardware(apps, schema_editor):
    RootCause = apps.get_model("logbook", "RootCause")
    RootCause.objects.filter(slug="host-maintenance").update(is_hardware=True)


class Migration(migrations.Migration):
    dependencies = [("logbook", "0009_chronicle_precision_swaps_counts")]

    operations = [migrations.RunPython(not_hardware, hardware)]
