"""Load the shipped GPU model catalogue (pools/inventory/catalogue/gpu_models.json)."""

from django.db import migrations


def load_catalogue(apps, schema_editor):
    from pools.inventory.catalogue.sync import catalogue_sync

    catalogue_sync(apps.get_model("pools", "GpuModel"), apps.get_model("pools", "GpuModelAlias"))


class Migration(migrations.Migration):
    dependencies = [("pools", "0001_initial")]
    operations = [migrations.RunPython(load_catalogue, migrations.RunPython.noop)]
