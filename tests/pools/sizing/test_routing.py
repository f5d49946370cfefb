"""The busiest card's routed experts under a skewed router (pools.sizing.routing)."""

from dataclasses import replace

import pytest

from pools.sizing.engines import engine_profile
from pools.sizing.gpus import gpu_spec
from pools.sizing.memory import precision_parse
from pools.sizing.presets import model_preset
from pools.sizing.routing import routing_exponent, skew_factor
from pools.sizing.throughput import replica_throughput


def test_each_router_family_reads_its_compute_bound_ratio():
    qwen, deepseek = model_preset("qwen3_235b_a22b"), model_preset("deepseek_v3")
    assert routing_exponent(qwen) == 1.2
    assert routing_exponent(deepseek) == 1.01  # multi-head latent attention: DeepSeek family
    # aiconfigurator's MoE op, power law over balanced where compute bound (module docstring).
    assert skew_factor(model=qwen, ranks=8) == 1.764
    assert skew_factor(model=deepseek, ranks=8) == 1.521
    assert skew_factor(model=qwen, ranks=1) == 1.112
    assert skew_factor(model=deepseek, ranks=2) == 1.212


def test_rank_counts_off_the_table_take_the_next_line_and_dense_models_none():
    qwen = model_preset("qwen3_235b_a22b")
    assert skew_factor(model=qwen, ranks=3) == 1.489  # the 4-rank value
    assert skew_factor(model=qwen, ranks=16) == 1.764  # the 8-rank value
    assert skew_factor(model=model_preset("llama3_70b"), ranks=8) == 1.0


def _arguments(**changes) -> dict:
    # An engine without CUDA-graph padding, so the step's tokens are the sequences' own.
    arguments = {
        "model": model_preset("qwen3_235b_a22b"),
        "precision": precision_parse("FP8"),
        "gpu": gpu_spec("h200_sxm"),
        "tp": 8,
        "kv_bits": 8,
        "input_tokens": 1024,
        "output_tokens": 2048,
        "batch": 1024,
        "engine": replace(engine_profile("vllm"), cuda_graph_batch_sizes=()),
        "dp_attention": 8,
    }
    return {**arguments, **changes}


def test_an_attention_dp_step_pays_the_eight_rank_skew_on_the_experts(monkeypatch):
    """Qwen3-235B FP8 on eight H200 with attention DP (experts over all eight cards), 1,024
    sequences of 1,024 in / 2,048 out: the MoE activation traffic is the balanced one x 1.764,
    the routed multiplies take longer, the weight stream does not change."""
    skewed = replica_throughput(**_arguments())
    monkeypatch.setattr("pools.sizing.throughput.skew_factor", lambda **_: 1.0)
    balanced = replica_throughput(**_arguments())

    assert skewed.tokens_per_step == pytest.approx(balanced.tokens_per_step)
    assert skewed.weight_bytes_read_per_step == pytest.approx(balanced.weight_bytes_read_per_step)
    assert skewed.moe_glue_ms == pytest.approx(balanced.moe_glue_ms * 1.764)
    assert skewed.gemm_ms > balanced.gemm_ms
    assert skewed.output_tok_s_total < balanced.output_tok_s_total


def test_without_attention_dp_each_card_pays_the_one_card_skew(monkeypatch):
    seen = []

    def spy(*, model, ranks):
        seen.append(ranks)
        return 1.0

    monkeypatch.setattr("pools.sizing.throughput.skew_factor", spy)
    replica_throughput(**_arguments(dp_attention=1))
    replica_throughput(**_arguments(tp=1, dp_attention=1, gpu=gpu_spec("b200"), batch=64))
    replica_throughput(**_arguments(dp_attention=4, tp=4))
    assert seen == [1, 1, 4]


def test_a_larger_batch_never_gives_less_throughput_for_the_skew():
    """One factor whatever the batch: a compute-bound MoE step still gains from more sequences
    (Qwen3-30B-A3B FP8 on one H100, 502 -> 748 sequences)."""
    arguments = _arguments(
        model=model_preset("qwen3_30b_a3b"), gpu=gpu_spec("h100_sxm"), tp=1, dp_attention=1
    )
    small = replica_throughput(**{**arguments, "batch": 502})
    large = replica_throughput(**{**arguments, "batch": 748})
    assert small.output_tok_s_total <= large.output_tok_s_total
