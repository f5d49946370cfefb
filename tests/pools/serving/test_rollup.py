"""Placing answers on allocations and turning them into one row of values (pure), with the
expected values worked out by hand in each docstring."""

from __future__ import annotations

import pytest
from serving_support import histogram, term

from pools.serving.rollup import allocation_values, place_targets
from scheduler_adapters.serving_metrics import answers_from_series


def values_of(*series, namespace="team-nlp"):
    answers = answers_from_series({"all": list(series)})
    placed, unmatched = place_targets(answers, open_ids=[7], namespaces={7: namespace})
    assert unmatched == []
    return allocation_values(placed[7])


def test_the_current_name_wins_over_its_deprecated_twin():
    """vLLM 0.9-0.10 export kv_cache_usage_perc and gpu_cache_usage_perc with one value:
    0.5 -> 50 %, read once (not 100 %, not a mean of two names)."""
    values = values_of(
        term("kv_cache_usage_pct", "vllm", "vllm:kv_cache_usage_perc", 0.5),
        term("kv_cache_usage_pct", "vllm", "vllm:gpu_cache_usage_perc", 0.5),
    )
    assert values.fields["kv_cache_usage_pct"] == pytest.approx(50.0)


def test_only_the_previous_name_is_read_where_the_engine_is_older():
    """A vLLM before 0.9: only gpu_cache_usage_perc (0.8 -> 80 %) and only
    time_per_output_token_seconds: 10 tokens, 4 under 20 ms, all under 50 ms ->
    p50 rank 5 in (0.02, 0.05] holding 4..10: 0.02 + 0.03 x 1/6 = 0.025 s."""
    values = values_of(
        term("kv_cache_usage_pct", "vllm", "vllm:gpu_cache_usage_perc", 0.8),
        *histogram(
            "itl",
            "vllm",
            "vllm:time_per_output_token_seconds_bucket",
            {"0.02": 4, "0.05": 10, "+Inf": 10},
        ),
    )
    assert values.fields["kv_cache_usage_pct"] == pytest.approx(80.0)
    assert values.fields["itl_p50_s"] == pytest.approx(0.025)


def test_two_engines_in_one_allocation_add_up_requests_and_tokens():
    """vLLM 3 running + SGLang 2 = 5; generation 6,000 + 1,500 = 7,500 tokens in 5 min."""
    values = values_of(
        term("requests_running", "vllm", "vllm:num_requests_running", 3),
        term("requests_running", "sglang", "sglang:num_running_reqs", 2),
        term("generation_tokens", "vllm", "vllm:generation_tokens_total", 6000),
        term("generation_tokens", "sglang", "sglang:generation_tokens_total", 1500),
    )
    assert values.fields["requests_running"] == 5
    assert values.fields["generation_tokens"] == 7500
    assert values.engines == ("sglang", "vllm")


def test_missing_series_are_unknown_and_name_their_metrics():
    values = values_of(term("requests_running", "vllm", "vllm:num_requests_running", 1))
    assert values.fields["gpu_util_pct"] is None
    assert values.fields["ttft_p95_s"] is None
    assert values.fields["prefix_cache_hit_pct"] is None
    assert "gpu_util_pct: DCGM_FI_PROF_GR_ENGINE_ACTIVE | DCGM_FI_DEV_GPU_UTIL" in values.missing
    assert (
        "ttft: sglang:time_to_first_token_seconds_bucket | "
        "nv_inference_first_response_histogram_ms_bucket | "  # Triton
        "trtllm_time_to_first_token_seconds_bucket | vllm:time_to_first_token_seconds_bucket"
    ) in values.missing
    assert not any(m.startswith("requests_running") for m in values.missing)


def test_prefix_cache_hit_share_is_hits_over_queries():
    """SGLang: 300 of 1,200 prompt tokens came from the radix cache -> 25 %."""
    values = values_of(
        term("prefix_cache_hits", "sglang", "sglang:cached_tokens_total", 300),
        term("prefix_cache_queries", "sglang", "sglang:prompt_tokens_total", 1200),
    )
    assert values.fields["prefix_cache_hit_pct"] == pytest.approx(25.0)


def test_no_prefix_queries_is_unknown_not_zero():
    values = values_of(
        term("prefix_cache_hits", "vllm", "vllm:prefix_cache_hits_total", 0),
        term("prefix_cache_queries", "vllm", "vllm:prefix_cache_queries_total", 0),
    )
    assert values.fields["prefix_cache_hit_pct"] is None


def test_profiling_utilisation_wins_and_busy_cards_follow_it():
    """GR_ENGINE_ACTIVE 0.62 -> 62 % over DEV_GPU_UTIL's 100 %; 2 cards busy by it."""
    values = values_of(
        term("gpu_util_pct", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.62),
        term("gpu_util_pct", "dcgm", "DCGM_FI_DEV_GPU_UTIL", 100),
        term("cards_busy", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2),
        term("cards_busy", "dcgm", "DCGM_FI_DEV_GPU_UTIL", 4),
    )
    assert values.fields["gpu_util_pct"] == pytest.approx(62.0)
    assert values.fields["cards_busy"] == 2


def test_placing_targets_label_first_then_a_namespace_with_one_allocation():
    """#7 and #8 share team-nlp; #9 alone in team-cv. A series labelled 8 goes to #8, an
    unlabelled team-nlp series cannot be split, team-cv's goes to #9, the rest are listed."""
    answers = answers_from_series(
        {
            "x": [
                term("requests_running", "vllm", "vllm:num_requests_running", 1, allocation="8"),
                term("requests_running", "vllm", "vllm:num_requests_running", 2),
                term(
                    "requests_running", "vllm", "vllm:num_requests_running", 3, namespace="team-cv"
                ),  # fmt: skip
                term(
                    "requests_running",
                    "vllm",
                    "vllm:num_requests_running",
                    4,
                    namespace="team-gone",
                ),  # fmt: skip
                term("requests_running", "vllm", "vllm:num_requests_running", 5, allocation="99"),
            ]
        }
    )
    placed, unmatched = place_targets(
        answers, open_ids=[7, 8, 9], namespaces={7: "team-nlp", 8: "team-nlp", 9: "team-cv"}
    )
    assert sorted(placed) == [8, 9]
    assert allocation_values(placed[8]).fields["requests_running"] == 1
    assert allocation_values(placed[9]).fields["requests_running"] == 3
    reasons = {(u.namespace, u.allocation_label): u.reason for u in unmatched}
    assert reasons == {
        ("team-gone", ""): "no open allocation serves in this namespace",
        ("team-nlp", ""): "2 open allocations share this namespace; label the pods "
        "gpu-pool-portal/allocation",
        ("team-nlp", "99"): "no open allocation has this id",
    }


def test_cards_reporting_with_none_busy_are_zero_busy_not_unknown():
    """`count by (...) (util >= 30)` answers no series when no card passes the threshold; the
    2 cards that reported make that 0 busy cards, not unknown."""
    values = values_of(term("cards_reporting", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2))
    assert values.fields["cards_busy"] == 0
    assert not any(m.startswith("cards_busy") for m in values.missing)
