"""Plans over GPU models: rows, replicas and cards, cost, warnings and the recommendation."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.sizing import SizingInputError
from pools.sizing.demand import demand_from_output_rate, demand_from_traffic
from pools.sizing.gpus import gpu_spec, gpu_specs_from_catalogue
from pools.sizing.plan import (
    HOURS_PER_MONTH,
    estimate_from_fields,
    estimate_replica,
    monthly_cost,
    replica_estimate_as_dict,
    sizing_plan,
)
from pools.sizing.presets import model_preset, model_presets

PRICES = {
    "h100_sxm": Decimal("2.50"),
    "a100_80g_sxm": Decimal("1.60"),
    "rtx4090": Decimal("0.40"),
    "rtx2080s": Decimal("0.10"),
}


def test_monthly_cost_is_cards_times_price_times_hours():
    assert HOURS_PER_MONTH == Decimal(8_760) / 12
    assert monthly_cost(cards=463, price_per_card_hour=Decimal("2.50")) == Decimal("844975.00")
    assert monthly_cost(
        cards=3, price_per_card_hour=Decimal("1.005"), hours_per_month=Decimal("1")
    ) == Decimal("3.02")  # 3.015 rounds half up
    assert monthly_cost(cards=3, price_per_card_hour=None) is None


def test_negative_money_is_refused():
    with pytest.raises(SizingInputError):
        monthly_cost(cards=1, price_per_card_hour=Decimal("-1"))


@pytest.fixture(scope="module")
def plan():
    gpus = gpu_specs_from_catalogue()
    return sizing_plan(
        model=model_preset("llama3_8b"),
        gpus=[gpus[slug] for slug in ("h100_sxm", "a100_80g_sxm", "rtx4090", "rtx2080s")],
        precision="FP16",
        kv_cache_dtype="FP16",
        input_tokens=1_000,
        output_tokens=200,
        demand=demand_from_output_rate(output_tok_s=2_000, input_tokens=1_000, output_tokens=200),
        tpot_target_ms=50,
        ttft_target_ms=2_000,
        free_cards={"h100_sxm": 0, "a100_80g_sxm": 100},
        prices=PRICES,
    )


def test_cards_are_replicas_times_tp_with_replicas_covering_the_peak(plan):
    for row in plan.rows:
        if row.cards is None:
            continue
        assert row.replicas == max(1, math.ceil(10.0 / row.replica_requests_per_s))
        assert row.cards == row.replicas * row.tp
        assert row.monthly_cost == Decimal(row.cards) * PRICES[row.gpu_slug] * Decimal(730)


def test_rows_meeting_targets_stay_within_them(plan):
    for row in plan.rows:
        if row.meets_targets:
            assert row.estimate.throughput.tpot_ms <= 50
            assert row.estimate.throughput.ttft_ms <= 2_000
            assert row.estimate.batch_limit == "targets"


def test_the_recommendation_is_the_cheapest_row_that_meets_the_targets(plan):
    meeting = [row for row in plan.rows if row.meets_targets]

    assert plan.recommended.monthly_cost == min(row.monthly_cost for row in meeting)
    assert plan.rows[0] is plan.recommended


def test_the_free_capacity_option_only_uses_free_cards(plan):
    by_slug = {row.gpu_slug: row for row in plan.rows}

    assert by_slug["h100_sxm"].fits_free_capacity is False
    assert "fewer_free_cards" in [w.code for w in by_slug["h100_sxm"].warnings]
    assert plan.recommended_in_free_capacity.gpu_slug == "a100_80g_sxm"


def test_a_card_without_tensor_figures_is_shown_but_never_recommended(plan):
    row = {row.gpu_slug: row for row in plan.rows}["rtx2080s"]

    assert row.cards == 8  # 16 GB of weights over eight 8 GB cards
    assert row.estimate.throughput.ttft_ms is None
    assert not row.meets_targets
    assert "compute_unknown" in [w.code for w in row.warnings]
    assert plan.recommended is not row


def test_a_card_too_small_is_a_row_with_the_reason():
    result = sizing_plan(
        model=model_preset("llama3_70b"),
        gpus=[gpu_spec("rtx2080s"), gpu_spec("h100_sxm")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=1_000,
        output_tokens=200,
        prices=PRICES,
    )
    row = result.rows[-1]

    assert row.gpu_slug == "rtx2080s"
    assert (row.cards, row.monthly_cost, row.meets_targets) == (None, None, False)
    assert [w.code for w in row.warnings] == ["does_not_fit"]
    assert result.recommended.gpu_slug == "h100_sxm"


def test_the_seeds_rule_is_shown_next_to_the_model():
    demand = demand_from_traffic(
        requests_per_day=100_000, peak_hours=4, input_tokens=5_000, output_tokens=1_500
    )

    result = sizing_plan(
        model=model_preset("llama3_8b"),
        gpus=[gpu_spec("h100_sxm")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=5_000,
        output_tokens=1_500,
        demand=demand,
        seed_per_card_tok_s=60,
    )
    row = result.rows[0]

    assert result.seed_rule_cards == 463
    assert row.per_card_equivalent_tok_s == pytest.approx(
        row.replica_requests_per_s * 4_000 / row.tp
    )
    assert row.per_card_equivalent_tok_s > 60  # batching beats the seeds' per-card figure


def test_tensor_parallel_consumer_cards_are_warned_about_pcie():
    result = sizing_plan(
        model=model_preset("llama3_70b"),
        gpus=[gpu_spec("rtx4090")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=500,
        output_tokens=200,
    )
    row = result.rows[0]

    assert (row.min_fit_tp, row.tp, row.replicas, row.cards) == (8, 8, 1, 8)
    assert "no_nvlink_tp" in [w.code for w in row.warnings]
    assert "PCIe" in row.warnings[0].message


def test_an_unreachable_tpot_target_is_flagged_and_not_recommended():
    result = sizing_plan(
        model=model_preset("llama3_70b"),
        gpus=[gpu_spec("a100_80g_sxm")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=500,
        output_tokens=200,
        tpot_target_ms=1,
    )
    row = result.rows[0]

    assert not row.meets_targets
    assert row.tp == row.min_fit_tp == 2
    assert "tpot_over_target" in [w.code for w in row.warnings]
    assert result.recommended is None


def test_a_card_without_bandwidth_is_listed_as_not_estimable():
    result = sizing_plan(
        model=model_preset("llama3_8b"),
        gpus=[gpu_spec("h800_pcie")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=500,
        output_tokens=200,
    )

    assert [w.code for w in result.rows[0].warnings] == ["cannot_estimate"]


def test_a_context_above_the_model_maximum_is_refused():
    with pytest.raises(SizingInputError) as error:
        sizing_plan(
            model=model_preset("llama2_7b"),
            gpus=[gpu_spec("h100_sxm")],
            precision="FP16",
            kv_cache_dtype=None,
            input_tokens=4_000,
            output_tokens=100,
        )

    assert error.value.data["reason"] == "context_too_long"


def test_estimate_replica_counts_every_replica():
    one = estimate_replica(
        model=model_preset("llama3_8b"),
        gpu=gpu_spec("h100_sxm"),
        precision="FP16",
        kv_cache_dtype=None,
        tp=2,
        input_tokens=1_000,
        output_tokens=1_000,
    )
    two = estimate_replica(
        model=model_preset("llama3_8b"),
        gpu=gpu_spec("h100_sxm"),
        precision="FP16",
        kv_cache_dtype=None,
        tp=2,
        gpu_count=4,
        input_tokens=1_000,
        output_tokens=1_000,
    )

    assert two.replicas == 2
    assert two.output_tok_s_total == pytest.approx(2 * one.output_tok_s_total)
    assert one.batch_limit == "engine"  # vLLM's 256 sequences, well below what fits
    assert one.throughput.batch == 256


def test_a_model_that_does_not_fit_has_no_speed_and_says_why():
    estimate = estimate_replica(
        model=model_preset("llama3_70b"),
        gpu=gpu_spec("h100_sxm"),
        precision="FP16",
        kv_cache_dtype=None,
        tp=1,
        input_tokens=1_000,
        output_tokens=1_000,
    )

    assert not estimate.fits
    assert estimate.throughput is None
    assert estimate.output_tok_s_total is None
    assert [w.code for w in estimate.warnings] == ["does_not_fit"]


BASE = {
    "model": "llama3_8b",
    "gpu": "h100_sxm",
    "tp": 1,
    "gpu_count": 1,
    "precision": "FP16",
    "input_len": 1_000,
    "output_len": 100,
}


@pytest.mark.parametrize(
    ("changes", "reason", "field"),
    [
        ({"model": "gpt5"}, "unknown_model", "model"),
        ({"gpu": "tpu_v5"}, "unknown_gpu", "gpu"),
        ({"gpu": None}, "missing", "gpu"),
        ({"input_len": None}, "missing", "input_len"),
        ({"input_len": "1000"}, "not_positive", "input_len"),
        ({"input_len": True}, "not_positive", "input_len"),
        ({"output_len": 0}, "not_positive", "output_len"),
        ({"concurrency": 2.5}, "not_positive", "concurrency"),
        ({"concurrency": -3}, "not_positive", "concurrency"),
        ({"tp": 2, "gpu_count": 3}, "inconsistent", "tp"),
        ({"model": "qwen2_5_7b", "tp": 8, "gpu_count": 8}, "inconsistent", "tp"),
        ({"precision": "FP4"}, "unknown_precision", "precision"),
        ({"precision": 16}, "not_a_string", "precision"),
        ({"request_rate": -1}, "not_positive", "request_rate"),
        ({"prompt_cache_hit_rate": 1}, "out_of_range", "prompt_cache_hit_rate"),
    ],
)
def test_estimate_from_fields_refuses_bad_input(changes, reason, field):
    fields = {**BASE, **changes}

    with pytest.raises(SizingInputError) as error:
        estimate_from_fields(fields, presets=model_presets(), gpus=gpu_specs_from_catalogue())

    assert (error.value.data["reason"], error.value.data.get("field")) == (reason, field)


def _refusal(fields: dict) -> SizingInputError:
    with pytest.raises(SizingInputError) as error:
        estimate_from_fields(fields, presets=model_presets(), gpus=gpu_specs_from_catalogue())
    return error.value


def test_three_bad_fields_are_refused_in_one_answer():
    """Issue 34: one answer names every field at fault, the first as it alone was named."""
    error = _refusal({**BASE, "tp": 0, "input_len": -5, "precision": "FP7"})

    assert (error.data["reason"], error.data["field"]) == ("not_positive", "tp")
    assert error.message == "tp must be a positive integer, got 0"
    assert error.data["errors"] == {
        "tp": "tp must be a positive integer, got 0",
        "input_len": "input_len must be a positive integer, got -5",
        "precision": "unknown precision 'FP7'; use one of FP16, BF16, FP8, INT8, FP8-WO, W8A16, "
        "INT8-WO, INT4, W4A16, INT4-AWQ, AWQ, INT4-GPTQ, GPTQ, NVFP4, MXFP4, MXFP4-WO, NVFP4-WO",
    }


def test_a_bad_custom_architecture_and_a_bad_tp_are_refused_together():
    """The architecture's seven missing fields (only num_layers given) and tp 0, one answer."""
    error = _refusal({**BASE, "model": "custom", "custom_model": {"num_layers": 2}, "tp": 0})

    missing = (
        "hidden_size",
        "num_attention_heads",
        "num_kv_heads",
        "head_dim",
        "intermediate_size",
        "vocab_size",
        "max_context_tokens",
    )
    assert (error.data["reason"], error.data["field"]) == ("missing", "custom_model.hidden_size")
    assert error.data["errors"] == {
        **{
            f"custom_model.{name}": f"{name} is required for a custom architecture "
            "(or give its config.json)"
            for name in missing
        },
        "tp": "tp must be a positive integer, got 0",
    }


