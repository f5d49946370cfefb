"""Issue 34: FP4 (NVFP4 / MXFP4) on Blackwell tensor cores and de-quantised elsewhere, the new
catalogue cards, and GPUs named the way nvidia-smi prints them."""

from __future__ import annotations

import pytest

from pools.sizing import SizingInputError
from pools.sizing.gpus import (
    gpu_slug_for_name,
    gpu_spec,
    gpu_specs_from_catalogue,
    trtllm_gen_attention,
)
from pools.sizing.memory import precision_parse
from pools.sizing.plan import estimate_replica
from pools.sizing.presets import model_preset
from pools.sizing.throughput import decode_weight_bytes, precision_on_gpu, tensor_tflops


@pytest.fixture(scope="module")
def specs():
    return gpu_specs_from_catalogue()


def test_fp4_runs_on_blackwell_tensor_cores_at_the_datasheet_rate(specs):
    """B200 (HGX, 1,000 W): FP4 9,000 TFLOPS dense, twice its FP8 4,500 (NVIDIA's table as
    tabulated in the catalogue's sources)."""
    nvfp4 = precision_parse("NVFP4")
    runs, warnings = precision_on_gpu(nvfp4, specs["b200"])

    assert (runs.name, warnings) == ("NVFP4", [])
    assert tensor_tflops(runs, specs["b200"]) == 9000.0 == 2 * specs["b200"].fp8_dense_tflops


def test_mxfp4_on_hopper_and_ampere_is_dequantised_to_16_bit(specs):
    for slug in ("h100_sxm", "a100_80g_sxm"):
        runs, warnings = precision_on_gpu(precision_parse("MXFP4"), specs[slug])

        assert runs.name == "MXFP4-WO" and runs.weight_only and runs.compute == "fp16"
        assert [w.code for w in warnings] == ["fp4_weight_only"]
        assert tensor_tflops(runs, specs[slug]) == specs[slug].fp16_dense_tflops


def test_block_scaled_fp4_reads_its_scales():
    """NVFP4: 4 bits + one 8-bit scale per 16 = 4.5 bits per weight; MXFP4: 8 / 32 = 4.25.
    Llama-3.1-8B decoder layers (8,030,261,248 - 2 x 525,336,576 = 6,979,588,096 weights) at
    4.5 bits = 3,926,018,304 B, + the 16-bit head 1,050,673,152 B + one embedding row 8,192 B."""
    model = model_preset("llama3_8b")
    nvfp4 = decode_weight_bytes(model=model, precision=precision_parse("NVFP4"), tokens=1)
    mxfp4 = decode_weight_bytes(model=model, precision=precision_parse("MXFP4"), tokens=1)

    assert nvfp4 == pytest.approx(6_979_588_096 * 4.5 / 8 + 1_050_673_152 + 8_192)
    assert mxfp4 == pytest.approx(6_979_588_096 * 4.25 / 8 + 1_050_673_152 + 8_192)


def test_gpt_oss_120b_in_mxfp4_fits_one_b200_and_one_h100(specs):
    """One card each; the H100 runs it de-quantised (vLLM's Marlin MXFP4 path). Weights: the
    116,789,232,960 parameters less the embedding and head (2 x 201,088 x 2,880 =
    1,158,266,880) at 4.25 bits (an E8M0 scale per 32 FP4 elements) + those at 16 bits:
    ceil(115,630,966,080 x 4.25 / 8) + 2,316,533,760 = 63,745,484,490 B (63.7 GB; the
    checkpoint keeps attention in BF16 too, which the catalogue's one precision does not)."""
    model = model_preset("gpt_oss_120b")
    for slug, runs in (("b200", "MXFP4"), ("h100_sxm", "MXFP4-WO")):
        estimate = estimate_replica(
            model=model, gpu=specs[slug], precision="MXFP4", kv_cache_dtype="FP8", tp=1,
            input_tokens=1_000, output_tokens=1_000, concurrency=16,
        )  # fmt: skip
        assert estimate.fits and estimate.precision == runs
        assert estimate.memory.weights_bytes == 63_745_484_490


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("b200", "b200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx_pro_6000_server"),
        ("NVIDIA GeForce RTX 5090", "rtx5090"),
        ("Tesla T4", "t4"),
        ("NVIDIA H200 NVL", "h200_nvl"),
        ("NVIDIA L40", "l40"),
        ("NVIDIA L40S", "l40s"),
    ],
)
def test_a_gpu_is_found_by_slug_or_nvidia_smi_name(name, slug):
    assert gpu_slug_for_name(name) == slug


def test_a_name_several_skus_share_asks_which():
    with pytest.raises(SizingInputError) as caught:
        gpu_slug_for_name("NVIDIA H100")

    assert caught.value.data["reason"] == "ambiguous_gpu"
    assert caught.value.data["candidates"] == ["h100_sxm", "h100_pcie", "h100_nvl"]


def test_an_unknown_gpu_name_is_refused():
    with pytest.raises(SizingInputError) as caught:
        gpu_slug_for_name("NVIDIA Z9000")

    assert caught.value.data["reason"] == "unknown_gpu"


@pytest.mark.parametrize(
    ("slug", "expected"),
    [
        ("b200", True),  # SM 100
        ("gb200", True),
        ("b300", True),  # SM 103
        ("gb300", True),
        ("rtx_pro_6000_server", False),  # SM 120: XQA, as Hopper
        ("rtx5090", False),
        ("h200_sxm", False),
        ("h100_sxm", False),
        ("a100_80g_sxm", False),
    ],
)
def test_tensorrt_llm_runs_trtllm_gen_attention_on_sm_100_and_103_only(slug, expected):
    """attentionOp.h: mUseTllmGen = (mSM >= 100) && (mSM != 120) && (mSM != 121); compute
    capabilities from NVIDIA's CUDA GPU table (B200 / GB200 10.0, B300 / GB300 10.3, RTX PRO 6000
    Blackwell and RTX 5090 12.0, H100 / H200 9.0, A100 8.0)."""
    assert trtllm_gen_attention(gpu_spec(slug)) is expected
