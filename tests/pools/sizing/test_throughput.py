"""Decode ceiling, step time, TPOT, TTFT, TP, MoE and request-rate solving, worked by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.sizing import SizingInputError
from pools.sizing.engines import ENGINE_PROFILES, VLLM_V0_STEP_OVERHEAD_S_PER_LAYER, engine_profile
from pools.sizing.fp4_kernels import fp4_kernels
from pools.sizing.gpus import gpu_spec, gpu_specs_from_catalogue
from pools.sizing.memory import precision_parse
from pools.sizing.presets import model_preset
from pools.sizing.throughput import (
    BANDWIDTH_EFFICIENCY,
    COMPUTE_EFFICIENCY,
    allreduce_s,
    batch_for_request_rate,
    batch_for_targets,
    decode_attention_flops_per_context_token,
    decode_attention_rate,
    decode_ceiling_batch1_tok_s,
    decode_weight_bytes,
    fp4_compute_shares,
    fp8_block_routed,
    linear_compute_s,
    linear_flops_rate,
    moe_glue_bytes,
    moe_glue_s,
    overlapped_s,
    precision_on_gpu,
    prefill_flops,
    replica_throughput,
    routed_expert_bytes,
    routed_expert_flops_rate,
    routed_fp4_stream_bytes,
    weight_bytes_read,
    weight_stream_s,
)

FP16 = precision_parse("FP16")

#: vLLM under the hard roofline max(stream, multiply): the sums worked by hand below add the
#: roofline's terms; the fitted GEMM overlap the shipped profile holds has its own tests.
HARD_MAX = replace(ENGINE_PROFILES["vllm"], gemm_overlap_exponent=None)


def replica(model_id="llama3_8b", gpu="h100_sxm", tp=1, batch=1, **overrides):
    arguments = {
        "engine": HARD_MAX,
        "model": model_preset(model_id),
        "precision": FP16,
        "gpu": gpu_spec(gpu),
        "tp": tp,
        "kv_bits": 16,
        "input_tokens": 1000,
        "output_tokens": 1000,
        "batch": batch,
    }
    arguments.update(overrides)
    return replica_throughput(**arguments)


def test_7b_fp16_on_a100_decodes_at_most_146_tokens_per_second():
    seconds_per_token = 14e9 / 2039e9

    rate = decode_ceiling_batch1_tok_s(weight_bytes=14e9, bandwidth_gbps=2039)

    assert seconds_per_token * 1e3 == pytest.approx(6.87, abs=0.005)
    assert rate == pytest.approx(1 / seconds_per_token)
    assert rate == pytest.approx(145.6, abs=0.05)


def test_70b_fp16_on_h100_sxm_decodes_at_most_24_tokens_per_second():
    seconds_per_token = 140e9 / 3350e9

    rate = decode_ceiling_batch1_tok_s(weight_bytes=140e9, bandwidth_gbps=3350)

    assert seconds_per_token * 1e3 == pytest.approx(41.8, abs=0.05)
    assert rate == pytest.approx(23.9, abs=0.05)


def test_the_estimate_reports_the_ceiling_of_the_preset():
    weights = 6_738_415_616 * 2  # Llama-2-7B, FP16

    estimate = replica("llama2_7b", "a100_80g_sxm")

    assert estimate.decode_ceiling_batch1_ms == pytest.approx(weights / 2039e9 * 1e3)
    assert estimate.decode_ceiling_batch1_tok_s == pytest.approx(2039e9 / weights)


def test_tp_splits_weights_and_bandwidth():
    one = replica("llama3_70b", tp=1)
    four = replica("llama3_70b", tp=4)

    assert four.decode_ceiling_batch1_ms == pytest.approx(one.decode_ceiling_batch1_ms / 4)


def test_batch_one_step_time_by_hand():
    # Llama-3-8B: the 128,256 x 4,096 embedding is a lookup (one row per token) and the output
    # head is read whole; every other weight is read once per step.
    table = 128_256 * 4_096
    weights = (8_030_261_248 - 2 * table) * 2 + table * 2 + 1 * 4_096 * 2
    bandwidth = 3350e9 * BANDWIDTH_EFFICIENCY
    kv_read = 1 * (1000 + 500) * 131_072  # mean context: input + half the output
    kernels = 32 * 10 * 3e-6
    decode = weights / bandwidth + kv_read / bandwidth + kernels
    # At batch 1 the request's own 1,000-token prefill cannot overlap any decode: it is run
    # alone, compute bound, once per 1,000 output tokens.
    linear = 8_030_261_248 - table
    prefill = (2 * linear * 1000 + 2 * 32 * 4096 * 1000**2) / (989e12 * COMPUTE_EFFICIENCY)
    serial = (prefill + kernels) / 1000

    estimate = replica()

    assert weights == 15_009_857_536
    assert estimate.tokens_per_step == 1  # one decode token; no other sequence to overlap
    assert estimate.weight_bytes_read_per_step == weights
    assert estimate.gemm_ms == pytest.approx(weights / bandwidth * 1e3)
    assert estimate.attention_ms == pytest.approx(kv_read / bandwidth * 1e3)
    assert estimate.kernel_overhead_ms == pytest.approx(kernels * 1e3)
    assert estimate.allreduce_ms == 0
    assert estimate.tpot_ms == pytest.approx(decode * 1e3)
    assert estimate.serial_prefill_ms == pytest.approx(serial * 1e3)
    assert estimate.step_ms == pytest.approx((decode + serial) * 1e3)
    assert estimate.output_tok_s_total == pytest.approx(1 / (decode + serial))
    assert estimate.requests_per_s == pytest.approx(1 / (decode + serial) / 1000)
    # The shipped vLLM profile overlaps nothing (p = 1, engines.py): the GEMM is the stream
    # plus one token's multiplies, 2 x linear FLOPs at 989 TFLOPS x the compute share.
    shipped = replica(engine="vllm")
    multiply = 2 * linear / (989e12 * COMPUTE_EFFICIENCY)
    assert shipped.gemm_ms == pytest.approx((weights / bandwidth + multiply) * 1e3)


def test_weight_only_int4_reads_group_scales_and_a_16_bit_output_head():
    # Qwen2.5-7B AWQ: decoder linears at 4 + (16 + 4) / 128 bits, lm_head 152,064 x 3,584 at
    # 16 bit, the embedding touched for one row.
    qwen = model_preset("qwen2_5_7b")
    table = 152_064 * 3_584
    layers = qwen.total_params - 2 * table

    read = decode_weight_bytes(model=qwen, precision=precision_parse("INT4-AWQ"), tokens=1)

    assert read == pytest.approx(layers * (4 + 20 / 128) / 8 + table * 2 + 3_584 * 2)


def test_the_vllm_v0_engine_adds_its_step_overhead_per_layer():
    current = replica(engine="vllm")
    v0 = replica(engine=engine_profile("vllm", "0.6.3"))

    assert engine_profile("vllm", "0.6.3").name == "vllm-v0"
    assert engine_profile("vllm", "0.8.5").name == "vllm"
    assert v0.kernel_overhead_ms == pytest.approx(32 * VLLM_V0_STEP_OVERHEAD_S_PER_LAYER * 1e3)
    assert current.kernel_overhead_ms == pytest.approx(32 * 10 * 3e-6 * 1e3)  # aiconfigurator
    assert v0.tpot_ms - current.tpot_ms == pytest.approx(
        32 * (VLLM_V0_STEP_OVERHEAD_S_PER_LAYER - 30e-6) * 1e3
    )


def test_ttft_at_batch_one_is_the_compute_bound_prefill():
    linear = 8_030_261_248 - 128_256 * 4_096  # the embedding lookup is not a multiply
    flops = 2 * linear * 1000 + 2 * 32 * 4096 * 1000**2
    seconds = flops / (989e12 * COMPUTE_EFFICIENCY) + 32 * 10 * 3e-6

    estimate = replica()

    assert prefill_flops(model=model_preset("llama3_8b"), input_tokens=1000) == flops
    assert estimate.ttft_ms == pytest.approx(seconds * 1e3)


def test_prompt_cache_hits_skip_their_prefill_flops():
    model = model_preset("llama3_8b")
    linear = 8_030_261_248 - 128_256 * 4_096

    flops = prefill_flops(model=model, input_tokens=1000, cached_tokens=600)

    assert flops == 2 * linear * 400 + 2 * 32 * 4096 * (1000**2 - 600**2)


def test_all_reduce_costs_the_measured_nvlink_share_or_latency_plus_ring_traffic():
    message = 8192.0

    nvlink = allreduce_s(message_bytes=message, tp=2, gpu=gpu_spec("h100_sxm"))
    pcie = allreduce_s(message_bytes=message, tp=2, gpu=gpu_spec("l40s"))

    # Two Hopper SXM cards, 8 KiB: between the measured 4 KiB (0.003225 of 450 GB/s) and
    # 16 KiB (0.01283) points, halfway on the log axis: sqrt(0.003225 x 0.01283) = 0.0064326;
    # 2 x 1/2 x 8192 / (450e9 x 0.0064326) = 2.830 us (the tables' H100 point: 2.7 us).
    assert nvlink == pytest.approx(8192 / (450e9 * 0.0064326), rel=1e-4)
    # PCIe Gen4 x16 is 32 GB/s a direction; an all-reduce's bus bandwidth reaches half of it.
    assert pcie == pytest.approx(50e-6 + 2 * (1 / 2) * message / 16e9)
    assert allreduce_s(message_bytes=message, tp=1, gpu=gpu_spec("l40s")) == 0


def test_pcie_tp_pays_a_larger_all_reduce_penalty_than_nvlink():
    pcie = replica("llama3_8b", "l40s", tp=2, batch=16)
    nvlink = replica("llama3_8b", "h100_sxm", tp=2, batch=16)

    assert pcie.allreduce_over == "PCIe"
    assert nvlink.allreduce_over == "NVLink"
    assert pcie.allreduce_ms > 4 * nvlink.allreduce_ms


def test_moe_reads_the_active_experts_for_one_token_and_all_for_many():
    mixtral = model_preset("mixtral_8x7b")

    one = weight_bytes_read(model=mixtral, weight_bits=16, tokens=1)
    many = weight_bytes_read(model=mixtral, weight_bits=16, tokens=10_000)

    assert one == pytest.approx(mixtral.active_params * 2)
    assert many == pytest.approx(mixtral.total_params * 2)


def test_fp8_on_a100_runs_as_weight_only_with_a_warning():
    runs, warnings = precision_on_gpu(precision_parse("FP8"), gpu_spec("a100_80g_sxm"))

    assert (runs.name, runs.weight_bits, runs.compute, runs.weight_only) == (
        "FP8-WO",
        8,
        "fp16",
        True,
    )
    assert [warning.code for warning in warnings] == ["fp8_weight_only"]


def test_fp8_on_hopper_is_native_and_on_h20_is_flagged_unknown():
    native, none = precision_on_gpu(precision_parse("FP8"), gpu_spec("h100_sxm"))
    kept, unknown = precision_on_gpu(precision_parse("FP8"), gpu_spec("h20"))

    assert (native.name, none) == ("FP8", [])
    assert kept.name == "FP8"
    assert [warning.code for warning in unknown] == ["fp8_support_unknown"]


def test_a_card_without_tensor_figures_has_no_ttft():
    estimate = replica("llama3_8b", "l20")

    assert estimate.ttft_ms is None
    assert estimate.prefill_ms is None
    assert estimate.output_tok_s_total > 0


def test_a_card_without_bandwidth_cannot_be_modelled():
    with pytest.raises(SizingInputError) as error:
        replica("llama3_8b", "h800_pcie")

    assert error.value.data["reason"] == "bandwidth_unknown"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"input_tokens": 0}, "input_len"),
        ({"output_tokens": -1}, "output_len"),
        ({"batch": 0}, "concurrency"),
        ({"batch": float("nan")}, "concurrency"),
    ],
)
def test_bad_sizes_are_refused(overrides, field):
    with pytest.raises(SizingInputError) as error:
        replica(**overrides)

    assert error.value.data["field"] == field


def test_a_low_request_rate_is_served_in_full():
    estimate, saturated = batch_for_request_rate(
        requests_per_s=1.0,
        max_batch=256,
        model=model_preset("llama3_8b"),
        precision=FP16,
        gpu=gpu_spec("h100_sxm"),
        tp=1,
        kv_bits=16,
        input_tokens=200,
        output_tokens=200,
    )
    # A request stays for its prefill share and 200 decode steps: 200 x the per-token cycle.
    in_system_s = 200 * estimate.step_ms / 1e3

    assert not saturated
    assert estimate.requests_per_s == pytest.approx(1.0, rel=1e-3)
    assert estimate.batch == pytest.approx(1.0 * in_system_s, rel=1e-3)  # Little's law
    assert estimate.step_ms > estimate.tpot_ms  # the lone prefill share is not in TPOT


def test_a_request_rate_above_capacity_is_flagged_saturated():
    estimate, saturated = batch_for_request_rate(
        requests_per_s=10_000.0,
        max_batch=256,
        model=model_preset("llama3_8b"),
        precision=FP16,
        gpu=gpu_spec("h100_sxm"),
        tp=1,
        kv_bits=16,
        input_tokens=200,
        output_tokens=200,
    )

    assert saturated
    assert estimate.batch == 256
    assert estimate.requests_per_s < 10_000


def test_batch_for_targets_is_the_largest_batch_within_the_tpot_target():
    arguments = {
        "model": model_preset("llama3_8b"),
        "precision": FP16,
        "gpu": gpu_spec("h100_sxm"),
        "tp": 1,
        "kv_bits": 16,
        "input_tokens": 1000,
        "output_tokens": 1000,
    }

    best = batch_for_targets(max_batch=400, tpot_target_ms=20, ttft_target_ms=None, **arguments)
    next_one = replica_throughput(batch=best.batch + 1, **arguments)

    assert best.tpot_ms <= 20 < next_one.tpot_ms
    assert (
        batch_for_targets(max_batch=400, tpot_target_ms=1, ttft_target_ms=None, **arguments) is None
    )


def test_gpu_specs_from_the_catalogue():
    specs = gpu_specs_from_catalogue()

    assert specs["h100_sxm"].memory_bytes == round(79.65 * 1024**3)
    assert specs["a100_80g_sxm"].fp8_native is False
    assert specs["h100_sxm"].fp8_native is True
    assert specs["h20"].fp8_native is None
    assert specs["h100_pcie"].pcie_gbps == 64
    assert specs["l40s"].pcie_gbps == 32
    assert not specs["rtx4090"].has_nvlink
    assert specs["h100_sxm"].peer_bandwidth_bytes_per_s(8) == 450e9
    assert specs["h100_nvl"].nvlink_spans(2)
    assert not specs["h100_nvl"].nvlink_spans(4)  # NVLink bridges join pairs only
    assert specs["h100_nvl"].peer_bandwidth_bytes_per_s(4) == 64e9


@settings(max_examples=100, deadline=None)
@given(
    model_id=st.sampled_from(["llama3_8b", "llama3_70b", "mixtral_8x7b", "qwen2_5_7b"]),
    gpu=st.sampled_from(["h100_sxm", "l40s", "a100_80g_pcie"]),
    tp=st.sampled_from([1, 2, 4]),
    batches=st.lists(st.integers(min_value=1, max_value=2_048), min_size=2, max_size=2),
    input_tokens=st.integers(min_value=1, max_value=16_000),
    output_tokens=st.integers(min_value=1, max_value=4_000),
)
def test_tpot_grows_and_throughput_never_falls_with_the_batch(
    model_id, gpu, tp, batches, input_tokens, output_tokens
):
    few, many = sorted(batches)
    common = {
        "model_id": model_id,
        "gpu": gpu,
        "tp": tp,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
    }

    small, large = replica(batch=few, **common), replica(batch=many, **common)

    assert 0 < small.tpot_ms <= large.tpot_ms
    assert 0 < small.output_tok_s_total <= large.output_tok_s_total * (1 + 1e-9)


def test_fp8_prefill_runs_its_linears_at_the_fp8_rate_and_attention_at_16_bit():
    # Llama-3-8B FP8 on H100 SXM, 1,000-token prompt: linears at 1,979 TFLOPS, attention over
    # 16-bit activations at 989 TFLOPS, each times the compute efficiency.
    linear = 2 * (8_030_261_248 - 128_256 * 4_096) * 1000
    attention = 2 * 32 * 4096 * 1000**2
    seconds = linear / (1979e12 * COMPUTE_EFFICIENCY) + attention / (989e12 * COMPUTE_EFFICIENCY)

    estimate = replica(precision=precision_parse("FP8"), kv_bits=8)

    assert estimate.ttft_ms == pytest.approx((seconds + 32 * 10 * 3e-6) * 1e3)


def test_the_gemm_roofline_is_a_hard_max_unless_a_profile_overlaps_less():
    # Stream 3 ms, multiply 4 ms: the roofline's 4 ms; p = 2: sqrt(9 + 16) = 5 ms; p = 1 (no
    # overlap): 7 ms. The shipped profiles hold the fitted exponents (engines.py); SGLang,
    # without published rows, the hard max.
    assert overlapped_s(0.003, 0.004, None) == 0.004
    assert overlapped_s(0.003, 0.004, 2.0) == pytest.approx(0.005)
    assert overlapped_s(0.003, 0.004, 1.0) == pytest.approx(0.007)
    assert overlapped_s(0.003, 0.0, 1.5) == 0.003
    exponents = {name: profile.gemm_overlap_exponent for name, profile in ENGINE_PROFILES.items()}
    assert exponents == {
        "vllm": 1.0,
        "vllm-v0": 1.0,
        "sglang": None,
        "tensorrt-llm": 1.5,
        "tensorrt-llm-pytorch": 1.5,
    }


def test_moe_glue_bytes_by_hand():
    # Qwen3-30B-A3B: 48 MoE layers, h 2,048, I 768, k 8; NVFP4 activations 4.5 bits = 0.5625 B.
    # 1,000 tokens = 8,000 slots. Per slot (6 + 2 x 0.5625) h, per token 2 h; (8 + 2 x 0.5625) I.
    qwen = model_preset("qwen3_30b_a3b")
    hidden, intermediate = moe_glue_bytes(
        model=qwen, precision=precision_parse("NVFP4"), tokens=1000
    )
    assert hidden == pytest.approx(48 * (8000 * 7.125 + 1000 * 2) * 2048)  # 5.80 GB
    assert intermediate == pytest.approx(48 * 8000 * 9.125 * 768)  # 2.69 GB
    # Mixtral-8x7B at 16 bit (a = 2), one token, k 2: 32 x (2 x 10 + 2) x 4,096 and
    # 32 x 2 x 12 x 14,336 bytes.
    mixtral = model_preset("mixtral_8x7b")
    assert moe_glue_bytes(model=mixtral, precision=FP16, tokens=1) == (
        pytest.approx(32 * 22 * 4096),
        pytest.approx(32 * 2 * 12 * 14336),
    )
    assert moe_glue_bytes(model=model_preset("llama3_8b"), precision=FP16, tokens=1000) == (0, 0)


def test_moe_glue_splits_the_intermediate_over_tp_and_everything_over_expert_parallel():
    qwen = model_preset("qwen3_30b_a3b")
    nvfp4 = precision_parse("NVFP4")
    hidden, intermediate = moe_glue_bytes(model=qwen, precision=nvfp4, tokens=1000)
    common = {"model": qwen, "precision": nvfp4, "tokens": 1000, "tp": 2, "card_bandwidth": 6.4e12}
    assert moe_glue_s(dp_attention=1, **common) == pytest.approx(
        (hidden + intermediate / 2) / 6.4e12
    )
    assert moe_glue_s(dp_attention=2, **common) == pytest.approx(
        (hidden + intermediate) / 2 / 6.4e12
    )


def test_gathered_moe_glue_writes_every_tokens_output_row_on_every_card():
    """Attention DP with the all-gather exchange: each card's finalize writes a 16-bit row for
    every token of the pass, 48 layers x 1,000 tokens x 2 B x 2,048 = 196,608,000 B on each of
    the 2 cards; the slots and the intermediate part stay split over them."""
    qwen = model_preset("qwen3_30b_a3b")
    nvfp4 = precision_parse("NVFP4")
    common = {"model": qwen, "precision": nvfp4, "tokens": 1000, "tp": 2, "card_bandwidth": 6.4e12}
    slot_part = 48 * 8000 * 7.125 * 2048  # the hidden bytes of the slots, split over EP
    intermediate = 48 * 8000 * 9.125 * 768
    per_token = 48 * 1000 * 2 * 2048
    assert per_token == 196_608_000
    assert moe_glue_s(dp_attention=2, gathered=True, **common) == pytest.approx(
        ((slot_part + intermediate) / 2 + per_token) / 6.4e12
    )
    # Without the gather each card writes only its own half of the token rows.
    assert moe_glue_s(dp_attention=2, **common) == pytest.approx(
        (slot_part + intermediate + per_token) / 2 / 6.4e12
    )


def test_a_moe_step_streams_its_routed_rows_and_a_dense_step_does_not():
    qwen = replica(
        "qwen3_30b_a3b", gpu="b200", batch=64, precision=precision_parse("NVFP4"), kv_bits=8
    )
    hidden, intermediate = moe_glue_bytes(
        model=model_preset("qwen3_30b_a3b"),
        precision=precision_parse("NVFP4"),
        tokens=qwen.tokens_per_step,
    )
    # B200: 8,000 GB/s x the bandwidth efficiency; x 1.112, the one-card routing skew of a
    # router of exponent 1.2 (pools/sizing/routing.py).
    expected_ms = 1.112 * (hidden + intermediate) / (8000e9 * BANDWIDTH_EFFICIENCY) * 1e3
    assert qwen.moe_glue_ms == pytest.approx(expected_ms)
    assert qwen.gemm_ms > qwen.moe_glue_ms > 0
    assert replica(batch=64).moe_glue_ms == 0


def test_prompt_attention_mixed_into_a_step_adds_to_the_decode_attention():
    # Llama-3-8B on H100 SXM, 64 sequences of 1,000 in / 1,000 out: each step carries 64 x
    # share prompt tokens. Decode attention reads 64 x 1,500 tokens x 131,072 B of KV (the
    # bandwidth side of its max), and the prompts' context attention (2 x 32 x 4,096 x 1,000^2
    # FLOPs per prompt, 64 / 1,000 prompts per step x share) runs after it at 989 TFLOPS x 0.5.
    estimate = replica(batch=64)
    share = (estimate.tokens_per_step - 64) / 64
    kv = 64 * 1500 * 131_072 / (3350e9 * BANDWIDTH_EFFICIENCY)
    decode_flops = 4 * 32 * 4096 * 64 * 1500 / (989e12 * COMPUTE_EFFICIENCY)
    prompts = 64 * share / 1000 * 2 * 32 * 4096 * 1000**2 / (989e12 * COMPUTE_EFFICIENCY)

    assert share > 0.9  # the prompts ride in the decode steps
    assert kv > decode_flops
    assert estimate.attention_ms == pytest.approx((kv + prompts) * 1e3)


def test_the_pytorch_backend_step_lasts_at_least_its_host_time_per_sequence():
    """TensorRT-LLM pull request 10273: 45.11 ms of host time per step at 1,536 sequences per
    rank on GB200 (29.4 us each); on x86 that x 13.48 / 37.08 (TransformerEngine issue 2053).
    The host prepares the next step during this one: with the overlap scheduler's ideal a step
    is max(GPU, host); the shipped profile hides it only partly, (GPU^1.5 + host^1.5)^(1/1.5)."""
    shipped = replace(engine_profile("tensorrt-llm-pytorch"), gemm_overlap_exponent=None)
    pytorch = replace(shipped, host_overlap_exponent=None)
    common = {"model_id": "qwen3_30b_a3b", "precision": precision_parse("NVFP4"), "kv_bits": 8}
    grace = replica(gpu="gb200", batch=4096, engine=pytorch, **common)
    grace_host_s = 4096 * 45.11e-3 / 1536  # 120.3 ms
    assert grace.host_ms == pytest.approx(grace_host_s * 1e3)
    assert grace.tpot_ms == pytest.approx(grace_host_s * 1e3)  # host-bound decode step
    # 34,050 tok/s, less the 1 / 4,096 share of prefill that runs alone (a few microseconds).
    assert grace.output_tok_s_total == pytest.approx(1536 / 45.11e-3, rel=1e-4)

    x86 = replica(gpu="b200", batch=4096, engine=pytorch, **common)
    assert x86.host_ms == pytest.approx(4096 * 45.11e-3 / 1536 * 13.48 / 37.08 * 1e3)  # 43.7 ms
    # The C++ executor's profile charges no host time: the same step without it.
    without_host = replace(pytorch, host_s_per_sequence=0.0)
    cpp = replica(gpu="b200", batch=4096, engine=without_host, **common)
    assert cpp.host_ms == 0
    assert x86.tpot_ms == pytest.approx(max(cpp.tpot_ms, x86.host_ms))
    # Host time that does not hide behind the GPU's: added (p = 1), or (GPU^2 + host^2)^(1/2).
    added = replica(
        gpu="b200", batch=4096, engine=replace(pytorch, host_overlap_exponent=1.0), **common
    )
    assert added.tpot_ms == pytest.approx(cpp.tpot_ms + x86.host_ms)
    halfway = replica(
        gpu="b200", batch=4096, engine=replace(pytorch, host_overlap_exponent=2.0), **common
    )
    assert halfway.tpot_ms == pytest.approx((cpp.tpot_ms**2 + x86.host_ms**2) ** 0.5)
    partly = replica(gpu="b200", batch=4096, engine=shipped, **common)
    assert partly.tpot_ms == pytest.approx((cpp.tpot_ms**1.5 + x86.host_ms**1.5) ** (1 / 1.5))


def test_the_pytorch_backend_is_named_by_its_aliases():
    assert engine_profile("trtllm-pytorch").name == "tensorrt-llm-pytorch"
    assert engine_profile("TRT-LLM pytorch").name == "tensorrt-llm-pytorch"
    assert ENGINE_PROFILES["tensorrt-llm"].host_s_per_sequence == 0.0
    assert ENGINE_PROFILES["vllm"].host_s_per_sequence_grace == 0.0


def test_nvfp4_routed_experts_multiply_at_the_published_moe_kernel_share_of_the_fp4_peak():
    # 1,262 TFLOPS (SGLang's NVFP4 MoE layer on one B200, Hugging Face blog "TFLOPS Gap") over
    # the B200's 9,000 dense FP4 TFLOPS; the dense layers keep 9,000 x 0.5 = 4,500 TFLOPS.
    b200 = gpu_spec("b200")
    qwen = model_preset("qwen3_30b_a3b")
    nvfp4 = precision_parse("NVFP4")
    assert routed_expert_flops_rate(
        model=qwen, precision=nvfp4, gpu=b200, tp=1, flops_rate=4500e12
    ) == pytest.approx(1262e12)
    assert routed_expert_flops_rate(
        model=qwen, precision=nvfp4, gpu=b200, tp=8, flops_rate=8 * 4500e12
    ) == pytest.approx(8 * 1262e12)
    # Below the share already, a dense model, or FP8: the rate passed in.
    assert routed_expert_flops_rate(
        model=qwen, precision=nvfp4, gpu=b200, tp=1, flops_rate=1000e12
    ) == pytest.approx(1000e12)
    llama = model_preset("llama3_8b")
    assert routed_expert_flops_rate(
        model=llama, precision=nvfp4, gpu=b200, tp=1, flops_rate=4500e12
    ) == pytest.approx(4500e12)
    fp8 = precision_parse("FP8")
    assert routed_expert_flops_rate(
        model=qwen, precision=fp8, gpu=b200, tp=1, flops_rate=2250e12
    ) == pytest.approx(2250e12)


def test_a_compute_bound_nvfp4_moe_prefill_runs_its_routed_experts_at_the_moe_kernel_rate():
    # Qwen3-30B-A3B NVFP4 on one B200, a lone 4,000-token prompt. Routed experts: 48 layers x 8
    # experts x 3 x 2,048 x 768 = 1,811,939,328 parameters a token; the other linears: 3,353,020,416
    # active - 151,936 x 2,048 embedding - the routed = 1,229,918,720. Attention: 2 x 48 layers x
    # 32 heads x 128 x 4,000^2 FLOPs at the 16-bit rate (2,250 TFLOPS x 0.5). The other linears
    # at the published dense NVFP4 GEMM rate, 3,039 TFLOPS (vLLM pull request 20646). The
    # routed multiplies and their activation traffic x 1.112, the one-card routing skew of a
    # router of exponent 1.2 (pools/sizing/routing.py).
    tokens = 4000
    routed = 48 * 8 * 3 * 2048 * 768
    assert routed == 1_811_939_328
    other = 3_353_020_416 - 151_936 * 2048 - routed
    compute_s = (
        2 * other * tokens / 3039e12
        + 2 * routed * tokens * 1.112 / 1262e12
        + 2 * 48 * 32 * 128 * tokens**2 / (2250e12 * COMPUTE_EFFICIENCY)
    )
    nvfp4 = precision_parse("NVFP4")
    qwen = model_preset("qwen3_30b_a3b")
    estimate = replica("qwen3_30b_a3b", gpu="b200", precision=nvfp4, kv_bits=8, input_tokens=tokens)
    glue_s = 1.112 * moe_glue_s(
        model=qwen,
        precision=nvfp4,
        tokens=tokens,
        tp=1,
        dp_attention=1,
        card_bandwidth=8000e9 * BANDWIDTH_EFFICIENCY,
        gathered=False,
    )
    # The multiplies outlast the weight stream (30.5 B weights at 4.5 bits: ~17 GB, of which
    # the 16.3 GB of experts stream at the NVFP4 MoE share: 5.1 ms).
    assert compute_s > 17.2e9 / (8000e9 * 0.397)
    kernel_s = 48 * HARD_MAX.step_overhead_s_per_layer
    assert estimate.ttft_ms == pytest.approx((compute_s + glue_s + kernel_s) * 1e3)
    assert linear_compute_s(
        model=qwen, tokens=tokens, flops_rate=4500e12, routed_rate=1262e12
    ) == pytest.approx(2 * other * tokens / 4500e12 + 2 * routed * tokens / 1262e12)


def test_fp4_linear_layers_multiply_at_the_published_dense_nvfp4_gemm_share_of_the_peak():
    # 3,039 TFLOPS (vLLM's NVFP4 CUTLASS GEMM with activation quantisation, 16,384 rows) of the
    # B200's 9,000: below the 0.5 efficiency, so it binds; FP8 keeps 4,500 x 0.5.
    nvfp4, fp8 = precision_parse("NVFP4"), precision_parse("FP8")
    b200 = gpu_spec("b200")

    def rate(precision, tflops, tp, efficiency, gpu=b200):
        return linear_flops_rate(
            precision=precision, gpu=gpu, tflops=tflops, tp=tp, efficiency=efficiency
        )

    assert rate(nvfp4, 9000, 1, 0.5) == pytest.approx(3039e12)
    assert rate(nvfp4, 9000, 4, 0.3) == pytest.approx(4 * 9000e12 * 0.3)
    assert rate(fp8, 4500, 2, 0.5) == pytest.approx(2 * 2250e12)
    assert rate(nvfp4, None, 1, 0.5) is None
    # An RTX PRO 6000 (SM120) reaches 0.624 of its 2,015.2 TFLOPS (aiconfigurator's tables):
    # above 0.5, so the efficiency binds - 2,015.2 x 0.5 = 1,007.6 TFLOPS, not 2,015.2 x 0.338.
    rtx = gpu_spec("rtx_pro_6000_server")
    assert rate(nvfp4, 2015.2, 1, 0.5, rtx) == pytest.approx(1007.6e12)
    assert rate(nvfp4, 2015.2, 1, 0.7, rtx) == pytest.approx(2015.2e12 * 0.624)


def test_a_compute_bound_dense_nvfp4_prefill_runs_at_the_dense_fp4_gemm_rate():
    # Llama-3-8B NVFP4 on one B200, a lone 8,000-token prompt: linears 2 x (8,030,261,248 -
    # 128,256 x 4,096) x 8,000 at 3,039 TFLOPS, attention 2 x 32 x 4,096 x 8,000^2 at 2,250 x 0.5.
    tokens = 8000
    seconds = 2 * (8_030_261_248 - 128_256 * 4_096) * tokens / 3039e12 + (
        2 * 32 * 4096 * tokens**2 / (2250e12 * COMPUTE_EFFICIENCY)
    )
    estimate = replica(
        gpu="b200", precision=precision_parse("NVFP4"), kv_bits=8, input_tokens=tokens
    )
    assert estimate.ttft_ms == pytest.approx((seconds + 32 * 10 * 3e-6) * 1e3)


def test_fp4_compute_shares_name_the_published_kernel_rates_the_run_multiplies_at():
    """NVFP4 at the engines' 0.5: linear layers at 3,039 / 9,000 = 0.33767 of the FP4 peak (vLLM
    PR 20646), a mixture of experts' routed experts at 1,262 / 9,000 = 0.14022 (HF "TFLOPS Gap"
    blog); a dense model has no routed share; FP8 keeps the engine's share everywhere (None)."""
    qwen_moe, dense = model_preset("qwen3_30b_a3b"), model_preset("llama3_70b")
    nvfp4, mxfp4 = precision_parse("NVFP4"), precision_parse("MXFP4")
    b200, gb200, h100 = gpu_spec("b200"), gpu_spec("gb200"), gpu_spec("h100_sxm")

    def shares(model, precision, efficiency, gpu=b200):
        return fp4_compute_shares(model=model, precision=precision, gpu=gpu, efficiency=efficiency)

    linear, routed = shares(qwen_moe, nvfp4, 0.5)
    assert linear == pytest.approx(0.337667, abs=1e-6)
    assert routed == pytest.approx(0.140222, abs=1e-6)
    assert shares(qwen_moe, nvfp4, 0.5, gb200) == (linear, routed)  # the same SM100 kernels
    assert shares(dense, mxfp4, 0.5) == (pytest.approx(0.337667, abs=1e-6), None)
    # An efficiency below both caps is the rate used for both.
    assert shares(qwen_moe, nvfp4, 0.1) == (0.1, 0.1)
    fp8 = precision_parse("FP8")
    assert shares(qwen_moe, fp8, 0.5) == (None, None)
    assert shares(qwen_moe, nvfp4, 0.5, h100) == (None, None)  # no FP4 tensor cores
    # SM120 (RTX PRO 6000, RTX 5090): dense 0.624 (above 0.5, so 0.5), routed 0.356.
    assert shares(qwen_moe, nvfp4, 0.5, gpu_spec("rtx_pro_6000_server")) == (0.5, 0.356)
    assert shares(qwen_moe, nvfp4, 0.5, gpu_spec("rtx5090")) == (0.5, 0.356)