@pytest.mark.parametrize(
    ("changes", "field", "errors"),
    [
        # Qwen2.5-7B's 28 heads are not split by TP 8: checked beside the bad output_len.
        (
            {"model": "qwen2_5_7b", "tp": 8, "gpu_count": 8, "output_len": 0},
            "output_len",
            {
                "output_len": "output_len must be a positive integer, got 0",
                "tp": "tp 8 does not divide Qwen2.5-7B's 28 attention heads",
            },
        ),
        # 200,000 + 100 tokens over Llama-3.1-8B's 131,072: checked beside the bad precision.
        (
            {"input_len": 200_000, "precision": "fp 16"},
            "precision",
            {
                "precision": "unknown precision 'fp 16'; use one of FP16, BF16, FP8, INT8, "
                "FP8-WO, W8A16, INT8-WO, INT4, W4A16, INT4-AWQ, AWQ, INT4-GPTQ, GPTQ, NVFP4, "
                "MXFP4, MXFP4-WO, NVFP4-WO",
                "input_len": "context of 200,100 tokens exceeds Llama-3.1-8B's maximum of 131,072",
            },
        ),
        # A bad output_len led before a missing input_len did, and still leads.
        (
            {"input_len": None, "output_len": 0},
            "output_len",
            {
                "output_len": "output_len must be a positive integer, got 0",
                "input_len": "input_len is required",
            },
        ),
    ],
)
def test_a_check_of_the_whole_runs_beside_a_bad_field_when_its_fields_passed(
    changes, field, errors
):
    error = _refusal({**BASE, **changes})

    assert error.data["field"] == field
    assert error.data["errors"] == errors


