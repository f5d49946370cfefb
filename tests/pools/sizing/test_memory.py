"""Weights, KV cache, overhead, reserve, fit and the smallest TP degree, worked by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.sizing import SizingInputError
from pools.sizing.gpus import gpu_specs_from_catalogue
from pools.sizing.memory import (
    GIB,
    MIB,
    checkpoint_bytes,
    engine_overhead_bytes,
    kv_bytes_per_token,
    kv_cache_bits,
    kv_cache_bytes,
    kv_heads_per_gpu,
    kv_tokens_per_sequence,
    memory_estimate,
    precision_parse,
    reserve_bytes,
    tp_degrees,
    weights_bytes,
)
from pools.sizing.presets import model_preset, model_presets

FP16 = precision_parse("FP16")
H100_BYTES = round(79.65 * GIB)  # catalogue: 81,559 MiB from nvidia-smi = 79.65 GiB


def test_kv_cache_of_llama3_8b_2048_tokens_times_32_sequences_is_8_gib():
    by_hand = 2 * 32 * 8 * 128 * 2048 * 32 * 2

    per_token = kv_bytes_per_token(num_layers=32, num_kv_heads=8, head_dim=128, kv_bits=16)
    total = kv_cache_bytes(kv_bytes_per_token=per_token, tokens_per_sequence=2048, sequences=32)

    assert by_hand == 8_589_934_592
    assert per_token == 131_072
    assert total == by_hand == 8 * GIB


def test_kv_cache_of_8192_tokens_times_16_sequences_is_16_gib_not_the_seeds_32_gb():
    by_hand = 2 * 32 * 8 * 128 * 8192 * 16 * 2

    total = kv_cache_bytes(kv_bytes_per_token=131_072, tokens_per_sequence=8192, sequences=16)

    assert total == by_hand == 17_179_869_184 == 16 * GIB
    assert total / 1e9 == pytest.approx(17.18, abs=0.01)  # GB, not "about 32 GB"


def test_memory_estimate_reports_the_same_kv_for_the_preset():
    estimate = memory_estimate(
        model=model_preset("llama3_8b"),
        precision=FP16,
        kv_bits=16,
        gpu_memory_bytes=H100_BYTES,
        tp=1,
        context_tokens=2048,
        sequences=32,
    )

    assert estimate.kv_cache_bytes == 8_589_934_592
    assert estimate.kv_cache_bytes_per_gpu == 8_589_934_592
    assert estimate.weights_bytes == 8_030_261_248 * 2
    assert estimate.fits


@pytest.mark.parametrize(
    ("params", "bits", "expected"),
    [
        (7_000_000_000, 16, 14_000_000_000),  # 7B FP16: 14 GB
        (70_000_000_000, 16, 140_000_000_000),  # 70B FP16: 140 GB
        (70_000_000_000, 8, 70_000_000_000),
        (70_000_000_000, 4, 35_000_000_000),
        (3, 4, 2),  # rounded up to whole bytes
    ],
)
def test_weights_bytes_are_params_times_bits_over_eight(params, bits, expected):
    assert weights_bytes(params=params, weight_bits=bits) == expected


# Llama-3.1-8B (config.json): 8,030,261,248 parameters; embedding and untied head 2 x 128,256
# x 4,096 = 1,050,673,152 of them, kept 16 bit by every quantised checkpoint; the 6,979,588,096
# decoder-layer weights at the stored width with its scales.
LLAMA_8B_LAYERS = 8_030_261_248 - 2 * 128_256 * 4_096


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        ("FP16", 8_030_261_248 * 2),
        # 1 byte a layer weight, 2 an embedding / head weight
        ("FP8", LLAMA_8B_LAYERS + 1_050_673_152 * 2),
        # the same FP8 checkpoint when a card runs it weight-only: no group scales
        ("FP8-WO", LLAMA_8B_LAYERS + 1_050_673_152 * 2),
        # 4 bits + a 16-bit scale and a 4-bit zero point per 128 weights = 4.15625 bits
        ("INT4-AWQ", 3_626_114_128 + 1_050_673_152 * 2),
        # 4 bits + one 8-bit E4M3 scale per 16 = 4.5 bits
        ("NVFP4", 3_926_018_304 + 1_050_673_152 * 2),
        # 4 bits + one 8-bit E8M0 scale per 32 = 4.25 bits
        ("MXFP4", 3_707_906_176 + 1_050_673_152 * 2),
    ],
)
def test_a_checkpoint_keeps_embedding_and_head_16_bit_and_counts_its_scales(precision, expected):
    assert LLAMA_8B_LAYERS * 4.15625 / 8 == pytest.approx(3_626_114_128, abs=1)
    assert LLAMA_8B_LAYERS * 4.5 / 8 == 3_926_018_304
    assert LLAMA_8B_LAYERS * 4.25 / 8 == 3_707_906_176
    model = model_preset("llama3_8b")
    assert model.total_params == 8_030_261_248

    assert checkpoint_bytes(model, precision_parse(precision)) == expected


@pytest.mark.parametrize(
    ("text", "bits", "compute", "weight_only"),
    [
        ("FP16", 16, "fp16", False),
        ("bf16", 16, "bf16", False),
        ("FP8", 8, "fp8", False),
        ("INT8", 8, "int8", False),
        ("INT4", 4, "fp16", True),
        ("int4-awq", 4, "fp16", True),
        ("INT4_GPTQ", 4, "fp16", True),
        ("W8A16", 8, "fp16", True),
    ],
)
def test_precisions(text, bits, compute, weight_only):
    precision = precision_parse(text)

    assert (precision.weight_bits, precision.compute, precision.weight_only) == (
        bits,
        compute,
        weight_only,
    )


def test_unknown_precision_and_kv_dtype_are_refused():
    with pytest.raises(SizingInputError) as precision:
        precision_parse("FP3")
    with pytest.raises(SizingInputError) as kv:
        kv_cache_bits("FP2")

    assert precision.value.data["reason"] == "unknown_precision"
    assert kv.value.data["reason"] == "unknown_kv_cache_dtype"


def test_fp8_kv_halves_the_cache():
    assert kv_cache_bits("FP8") == 8
    assert kv_cache_bits(None) == kv_cache_bits("auto") == 16
    assert kv_bytes_per_token(num_layers=32, num_kv_heads=8, head_dim=128, kv_bits=8) == 65_536


@pytest.mark.parametrize(
    ("kv_heads", "tp", "per_gpu"), [(8, 1, 8), (8, 2, 4), (8, 8, 1), (4, 8, 1), (8, 16, 1)]
)
def test_kv_heads_are_split_by_tp_and_replicated_beyond_their_number(kv_heads, tp, per_gpu):
    assert kv_heads_per_gpu(num_kv_heads=kv_heads, tp=tp) == per_gpu


def test_sliding_window_caps_the_kv_per_sequence():
    mistral = model_preset("mistral_7b")

    assert kv_tokens_per_sequence(mistral, 8_000) == 4_096
    assert kv_tokens_per_sequence(mistral, 1_000) == 1_000
    assert kv_tokens_per_sequence(model_preset("llama3_8b"), 8_000) == 8_000


def test_tp_degrees_are_powers_of_two_up_to_the_node_that_divide_the_heads():
    assert tp_degrees(model=model_preset("llama3_70b"), max_tp=8) == [1, 2, 4, 8]
    assert tp_degrees(model=model_preset("llama3_70b"), max_tp=6) == [1, 2, 4]
    assert tp_degrees(model=model_preset("qwen2_5_7b"), max_tp=8) == [1, 2, 4]  # 28 heads


def test_overhead_and_reserve_rules():
    assert engine_overhead_bytes(tp=1) == 3 * GIB
    assert engine_overhead_bytes(tp=2) == 3 * GIB + 342 * MIB
    assert engine_overhead_bytes(tp=8) == 3 * GIB + 392 * MIB
    assert reserve_bytes(gpu_memory_bytes=80 * GIB) == 8 * GIB  # vLLM: 10 % of the card
    assert reserve_bytes(gpu_memory_bytes=4 * GIB) == GIB  # never below 1 GiB


def test_tensorrt_llm_reserves_a_tenth_of_the_free_memory():
    estimate = memory_estimate(
        model=model_preset("llama3_8b"),
        precision=FP16,
        kv_bits=16,
        gpu_memory_bytes=80 * GIB,
        tp=1,
        context_tokens=2048,
        sequences=None,
        engine="tensorrt-llm",
    )
    free = 80 * GIB - 16_060_522_496 - 3 * GIB

    assert estimate.reserve_bytes_per_gpu == int(free * 0.1)


def test_70b_fp16_fits_on_two_h100s_with_room_for_seven_sequences():
    model = model_preset("llama3_70b")
    weights_per_gpu = 70_553_706_496 * 2 // 2
    overhead = 3 * GIB + 342 * MIB
    reserve = int(H100_BYTES * 0.1)
    budget = H100_BYTES - weights_per_gpu - overhead - reserve
    per_sequence = 2 * 80 * 4 * 128 * 2 * (2048 + 128)  # 4 of 8 KV heads per card

    estimate = memory_estimate(
        model=model,
        precision=FP16,
        kv_bits=16,
        gpu_memory_bytes=H100_BYTES,
        tp=2,
        context_tokens=2048 + 128,
        sequences=None,
    )

    assert estimate.fits
    assert estimate.kv_budget_bytes_per_gpu == budget
    assert estimate.kv_bytes_per_sequence_per_gpu == per_sequence
    assert estimate.max_sequences == budget // per_sequence == 7
    assert estimate.kv_cache_bytes_per_gpu == 7 * per_sequence


def test_70b_fp16_does_not_fit_on_one_card():
    common = {
        "model": model_preset("llama3_70b"),
        "precision": FP16,
        "kv_bits": 16,
        "gpu_memory_bytes": H100_BYTES,
        "context_tokens": 2176,
        "sequences": None,
    }

    single = memory_estimate(tp=1, **common)

    assert not single.fits
    assert single.max_sequences == 0
    assert single.kv_budget_bytes_per_gpu == 0


def test_more_sequences_than_fit_is_reported_not_hidden():
    estimate = memory_estimate(
        model=model_preset("llama3_70b"),
        precision=FP16,
        kv_bits=16,
        gpu_memory_bytes=H100_BYTES,
        tp=2,
        context_tokens=2176,
        sequences=8,
    )

    assert not estimate.fits
    assert estimate.total_bytes_per_gpu > estimate.gpu_memory_bytes


@pytest.mark.parametrize(
    ("changes", "reason", "field"),
    [
        ({"context_tokens": 0}, "not_positive", "context_tokens"),
        ({"context_tokens": -5}, "not_positive", "context_tokens"),
        ({"sequences": 0}, "not_positive", "concurrency"),
        ({"tp": 0}, "not_positive", "tp"),
        ({"context_tokens": 131_073}, "context_too_long", "input_len"),
        ({"engine": "ollama"}, "unknown_engine", "engine"),
    ],
)
def test_bad_sizes_are_refused(changes, reason, field):
    arguments = {
        "model": model_preset("llama3_8b"),
        "precision": FP16,
        "kv_bits": 16,
        "gpu_memory_bytes": H100_BYTES,
        "tp": 1,
        "context_tokens": 4096,
        "sequences": 1,
    }
    arguments.update(changes)

    with pytest.raises(SizingInputError) as error:
        memory_estimate(**arguments)

    assert (error.value.data["reason"], error.value.data["field"]) == (reason, field)


PRESET_IDS = sorted(model_presets())


@settings(max_examples=150, deadline=None)
@given(
    model_id=st.sampled_from(PRESET_IDS),
    gpu_slug=st.sampled_from(["h200_sxm", "h100_sxm", "l40s", "rtx4090", "a100_40g_sxm"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    contexts=st.lists(st.integers(min_value=1, max_value=32_768), min_size=2, max_size=2),
    sequences=st.lists(st.integers(min_value=1, max_value=4_096), min_size=2, max_size=2),
    kv_bits=st.sampled_from([8, 16]),
)
def test_memory_is_monotone_in_context_and_concurrency(
    model_id, gpu_slug, tp, contexts, sequences, kv_bits
):
    model = model_presets()[model_id]
    gpu = gpu_specs_from_catalogue()[gpu_slug]
    small_context, large_context = sorted(contexts)
    few, many = sorted(sequences)
    if model.num_attention_heads % tp:
        tp = 1

    def estimate(context, count):
        return memory_estimate(
            model=model,
            precision=FP16,
            kv_bits=kv_bits,
            gpu_memory_bytes=gpu.memory_bytes,
            tp=tp,
            context_tokens=min(context, model.max_context_tokens),
            sequences=count,
        )

    small, large = estimate(small_context, few), estimate(large_context, many)

    assert 0 <= small.kv_cache_bytes <= large.kv_cache_bytes
    assert small.total_bytes_per_gpu <= large.total_bytes_per_gpu
    assert large.max_sequences <= small.max_sequences
    assert isinstance(large.max_sequences, int) and large.max_sequences >= 0
    assert not large.fits or small.fits