def test_nvfp4_routed_experts_stream_at_the_published_moe_kernel_share_of_the_bandwidth():
    """Qwen3-30B-A3B NVFP4 on one B200 (8,000 GB/s), 4,096 tokens touch every expert: 48 MoE
    layers x 128 experts x 3 x 2,048 x 768 weights at 4.5 bits = 16,307,453,952 B, streamed at
    0.397 of the peak (aiconfigurator's TensorRT-LLM MoE op tables): 5.1346 ms, not the
    2.5480 ms of the other weights' 0.8. FP8, a dense model, or a card without FP4 tensor
    cores: nothing streams at the NVFP4 share."""
    qwen, b200 = model_preset("qwen3_30b_a3b"), gpu_spec("b200")
    nvfp4 = precision_parse("NVFP4")
    experts = 48 * 128 * 3 * 2048 * 768 * 4.5 / 8
    assert experts == 16_307_453_952
    routed = routed_fp4_stream_bytes(model=qwen, precision=nvfp4, gpu=b200, tokens=4096)
    assert routed == pytest.approx(experts, rel=1e-12)
    assert routed == routed_expert_bytes(model=qwen, precision=nvfp4, tokens=4096)
    seconds = weight_stream_s(
        weight_bytes=experts, routed_fp4_bytes=routed, bandwidth=8000e9, gpu=b200
    )
    assert seconds == pytest.approx(5.13459e-3, rel=1e-5)
    # The rest of the bytes keep BANDWIDTH_EFFICIENCY: 1e9 more bytes add 1e9 / 6.4e12 s.
    more = weight_stream_s(
        weight_bytes=experts + 1e9, routed_fp4_bytes=routed, bandwidth=8000e9, gpu=b200
    )
    assert more - seconds == pytest.approx(1e9 / 6.4e12)
    # An RTX PRO 6000's kernels stream them at 0.832 of its 1,597 GB/s (aiconfigurator), above
    # the 0.8 of the other weights: at 0.8 like the rest, 16,307,453,952 / 1.2776e12 = 12.764 ms.
    rtx = gpu_spec("rtx_pro_6000_server")
    assert weight_stream_s(
        weight_bytes=experts, routed_fp4_bytes=routed, bandwidth=1597e9, gpu=rtx
    ) == pytest.approx(12.7642e-3, rel=1e-4)

    fp8 = precision_parse("FP8")
    assert routed_fp4_stream_bytes(model=qwen, precision=fp8, gpu=b200, tokens=4096) == 0
    dense = model_preset("llama3_70b")
    assert routed_fp4_stream_bytes(model=dense, precision=nvfp4, gpu=b200, tokens=4096) == 0
    h100 = gpu_spec("h100_sxm")
    assert routed_fp4_stream_bytes(model=qwen, precision=nvfp4, gpu=h100, tokens=4096) == 0


