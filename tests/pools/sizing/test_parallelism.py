"""Pipeline stages, cross-node tensor parallelism and expert parallelism (issue 34)."""

from __future__ import annotations

import pytest

from pools.sizing import SizingInputError
from pools.sizing.engines import ENGINE_PROFILES, batch_cap
from pools.sizing.gpus import gpu_spec, gpu_specs_from_catalogue, node_gpus
from pools.sizing.memory import memory_estimate, precision_parse
from pools.sizing.plan import estimate_from_fields, replica_estimate_as_dict
from pools.sizing.presets import model_preset, model_presets
from pools.sizing.throughput import (
    all_to_all_s,
    allreduce_s,
    decode_weight_bytes,
    dp_weight_bytes,
    gather_or_scatter_s,
    moe_all_to_all_s,
    moe_allgather_s,
    moe_dp_exchange,
    pipeline_cross_node_hops,
    pipeline_hop_s,
    replica_throughput,
    routed_expert_bytes,
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


# --- Expert parallelism with attention data parallelism (issue 34) --------------------------

#: DeepSeek-V3's routed experts, by hand from its config.json: 61 layers - 3 dense = 58 MoE
#: layers x 256 experts x 3 matrices x hidden 7,168 x moe_intermediate 2,048.
DSV3_ROUTED_PARAMS = 58 * 256 * 3 * 7_168 * 2_048


def _dsv3(**fields):
    base = {
        "model": "deepseek_v3",
        "gpu": "h200_sxm",
        "precision": "FP8",
        "kv_cache_dtype": "FP8",
        "tp": 16,
        "ep": 16,
        "nic_gbps": 400,
        "engine": "sglang",
        "input_len": 1_000,
        "output_len": 1_000,
    }
    return estimate_from_fields(
        {**base, **fields}, presets=model_presets(), gpus=gpu_specs_from_catalogue()
    )


def test_dp_attention_splits_the_experts_and_replicates_attention_per_rank():
    """DeepSeek-V3 FP8 on 16 H200 (two 8-card nodes), EP 16, DP 16: each card keeps 256 / 16
    = 16 experts of each of the 58 MoE layers at 1 byte a weight, 58 x 256 x 3 x 7,168 x 2,048
    / 16 = 40,869,298,176 B, and the rest of the model - attention, 3 dense layers, shared
    experts, embeddings and head - whole (671,026,404,352 - 653,908,770,816 = 17,117,633,536
    weights, the 2 x 129,280 x 7,168 = 1,853,358,080 of the embedding and head at 2 bytes, the
    checkpoint keeps them 16 bit: 18,970,991,616 B). Its KV cache holds only its own
    sequences, each 61 layers x (512 + 64) x 1 B x 2,000 tokens = 70,272,000 B, so 16 ranks x
    (KV budget // that) sequences fit; without attention DP every card holds every sequence's
    latent (MLA is not split by TP)."""
    assert DSV3_ROUTED_PARAMS == 653_908_770_816
    total = model_preset("deepseek_v3").total_params
    gpu = gpu_spec("h200_sxm")
    estimate = _dsv3(dp_attention=16)
    memory = estimate.memory

    assert memory.expert_weights_bytes_per_gpu == 40_869_298_176 == DSV3_ROUTED_PARAMS // 16
    embedding = 2 * 129_280 * 7_168
    whole = 40_869_298_176 + (total - DSV3_ROUTED_PARAMS) + embedding
    assert memory.weights_bytes_per_gpu == whole == 59_840_289_792
    assert memory.kv_bytes_per_sequence_per_gpu == 61 * 576 * 2_000 == 70_272_000
    overhead = 3 * 1024**3 + 392 * 1024**2  # engine overhead + NCCL buffers at TP >= 4
    reserve = int(gpu.memory_bytes * 0.10)
    budget = gpu.memory_bytes - memory.weights_bytes_per_gpu - overhead - reserve
    assert memory.max_sequences == 16 * (budget // 70_272_000)

    plain = _dsv3().memory  # EP 16 without attention DP: every card holds 1 / 16 of it all
    assert plain.weights_bytes_per_gpu == -(-(total + embedding) // 16)
    plain_budget = gpu.memory_bytes - plain.weights_bytes_per_gpu - overhead - reserve
    assert plain.max_sequences == plain_budget // 70_272_000
    assert memory.max_sequences > 10 * plain.max_sequences


def test_dp_attention_kv_on_the_busiest_card_is_its_ranks_share_of_the_sequences():
    """33 sequences over 16 DP ranks: the busiest rank holds ceil(33 / 16) = 3."""
    memory = _dsv3(dp_attention=16, concurrency=33).memory

    assert memory.kv_cache_bytes_per_gpu == 3 * 70_272_000


def test_all_to_all_crosses_the_nic_for_the_ranks_on_other_nodes():
    """1 MB per card among 16 H200 on two nodes: 8 / 16 of it goes over the 400 Gb/s NIC
    (50 GB/s) while 7 / 16 goes over NVLink (450 GB/s per direction, 370 GB/s of it reached by
    a collective: faster): 50 us + 0.5e6 / 50e9 = 60 us. Among 8 on one node: 10 us + 0.875e6 /
    370e9 = 12.365 us."""
    gpu = gpu_spec("h200_sxm")

    assert all_to_all_s(bytes_per_card=1e6, ranks=16, gpu=gpu, nic_gbps=400) == pytest.approx(60e-6)
    assert all_to_all_s(bytes_per_card=1e6, ranks=8, gpu=gpu) == pytest.approx(
        10e-6 + 0.875e6 / 370e9
    )
    assert all_to_all_s(bytes_per_card=1e6, ranks=1, gpu=gpu) == 0.0


def test_moe_all_to_all_is_tokens_times_hidden_times_bytes_times_k_per_direction():
    """DeepSeek-V3 FP8, 128 tokens per card on 16 H200 (400 Gb/s): dispatch 128 x 8 x 7,168 x
    1 B = 7,340,032 B, combine x 2 B = 14,680,064 B, half of each over the NIC: (50 us +
    3,670,016 / 50e9 s) + (50 us + 7,340,032 / 50e9 s) = 320.20096 us per MoE layer, x 58 =
    18.5716557 ms."""
    seconds = moe_all_to_all_s(
        model=model_preset("deepseek_v3"),
        precision=precision_parse("FP8"),
        tokens_per_card=128,
        ranks=16,
        gpu=gpu_spec("h200_sxm"),
        nic_gbps=400,
    )

    assert seconds == pytest.approx(58 * (100e-6 + (3_670_016 + 7_340_032) / 50e9))
    assert seconds == pytest.approx(18.5716557e-3)


def test_dp_attention_decode_step_costs_the_all_to_all_and_no_cross_node_all_reduce():
    """With DP 16 an attention rank is one card: no all-reduce at all, the step pays the MoE
    all-to-all (58 layers) of the tokens each card dispatches; at DP 4 the 4-card ranks
    all-reduce inside the node."""
    one = _dsv3(dp_attention=16, concurrency=16).throughput
    four = _dsv3(dp_attention=4, concurrency=16).throughput
    model, fp8, gpu = model_preset("deepseek_v3"), precision_parse("FP8"), gpu_spec("h200_sxm")

    assert one.allreduce_ms == 0.0
    assert one.allreduce_over == "none"
    assert one.all_to_all_ms == pytest.approx(
        moe_all_to_all_s(
            model=model,
            precision=fp8,
            tokens_per_card=one.tokens_per_step / 16,
            ranks=16,
            gpu=gpu,
            nic_gbps=400,
        )
        * 1e3
    )
    assert four.allreduce_over == "NVLink"
    assert four.allreduce_ms > 0
    assert replica_estimate_as_dict(_dsv3(dp_attention=16, concurrency=1))["dp_attention"] == 16


def test_an_all_gather_or_reduce_scatter_is_half_a_ring_all_reduce():
    """8 V100 SXM2 (NVLink 150 GB/s per direction, no measured table: the ring formula, 0.822
    of it reached), 8 MB gathered: 10 us + 7 / 8 x 8e6 / 123.33e9 s = 66.757 us; the all-reduce
    of the same tensor moves twice the bytes after one latency."""
    gpu = gpu_spec("v100_32g_sxm2")

    gathered = gather_or_scatter_s(message_bytes=8e6, ranks=8, gpu=gpu)
    assert gathered == pytest.approx(10e-6 + 7 / 8 * 8e6 / (150e9 * 370 / 450), rel=1e-9)
    assert gathered == pytest.approx(66.757e-6, rel=1e-4)
    assert allreduce_s(message_bytes=8e6, tp=8, gpu=gpu) == pytest.approx(
        10e-6 + 2 * (gathered - 10e-6)
    )
    assert gather_or_scatter_s(message_bytes=8e6, ranks=1, gpu=gpu) == 0.0


def test_moe_all_gather_moves_every_token_whatever_k():
    """Llama 4 Maverick FP8 (h 5,120, k 1, 24 MoE layers), 3,000 tokens on 8 H200: gather
    3,000 x (5,120 x 1 B + 1 x 8 B routing) = 15,384,000 B, reduce-scatter 3,000 x 5,120 x 2 B
    = 30,720,000 B at the 370 GB/s a collective reaches of NVLink's 450: (10 us + 7 / 8 x
    15,384,000 / 370e9) + (10 us + 7 / 8 x 30,720,000 / 370e9) = 129.030 us a layer, 3.0967 ms
    for 24. The all-to-all of the same pass sends each card's 375 tokens to k = 1 expert:
    (10 us + 7 / 8 x 1,920,000 / 370e9) + (10 us + 7 / 8 x 3,840,000 / 370e9) = 33.6 us a
    layer, 8 times less data."""
    model, fp8, gpu = model_preset("llama4_maverick"), precision_parse("FP8"), gpu_spec("h200_sxm")

    gathered = moe_allgather_s(
        model=model, precision=fp8, tokens=3_000, ranks=8, gpu=gpu, nic_gbps=None
    )
    layer = (10e-6 + 7 / 8 * 15_384_000 / 370e9) + (10e-6 + 7 / 8 * 30_720_000 / 370e9)
    assert layer == pytest.approx(129.030e-6, rel=1e-5)
    assert gathered == pytest.approx(24 * layer)
    sent = moe_all_to_all_s(
        model=model, precision=fp8, tokens_per_card=375, ranks=8, gpu=gpu, nic_gbps=None
    )
    assert sent == pytest.approx(24 * (20e-6 + 7 / 8 * (1_920_000 + 3_840_000) / 370e9))
    dense = model_preset("llama3_70b")
    assert (
        moe_allgather_s(model=dense, precision=fp8, tokens=3_000, ranks=8, gpu=gpu, nic_gbps=None)
        == 0.0
    )


def test_tensorrt_llm_gathers_except_on_an_nvl72_rack_with_more_ranks_than_k():
    """TensorRT-LLM's MoE all-to-all needs MNNVL (GB200 / GB300 NVL72) and EP above k
    (``enable_alltoall``); elsewhere it gathers. SGLang's profile keeps the all-to-all."""
    maverick, qwen = model_preset("llama4_maverick"), model_preset("qwen3_235b_a22b")
    h200, gb200 = gpu_spec("h200_sxm"), gpu_spec("gb200")
    trt = ENGINE_PROFILES["tensorrt-llm-pytorch"].moe_dp_exchange

    assert trt == "allgather"
    assert moe_dp_exchange(exchange=trt, model=maverick, gpu=h200, ranks=8) == "allgather"
    assert moe_dp_exchange(exchange=trt, model=maverick, gpu=gb200, ranks=8) == "all_to_all"
    assert moe_dp_exchange(exchange=trt, model=qwen, gpu=gb200, ranks=8) == "allgather"  # k 8
    assert moe_dp_exchange(exchange=trt, model=qwen, gpu=gb200, ranks=16) == "all_to_all"
    assert ENGINE_PROFILES["sglang"].moe_dp_exchange == "all_to_all"


def test_a_tensorrt_llm_dp_step_pays_the_all_gather_and_sglang_the_all_to_all():
    """Maverick FP8 on 8 H200 at 256 sequences with attention DP 8: under TensorRT-LLM the
    step's exchange is the all-gather of the step's tokens, under SGLang the all-to-all of each
    card's eighth of them."""
    fields = {
        "model": "llama4_maverick",
        "gpu": "h200_sxm",
        "precision": "FP8",
        "kv_cache_dtype": "FP8",
        "tp": 8,
        "ep": 8,
        "dp_attention": 8,
        "concurrency": 256,
        "input_len": 1_000,
        "output_len": 1_000,
    }
    model, fp8, gpu = model_preset("llama4_maverick"), precision_parse("FP8"), gpu_spec("h200_sxm")
    trt = _estimate(**fields, engine="tensorrt-llm-pytorch").throughput
    sgl = _estimate(**fields, engine="sglang").throughput

    assert trt.all_to_all_ms == pytest.approx(
        moe_allgather_s(
            model=model, precision=fp8, tokens=trt.tokens_per_step, ranks=8, gpu=gpu, nic_gbps=None
        )
        * 1e3
    )
    assert sgl.all_to_all_ms == pytest.approx(
        moe_all_to_all_s(
            model=model,
            precision=fp8,
            tokens_per_card=sgl.tokens_per_step / 8,
            ranks=8,
            gpu=gpu,
            nic_gbps=None,
        )
        * 1e3
    )
    assert trt.all_to_all_ms > sgl.all_to_all_ms  # k = 1: the gather moves 8x the bytes


def test_dp_attention_reads_the_replicated_weights_once_per_rank():
    """At one sequence the step streams every rank's copy of the replicated weights: d x
    (decode bytes - routed experts touched - embedding lookups) + routed + lookups."""
    model, fp8 = model_preset("deepseek_v3"), precision_parse("FP8")
    whole = decode_weight_bytes(model=model, precision=fp8, tokens=1)
    routed = routed_expert_bytes(model=model, precision=fp8, tokens=1)
    lookup = 7_168 * 2

    assert dp_weight_bytes(model=model, precision=fp8, tokens=1, dp_attention=4) == pytest.approx(
        4 * (whole - routed - lookup) + routed + lookup
    )
    assert dp_weight_bytes(model=model, precision=fp8, tokens=1, dp_attention=1) == whole


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"dp_attention": 16, "ep": None}, "dp_attention"),  # needs EP
        ({"dp_attention": 16, "ep": 8}, "dp_attention"),  # EP must equal TP
        ({"dp_attention": 3}, "dp_attention"),  # does not divide TP 16
        ({"model": "llama3_70b", "tp": 8, "ep": None, "dp_attention": 8}, "dp_attention"),
    ],
)
def test_dp_attention_layouts_that_cannot_be_costed_are_refused(fields, field):
    with pytest.raises(SizingInputError) as error:
        _dsv3(**fields)

    assert (error.value.data["reason"], error.value.data["field"]) == ("inconsistent", field)


