"""GPU models keep their PCI device ids in the database, so a pool admin can edit them.

Fills ``pci_device_ids`` from the shipped catalogue (pools/inventory/catalogue/gpu_models.json)
where a model has none, and adds the catalogue models this database lacks (H800 NVL, RTX 2080 Ti,
RTX 3090, GTX 1080 Ti, V100) with 0002's frozen loader. An existing model or alias is never
overwritten: an admin may have edited it.
"""

import importlib
import json
from decimal import Decimal

from django.db import migrations, models

initial_catalogue = importlib.import_module("pools.migrations.0002_gpu_catalogue")


def add_models_and_device_ids(apps, schema_editor):
    GpuModel = apps.get_model("pools", "GpuModel")
    GpuModelAlias = apps.get_model("pools", "GpuModelAlias")
    with initial_catalogue.CATALOGUE.open(encoding="utf-8") as fh:
        entries = {e["slug"]: e for e in json.load(fh)["models"]}
    existing = set(GpuModel.objects.values_list("slug", flat=True))
    for slug, entry in entries.items():
        if slug in existing:
            continue
        values = {f: entry.get(f) for f in initial_catalogue.PLAIN_FIELDS}
        values.update(
            {
                f: None if entry.get(f) is None else Decimal(str(entry[f]))
                for f in initial_catalogue.DECIMAL_FIELDS
            }
        )
        model = GpuModel.objects.create(slug=slug, **values)
        for alias in entry.get("aliases", []):
            key = initial_catalogue.model_key(alias["value"])
            if key:
                GpuModelAlias.objects.get_or_create(
                    key=key,
                    defaults={"gpu_model": model, "value": alias["value"], "kind": alias["kind"]},
                )
    for model in GpuModel.objects.filter(slug__in=entries):
        if not model.pci_device_ids:
            model.pci_device_ids = entries[model.slug].get("pci_device_ids", [])
            model.save(update_fields=["pci_device_ids"])


class Migration(migrations.Migration):
    dependencies = [("pools", "0019_idle_finding_placement_before")]
    operations = [
        migrations.AddField(
            model_name="gpumodel",
            name="pci_device_ids",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text='16-bit PCI device ids, e.g. ["0x2330"]: the tie-breaker between SKUs '
                "sharing a name.",
            ),
        ),
        migrations.RunPython(add_models_and_device_ids, migrations.RunPython.noop),
    ]