def test_a_weight_bound_nvfp4_moe_step_streams_its_experts_at_the_moe_kernel_share():
    """Llama 4 Scout NVFP4 on one B200, 8 sequences of 128 / 128: a step of a few dozen tokens
    multiplies far less than it streams, so under the hard roofline its GEMM time less the MoE
    glue is the weight stream alone: the NVFP4 experts its tokens touch at 0.397 of 8,000 GB/s
    plus every other weight byte at 0.8."""
    nvfp4 = precision_parse("NVFP4")
    scout = model_preset("llama4_scout")
    estimate = replica(
        "llama4_scout",
        gpu="b200",
        precision=nvfp4,
        kv_bits=8,
        batch=8,
        input_tokens=128,
        output_tokens=128,
    )
    routed = routed_expert_bytes(model=scout, precision=nvfp4, tokens=estimate.tokens_per_step)
    whole = decode_weight_bytes(model=scout, precision=nvfp4, tokens=estimate.tokens_per_step)
    assert estimate.weight_bytes_read_per_step == pytest.approx(whole)
    stream_ms = (
        (whole - routed) / (8000e9 * BANDWIDTH_EFFICIENCY) + routed / (8000e9 * 0.397)
    ) * 1e3
    assert estimate.gemm_ms - estimate.moe_glue_ms == pytest.approx(stream_ms)