def test_multimodal_and_speculation_fields_are_named_beside_an_unknown_model():
    """Images -1 and width 0 px, an acceptance rate of 1.5 and no cost ratio (nor draft
    model): each named, after the model, in the order the fields are read."""
    error = _refusal(
        {
            **BASE,
            "model": "gpt5",
            "images_per_request": -1,
            "image_width_px": 0,
            "speculative_draft_tokens": 4,
            "speculative_acceptance_rate": 1.5,
        }
    )

    errors = error.data["errors"]
    assert (error.data["reason"], error.data["field"]) == ("unknown_model", "model")
    assert list(errors) == [
        "model",
        "images_per_request",
        "image_width_px",
        "speculative_draft_cost_ratio",
        "speculative_acceptance_rate",
    ]
    assert errors["model"].startswith("unknown model 'gpt5'; known: llama2_7b, ")
    assert errors["images_per_request"] == (
        "images_per_request must be a whole number from 0 to 1e+06, got -1"
    )
    assert (
        errors["image_width_px"] == "image_width_px must be a whole number from 1 to 16384, got 0"
    )
    assert errors["speculative_draft_cost_ratio"] == (
        "speculative decoding needs the draft tokens, the acceptance rate and the draft's cost "
        "ratio (or draft model) together; speculative_draft_cost_ratio is missing"
    )
    assert errors["speculative_acceptance_rate"] == (
        "speculative_acceptance_rate must be a number in [0, 1), got 1.5"
    )


