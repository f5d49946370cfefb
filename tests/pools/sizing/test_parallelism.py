"""Pipeline stages, cross-node tensor parallelism and expert parallelism (issue 34)."""

from __future__ import annotations

import pytest

from pools.sizing import SizingInputError
from pools.sizing.gpus import gpu_spec, gpu_specs_from_catalogue, node_gpus
from pools.sizing.memory import memory_estimate, precision_parse
from pools.sizing.plan import estimate_from_fields, replica_estimate_as_dict
from pools.sizing.presets import model_preset, model_presets
from pools.sizing.throughput import (
    allreduce_s,
    pipeline_cross_node_hops,
    pipeline_hop_s,
    replica_throughput,
)

FP16 = precision_parse("FP16")


def _estimate(**fields):
    base = {"model": "llama3_70b", "gpu": "h100_sxm", "input_len": 1_000, "output_len": 100}
    return estimate_from_fields(
        {**base, **fields}, presets=model_presets(), gpus=gpu_specs_from_catalogue()
    )


def test_a_pipeline_stage_holds_its_share_of_the_layers():
    """Llama-3-8B (32 layers) FP16 at PP 2: 16 layers per card, so half the weights,
    8,030,261,248 x 2 / 2 = 8,030,261,248 B, and half of the 131,072 B of KV per token;
    at PP 3 the busiest stage has ceil(32 / 3) = 11 layers: ceil(16,060,522,496 x 11 / 32) =
    5,520,804,608 B."""
    model = model_preset("llama3_8b")
    common = {
        "model": model,
        "precision": FP16,
        "kv_bits": 16,
        "gpu_memory_bytes": gpu_spec("h100_sxm").memory_bytes,
        "tp": 1,
        "context_tokens": 2_048,
        "sequences": 1,
    }

    two = memory_estimate(pp=2, **common)
    three = memory_estimate(pp=3, **common)

    assert two.weights_bytes_per_gpu == 8_030_261_248
    assert two.kv_bytes_per_token_per_gpu == 65_536
    assert two.kv_bytes_per_sequence_per_gpu == 65_536 * 2_048
    assert three.weights_bytes_per_gpu == 5_520_804_608
    assert two.weights_bytes == 16_060_522_496  # the whole model is still counted once


def test_more_stages_than_layers_is_refused():
    model = model_preset("llama3_8b")

    with pytest.raises(SizingInputError) as error:
        memory_estimate(
            model=model,
            precision=FP16,
            kv_bits=16,
            gpu_memory_bytes=80 * 2**30,
            tp=1,
            context_tokens=100,
            sequences=1,
            pp=33,
        )

    assert (error.value.data["reason"], error.value.data["field"]) == ("inconsistent", "pp")


def test_a_hand_over_between_nodes_costs_latency_plus_bytes_over_the_nic():
    """1,000 tokens of Llama-3-70B activations: 1,000 x 8,192 x 2 = 16,384,000 B. One card on
    a 400 Gb/s NIC (50e9 B/s): 50 us + 327.68 us = 377.68 us; a TP group of 8 sends 1/8 each:
    50 us + 40.96 us. Inside an H100 node, NVLink 900 / 2 = 450 GB/s: 10 us + 36.41 us."""
    h100 = gpu_spec("h100_sxm")
    message = 1_000 * 8_192 * 2

    one = pipeline_hop_s(message_bytes=message, tp=1, gpu=h100, crosses_node=True, nic_gbps=400)
    eight = pipeline_hop_s(message_bytes=message, tp=8, gpu=h100, crosses_node=True, nic_gbps=400)
    local = pipeline_hop_s(message_bytes=message, tp=1, gpu=h100, crosses_node=False, nic_gbps=None)

    assert one == pytest.approx(50e-6 + 327.68e-6)
    assert eight == pytest.approx(50e-6 + 40.96e-6)
    assert local == pytest.approx(10e-6 + 16_384_000 / 450e9)


@pytest.mark.parametrize(
    ("gpu", "tp", "pp", "hops"),
    [
        ("h100_sxm", 8, 2, 1),  # two nodes, one boundary between them
        ("h100_sxm", 4, 2, 0),  # both stages in one node
        ("h100_sxm", 2, 8, 1),  # 4 stages per node, two nodes
        ("h100_sxm", 8, 4, 3),
        ("gb200", 8, 4, 0),  # 32 cards inside the 72-GPU NVLink domain
    ],
)
def test_stage_boundaries_that_cross_a_node(gpu, tp, pp, hops):
    assert pipeline_cross_node_hops(gpu=gpu_spec(gpu), tp=tp, pp=pp) == hops