def test_latent_attention_decodes_in_its_absorbed_form():
    # DeepSeek-V3: 61 layers x 128 heads, each attending to the 512-value latent plus the 64-value
    # rotary key (QK^T over 576 values) and reading the latent back (PV over 512):
    # 2 x 61 x 128 x (512 + 64 + 512) = 16,990,208 FLOPs per context token; the standard form
    # with head_dim 192 would be 4 x 61 x 128 x 192 = 5,996,544.
    assert decode_attention_flops_per_context_token(model_preset("deepseek_v3")) == 16_990_208
    # Grouped-query attention keeps the standard form: Llama-3-8B 4 x 32 x 32 x 128 = 524,288.
    assert decode_attention_flops_per_context_token(model_preset("llama3_8b")) == 524_288


def test_latent_attention_against_an_fp8_cache_multiplies_in_fp8_on_blackwell_only():
    deepseek, llama = model_preset("deepseek_v3"), model_preset("llama3_8b")
    b200, h200 = gpu_spec("b200"), gpu_spec("h200_sxm")
    bf16_rate = 2250e12 * 0.55
    # One B200, FP8 cache: 4,500 FP8 TFLOPS x 0.55 = 2.475e15 FLOP/s.
    assert decode_attention_rate(
        model=deepseek, gpu=b200, kv_bits=8, tp=1, efficiency=0.55, rate=bf16_rate
    ) == pytest.approx(2.475e15)
    # A 16-bit cache, a Hopper card, or a model without latent attention: the 16-bit rate given.
    assert decode_attention_rate(
        model=deepseek, gpu=b200, kv_bits=16, tp=1, efficiency=0.55, rate=bf16_rate
    ) == pytest.approx(bf16_rate)
    assert decode_attention_rate(
        model=deepseek, gpu=h200, kv_bits=8, tp=8, efficiency=0.55, rate=8 * 989e12 * 0.55
    ) == pytest.approx(8 * 989e12 * 0.55)
    assert decode_attention_rate(
        model=llama, gpu=b200, kv_bits=8, tp=1, efficiency=0.55, rate=bf16_rate
    ) == pytest.approx(bf16_rate)