def test_an_unknown_model_leads_an_ambiguous_gpu_name():
    """With both names at fault the model's fault leads (as ``_model_and_gpu`` always said);
    an ambiguous GPU name used to refuse the request before the model was looked at."""

    def ambiguous(name: str) -> str:
        raise SizingInputError("several", reason="ambiguous_gpu", field="gpu", candidates=["a"])

    with pytest.raises(SizingInputError) as error:
        estimate_from_fields(
            {**BASE, "model": "gpt5", "gpu": "NVIDIA H100"},
            presets=model_presets(),
            gpus=gpu_specs_from_catalogue(),
            name_to_slug=ambiguous,
        )

    assert (error.value.data["reason"], error.value.data["field"]) == ("unknown_model", "model")
    assert list(error.value.data["errors"]) == ["model", "gpu"]
    assert error.value.data["errors"]["gpu"] == "several"


def test_estimate_as_dict_has_the_headline_fields_first():
    estimate = estimate_from_fields(
        {**BASE, "concurrency": 4}, presets=model_presets(), gpus=gpu_specs_from_catalogue()
    )

    result = replica_estimate_as_dict(estimate)

    assert result["weights_bytes"] == 8_030_261_248 * 2
    assert result["kv_cache_bytes"] == 4 * 1_100 * 131_072
    assert result["fits"] is True
    assert result["batch"] == 4
    assert result["tpot_ms"] == result["throughput"]["tpot_ms"]
    assert result["warnings"] == []