def test_each_attention_dp_rank_schedules_its_own_batch_cap():
    """Qwen3-30B-A3B NVFP4 on 8 B200 at 128/128 holds far more than 4,096 sequences: without
    attention DP TensorRT-LLM admits its 4,096 (max_batch_size), with 8 DP ranks each rank
    admits 4,096 of its own, 32,768 in all (py_executor.py: tp_size x max_num_active_requests)."""
    common = {
        "model": "qwen3_30b_a3b",
        "gpu": "b200",
        "precision": "NVFP4",
        "kv_cache_dtype": "FP8",
        "tp": 8,
        "ep": 8,
        "engine": "tensorrt-llm-pytorch",
        "input_len": 128,
        "output_len": 128,
    }
    plain = _estimate(**common)
    ranks = _estimate(**common, dp_attention=8)

    assert plain.memory.max_sequences > 4_096 and ranks.memory.max_sequences > 32_768
    assert (plain.throughput.batch, plain.batch_limit) == (4_096, "engine")
    assert (ranks.throughput.batch, ranks.batch_limit) == (32_768, "engine")
    assert batch_cap(ENGINE_PROFILES["sglang"], 8) is None  # SGLang: only the KV cache limits


def test_pipeline_stages_without_a_tp_say_the_layout_across_nodes_needs_the_nic():
    """Kimi-K2 in BF16 (1,026.4 B parameters x 2 B = 2,052.8 GB) on H200 (141 GiB) at PP 2
    with TP left to the plan: TP 4 x PP 2 (one node) needs 2,052.8 / 8 = 256.6 GB of weights
    a card and does not fit; TP 8 x PP 2 (128.3 GB a card) spans two nodes, which needs the
    NIC rate. The row said only "Needs ... at TP 4", as if the cards were too small; it must
    also say what the layout across nodes lacks (000 section 4.1: PP across nodes)."""
    from pools.sizing.plan import sizing_plan

    plan = sizing_plan(
        model=model_preset("kimi_k2"), gpus=[gpu_spec("h200_sxm")], precision="BF16",
        kv_cache_dtype="FP8", input_tokens=1_000, output_tokens=200, concurrency=8, pp=2,
    )  # fmt: skip

    (row,) = plan.rows
    codes = [w.code for w in row.warnings]
    assert codes == ["does_not_fit", "layout_refused"]
    assert "at TP 4" in row.warnings[0].message
    assert row.warnings[1].message.startswith("tp 8 x pp 2 spans more than one 8-card node")
    assert "nic_gbps" in row.warnings[1].message
