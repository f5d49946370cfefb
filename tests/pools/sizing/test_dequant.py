"""De-quantisation of 4-bit weight-only layers, and vLLM's original AWQ kernel, worked by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pools.sizing.engines import ENGINE_PROFILES, engine_profile, with_fitted
from pools.sizing.gpus import cuda_core_instructions_per_s, gpu_spec
from pools.sizing.memory import precision_parse
from pools.sizing.presets import model_preset
from pools.sizing.throughput import (
    decode_weight_bytes,
    dequant_seconds,
    quantised_linear_params,
    replica_throughput,
)

AWQ = precision_parse("INT4-AWQ")
GPTQ = precision_parse("INT4-GPTQ")
QWEN_7B = model_preset("qwen2_5_7b")
#: Qwen2.5-7B: everything but the input embedding and the 16-bit lm_head, 152,064 x 3,584 each.
QWEN_7B_LAYERS = QWEN_7B.total_params - 2 * 152_064 * 3_584
#: A100 SXM 80GB: 19.5 TFLOPS FP32 / 2 FLOPs per FMA; 2,039 GB/s x 0.8; 312 TFLOPS x 0.50.
A100_INSTRUCTIONS = 9.75e12
A100_BANDWIDTH = 2_039e9 * 0.8
A100_FP16 = 312e12 * 0.50


def qwen_7b_on_a100(precision, version, **overrides):
    arguments = {
        "model": QWEN_7B,
        "precision": precision,
        "gpu": gpu_spec("a100_80g_sxm"),
        "tp": 1,
        "kv_bits": 16,
        "input_tokens": 1,
        "output_tokens": 2048,
        "batch": 1,
        # The hard roofline, so that at batch 1 the GEMM is the weight stream (plus the
        # original kernel's serial terms); the fitted overlap has its tests in test_throughput.
        "engine": replace(engine_profile("vllm", version), gemm_overlap_exponent=None),
    }
    arguments.update(overrides)
    return replica_throughput(**arguments)


def test_vllm_before_0_5_3_runs_awq_on_its_original_gemm_kernel():
    assert engine_profile("vllm", "0.4.2").awq_kernel == "gemm"
    assert engine_profile("vllm", "0.5.2").awq_kernel == "gemm"
    assert engine_profile("vllm", "0.5.3").awq_kernel == "marlin"
    assert engine_profile("vllm", "0.6.3").awq_kernel == "marlin"
    assert engine_profile("vllm").awq_kernel == "marlin"
    assert engine_profile("tensorrt-llm").awq_kernel == "marlin"
    # Same engine generation (V0): the same fitted step overhead.
    assert engine_profile("vllm", "0.4.2").name == engine_profile("vllm", "0.6.3").name == "vllm-v0"


def test_a_refit_replaces_only_the_fitted_numbers():
    refit = replace(
        ENGINE_PROFILES["vllm-v0"], step_overhead_s_per_layer=50e-6, compute_efficiency=0.5
    )

    profile = with_fitted(engine_profile("vllm", "0.4.2"), refit)

    assert (profile.step_overhead_s_per_layer, profile.compute_efficiency) == (50e-6, 0.5)
    assert profile.awq_kernel == "gemm"
    assert with_fitted(ENGINE_PROFILES["vllm"], None) is ENGINE_PROFILES["vllm"]


def test_a100_cuda_cores_issue_9_75e12_instructions_per_second():
    assert cuda_core_instructions_per_s(gpu_spec("a100_80g_sxm")) == A100_INSTRUCTIONS
    assert cuda_core_instructions_per_s(gpu_spec("l20")) is None


def test_only_4_bit_weight_only_layers_are_de_quantised():
    assert quantised_linear_params(model=QWEN_7B, precision=AWQ, tokens=1) == QWEN_7B_LAYERS
    assert quantised_linear_params(model=QWEN_7B, precision=GPTQ, tokens=1) == QWEN_7B_LAYERS
    for name in ("FP16", "FP8", "W8A16"):
        assert (
            quantised_linear_params(model=QWEN_7B, precision=precision_parse(name), tokens=1) == 0
        )


def test_marlin_hides_the_de_quantisation_behind_the_weight_stream():
    # 6.53e9 weights x 17 / 8 instructions / 9.75e12 per s = 1.42 ms of CUDA-core work, less
    # than the 2.8 ms the 4-bit weights take to stream: the layers cost the stream alone.
    estimate = qwen_7b_on_a100(AWQ, "0.6.3")
    weights = decode_weight_bytes(model=QWEN_7B, precision=AWQ, tokens=1)

    assert estimate.dequant_ms == pytest.approx(QWEN_7B_LAYERS * 17 / 8 / A100_INSTRUCTIONS * 1e3)
    assert estimate.dequant_ms == pytest.approx(1.4223, abs=1e-4)
    assert estimate.gemm_ms == pytest.approx(weights / A100_BANDWIDTH * 1e3)


def test_the_original_awq_kernel_adds_de_quantisation_and_16_row_mmas_to_the_stream():
    # No double buffering: stream + de-quantise + multiply 16 padded rows, one after another:
    # 1.42 ms + 2 x 16 x 6.53e9 / 156e12 = 1.34 ms: 2.76 ms more than Marlin for one token.
    marlin = qwen_7b_on_a100(AWQ, "0.6.3")
    original = qwen_7b_on_a100(AWQ, "0.4.2")
    dequant = QWEN_7B_LAYERS * 17 / 8 / A100_INSTRUCTIONS
    mmas = 2 * 16 * QWEN_7B_LAYERS / A100_FP16

    assert original.gemm_ms - marlin.gemm_ms == pytest.approx((dequant + mmas) * 1e3)
    assert (dequant + mmas) * 1e3 == pytest.approx(2.76, abs=0.01)
    # GPTQ checkpoints ran on Marlin in those releases too.
    assert qwen_7b_on_a100(GPTQ, "0.4.2").gemm_ms == pytest.approx(
        qwen_7b_on_a100(GPTQ, "0.6.3").gemm_ms
    )


def test_seventeen_tokens_take_two_tiles_on_the_original_kernel():
    common = {
        "model": QWEN_7B,
        "precision": AWQ,
        "gpu": gpu_spec("a100_80g_sxm"),
        "tp": 1,
        "memory_s": 0.003,
        "compute_s": 0.0001,
        "flops_rate": A100_FP16,
        "effective_bandwidth": A100_BANDWIDTH,
        "awq_kernel": "gemm",
    }
    dequant = QWEN_7B_LAYERS * 17 / 8 / A100_INSTRUCTIONS
    mmas = 2 * 16 * QWEN_7B_LAYERS / A100_FP16

    extra, work = dequant_seconds(tokens=17, **common)

    assert work == pytest.approx(2 * dequant)
    assert extra == pytest.approx(0.003 + 2 * (dequant + mmas) - 0.003)


def test_from_256_tokens_vllm_writes_the_fp16_matrix_and_multiplies_it():
    # awq_dequantize: max(stream 3 ms + 2 B per weight written, CUDA cores); torch.matmul:
    # max(2 B per weight read, 10 ms of compute); both instead of max(3 ms, 10 ms).
    fp16_matrix = QWEN_7B_LAYERS * 2 / A100_BANDWIDTH

    extra, _ = dequant_seconds(
        model=QWEN_7B,
        precision=AWQ,
        gpu=gpu_spec("a100_80g_sxm"),
        tp=1,
        tokens=512,
        memory_s=0.003,
        compute_s=0.010,
        flops_rate=A100_FP16,
        effective_bandwidth=A100_BANDWIDTH,
        awq_kernel="gemm",
    )

    assert extra == pytest.approx((0.003 + fp16_matrix) + max(fp16_matrix, 0.010) - 0.010)


def test_tensor_parallel_cards_each_de_quantise_their_share():
    one = qwen_7b_on_a100(AWQ, "0.6.3")
    two = qwen_7b_on_a100(AWQ, "0.6.3", tp=2)

    assert two.dequant_ms == pytest.approx(one.dequant_ms / 2)


def test_a_card_without_a_cuda_core_figure_has_no_de_quantisation_term():
    estimate = qwen_7b_on_a100(AWQ, "0.4.2", gpu=gpu_spec("l20"))

    assert estimate.dequant_ms == 0


def test_vllm_before_0_4_3_reads_the_kv_cache_once_per_query_head():
    # Qwen2.5-7B: 28 query heads share 4 KV heads, so the paged-attention kernel of vLLM 0.4.2
    # reads each sequence's KV cache 7 times; from 0.4.3 FlashAttention reads it once.
    assert engine_profile("vllm", "0.4.2").decode_kv_reads_per_query_head is True
    assert engine_profile("vllm", "0.4.3").decode_kv_reads_per_query_head is False
    assert engine_profile("vllm").decode_kv_reads_per_query_head is False
    long_prompt = {"input_tokens": 30_720}
    old = qwen_7b_on_a100(GPTQ, "0.4.2", **long_prompt)
    new = qwen_7b_on_a100(GPTQ, "0.6.3", **long_prompt)

    assert old.kv_bytes_read_per_step == 7 * new.kv_bytes_read_per_step
    # 28 layers x 4 KV heads x 128 x 2 (K, V) x 2 bytes = 57,344 B per token, over the mean
    # context of 30,720 + 1,024 tokens.
    assert new.kv_bytes_read_per_step == 57_344 * (30_720 + 1_024)
    assert old.attention_ms == pytest.approx(7 * 57_344 * 31_744 / A100_BANDWIDTH * 1e3)