def test_a_large_deepseek_batch_pays_the_absorbed_attention_flops():
    # DeepSeek-V3 FP8 on 8 H200s, 1,024 sequences, 1,000/1,000 tokens: decode attention over a
    # mean context of 1,000 + 500 tokens. Absorbed: 16,990,208 x 1,024 x 1,500 = 2.6097e13 FLOPs
    # at 8 x 989 TFLOPS x 0.5 (BF16 on Hopper) = 6.597 ms, above the FP8 latent read (1,024 x
    # 1,500 x 61 x 576 B at 8 x 4.8 TB/s x 0.8 = 1.757 ms); the standard form would give 2.328 ms.
    # The prompts' own attention riding in the step comes on top.
    profile = replace(ENGINE_PROFILES["vllm"], gemm_overlap_exponent=None)
    estimate = replica(
        "deepseek_v3",
        gpu="h200_sxm",
        tp=8,
        batch=1024,
        precision=precision_parse("FP8"),
        kv_bits=8,
        engine=profile,
        input_tokens=1000,
        output_tokens=1000,
    )
    assert estimate.attention_ms >= 6.5968


def test_block_scaled_fp8_experts_multiply_at_the_moe_kernel_share_on_hopper_only():
    # DeepSeek-V3 (FP8 checkpoint, 128 x 128 blocks) on 8 H200s at 0.55: min(8 x 1,979e12 x 0.55,
    # 8 x 1,979e12 x 0.2386) = 3.7775152e15 FLOP/s (aiconfigurator's H200 fp8_block MoE slope).
    deepseek, mixtral = model_preset("deepseek_v3"), model_preset("mixtral_8x7b")
    fp8 = precision_parse("FP8")
    h200, b200 = gpu_spec("h200_sxm"), gpu_spec("b200")
    rate = 8 * 1979e12 * 0.55
    assert fp8_block_routed(model=deepseek, precision=fp8, gpu=h200)
    assert routed_expert_flops_rate(
        model=deepseek, precision=fp8, gpu=h200, tp=8, flops_rate=rate
    ) == pytest.approx(3.7775152e15)
    # Per-tensor FP8 experts (Mixtral), Blackwell, or 16-bit: the rate passed in.
    assert routed_expert_flops_rate(
        model=mixtral, precision=fp8, gpu=h200, tp=8, flops_rate=rate
    ) == pytest.approx(rate)
    assert not fp8_block_routed(model=deepseek, precision=fp8, gpu=b200)
    assert not fp8_block_routed(model=deepseek, precision=precision_parse("BF16"), gpu=h200)


