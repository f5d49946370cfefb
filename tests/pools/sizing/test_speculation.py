"""Speculative decoding (seeds/000 §3.3; Leviathan, Kalman and Matias 2023), worked by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pools.sizing import SizingInputError
from pools.sizing.engines import ENGINE_PROFILES
from pools.sizing.gpus import gpu_spec, gpu_specs_from_catalogue
from pools.sizing.memory import precision_parse
from pools.sizing.plan import estimate_from_fields, estimate_replica, speculation_from_fields
from pools.sizing.presets import model_preset, model_presets
from pools.sizing.throughput import BANDWIDTH_EFFICIENCY, Speculation, replica_throughput

#: vLLM with the hard roofline and the 0.45 compute share, pinned so the hand sums below hold
#: whatever the shipped profile's fitted numbers are.
HARD_MAX = replace(ENGINE_PROFILES["vllm"], gemm_overlap_exponent=None, compute_efficiency=0.45)


@pytest.mark.parametrize(
    ("gamma", "alpha", "expected"),
    [
        # (1 - alpha^(gamma+1)) / (1 - alpha): 0.8^5 = 0.32768, 0.67232 / 0.2 = 3.3616
        (4, 0.8, 3.3616),
        (1, 0.5, 1.5),  # (1 - 0.25) / 0.5
        (3, 0.0, 1.0),  # nothing accepted: the target's own token only
    ],
)
def test_expected_tokens_per_pass_is_leviathan_equation_one(gamma, alpha, expected):
    speculation = Speculation(draft_tokens=gamma, acceptance_rate=alpha, draft_cost_ratio=0.1)

    assert speculation.tokens_per_step() == pytest.approx(expected)


def _llama3_8b(batch, *, input_tokens=1000, output_tokens=1000, speculation=None):
    return replica_throughput(
        model=model_preset("llama3_8b"),
        precision=precision_parse("FP16"),
        gpu=gpu_spec("h100_sxm"),
        tp=1,
        kv_bits=16,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        batch=batch,
        engine=HARD_MAX,
        speculation=speculation,
    )


def test_one_sequence_gains_the_expected_tokens_for_one_weight_read():
    """Llama-3-8B FP16 on one H100 SXM, one sequence of 1,000 in / 1,000 out; gamma 4,
    alpha 0.8, draft cost 0.05 of a target step.

    Plain step (test_throughput's batch-one sum): weights 15,009,857,536 B + KV 1,500 tokens x
    131,072 B at 3,350 GB/s x 0.8, + 32 layers x 10 kernels x 3 us. The verification pass
    multiplies 5 tokens but reads the same weights (plus 4 more embedding rows of 4,096 x 2 B)
    and the same KV once; 5 tokens' multiplies (2 x 7.5e9 x 5 / 445 TFLOPS = 0.17 ms) stay
    under the 5.6 ms weight stream. Draft: 4 x 0.05 x the plain step. Tokens per pass 3.3616.
    The prefill (compute bound: 2 x linear x 1,000 + 2 x 32 x 4,096 x 1,000^2 FLOPs at
    989 TFLOPS x 0.45, + kernels) runs alone once per 1,000 tokens: 3.3616 / 1,000 of it per pass.
    """
    table = 128_256 * 4_096
    linear = 8_030_261_248 - table
    plain_weights = 15_009_857_536
    verify_weights = plain_weights + 4 * 4_096 * 2
    bandwidth = 3350e9 * BANDWIDTH_EFFICIENCY
    kv = 1500 * 131_072 / bandwidth
    kernels = 32 * 10 * 3e-6
    plain = plain_weights / bandwidth + kv + kernels
    verify = verify_weights / bandwidth + kv + kernels
    draft = 4 * 0.05 * plain
    tokens = (1 - 0.8**5) / (1 - 0.8)
    prefill = (2 * linear * 1000 + 2 * 32 * 4096 * 1000**2) / (989e12 * 0.45) + kernels
    serial = tokens / 1000 * prefill
    speculation = Speculation(draft_tokens=4, acceptance_rate=0.8, draft_cost_ratio=0.05)

    estimate = _llama3_8b(1, speculation=speculation)

    assert estimate.speculative_credited is True
    assert estimate.speculative_tokens_per_step == pytest.approx(3.3616)
    assert estimate.tokens_per_step == 5  # 4 draft tokens + the target's own, verified at once
    assert estimate.weight_bytes_read_per_step == verify_weights
    assert estimate.tpot_ms == pytest.approx((verify + draft) / tokens * 1e3)
    assert estimate.step_ms == pytest.approx((verify + draft + serial) * 1e3)
    assert estimate.output_tok_s_total == pytest.approx(tokens / (verify + draft + serial))
    # About 3.3616 / 1.2 = 2.8 times plain decoding's rate.
    assert estimate.output_tok_s_total / _llama3_8b(1).output_tok_s_total == pytest.approx(
        (plain + serial / tokens) / ((verify + draft + serial) / tokens)
    )


def test_a_compute_bound_batch_is_credited_nothing():
    """256 sequences of 128 in / 128 out, each step also carrying 256 x 128 / 128 prompt tokens:
    plain, 512 tokens x 2 x 7.5e9 FLOPs / 445 TFLOPS = 17 ms of multiplies (compute bound; the
    weights stream in 5.6 ms) + 2.4 ms of KV, about 21 ms a token. Verifying 4 + 1 tokens a
    sequence: 1,280 + 256 x 2.31 prompt tokens = 1,870 tokens, 63 ms, + the draft's 4 x 0.05 x
    21 ms; at alpha 0.6 a pass gives (1 - 0.6^5) / 0.4 = 2.31 tokens: about 30 ms a token. So
    the plain estimate stands, and the plan says why."""
    speculation = Speculation(draft_tokens=4, acceptance_rate=0.6, draft_cost_ratio=0.05)
    lengths = {"input_tokens": 128, "output_tokens": 128}

    estimate = _llama3_8b(256, speculation=speculation, **lengths)
    plain = _llama3_8b(256, **lengths)

    assert estimate.speculative_credited is False
    assert estimate.speculative_tokens_per_step == 1.0
    assert estimate.output_tok_s_total == pytest.approx(plain.output_tok_s_total)
    assert estimate.tpot_ms == pytest.approx(plain.tpot_ms)

    planned = estimate_replica(
        model=model_preset("llama3_8b"),
        gpu=gpu_spec("h100_sxm"),
        precision="FP16",
        kv_cache_dtype=None,
        tp=1,
        concurrency=256,
        engine=HARD_MAX,
        speculation=speculation,
        **lengths,
    )
    assert [w.code for w in planned.warnings] == ["speculation_not_credited"]


REQUEST = {
    "model": "llama3_8b",
    "gpu": "h100_sxm",
    "input_len": 1000,
    "output_len": 1000,
    "concurrency": 1,
}


def _from_fields(**extra):
    return estimate_from_fields(
        {**REQUEST, **extra}, presets=model_presets(), gpus=gpu_specs_from_catalogue()
    )


def test_the_request_fields_turn_it_on():
    estimate = _from_fields(
        speculative_draft_tokens=4,
        speculative_acceptance_rate=0.8,
        speculative_draft_cost_ratio=0.05,
    )

    assert estimate.throughput.speculative_tokens_per_step == pytest.approx(3.3616)
    assert _from_fields().throughput.speculative_tokens_per_step is None


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"speculative_draft_tokens": 4, "speculative_acceptance_rate": 0.8},
         "speculative_draft_cost_ratio", "missing"),
        ({"speculative_draft_tokens": 17, "speculative_acceptance_rate": 0.8,
          "speculative_draft_cost_ratio": 0.1}, "speculative_draft_tokens", "out_of_range"),
        ({"speculative_draft_tokens": 0, "speculative_acceptance_rate": 0.8,
          "speculative_draft_cost_ratio": 0.1}, "speculative_draft_tokens", "not_positive"),
        ({"speculative_draft_tokens": 4, "speculative_acceptance_rate": 1.0,
          "speculative_draft_cost_ratio": 0.1}, "speculative_acceptance_rate", "out_of_range"),
        ({"speculative_draft_tokens": 4, "speculative_acceptance_rate": "high",
          "speculative_draft_cost_ratio": 0.1}, "speculative_acceptance_rate", "out_of_range"),
        ({"speculative_draft_tokens": 4, "speculative_acceptance_rate": 0.5,
          "speculative_draft_cost_ratio": 1.5}, "speculative_draft_cost_ratio", "out_of_range"),
    ],
)  # fmt: skip
def test_bad_speculation_fields_are_refused_by_name(fields, field, reason):
    with pytest.raises(SizingInputError) as caught:
        _from_fields(**fields)

    assert caught.value.data["field"] == field
    assert caught.value.data["reason"] == reason


# A separate draft model: its memory is counted and its cost ratio follows from its size.

DRAFTED = {
    "speculative_draft_tokens": 4,
    "speculative_acceptance_rate": 0.7,
    "speculative_draft_model": "llama3_8b",
}


def _llama3_70b_tp4(concurrency, speculation):
    return estimate_replica(
        model=model_preset("llama3_70b"),
        gpu=gpu_spec("h100_sxm"),
        precision="FP16",
        kv_cache_dtype=None,
        tp=4,
        input_tokens=1000,
        output_tokens=1000,
        concurrency=concurrency,
        speculation=speculation,
    )


def test_a_draft_model_takes_weights_and_kv_on_every_card():
    """Llama-3.1-8B drafting for Llama-3.1-70B, FP16, TP 4 on H100 SXM, 2,000-token context.

    Draft weights 8,030,261,248 x 2 B = 16,060,522,496 B, / 4 cards = 4,015,130,624 B a card.
    Draft KV per token per card: 2 x 32 layers x (8 KV heads / 4 = 2) x 128 x 2 B = 32,768 B;
    x 2,000 tokens = 65,536,000 B a sequence. The target's: 2 x 80 x 2 x 128 x 2 B = 81,920 B
    a token, 163,840,000 B a sequence. Budget = 85,523,536,282 (the card) - 35,276,853,248
    (target weights) - 4,015,130,624 (draft) - 3,632,267,264 (overhead) - 8,552,353,628
    (reserve: 10 % of the card) = 34,046,931,518 B; // (163,840,000 + 65,536,000) = 148
    sequences. Without the draft: 38,062,062,142 // 163,840,000 = 232.
    """
    speculation = speculation_from_fields(
        DRAFTED, presets=model_presets(), target=model_preset("llama3_70b")
    )
    drafted = _llama3_70b_tp4(None, speculation).memory
    plain = _llama3_70b_tp4(None, None).memory

    assert drafted.draft_weights_bytes_per_gpu == 4_015_130_624
    assert drafted.draft_kv_bytes_per_sequence_per_gpu == 65_536_000
    assert drafted.kv_bytes_per_sequence_per_gpu == 163_840_000
    assert drafted.kv_budget_bytes_per_gpu == 34_046_931_518
    assert drafted.max_sequences == 148
    assert plain.max_sequences == 232
    assert plain.draft_weights_bytes_per_gpu == 0


def test_the_draft_models_cost_ratio_is_its_share_of_the_active_parameters():
    # 8,030,261,248 / 70,553,706,496 = 0.11382
    speculation = speculation_from_fields(
        DRAFTED, presets=model_presets(), target=model_preset("llama3_70b")
    )

    assert speculation.draft_cost_ratio == pytest.approx(0.11382, abs=1e-5)
    assert speculation.draft.id == "llama3_8b"
    given = speculation_from_fields(
        {**DRAFTED, "speculative_draft_cost_ratio": 0.2},
        presets=model_presets(),
        target=model_preset("llama3_70b"),
    )
    assert given.draft_cost_ratio == 0.2


def test_the_draft_is_credited_at_one_sequence_and_not_at_saturation():
    speculation = speculation_from_fields(
        DRAFTED, presets=model_presets(), target=model_preset("llama3_70b")
    )

    one = _llama3_70b_tp4(1, speculation)
    full = _llama3_70b_tp4(None, speculation)

    assert one.throughput.speculative_credited is True
    assert [w.code for w in one.warnings] == []
    assert full.throughput.speculative_credited is False
    assert [w.code for w in full.warnings] == ["speculation_not_credited"]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({**DRAFTED, "speculative_draft_model": "gpt5"}, "unknown_model"),
        ({**DRAFTED, "speculative_draft_model": "qwen2_5_72b"}, "inconsistent"),  # not smaller
    ],
)
def test_a_bad_draft_model_is_refused_by_name(fields, reason):
    with pytest.raises(SizingInputError) as caught:
        speculation_from_fields(fields, presets=model_presets(), target=model_preset("llama3_70b"))

    assert caught.value.data["field"] == "speculative_draft_model"
    assert caught.value.data["reason"] == reason


def test_the_command_fields_take_a_draft_model():
    estimate = estimate_from_fields(
        {**REQUEST, "model": "llama3_70b", "tp": 4, **DRAFTED},
        presets=model_presets(),
        gpus=gpu_specs_from_catalogue(),
    )

    assert estimate.memory.draft_weights_bytes_per_gpu == 4_015_130_624
    assert estimate.throughput.speculative_credited is True
