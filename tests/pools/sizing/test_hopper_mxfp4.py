"""gpt-oss's MXFP4 experts on Hopper under TensorRT-LLM (issue 34): weight-only MXFP4 on the
TRITON MoE op, at the rates NVIDIA's aiconfigurator measured for that op; worked by hand."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pools.sizing.engines import ENGINE_PROFILES
from pools.sizing.gpus import gpu_spec
from pools.sizing.memory import precision_parse
from pools.sizing.presets import model_preset
from pools.sizing.throughput import (
    BANDWIDTH_EFFICIENCY,
    decode_weight_bytes,
    hopper_mxfp4_routed,
    hopper_mxfp4_routed_rate,
    hopper_mxfp4_shares,
    hopper_mxfp4_stream_extra_s,
    precision_on_gpu,
    replica_throughput,
    routed_active_params,
    routed_expert_bytes,
)

MXFP4_WO = precision_parse("MXFP4-WO")
TRTLLM = ENGINE_PROFILES["tensorrt-llm-pytorch"]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_the_triton_op_multiplies_at_its_measured_share_plus_a_time_per_routed_slot():
    """gpt-oss-20b (hidden = I = 2,880): a slot - one token's row to one of its 4 experts - is
    6 x 2,880 x 2,880 = 49,766,400 FLOPs. One H200 (989 TFLOPS BF16): 1 / (1 / (989e12 x
    0.4431) + 15.80e-9 / 49,766,400) = 1 / (2.28193e-15 + 3.17483e-16) = 3.84702e14 FLOP/s,
    0.389 of the peak (aiconfigurator's slope at EP 1: 0.39). Four H100s at EP 4:
    1 / (1 / (4 x 4.382259e14) + 3.17483e-16) = 1.126170e15, 0.285 of each card's peak (the
    tables: 0.28). A lower rate passed in (the engine's own) wins."""
    oss, h200, h100 = model_preset("gpt_oss_20b"), gpu_spec("h200_sxm"), gpu_spec("h100_sxm")

    one = hopper_mxfp4_routed_rate(model=oss, gpu=h200, tp=1, flops_rate=1e16)
    four = hopper_mxfp4_routed_rate(model=oss, gpu=h100, tp=4, flops_rate=1e16)

    assert one == pytest.approx(3.84702e14, rel=1e-5)
    assert one / 989e12 == pytest.approx(0.389, abs=5e-4)
    assert four == pytest.approx(1.126170e15, rel=1e-5)
    assert four / 4 / 989e12 == pytest.approx(0.285, abs=5e-4)
    assert hopper_mxfp4_routed_rate(model=oss, gpu=h200, tp=1, flops_rate=1e14) == 1e14


def test_only_mxfp4_experts_on_hopper_under_an_engine_with_the_triton_op_get_its_rates():
    """MXFP4 asked for on a Hopper card runs as MXFP4-WO (no FP4 tensor cores); on a B200 it
    stays MXFP4 and multiplies on FP4 tensor cores. vLLM's kernel for the same checkpoint
    reaches its own efficiency (0.55 - 0.58 in the same tables), so it has no such flag."""
    oss, h200, b200 = model_preset("gpt_oss_120b"), gpu_spec("h200_sxm"), gpu_spec("b200")
    mxfp4 = precision_parse("MXFP4")
    on_hopper, _ = precision_on_gpu(mxfp4, h200)
    on_blackwell, _ = precision_on_gpu(mxfp4, b200)

    assert on_hopper == MXFP4_WO
    assert hopper_mxfp4_routed(model=oss, precision=on_hopper, gpu=h200, triton=True)
    assert not hopper_mxfp4_routed(model=oss, precision=on_hopper, gpu=h200, triton=False)
    assert not hopper_mxfp4_routed(model=oss, precision=on_blackwell, gpu=b200, triton=True)
    fp8 = precision_parse("FP8")
    assert not hopper_mxfp4_routed(model=oss, precision=fp8, gpu=h200, triton=True)
    dense = model_preset("llama3_70b")
    assert not hopper_mxfp4_routed(model=dense, precision=MXFP4_WO, gpu=h200, triton=True)
    assert TRTLLM.hopper_mxfp4_moe_triton
    assert not ENGINE_PROFILES["vllm"].hopper_mxfp4_moe_triton
    assert not ENGINE_PROFILES["sglang"].hopper_mxfp4_moe_triton


def test_the_triton_ops_experts_stream_at_its_measured_share_of_the_bandwidth():
    """gpt-oss-20b, 4,096 tokens touch all 32 experts of its 24 layers: 24 x 32 x 3 x 2,880 x
    2,880 x 4.25 / 8 = 10,152,345,600 B of MXFP4 (E8M0 scale per 32 weights). On one H200
    (4.8 TB/s) at 0.2917 instead of 0.8: 10,152,345,600 / 1.40016e12 - 10,152,345,600 /
    3.84e12 = 7.250847 - 2.643840 = 4.607007 ms more. vLLM: nothing more."""
    oss, h200 = model_preset("gpt_oss_20b"), gpu_spec("h200_sxm")
    experts = 24 * 32 * 3 * 2880 * 2880 * 4.25 / 8
    assert experts == 10_152_345_600
    assert routed_expert_bytes(model=oss, precision=MXFP4_WO, tokens=4096) == pytest.approx(
        experts, rel=1e-9
    )

    extra = hopper_mxfp4_stream_extra_s(
        model=oss, precision=MXFP4_WO, gpu=h200, tokens=4096, triton=True, bandwidth=4.8e12
    )
    plain = hopper_mxfp4_stream_extra_s(
        model=oss, precision=MXFP4_WO, gpu=h200, tokens=4096, triton=False, bandwidth=4.8e12
    )

    assert extra == pytest.approx(4.607007e-3, rel=1e-6)
    assert plain == 0.0


def test_a_compute_bound_gpt_oss_step_on_an_h200_multiplies_its_experts_at_the_triton_rate():
    """gpt-oss-20b MXFP4 on one H200 under TensorRT-LLM's profile with the hard roofline, no host
    time and no CUDA graphs, 2,048 sequences of 128 / 2,048 tokens: a step of 2,048 decode
    tokens plus the prompts riding in it, 2,048 x 128 / 2,048 x (1 - 1 / 2,048) (one
    sequence's own prefill runs alone) = 2,175.9375 tokens. Its linear layers multiply
    2 x (linear - routed) params per token at 989e12 x 0.55 and 2 x routed params at
    3.84702e14 (the first test) / 1.112 (the busiest expert's routing skew on one card,
    pools/sizing/routing.py); its stream is every weight at 0.8 of 4.8 TB/s plus its experts'
    extra at 0.2917; the GEMM time less the MoE glue is the larger of the two. With the flag
    off (vLLM's kernel) the experts would multiply at 989e12 x 0.55 / 1.112 and stream at
    0.8."""
    oss, h200 = model_preset("gpt_oss_20b"), gpu_spec("h200_sxm")
    profile = replace(
        TRTLLM,
        gemm_overlap_exponent=None,
        host_s_per_sequence=0.0,
        cuda_graph_batch_sizes=(),
    )
    arguments = {
        "model": oss,
        "precision": MXFP4_WO,
        "gpu": h200,
        "tp": 1,
        "kv_bits": 16,
        "input_tokens": 128,
        "output_tokens": 2048,
        "batch": 2048,
    }

    estimate = replica_throughput(engine=profile, **arguments)
    without = replica_throughput(
        engine=replace(profile, hopper_mxfp4_moe_triton=False), **arguments
    )

    tokens = 2048 + 2048 * 128 / 2048 * (1 - 1 / 2048)
    assert tokens == 2175.9375
    assert estimate.tokens_per_step == pytest.approx(tokens)
    routed = routed_active_params(oss)
    assert routed == 24 * 4 * 3 * 2880 * 2880
    linear = oss.active_params - oss.vocab_size * oss.hidden_size
    dense_rate = 989e12 * 0.55
    skew = 1.112
    compute_s = (
        2 * (linear - routed) * tokens / dense_rate + 2 * routed * tokens * skew / 3.84702e14
    )
    weights = decode_weight_bytes(model=oss, precision=MXFP4_WO, tokens=tokens)
    experts = routed_expert_bytes(model=oss, precision=MXFP4_WO, tokens=tokens)
    memory_s = weights / (4.8e12 * BANDWIDTH_EFFICIENCY) + experts * (
        1 / (4.8e12 * 0.2917) - 1 / (4.8e12 * 0.8)
    )
    assert compute_s > memory_s
    assert estimate.gemm_ms - estimate.moe_glue_ms == pytest.approx(compute_s * 1e3, rel=1e-4)
    plain_s = 2 * (linear - routed) * tokens / dense_rate + 2 * routed * tokens * skew / dense_rate
    assert without.gemm_ms - without.moe_glue_ms == pytest.approx(plain_s * 1e3, rel=1e-4)


def test_the_page_states_the_triton_rates_for_mxfp4_experts_only():
    oss, dense = model_preset("gpt_oss_120b"), model_preset("llama3_70b")
    mxfp4 = precision_parse("MXFP4")

    assert hopper_mxfp4_shares(model=oss, precision=mxfp4, triton=True) == (
        0.4431,
        15.80e-9,
        0.2917,
    )
    assert hopper_mxfp4_shares(model=oss, precision=MXFP4_WO, triton=True) is not None
    assert hopper_mxfp4_shares(model=oss, precision=mxfp4, triton=False) is None
    assert hopper_mxfp4_shares(model=dense, precision=mxfp4, triton=True) is None
    assert hopper_mxfp4_shares(model=oss, precision=precision_parse("FP8"), triton=True) is None


def test_the_hopper_gpt_oss_cells_of_the_perf_overview_are_read_as_mxfp4_weight_only():
    """The perf-overview's H100 / H200 GPT-OSS columns say "(FP8)" but TensorRT-LLM runs the
    MXFP4 checkpoint there as W4A16_MXFP4 (model_config.py) on its TRITON MoE backend, with the
    KV cache at 16 bit; all 20 cells carry that label and its sources."""
    data = json.loads((FIXTURES / "sizing_dataset_2026_trtllm_next.json").read_text())
    hopper = [
        row
        for row in data["measurements"]
        if row["model_ref"].startswith("gpt_oss") and row["gpu"] in ("h100_sxm", "h200_sxm")
    ]

    assert len(hopper) == 20
    for row in hopper:
        assert row["precision"] == "MXFP4 weight-only (table: FP8; see notes)"
        assert "get_mxfp4_quant_algo" in row["notes"]
        assert "TRITON" in row["notes"]
        assert "FP8" not in row["kv_cache_dtype"].upper()
