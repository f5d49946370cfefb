"""QA (h-qa): the new GeForce models' FP16 tensor rates are on a different basis from the rest
of the catalogue (issue #38 item 2).

GeForce cards run FP16 tensor maths with FP32 accumulate at half the FP16-accumulate rate. The
catalogue's RTX 4090 (165.2) and RTX 4090 D (147.09, its source says "FP16 tensor, FP32
accumulate") carry the FP32-accumulate figure — the one frameworks get, since cuBLAS/PyTorch
accumulate FP16 GEMMs in FP32 — and so does each model's bf16 value. The models added in #38
carry the FP16-accumulate figure instead:

* RTX 3090: NVIDIA Ampere GA102 whitepaper (v2), Appendix A table: peak FP16 Tensor TFLOPS
  with FP16 accumulate 142, with FP32 accumulate 71 (dense); the catalogue says 142 (and 71 for
  BF16, which GA102 runs at the FP32-accumulate rate).
* RTX 2080 Ti (reference): NVIDIA Turing whitepaper, Table 1: with FP16 accumulate 107.6, with
  FP32 accumulate 53.8; the catalogue says 107.6.

Sizing therefore rates a 3090 at 142 / 165.2 = 86 % of a 4090 where the like-for-like figure is
71 / 165.2 = 43 %: twice the throughput it can deliver. Expected: the FP32-accumulate figures.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("slug", "fp16_fp32_accumulate"),
    [("rtx3090", Decimal("71.00")), ("rtx2080ti", Decimal("53.80"))],
)
def test_geforce_fp16_dense_is_the_fp32_accumulate_rate_like_the_rtx_4090(
    slug, fp16_fp32_accumulate
):
    # the basis the catalogue already uses for GeForce: RTX 4090 fp16 = bf16 = 165.2 (FP32 acc.)
    rtx4090 = GpuModel.objects.get(slug="rtx4090")
    assert rtx4090.fp16_dense_tflops == rtx4090.bf16_dense_tflops == Decimal("165.20")

    assert GpuModel.objects.get(slug=slug).fp16_dense_tflops == fp16_fp32_accumulate
