"""Issue 34's GPU models join the catalogue: B200, B300, GB200 and GB300 (per GPU), RTX PRO 6000
Blackwell Server and Workstation, GeForce RTX 5090, H200 NVL, and the older A30, A40, T4 and L40,
each cited in the shipped catalogue (pools/inventory/catalogue/gpu_models.json) with its PCI
device id from NVIDIA's open-gpu-kernel-modules name table.

A database made from scratch already has them (0002 loads the whole shipped catalogue); this adds
the models an older database lacks, with their aliases and device ids, as 0020 did. An existing
model or alias is never overwritten: an admin may have edited it.
"""

import importlib
import json
from decimal import Decimal

from django.db import migrations

initial_catalogue = importlib.import_module("pools.migrations.0002_gpu_catalogue")

NEW_SLUGS = (
    "b200",
    "b300",
    "gb200",
    "gb300",
    "rtx_pro_6000_server",
    "rtx_pro_6000_ws",
    "rtx5090",
    "h200_nvl",
    "a30",
    "a40",
    "t4",
    "l40",
)


def add_issue_34_models(apps, schema_editor):
    GpuModel = apps.get_model("pools", "GpuModel")
    GpuModelAlias = apps.get_model("pools", "GpuModelAlias")
    with initial_catalogue.CATALOGUE.open(encoding="utf-8") as fh:
        entries = {e["slug"]: e for e in json.load(fh)["models"] if e["slug"] in NEW_SLUGS}
    existing = set(GpuModel.objects.filter(slug__in=NEW_SLUGS).values_list("slug", flat=True))
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
        values["sources"] = values.get("sources") or {}
        values["pci_device_ids"] = entry.get("pci_device_ids", [])
        model = GpuModel.objects.create(slug=slug, **values)
        for alias in entry.get("aliases", []):
            key = initial_catalogue.model_key(alias["value"])
            if key:
                GpuModelAlias.objects.get_or_create(
                    key=key,
                    defaults={"gpu_model": model, "value": alias["value"], "kind": alias["kind"]},
                )


class Migration(migrations.Migration):
    dependencies = [("pools", "0027_catfix_geforce_fp16")]
    operations = [migrations.RunPython(add_issue_34_models, migrations.RunPython.noop)]
