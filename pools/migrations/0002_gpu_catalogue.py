"""Load the shipped GPU model catalogue (pools/inventory/catalogue/gpu_models.json).

The loader is frozen here as it was when this migration was written (it calls no application
code, which may move or change): it reads the shipped JSON, sets only the fields the historical
model has at this point, and keys aliases with the name normalisation of that time (lower case,
letters and digits only, a trailing "-shared" and the "nvidia"/"geforce" prefixes dropped).
``manage.py sync_gpu_catalogue`` brings an existing database up to a newer catalogue.
"""

import json
import re
from decimal import Decimal
from pathlib import Path

from django.db import migrations

CATALOGUE = Path(__file__).resolve().parents[1] / "inventory" / "catalogue" / "gpu_models.json"
DECIMAL_FIELDS = (
    "memory_gib",
    "memory_bandwidth_gbps",
    "fp16_dense_tflops",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "int8_dense_tops",
    "nvlink_gbps",
)
PLAIN_FIELDS = (
    "name",
    "vendor_name",
    "architecture",
    "card_class",
    "form_factor",
    "tdp_w",
    "cuda_cores",
    "sources",
)


def model_key(raw):
    text = raw.strip().lower()
    if text.endswith("-shared"):
        text = text[: -len("-shared")]
    key = re.sub(r"[^a-z0-9]", "", text)
    for prefix in ("nvidia", "geforce"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key


def load_catalogue(apps, schema_editor):
    GpuModel = apps.get_model("pools", "GpuModel")
    GpuModelAlias = apps.get_model("pools", "GpuModelAlias")
    known = {f.name for f in GpuModel._meta.get_fields()}
    with CATALOGUE.open(encoding="utf-8") as fh:
        entries = json.load(fh)["models"]
    for entry in entries:
        values = {f: entry.get(f) for f in PLAIN_FIELDS if f in known}
        values.update(
            {
                f: None if entry.get(f) is None else Decimal(str(entry[f]))
                for f in DECIMAL_FIELDS
                if f in known
            }
        )
        values["sources"] = values.get("sources") or {}
        model, _ = GpuModel.objects.update_or_create(slug=entry["slug"], defaults=values)
        for alias in entry.get("aliases", []):
            key = model_key(alias["value"])
            if key:
                GpuModelAlias.objects.get_or_create(
                    key=key,
                    defaults={"gpu_model": model, "value": alias["value"], "kind": alias["kind"]},
                )


class Migration(migrations.Migration):
    dependencies = [("pools", "0001_initial")]
    operations = [migrations.RunPython(load_catalogue, migrations.RunPython.noop)]