def test_each_blackwell_chip_family_has_its_own_fp4_kernel_shares():
    """Compute capability 10.x (B200, B300, GB200, GB300) takes the shares published for the
    B200; 12.0 (RTX PRO 6000 Server and Workstation, RTX 5090) the RTX PRO 6000's own, from
    aiconfigurator's tables of TensorRT-LLM's kernels on it (0.624 / 0.356 / 0.832); a card
    without FP4 tensor cores has none."""
    for slug in ("b200", "b300", "gb200", "gb300"):
        kernels = fp4_kernels(gpu_spec(slug))
        assert (kernels.dense_gemm, kernels.moe_gemm, kernels.moe_stream) == pytest.approx(
            (3039 / 9000, 1262 / 9000, 0.397)
        )
    for slug in ("rtx_pro_6000_server", "rtx_pro_6000_ws", "rtx5090"):
        kernels = fp4_kernels(gpu_spec(slug))
        assert (kernels.dense_gemm, kernels.moe_gemm, kernels.moe_stream) == (0.624, 0.356, 0.832)
    assert fp4_kernels(gpu_spec("h100_sxm")) is None
    assert fp4_kernels(gpu_spec("l40s")) is None


def test_when_every_prompt_runs_alone_the_others_prompts_fall_between_a_sequences_tokens():
    """Llama-3-8B, four H100, vLLM, 1,907 / 804 tokens: at 170 sequences the scheduler's faster
    choice runs every prompt alone (hypothesis found TPOT 8.1869 ms there against 8.1889 ms at
    101, mixed). A sequence's own prompt (1 / 170 of that prefill time) comes before its first
    token; the other 169 run between its tokens: TPOT = decode step + 169 / 170 x the prefill
    time per step."""
    common = {"model_id": "llama3_8b", "gpu": "h100_sxm", "tp": 4, "input_tokens": 1907}
    alone = replica(batch=170, output_tokens=804, **common)
    mixed = replica(batch=169, output_tokens=804, **common)

    assert alone.tokens_per_step == 170  # no prompt rides in the decode steps
    decode_ms = alone.step_ms - alone.serial_prefill_ms
    assert alone.tpot_ms == pytest.approx(decode_ms + alone.serial_prefill_ms * 169 / 170)
    assert mixed.tpot_ms < alone.tpot_ms
    assert mixed.tpot_ms == pytest.approx(mixed.step_ms - mixed.serial_prefill_ms)
