"""The RTX 3090 and RTX 2080 Ti carry their FP16 tensor rate with FP32 accumulate, like the RTX 4090.

0020 loaded them with the FP16-accumulate figures (142 and 107.6 TFLOPS dense), twice what
frameworks get (cuBLAS and PyTorch accumulate FP16 GEMMs in FP32) and on another basis than the
rest of the catalogue. The FP32-accumulate figures: RTX 3090 71 TFLOPS (NVIDIA Ampere GA102
whitepaper v2, Appendix A), RTX 2080 Ti 53.8 TFLOPS (NVIDIA Turing whitepaper, Table 1). A
model whose value is no longer the one 0020 wrote was edited by an admin and is left alone;
the citation comes from the shipped catalogue, as in 0020.
"""

import importlib
import json
from decimal import Decimal

from django.db import migrations

initial_catalogue = importlib.import_module("pools.migrations.0002_gpu_catalogue")

#: slug -> (fp16_dense_tflops 0020 wrote, the FP32-accumulate figure), TFLOPS dense.
FP16_DENSE = {
    "rtx3090": (Decimal("142"), Decimal("71")),
    "rtx2080ti": (Decimal("107.6"), Decimal("53.8")),
}


def fp16_dense_fp32_accumulate(apps, schema_editor):
    GpuModel = apps.get_model("pools", "GpuModel")
    with initial_catalogue.CATALOGUE.open(encoding="utf-8") as fh:
        entries = {e["slug"]: e for e in json.load(fh)["models"]}
    for model in GpuModel.objects.filter(slug__in=FP16_DENSE):
        wrong, right = FP16_DENSE[model.slug]
        if model.fp16_dense_tflops != wrong:
            continue
        model.fp16_dense_tflops = right
        source = entries.get(model.slug, {}).get("sources", {}).get("fp16_dense_tflops")
        if source:
            model.sources = {**(model.sources or {}), "fp16_dense_tflops": source}
        model.save(update_fields=["fp16_dense_tflops", "sources"])


class Migration(migrations.Migration):
    dependencies = [("pools", "0026_calib_records")]
    operations = [migrations.RunPython(fp16_dense_fp32_accumulate, migrations.RunPython.noop)]
