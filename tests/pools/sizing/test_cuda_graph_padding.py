"""TensorRT-LLM's PyTorch backend: the limits trtllm-bench gives the engine and the CUDA-graph
padding of its decode-only steps (issue 34). Every expected value is worked by hand below from
the cited sources' rules (``pools.sizing.throughput`` docstrings)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pools.sizing.engines import (
    ENGINE_PROFILES,
    TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES,
    engine_profile,
)
from pools.sizing.gpus import gpu_spec
from pools.sizing.memory import precision_parse
from pools.sizing.presets import model_preset
from pools.sizing.throughput import (
    cuda_graph_padding_tokens,
    cuda_graph_sizes,
    graph_step_share,
    linear_compute_s,
    linear_flops_rate,
    moe_glue_s,
    padded_batch,
    replica_throughput,
    routed_expert_flops_rate,
    tensor_tflops,
    trtllm_bench_settings,
)

NVFP4 = precision_parse("NVFP4")
FP8 = precision_parse("FP8")
GIB = 2**30


def test_trtllm_bench_limits_for_qwen3_30b_a3b_nvfp4_on_one_b200():
    # tuning.py: weights 30,532,110,336 x 0.5 B; KV per token 2 x 48 layers x max(1, 4) heads x
    # 128 x 1 B (FP8) = 49,152 B; 0.90 of (180 GiB - weights) for 128 + 2,048 tokens each.
    requests = (180 - 30_532_110_336 * 0.5 / GIB) * 0.90 * GIB / (49_152 * 2_176)
    assert 1497 < requests < 1498
    # >= 1,024 requests: 256 x ceil(1,497.9 / 256) = 1,536; tokens 1,497.9 x (1 + 128 / 2,048)
    # = 1,591.5, below 4,096: max(2,048, 256 x 7) = 2,048.
    settings = trtllm_bench_settings(
        model=model_preset("qwen3_30b_a3b"),
        precision=NVFP4,
        kv_bits=8,
        gpu=gpu_spec("b200"),
        tp=1,
        pp=1,
        input_tokens=128,
        output_tokens=2048,
    )
    assert settings == (1536, 2048)


def test_trtllm_bench_lets_llama4_maverick_on_eight_h100_run_1280_sequences():
    # 400,711,848,960 FP8 weights = 373.19 GiB of 8 x 79.65 GiB; KV 2 x 48 x 8 x 128 x 1 B =
    # 98,304 B per token x 2,176 tokens; 0.90 x 264.0 GiB / 0.19922 GiB = 1,192.7 requests ->
    # 256 x 5 = 1,280; 1,192.7 x 1.0625 = 1,267 tokens -> the 2,048 floor.
    requests = (8 * 79.65 - 400_711_848_960 / GIB) * 0.90 * GIB / (98_304 * 2_176)
    assert 1192 < requests < 1193
    settings = trtllm_bench_settings(
        model=model_preset("llama4_maverick"),
        precision=FP8,
        kv_bits=8,
        gpu=gpu_spec("h100_sxm"),
        tp=8,
        pp=1,
        input_tokens=128,
        output_tokens=2048,
    )
    assert settings == (1280, 2048)


def test_no_bench_limits_when_the_weights_leave_no_kv_memory():
    # Maverick's 373 GiB of FP8 weights on two H100s (159.3 GiB): trtllm-bench refuses the run.
    assert (
        trtllm_bench_settings(
            model=model_preset("llama4_maverick"),
            precision=FP8,
            kv_bits=8,
            gpu=gpu_spec("h100_sxm"),
            tp=2,
            pp=1,
            input_tokens=128,
            output_tokens=2048,
        )
        is None
    )


def test_captured_graph_sizes_stop_at_the_largest_decode_batch_and_pad_to_it():
    sizes = TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES
    small = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512)
    # min(1,536, 2,048) = 1,536: 2,048 is dropped and 1,536 captured in its place.
    assert cuda_graph_sizes(sizes, max_batch_size=1536, max_num_tokens=2048) == (
        *small,
        1024,
        1536,
    )
    # min(4,096, 8,192) = 4,096 is itself a configured size: nothing added.
    assert cuda_graph_sizes(sizes, max_batch_size=4096, max_num_tokens=8192) == (
        *small,
        1024,
        2048,
        4096,
    )
    # The token budget binds: min(4,096, 1,000) = 1,000.
    assert cuda_graph_sizes(sizes, max_batch_size=4096, max_num_tokens=1000) == (*small, 1000)
    captured = (*small, 1024, 1536)
    assert padded_batch(1470, captured) == 1536
    assert padded_batch(1024, captured) == 1024
    assert padded_batch(300, captured) == 384
    assert padded_batch(1600, captured) == 1600  # above every graph: runs unpadded


def test_share_of_decode_steps_without_a_prompt():
    # 1,470 / 2,048 = 0.7178 requests start per step; a step taking prompts fits
    # (2,048 - 1,470) / 128 = 4.516 of them: 1 - 0.7178 / 4.516 = 0.8410.
    share = graph_step_share(batch=1470, input_tokens=128, output_tokens=2048, max_num_tokens=2048)
    assert share == pytest.approx(1 - (1470 / 2048) / ((2048 - 1470) / 128))
    assert share == pytest.approx(0.8410, abs=1e-4)
    # 128-token outputs at 4,000 sequences: 31 prompts per step, at most one fits: 0.
    assert (
        graph_step_share(batch=4000, input_tokens=128, output_tokens=128, max_num_tokens=4096) == 0
    )


def test_padding_rows_per_step_by_hand():
    common = {
        "sizes": TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES,
        "settings": (1536, 2048),
        "input_tokens": 128,
        "output_tokens": 2048,
    }
    share = 1 - (1470 / 2048) / ((2048 - 1470) / 128)
    mixed = cuda_graph_padding_tokens(batch=1470, dp=1, decode_only=False, **common)
    assert mixed == pytest.approx((1536 - 1470) * share)  # 55.5 rows
    assert cuda_graph_padding_tokens(batch=1470, dp=1, decode_only=True, **common) == 66
    # Two attention DP ranks of 735: each pads to 1,024.
    assert cuda_graph_padding_tokens(batch=1470, dp=2, decode_only=True, **common) == 2 * 289
    # No graphs configured (vLLM's profile here), or no bench limits: nothing.
    assert (
        cuda_graph_padding_tokens(
            sizes=(),
            settings=(1536, 2048),
            batch=1470,
            dp=1,
            input_tokens=128,
            output_tokens=2048,
            decode_only=True,
        )
        == 0
    )
    assert (
        cuda_graph_padding_tokens(
            sizes=TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES,
            settings=None,
            batch=1470,
            dp=1,
            input_tokens=128,
            output_tokens=2048,
            decode_only=True,
        )
        == 0
    )
    assert ENGINE_PROFILES["vllm"].cuda_graph_batch_sizes == ()
    assert (
        engine_profile("trtllm-pytorch").cuda_graph_batch_sizes
        == TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES
    )


def test_a_pytorch_backend_step_multiplies_its_padded_batch(monkeypatch):
    """Qwen3-30B-A3B NVFP4 on one B200, 1,470 sequences of 128 in / 2,048 out: compute bound
    (hard roofline), so the padded profile's GEMM time is the unpadded one's plus the multiplies
    and expert activations of the padding rows (1,536 - 1,470 of them on the steps that run a
    graph). Balanced routing (the router's skew, tests/pools/sizing/test_routing.py, held at 1)."""
    monkeypatch.setattr("pools.sizing.throughput.skew_factor", lambda **_: 1.0)
    padded_profile = replace(engine_profile("tensorrt-llm-pytorch"), gemm_overlap_exponent=None)
    plain_profile = replace(padded_profile, cuda_graph_batch_sizes=())
    model, gpu = model_preset("qwen3_30b_a3b"), gpu_spec("b200")
    arguments = {
        "model": model,
        "precision": NVFP4,
        "gpu": gpu,
        "tp": 1,
        "kv_bits": 8,
        "input_tokens": 128,
        "output_tokens": 2048,
        "batch": 1470,
    }
    padded = replica_throughput(engine=padded_profile, **arguments)
    plain = replica_throughput(engine=plain_profile, **arguments)
    tokens = plain.tokens_per_step
    assert padded.tokens_per_step == pytest.approx(tokens)  # padding rows are not output
    decode_only = tokens == pytest.approx(1470)
    rows = (1536 - 1470) * (1 if decode_only else 1 - (1470 / 2048) / ((2048 - 1470) / 128))
    flops_rate = linear_flops_rate(
        precision=NVFP4, gpu=gpu, tflops=tensor_tflops(NVFP4, gpu), tp=1, efficiency=0.5
    )
    routed_rate = routed_expert_flops_rate(
        model=model, precision=NVFP4, gpu=gpu, tp=1, flops_rate=flops_rate
    )

    def compute(n):
        return linear_compute_s(
            model=model, tokens=n, flops_rate=flops_rate, routed_rate=routed_rate
        )

    def glue(n):
        return moe_glue_s(
            model=model,
            precision=NVFP4,
            tokens=n,
            tp=1,
            dp_attention=1,
            card_bandwidth=8000e9 * 0.8,
        )

    extra_ms = (compute(tokens + rows) - compute(tokens) + glue(tokens + rows) - glue(tokens)) * 1e3
    assert extra_ms > 0.25  # 0.28 ms of a ~24 ms step
    assert padded.gemm_ms == pytest.approx(plain.gemm_ms + extra_ms)
    assert padded.output_tok_s_total < plain.output_tok_s_total


def test_trtllm_bench_limits_of_a_pipeline_are_a_micro_batch_of_all_its_cards():
    # Llama 3.3 70B NVFP4 (70,553,706,496 parameters x 0.5 B = 32.854 GiB) on RTX PRO 6000
    # Server cards (96 GiB), FP8 KV 2 x 80 layers x 8 heads x 128 x 1 B = 163,840 B a token,
    # 128 + 2,048 tokens a request. tuning.py, TP 1 PP 2: 0.90 x (2 x 96 - 32.854) GiB for
    # 431.4 requests, / 2 stages = 215.7 a micro-batch -> 32 x ceil(215.7 / 32) = 224; tokens
    # 215.7 x 1.0625 = 229 -> the 2,048 floor. On one card alone (PP 1): 171.2 -> 192.
    per_request = 163_840 * 2_176 / GIB
    weights = 70_553_706_496 * 0.5 / GIB
    assert 431.3 < (2 * 96 - weights) * 0.90 / per_request < 431.5
    assert 171.1 < (96 - weights) * 0.90 / per_request < 171.3
    common = {
        "model": model_preset("llama3_70b"),
        "precision": NVFP4,
        "kv_bits": 8,
        "gpu": gpu_spec("rtx_pro_6000_server"),
        "tp": 1,
        "input_tokens": 128,
        "output_tokens": 2048,
    }
    assert trtllm_bench_settings(pp=2, **common) == (224, 2048)
    assert trtllm_bench_settings(pp=1, **common) == (192, 2048)


def test_a_pipeline_stage_pads_its_micro_batch_to_the_replicas_limits():
    """400 sequences over TP 1 PP 2: micro-batches of 200, which the replica's limits (224, see
    above) pad to the 224 graph. With one card's limits (192) they would run unpadded (200 is
    above every captured size), so no padding would be charged: the old behaviour."""
    padded_profile = engine_profile("tensorrt-llm-pytorch")
    plain_profile = replace(padded_profile, cuda_graph_batch_sizes=())
    sizes = cuda_graph_sizes(
        TRTLLM_BENCH_CUDA_GRAPH_BATCH_SIZES, max_batch_size=224, max_num_tokens=2048
    )
    assert padded_batch(200, sizes) == 224
    arguments = {
        "model": model_preset("llama3_70b"),
        "precision": NVFP4,
        "gpu": gpu_spec("rtx_pro_6000_server"),
        "tp": 1,
        "pp": 2,
        "kv_bits": 8,
        "input_tokens": 128,
        "output_tokens": 2048,
        "batch": 400,
    }
    padded = replica_throughput(engine=padded_profile, **arguments)
    plain = replica_throughput(engine=plain_profile, **arguments)
    assert padded.tokens_per_step == pytest.approx(plain.tokens_per_step)
    assert padded.gemm_ms > plain.gemm_ms
    assert padded.output_tok_s_total < plain.output_tok_s_total