@settings(max_examples=40, deadline=None)
@given(
    model_id=st.sampled_from(sorted(model_presets())),
    output_tok_s=st.floats(min_value=0.01, max_value=1e6),
    input_tokens=st.integers(min_value=1, max_value=2_000),  # within every preset's context
    output_tokens=st.integers(min_value=1, max_value=2_000),
    tpot_target_ms=st.one_of(st.none(), st.floats(min_value=1, max_value=500)),
)
def test_plan_card_counts_are_whole_and_cover_whole_replicas(
    model_id, output_tok_s, input_tokens, output_tokens, tpot_target_ms
):
    try:
        demand = demand_from_output_rate(
            output_tok_s=output_tok_s, input_tokens=input_tokens, output_tokens=output_tokens
        )
    except SizingInputError as error:
        assert error.data["reason"] == "absurd_traffic"
        return

    result = sizing_plan(
        model=model_presets()[model_id],
        gpus=[gpu_spec(slug) for slug in ("h100_sxm", "l40s", "rtx4090")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        demand=demand,
        tpot_target_ms=tpot_target_ms,
    )

    for row in result.rows:
        if row.cards is None:
            continue
        assert isinstance(row.cards, int) and isinstance(row.replicas, int)
        assert row.replicas >= 1 and row.cards == row.replicas * row.tp
        assert row.replicas * row.replica_requests_per_s >= demand.peak_requests_per_s * (1 - 1e-9)


def test_concurrency_sizes_replicas_by_the_sequences_each_holds():
    gpus = gpu_specs_from_catalogue()
    result = sizing_plan(
        model=model_preset("llama3_70b"),
        gpus=[gpus["h100_sxm"], gpus["a100_80g_sxm"]],
        precision="FP16",
        kv_cache_dtype="FP16",
        input_tokens=1_000,
        output_tokens=200,
        concurrency=300,
        tpot_target_ms=50,
    )

    for row in result.rows:
        batch = row.estimate.throughput.batch
        assert batch == int(batch) and row.estimate.throughput.tpot_ms <= 50
        assert row.replicas == math.ceil(300 / batch)
        assert row.cards == row.replicas * row.tp
    assert result.seed_rule_cards is None


def test_a_plan_takes_a_demand_or_a_concurrency_not_both():
    with pytest.raises(SizingInputError) as caught:
        sizing_plan(
            model=model_preset("llama3_8b"),
            gpus=[gpu_spec("h100_sxm")],
            precision="FP16",
            kv_cache_dtype=None,
            input_tokens=100,
            output_tokens=100,
            demand=demand_from_output_rate(output_tok_s=100, input_tokens=100, output_tokens=100),
            concurrency=4,
        )

    assert caught.value.data["reason"] == "inconsistent"


def test_progress_is_called_after_each_gpu_model():
    calls = []
    sizing_plan(
        model=model_preset("llama3_8b"),
        gpus=[gpu_spec("h100_sxm"), gpu_spec("l40s")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=100,
        output_tokens=100,
        on_progress=lambda done, total: calls.append((done, total)),
    )

    assert calls == [(1, 2), (2, 2)]


def test_a_share_of_the_peak_and_a_buffer_are_separate_lines():
    """seeds/004 section 2.3: carry 85 % of the peak, keep a 30 % buffer. 20,000 output tok/s of
    200-token answers is 100 requests/s at the peak; with r requests/s per replica the lines
    are ceil(100 / r) for the peak, ceil(85 / r) for 85 % of it, ceil(0.3 x that) on top."""
    gpus = gpu_specs_from_catalogue()
    common = {
        "model": model_preset("llama3_8b"),
        "gpus": [gpus["h100_sxm"]],
        "precision": "FP16",
        "kv_cache_dtype": "FP16",
        "input_tokens": 1_000,
        "output_tokens": 200,
        "demand": demand_from_output_rate(
            output_tok_s=20_000, input_tokens=1_000, output_tokens=200
        ),
        "tpot_target_ms": 50,
        "ttft_target_ms": 1_000,
    }
    whole = sizing_plan(**common).rows[0]
    row = sizing_plan(**common, sized_share=0.85, buffer_share=0.3).rows[0]

    rate = row.replica_requests_per_s
    assert rate == whole.replica_requests_per_s
    assert row.replicas_at_peak == math.ceil(100 / rate) == whole.replicas
    assert row.replicas_sized == math.ceil(85 / rate)
    assert row.replicas_buffer == math.ceil(0.3 * row.replicas_sized)
    assert row.replicas == row.replicas_sized + row.replicas_buffer
    assert row.cards == row.replicas * row.tp
    with pytest.raises(SizingInputError):
        sizing_plan(**common, sized_share=0)


def test_sequences_in_flight_are_costed_at_the_batch_each_replica_runs():
    """Issue 34: with a concurrency each replica runs the sequences it is given, so one
    sequence is the batch-1 figure of ``estimate_replica`` (not the largest batch allowed)."""
    gpus = gpu_specs_from_catalogue()
    model = model_preset("llama3_8b")
    row = sizing_plan(
        model=model,
        gpus=[gpus["h100_sxm"]],
        precision="BF16",
        kv_cache_dtype="FP16",
        input_tokens=1_000,
        output_tokens=200,
        concurrency=1,
        tpot_target_ms=50,
        ttft_target_ms=1_000,
    ).rows[0]
    alone = estimate_replica(
        model=model, gpu=gpus["h100_sxm"], precision="BF16", kv_cache_dtype="FP16", tp=1,
        input_tokens=1_000, output_tokens=200, concurrency=1,
    )  # fmt: skip

    assert (row.tp, row.replicas, row.estimate.throughput.batch) == (1, 1, 1)
    assert row.estimate.throughput.output_tok_s_total == alone.throughput.output_tok_s_total


def test_an_nvl72_rack_lets_tensor_parallelism_span_trays():
    """GB200 NVL72: 72 GPUs in one NVLink domain, 4 per compute tray. With 4 cards per node
    DeepSeek-V3 in BF16 (671 B x 2 B = 1.34 TB) fits no TP of 4 (4 x 186 GB); across the rack's
    domain TP 8 (8 x 186 = 1.49 TB, less overhead and reserve) is allowed and chosen. A B200
    node of 4 cards has no such domain: nothing fits."""
    gpus = gpu_specs_from_catalogue()
    plan = sizing_plan(
        model=model_preset("deepseek_v3"),
        gpus=[gpus["gb200"], gpus["b200"]],
        precision="BF16",
        kv_cache_dtype="FP8",
        input_tokens=1_000,
        output_tokens=200,
        concurrency=8,
        cards_per_node=4,
    )
    rows = {row.gpu_slug: row for row in plan.rows}

    assert rows["gb200"].tp is not None and rows["gb200"].tp >= 8
    assert rows["gb200"].min_fit_tp == 8
    assert rows["b200"].tp is None


def test_tensorrt_llm_keeps_llama_4s_chunked_kv_whole_and_decodes_it_per_query_head_on_hopper():
    """Llama 4 Scout's 36 chunked-attention layers (attention_chunk_size 8,192; 12 global) on
    TensorRT-LLM: every layer's KV is kept to max_seq_len (resource_manager.py), decode reads a
    chunked layer's chunk (pull request 4693), and on a card without trtllm-gen attention the
    XQA kernels refuse chunked attention, so MMHA reads that chunk once per query head: 40 / 8
    = 5 passes (kernelUtils.cpp, pull request 6306). 20,000 + 2,000 tokens, FP8 KV, TP 4 (2 of 8
    KV heads a card): 2 x 128 x 2 x 1 B = 512 B per layer-token per card.
    Kept a sequence: vLLM (12 x 22,000 + 36 x 8,192) x 512 = 286,162,944 B; TensorRT-LLM
    48 x 22,000 x 512 = 540,672,000 B.
    Read per decode step, 8 sequences of mean context 20,000 + 2,001 // 2 = 21,000 on 4 cards:
    vLLM and TensorRT-LLM on B200 32 x (12 x 21,000 + 36 x 8,192) x 512 = 8,960,606,208 B;
    TensorRT-LLM on H200 adds 32 x 4 x 36 x 8,192 x 512 = 19,327,352,832 B: 28,287,959,040 B."""
    scout = model_preset("llama4_scout")
    common = {
        "model": scout,
        "precision": "FP8",
        "kv_cache_dtype": "FP8",
        "tp": 4,
        "input_tokens": 20_000,
        "output_tokens": 2_000,
        "concurrency": 8,
    }
    h200, b200 = gpu_spec("h200_sxm"), gpu_spec("b200")
    vllm = estimate_replica(**common, gpu=h200, engine="vllm")
    trt = estimate_replica(**common, gpu=h200, engine="tensorrt-llm-pytorch")
    trt_b200 = estimate_replica(**common, gpu=b200, engine="tensorrt-llm-pytorch")

    assert vllm.memory.kv_bytes_per_sequence_per_gpu == 286_162_944
    assert trt.memory.kv_bytes_per_sequence_per_gpu == 540_672_000
    assert trt_b200.memory.kv_bytes_per_sequence_per_gpu == 540_672_000
    assert vllm.throughput.kv_bytes_read_per_step == 8_960_606_208
    assert trt_b200.throughput.kv_bytes_read_per_step == 8_960_606_208
    assert trt.throughput.kv_bytes_read_per_step == 28_287_959_040


def test_tensorrt_llm_keeps_the_whole_kv_of_gpt_oss_sliding_layers_but_reads_the_window():
    """gpt-oss-120b: 36 layers, 18 of them a 128-token sliding window, 8 KV heads of 64.
    TensorRT-LLM sizes every layer's KV to max_seq_len unless max_attention_window is set
    (resource_manager.py), which gpt-oss's model code does not set; its sliding layers pass the
    window to the attention op (modeling_gpt_oss.py, attention_window_size), so decode reads
    only the window. 20,000 + 2,000 tokens, FP8 KV, TP 1: 2 x 8 x 64 x 1 B = 1,024 B per
    layer-token. Kept: vLLM (18 x 22,000 + 18 x 128) x 1,024 = 398,304 x 1,024 = 407,863,296 B;
    TensorRT-LLM 36 x 22,000 x 1,024 = 792,000 x 1,024 = 811,008,000 B. Read per decode step
    at batch 8, mean context 20,000 + 2,001 // 2 = 21,000 tokens, on both engines:
    8 x (18 x 21,000 + 18 x 128) x 1,024 = 8 x 380,304 x 1,024 = 3,115,450,368 B."""
    gpt_oss = model_preset("gpt_oss_120b")
    common = {
        "model": gpt_oss,
        "gpu": gpu_spec("h200_sxm"),
        "precision": "FP8",
        "kv_cache_dtype": "FP8",
        "tp": 1,
        "input_tokens": 20_000,
        "output_tokens": 2_000,
        "concurrency": 8,
    }
    vllm = estimate_replica(**common, engine="vllm")
    trt = estimate_replica(**common, engine="tensorrt-llm-pytorch")

    assert vllm.memory.kv_bytes_per_sequence_per_gpu == 407_863_296
    assert trt.memory.kv_bytes_per_sequence_per_gpu == 811_008_000
    assert vllm.throughput.batch == trt.throughput.batch == 8
    assert vllm.throughput.kv_bytes_read_per_step == 3_115_450_368
    assert trt.throughput.kv_bytes_read_per_step == 3_115_450_368


def test_llama_4_on_tensorrt_llm_warns_of_its_mmha_decode_on_hopper_only():
    """The chunked layers' decode on MMHA is said where it happens (H200 on TensorRT-LLM), with
    the passes (40 query heads / 8 KV heads = 5) and the layers (36), and not on a B200, on vLLM
    or for a model without chunked attention."""
    common = {
        "precision": "FP8",
        "kv_cache_dtype": "FP8",
        "tp": 4,
        "input_tokens": 1_000,
        "output_tokens": 1_000,
        "concurrency": 64,
    }
    scout, h200 = model_preset("llama4_scout"), gpu_spec("h200_sxm")

    def codes(**kwargs):
        return [w.code for w in estimate_replica(**{**common, **kwargs}).warnings]

    warned = estimate_replica(**common, model=scout, gpu=h200, engine="tensorrt-llm-pytorch")
    (warning,) = [w for w in warned.warnings if w.code == "chunked_decode_mmha"]
    assert "36 chunked-attention layers" in warning.message
    assert "5 times, once per query head" in warning.message
    assert f"{warned.throughput.attention_ms:.1f} ms of every" in warning.message
    assert "chunked_decode_mmha" not in codes(
        model=scout, gpu=gpu_spec("b200"), engine="tensorrt-llm-pytorch"
    )
    assert "chunked_decode_mmha" not in codes(model=scout, gpu=h200, engine="vllm")
    assert "chunked_decode_mmha" not in codes(
        model=model_preset("qwen3_235b_a22b"), gpu=h200, engine="tensorrt-llm-pytorch"
    )


def test_a_plan_row_states_its_estimate_and_warnings_at_the_batch_it_runs():
    """A TPOT target of 50 ms holds Llama 4 Scout (FP8, TensorRT-LLM, H200, TP 4) to fewer
    sequences than fit; the row's estimate and its warnings describe that batch, not the
    saturated one: the MMHA warning quotes the chosen step's attention and step milliseconds,
    the KV total is the chosen batch's sequences x their KV, and the band is the row's."""
    result = sizing_plan(
        model=model_preset("llama4_scout"),
        gpus=[gpu_spec("h200_sxm")],
        precision="FP8",
        kv_cache_dtype="FP8",
        input_tokens=2_000,
        output_tokens=500,
        demand=demand_from_output_rate(output_tok_s=20_000, input_tokens=2_000, output_tokens=500),
        tpot_target_ms=50,
        engine="tensorrt-llm-pytorch",
        tp=4,
    )
    (row,) = result.rows
    estimate = row.estimate
    step = estimate.throughput
    assert step.tpot_ms <= 50
    assert step.batch < estimate.memory.max_sequences  # fewer than fit
    (warning,) = [w for w in row.warnings if w.code == "chunked_decode_mmha"]
    assert f"attention is {step.attention_ms:.1f} ms of every {step.step_ms:.1f} ms" in (
        warning.message
    )
    assert warning in estimate.warnings
    assert estimate.memory.sequences == math.ceil(step.batch)
    # KV per card: sequences x 48 layers x 2,500 tokens x 2 KV heads x 128 x 2 x 1 B (FP8).
    assert estimate.memory.kv_cache_bytes_per_gpu == math.ceil(step.batch) * 48 * 2_500 * 512
    assert estimate.band == row.band