def test_a_tp_group_across_nodes_all_reduces_at_the_nic_rate():
    """16 H100 (two nodes) on 400 Gb/s, 1 MB: 50 us + 2 x 15 / 16 x 1e6 / 50e9 = 87.5 us; the
    same group inside a GB200 NVL72 stays on NVLink."""
    assert node_gpus(gpu_spec("h100_sxm")) == 8
    assert node_gpus(gpu_spec("gb200")) == 72
    seconds = allreduce_s(message_bytes=1e6, tp=16, gpu=gpu_spec("h100_sxm"), nic_gbps=400)

    assert seconds == pytest.approx(87.5e-6)
    nvl = allreduce_s(message_bytes=1e6, tp=16, gpu=gpu_spec("gb200"))
    assert nvl < seconds


def test_two_stages_double_the_sequences_of_one_tp_group_at_half_the_batch():
    """PP 2 of one card each, 64 sequences: two micro-batches of 32 alternate, so a token
    takes one TP-1 step at batch 32 plus one NVLink hand-over of its activations; output =
    64 / that. The hand-over: 10 us + tokens x 8,192 x 2 B / 450 GB/s."""
    model = model_preset("llama3_70b")
    common = {
        "model": model,
        "precision": FP16,
        "gpu": gpu_spec("h100_sxm"),
        "tp": 1,
        "kv_bits": 16,
        "input_tokens": 1_000,
        "output_tokens": 1_000,
    }
    half = replica_throughput(batch=32, **common)
    hop_s = 10e-6 + half.tokens_per_step * 8_192 * 2 / 450e9

    piped = replica_throughput(batch=64, pp=2, **common)

    assert piped.pp == 2
    assert piped.pipeline_hops_ms == pytest.approx(hop_s * 1e3)
    assert piped.step_ms == pytest.approx(half.step_ms + hop_s * 1e3)
    assert piped.output_tok_s_total == pytest.approx(64 / (half.step_ms / 1e3 + hop_s))
    assert piped.output_tok_s_per_gpu == pytest.approx(piped.output_tok_s_total / 2)


def test_the_article_layout_tp_in_the_node_pp_across_nodes():
    """Llama-3-70B FP16 on two H100 nodes: TP 8 x PP 2 needs the NIC only for the one stage
    boundary; the replica is 16 cards and the dict says so."""
    estimate = _estimate(tp=8, pp=2, nic_gbps=400, concurrency=16)
    result = replica_estimate_as_dict(estimate)

    assert (result["tp"], result["pp"], result["nic_gbps"], result["replicas"]) == (8, 2, 400, 1)
    assert result["throughput"]["allreduce_over"] == "NVLink"
    assert estimate.memory.weights_bytes_per_gpu == -(-(70_553_706_496 * 2 // 8) * 40 // 80)
    assert [w.code for w in estimate.warnings] == []


@pytest.mark.parametrize(
    ("fields", "reason", "field"),
    [
        ({"tp": 16}, "nic_too_slow", "nic_gbps"),  # across nodes, no NIC given
        ({"tp": 16, "nic_gbps": 200}, "nic_too_slow", "nic_gbps"),  # below 400 Gb/s
        ({"tp": 8, "pp": 2}, "missing", "nic_gbps"),  # stages on two nodes
        ({"tp": 8, "pp": 2, "nic_gbps": -1}, "not_positive", "nic_gbps"),
        ({"tp": 8, "pp": 0}, "not_positive", "pp"),
        ({"tp": 8, "pp": 2, "nic_gbps": 400, "gpu_count": 8}, "inconsistent", "tp"),
        ({"tp": 8, "ep": 8}, "inconsistent", "ep"),  # a dense model has no experts
        ({"model": "mixtral_8x7b", "tp": 4, "ep": 8}, "inconsistent", "ep"),  # ep > tp
        ({"model": "qwen3_30b_a3b", "tp": 4, "ep": 3}, "inconsistent", "ep"),
    ],
)
def test_layouts_the_model_cannot_cost_or_the_article_advises_against_are_refused(
    fields, reason, field
):
    with pytest.raises(SizingInputError) as error:
        _estimate(**fields)

    assert (error.value.data["reason"], error.value.data.get("field")) == (reason, field)


def test_cross_node_tp_on_a_fast_nic_is_costed_and_warned_about():
    estimate = _estimate(tp=16, nic_gbps=400, concurrency=8)

    assert estimate.throughput.allreduce_over == "NIC"
    assert [w.code for w in estimate.warnings] == ["cross_node_tp"]


def test_expert_parallel_is_accepted_for_a_mixture_of_experts():
    estimate = _estimate(model="qwen3_30b_a3b", tp=4, ep=4, concurrency=8)

    assert replica_estimate_as_dict(estimate)["ep"] == 4
    assert estimate.throughput is not None
