"""Speed of one serving replica (a TP group of cards): decode step time, TPOT, TTFT, tok/s.

The model, after DESIGN.md "Sizing" and the public estimators in
``shared/research/sizing_anchors.md`` (a per-operation roofline as in LLM-Viewer and llm-analysis,
with aiconfigurator's empirical constants), and issue 17's evidence:

- **Decode is memory-bandwidth bound.** One decode step streams the decoder layers' weights at
  their stored width (weight-only INT4/INT8 plus their group scales and zero points), the output
  head at 16 bit, one embedding row per token (a lookup, not the table) - for a mixture of
  experts only the experts the batch's tokens route to - plus the batch's KV cache
  (:func:`decode_weight_bytes`). GEMM time = the roofline of weight bytes / (bandwidth ×
  efficiency) and 2 × active params × tokens / (tensor FLOPS × efficiency), combined as far as
  the engine overlaps them (:func:`overlapped_s`) - a mixture of experts' routed-expert GEMMs
  in FP4 on Blackwell at the share of the FP4 peak measured MoE-layer kernels reach, and FP4 on
  Blackwell at most at the share measured dense NVFP4 GEMMs reach, not the efficiency of the
  other tensor rates, and its NVFP4 routed experts' weights streaming at the share of the
  bandwidth measured MoE kernels reach (:func:`weight_stream_s`), each for the card's chip
  family (``pools.sizing.fp4_kernels``: a B200 14 %, 34 %, 0.397; an RTX PRO 6000 36 %, capped
  by the efficiency, 0.8), and block-scaled FP8 experts on Hopper at the share of the
  FP8 peak TensorRT-LLM's MoE op reaches (:data:`MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE`, 24 %),
  and MXFP4 experts on Hopper under TensorRT-LLM (weight-only on its TRITON MoE op) at the
  rates measured for that op (:func:`hopper_mxfp4_routed_rate`, 44 % of the BF16 peak plus a
  time per routed slot; :data:`HOPPER_MXFP4_MOE_STREAM_SHARE`, 0.2917 of the bandwidth);
  a mixture of experts adds the activation traffic of its routed rows between the grouped
  GEMMs (:func:`moe_glue_s`); attention time = max(KV bytes read / (bandwidth × efficiency),
  decode attention FLOPs / (16-bit FLOPS × efficiency); latent attention decodes in its
  absorbed form, :func:`decode_attention_flops_per_context_token`, in FP8 on Blackwell against
  an FP8 cache, :func:`decode_attention_rate`) + the context attention FLOPs of the prompts
  mixed into the step at that rate (separate kernels, one after the other); plus the engine
  profile's fixed time per layer and step (``pools.sizing.engines``) and, for TP > 1, two
  all-reduces per layer. vLLM before 0.4.3 reads the KV cache once per query head
  (``engines.VLLM_FLASH_DECODE_FIRST_VERSION``).
- **De-quantisation is its own term** of 4-bit weight-only layers (:func:`dequant_seconds`):
  CUDA-core instructions per weight / the card's CUDA-core rate. Marlin-type kernels overlap it
  with the weight stream (GEMM time = max(memory, compute, de-quantisation)); vLLM's original
  AWQ kernel (releases before 0.5.3) runs stream, de-quantisation and 16-row MMAs one after
  another, which is why a 4-bit AWQ model at batch 1 there stays far from its byte-count
  roofline.
- **Prefill is compute bound**: 2 × active params FLOPs per input token plus causal attention
  2 × layers × heads × head dim × tokens². Engines with continuous batching and chunked prefill
  (vLLM, SGLang, TensorRT-LLM in-flight batching) mix prefill chunks into the decode steps of the
  *other* sequences; a sequence's own prefill runs before its first decode step, so 1 / batch of
  the prefill work runs alone (compute bound) and the rest rides in the decode steps. The step
  (per output token of every sequence) = decode step + that serial share; TPOT = decode step.
- **Tensor parallelism** splits weights, KV heads, bandwidth and FLOPS across the ``tp`` cards and
  costs two all-reduces per layer of tokens × hidden × 2 bytes: 2 (tp - 1) / tp × bytes / bus
  bandwidth, the bus bandwidth NVLink all-reduces were measured to reach at that size on
  NVSwitch systems (:func:`allreduce_s`, :mod:`pools.sizing.collectives`), else latency plus the
  ring formula; cards without NVLink go over PCIe at half its link rate
  (:data:`PCIE_ALLREDUCE_SHARE`), the "PCIe all-reduce penalty" stated per result.

Output rate = sequences in flight / step; TTFT = the prefill of one request alone (compute or
weight streaming, whichever is slower) plus one decode step of the running batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pools.sizing import SizingInputError, SizingWarning
from pools.sizing.collectives import measured_allreduce_share
from pools.sizing.engines import COMPUTE_EFFICIENCY as _DEFAULT_COMPUTE_EFFICIENCY
from pools.sizing.engines import EngineProfile, engine_profile
from pools.sizing.fp4_kernels import fp4_kernels
from pools.sizing.gpus import (
    NVLINK_DOMAIN_GPUS,
    GpuSpec,
    cuda_core_instructions_per_s,
    fp4_dense_tflops,
    grace_hosted,
    node_gpus,
    trtllm_gen_attention,
)
from pools.sizing.memory import (
    FP4_SCALE_BITS_PER_WEIGHT,
    LM_HEAD_BITS,
    Precision,
    embedding_params,
    kv_bytes_per_sequence,
    kv_tokens_per_sequence,
    precision_parse,
    stored_bits_per_weight,
    window_kv_bytes_per_sequence,
)
from pools.sizing.presets import ModelArch
from pools.sizing.routing import skew_factor

#: Share of peak memory bandwidth that decode kernels reach. NVIDIA aiconfigurator's empirical
#: mode uses ``mem_bw_empirical_scaling_factor: 0.8`` (systems/*.yaml); single-stream TPOTs in the
#: sizing dataset reach 75-84 % of bandwidth / weight bytes on one card (sizing_anchors.md 3.2).
BANDWIDTH_EFFICIENCY = 0.8

#: Default share of tensor peak (an engine profile may differ): see ``pools.sizing.engines``.
COMPUTE_EFFICIENCY = _DEFAULT_COMPUTE_EFFICIENCY

#: Fixed latency per memory-bound kernel, seconds: aiconfigurator ``mem_empirical_constant_latency``
#: 3 us. A Llama-style layer runs about ten kernels per step (input norm, QKV GEMM, rotary,
#: attention, O GEMM, residual + post norm, gate/up GEMM, activation, down GEMM, residual).
KERNEL_LATENCY_S = 3e-6
KERNELS_PER_LAYER = 10

#: Start-up latency of one all-reduce, seconds. NVLink: aiconfigurator ``p2p_latency`` 10 us.
#: PCIe: nccl-tests all_reduce_perf on eight PCIe RTX 3090s took 54 us for an 8-byte all-reduce
#: (github.com/NVIDIA/nccl/issues/1439); 50 us is used for every card without NVLink.
ALLREDUCE_LATENCY_NVLINK_S = 10e-6
ALLREDUCE_LATENCY_PCIE_S = 50e-6

#: Share of the NVLink rate (per direction) a ring collective's bus bandwidth reaches: "450GB/s is
#: the line rate. With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of
#: 370GB/s" (an NCCL maintainer, NVIDIA/nccl-tests issue 212, on 8 H100; busBw of a ring
#: all-reduce or of any other collective), 370 / 450 = 0.822, taken for every NVLink generation.
#: Issue 34, cross-validated: the 726 published rows go from median 11.8 % / P90 39.5 % to
#: 11.6 / 38.3 % (TensorRT-LLM 0.20 tables, TP 1-8: median 11.4 -> 9.7 %), the default 227 rows
#: from 9.7 / 25.2 % to 9.3 / 24.8 %.
NVLINK_COLLECTIVE_SHARE = 370 / 450

#: Share of the PCIe link rate (per direction) an all-reduce's bus bandwidth reaches on cards
#: without NVLink: nccl-tests all_reduce_perf on 8 RTX 5090 over PCIe 5.0 (64 GB/s per
#: direction) peaked at 28 GB/s bus bandwidth, 35 GB/s on 4 of them (github.com/NVIDIA/nccl
#: issues/1639; an NCCL maintainer there: on PCI systems the CPU and memory bound it): 0.44 and
#: 0.55, so 0.5.
PCIE_ALLREDUCE_SHARE = 0.5

#: Bytes per activation element exchanged by TP all-reduces (16-bit activations).
ACTIVATION_BYTES = 2

#: Least NIC rate per card, Gb/s, at which tensor parallelism may span nodes: ``000`` §4.1
#: ("如果不得不在多个节点间拆张量并行，网卡带宽没有400G以上，性能基本别指望" - TP split across
#: nodes on NICs below 400G is not worth expecting anything from). Below it such a TP is refused.
MIN_CROSS_NODE_TP_NIC_GBITS = 400

#: Start-up latency of one message between nodes, seconds. No measurement is on record here, so
#: it is taken as the PCIe all-reduce's (:data:`ALLREDUCE_LATENCY_PCIE_S`, 50 us), an
#: assumption; the bandwidth term is the NIC's line rate.
NIC_LATENCY_S = ALLREDUCE_LATENCY_PCIE_S


def _nic_bytes_per_s(nic_gbps: float | None) -> float:
    if nic_gbps is None or not nic_gbps > 0:
        raise SizingInputError(
            "the cards span more than one node: give the NIC rate per card (nic_gbps, Gb/s)",
            reason="missing",
            field="nic_gbps",
        )
    return nic_gbps * 1e9 / 8


def precision_on_gpu(precision: Precision, gpu: GpuSpec) -> tuple[Precision, list[SizingWarning]]:
    """The precision the card really runs, and why it differs from the one asked for.

    FP8 on a card without FP8 tensor cores (A100, A10, Turing) runs only as weight-only
    quantisation: weights stored in 8 bits, de-quantised to FP16 for the multiply (vLLM's FP8
    Marlin path), so memory and bandwidth halve but compute runs at the FP16 rate. FP8 on a card
    whose FP8 support is unknown is kept, with a warning. NVFP4 / MXFP4 multiply natively only
    on Blackwell (:data:`pools.sizing.gpus.FP4_DENSE_TFLOPS`); elsewhere they run de-quantised
    to 16 bit (``MXFP4-WO`` / ``NVFP4-WO``: vLLM serves gpt-oss's MXFP4 on Hopper and Ampere
    with its Marlin MXFP4 kernel, TensorRT-LLM on Hopper as ``W4A16_MXFP4`` on its TRITON MoE
    backend, :func:`hopper_mxfp4_routed`), 4.25 / 4.5 bits per weight read, FP16 compute.
    """
    if precision.compute == "fp4":
        if fp4_dense_tflops(gpu) is not None:
            return precision, []
        return precision_parse(f"{precision.name}-WO"), [
            SizingWarning(
                "fp4_weight_only",
                f"{gpu.name} has no FP4 tensor cores (Blackwell has): {precision.name} runs as "
                "weight-only 4-bit (de-quantised to 16 bit for the multiply); memory and "
                "bandwidth as 4-bit, compute at the FP16 rate.",
            )
        ]
    if precision.compute != "fp8":
        return precision, []
    if gpu.fp8_native is False:
        return precision_parse("FP8-WO"), [
            SizingWarning(
                "fp8_weight_only",
                f"{gpu.name} has no FP8 tensor cores: FP8 runs only as weight-only quantisation "
                "(8-bit weights de-quantised to FP16 for the multiply); memory and bandwidth as "
                "FP8, compute at the FP16 rate.",
            )
        ]
    if gpu.fp8_native is None:
        return precision, [
            SizingWarning(
                "fp8_support_unknown",
                f"The catalogue does not say whether {gpu.name} has FP8 tensor cores.",
            )
        ]
    return precision, []


def tensor_tflops(precision: Precision, gpu: GpuSpec) -> float | None:
    """Dense tensor peak in TFLOPS (TOPS for INT8) for the precision's compute type on ``gpu``.

    Falls back to the FP16 rate when the FP8 / INT8 / BF16 figure is unknown; ``None`` when no
    rate is known at all (the compute-bound parts then cannot be modelled).
    """
    rates = {
        "fp4": fp4_dense_tflops(gpu),
        "fp8": gpu.fp8_dense_tflops,
        "int8": gpu.int8_dense_tops,
        "bf16": gpu.bf16_dense_tflops,
        "fp16": gpu.fp16_dense_tflops,
    }
    return rates.get(precision.compute) or gpu.fp16_dense_tflops


def allreduce_s(
    *, message_bytes: float, tp: int, gpu: GpuSpec, nic_gbps: float | None = None
) -> float:
    """Seconds for one all-reduce of ``message_bytes`` across ``tp`` cards of ``gpu``.

    On NVSwitch-connected cards (form factor ``sxm``) of a generation with a measured table,
    inside the NVLink domain: 2 x (tp - 1) / tp x bytes / (NVLink per direction x the measured
    bus bandwidth share at that size, :func:`pools.sizing.collectives.measured_allreduce_share`):
    eight H200, 8 MiB: 1.75 x 8,388,608 / (450e9 x 0.42279) = 77.16 us (the tables' H200 point:
    77 us; the ring formula below said 49.7 us). Elsewhere the ring formula: latency + 2 x
    (tp - 1) / tp x bytes / bus bandwidth - NVLink per direction x
    :data:`NVLINK_COLLECTIVE_SHARE` (Volta, Turing, bridged pairs), else the PCIe link rate x
    :data:`PCIE_ALLREDUCE_SHARE`. 0 for tp = 1. Ring all-reduce traffic per card is the
    llm-analysis formula (sizing_anchors.md 2.5). A group larger than a node
    (:func:`pools.sizing.gpus.node_gpus`) is bound by its slowest ring link, the NIC:
    ``nic_gbps`` Gb/s per card (/ 8 for bytes), :data:`NIC_LATENCY_S`; 16 H100 on 400 Gb/s,
    1 MB: 50 us + 2 x 15 / 16 x 1e6 / 50e9 = 87.5 us.

    Issue 34, cross-validated: TensorRT-LLM's Llama 3.3 70B NVFP4 tables on 8 B200 went from
    +22 ... +59 % to +6 ... +33 %; the 726 published rows' median 11.3 -> 10.7 %, the default
    227 rows' 9.3 -> 8.7 %.
    """
    if tp <= 1:
        return 0.0
    factor = 2 * (tp - 1) / tp
    if tp <= node_gpus(gpu) and gpu.nvlink_spans(tp) and gpu.form_factor == "sxm":
        share = measured_allreduce_share(
            architecture=gpu.architecture, cards=tp, message_bytes=message_bytes
        )
        if share is not None:
            return factor * message_bytes / (gpu.peer_bandwidth_bytes_per_s(tp) * share)
    latency, bandwidth = _ring_link(ranks=tp, gpu=gpu, nic_gbps=nic_gbps)
    return latency + factor * message_bytes / bandwidth


def _ring_link(*, ranks: int, gpu: GpuSpec, nic_gbps: float | None) -> tuple[float, float]:
    """(latency s, bus bandwidth B/s) of a ring collective over ``ranks`` cards of ``gpu``:
    the NIC (:data:`NIC_LATENCY_S`, ``nic_gbps`` / 8) for a group larger than a node, else
    NVLink per direction x :data:`NVLINK_COLLECTIVE_SHARE` where it spans the group, else PCIe
    x :data:`PCIE_ALLREDUCE_SHARE`."""
    if ranks > node_gpus(gpu):
        return NIC_LATENCY_S, _nic_bytes_per_s(nic_gbps)
    nvlink = gpu.nvlink_spans(ranks)
    latency = ALLREDUCE_LATENCY_NVLINK_S if nvlink else ALLREDUCE_LATENCY_PCIE_S
    share = NVLINK_COLLECTIVE_SHARE if nvlink else PCIE_ALLREDUCE_SHARE
    return latency, gpu.peer_bandwidth_bytes_per_s(ranks) * share


def gather_or_scatter_s(
    *, message_bytes: float, ranks: int, gpu: GpuSpec, nic_gbps: float | None = None
) -> float:
    """Seconds of one ring all-gather, or one reduce-scatter, of a tensor of ``message_bytes``
    (the whole gathered tensor, every rank's part) across ``ranks`` cards: each is half of a
    ring all-reduce (which is a reduce-scatter followed by an all-gather), so latency +
    (ranks - 1) / ranks x bytes / bus bandwidth, over the links of :func:`allreduce_s` (Patarasuk
    and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC
    2009: the ring all-reduce moves 2 (p - 1) / p of the data per node, each half (p - 1) / p).
    0 for one rank. 8 H200 (NVLink 450 GB/s per direction), 8 MB: 10 us + 7 / 8 x 8e6 / 450e9
    = 25.556 us."""
    if ranks <= 1:
        return 0.0
    latency, bandwidth = _ring_link(ranks=ranks, gpu=gpu, nic_gbps=nic_gbps)
    return latency + (ranks - 1) / ranks * message_bytes / bandwidth


#: Bytes per element of the MoE all-to-all: tokens are dispatched to their experts in FP8 when
#: the experts multiply in FP8 (or FP4) and combined back in BF16 (DeepSeek-V3 technical report,
#: arXiv 2412.19437 §3.3.2 "Low-Precision Storage and Communication": activations are quantised
#: to FP8 before the MoE up-projections and then dispatched; the combine stays BF16; DeepEP's
#: kernels likewise dispatch FP8 and combine BF16), else 16-bit both ways.
DISPATCH_BYTES_LOW_PRECISION = 1


def all_to_all_s(
    *, bytes_per_card: float, ranks: int, gpu: GpuSpec, nic_gbps: float | None = None
) -> float:
    """Seconds of one all-to-all among ``ranks`` expert-parallel cards in which each card sends
    ``bytes_per_card`` (its tokens x the experts each goes to x hidden x bytes per element),
    spread evenly over the ranks (a balanced router): 1 / ranks stays on the card, the ranks of
    its node (:func:`pools.sizing.gpus.node_gpus`: NVLink domain) get theirs over NVLink (PCIe
    at :data:`PCIE_ALLREDUCE_SHARE` without it), the rest over the NIC (``nic_gbps`` Gb/s per
    card, required then). The two links run at once (DeepEP's normal kernels forward over
    NVLink and RDMA together), so the time is latency + the slower of the two. 0 for 1 rank.
    16 H200 (8 per node, NVLink 900 GB/s, 400 Gb/s NIC), 1 MB per card: 8 / 16 of it over the
    NIC, 50 us + 0.5e6 / 50e9 s = 60 us."""
    if ranks <= 1:
        return 0.0
    local = min(ranks, node_gpus(gpu))
    nvlink = gpu.nvlink_spans(local)
    inside_bw = gpu.peer_bandwidth_bytes_per_s(local) * (
        NVLINK_COLLECTIVE_SHARE if nvlink else PCIE_ALLREDUCE_SHARE
    )
    seconds = bytes_per_card * (local - 1) / ranks / inside_bw
    latency = ALLREDUCE_LATENCY_NVLINK_S if nvlink else ALLREDUCE_LATENCY_PCIE_S
    if ranks > local:
        across = bytes_per_card * (ranks - local) / ranks / _nic_bytes_per_s(nic_gbps)
        seconds, latency = max(seconds, across), NIC_LATENCY_S
    return latency + seconds


def moe_all_to_all_s(
    *,
    model: ModelArch,
    precision: Precision,
    tokens_per_card: float,
    ranks: int,
    gpu: GpuSpec,
    nic_gbps: float | None,
) -> float:
    """Seconds of a pass's MoE all-to-alls with expert parallelism over ``ranks`` cards and
    attention data parallelism: per MoE layer one dispatch (``tokens_per_card`` tokens per
    card x ``experts_per_token`` x hidden x :data:`DISPATCH_BYTES_LOW_PRECISION` or 2 bytes)
    and one combine (the same at 2 bytes) - bytes = tokens x hidden x dtype bytes x k per
    direction, the scheme of the DeepSeek-V3 report §3.4 and DeepEP (:func:`all_to_all_s`)."""
    if not model.is_moe or ranks <= 1:
        return 0.0
    low = precision.compute in ("fp8", "fp4")
    per_card = tokens_per_card * model.experts_per_token * model.hidden_size
    dispatch = all_to_all_s(
        bytes_per_card=per_card * (DISPATCH_BYTES_LOW_PRECISION if low else ACTIVATION_BYTES),
        ranks=ranks,
        gpu=gpu,
        nic_gbps=nic_gbps,
    )
    combine = all_to_all_s(
        bytes_per_card=per_card * ACTIVATION_BYTES, ranks=ranks, gpu=gpu, nic_gbps=nic_gbps
    )
    return model.num_moe_layers * (dispatch + combine)  # fmt: skip


#: Bytes per expert choice of the routing result gathered beside each token's activations:
#: the expert id (int32) and its weight (float32) - TensorRT-LLM's CUTLASS MoE asserts
#: ``token_final_scales.dtype == torch.float32`` and ``token_selected_experts.dtype ==
#: torch.int32`` before the gather (``fused_moe_cutlass.py`` @000a01de, ``forward_chunk``).
ROUTING_BYTES_PER_CHOICE = 4 + 4


def moe_allgather_s(
    *,
    model: ModelArch,
    precision: Precision,
    tokens: float,
    ranks: int,
    gpu: GpuSpec,
    nic_gbps: float | None,
) -> float:
    """Seconds of a pass's MoE exchange when attention DP gathers tokens instead of sending
    them to their experts (``engines.MOE_DP_EXCHANGES`` ``"allgather"``: TensorRT-LLM's CUTLASS
    MoE): per MoE layer every card all-gathers all ``tokens`` of the pass - each token's
    activations quantised to the experts' GEMM input type first (:func:`_expert_input_bytes`:
    FP8 1 byte, NVFP4 0.5625 with its scales, else 2) plus its k routing choices
    (:data:`ROUTING_BYTES_PER_CHOICE`) - and reduce-scatters the MoE output, tokens x hidden
    x 2 bytes (:func:`gather_or_scatter_s` each). Unlike the all-to-all
    (:func:`moe_all_to_all_s`, tokens x k rows) the volume does not depend on k: the same for
    k = ranks, k times more below it. Llama 4 Maverick FP8 (h 5,120, k 1, 24 MoE layers),
    3,000 tokens on 8 H200: (10 us + 7 / 8 x 3,000 x 5,128 / 450e9) + (10 us + 7 / 8 x
    3,000 x 10,240 / 450e9) = 109.6 us a layer, 2.63 ms a pass."""
    if not model.is_moe or ranks <= 1:
        return 0.0
    choices = model.experts_per_token * ROUTING_BYTES_PER_CHOICE
    gathered = tokens * (model.hidden_size * _expert_input_bytes(precision) + choices)
    scattered = tokens * model.hidden_size * ACTIVATION_BYTES
    common = {"ranks": ranks, "gpu": gpu, "nic_gbps": nic_gbps}
    one_layer = gather_or_scatter_s(message_bytes=gathered, **common) + gather_or_scatter_s(
        message_bytes=scattered, **common
    )
    return model.num_moe_layers * one_layer


def moe_dp_exchange(*, exchange: str, model: ModelArch, gpu: GpuSpec, ranks: int) -> str:
    """The exchange an engine whose profile says ``exchange`` runs for ``model`` over ``ranks``
    expert-parallel cards of ``gpu``: ``"allgather"`` becomes ``"all_to_all"`` on an NVL72
    rack's NVLink fabric (``gpus.NVLINK_DOMAIN_GPUS``) with more ranks than experts per token,
    TensorRT-LLM's ``enable_alltoall`` rule (``engines.MOE_DP_EXCHANGES``)."""
    if (
        exchange == "allgather"
        and gpu.slug in NVLINK_DOMAIN_GPUS
        and ranks > model.experts_per_token
    ):
        return "all_to_all"
    return exchange


def routed_expert_bytes(*, model: ModelArch, precision: Precision, tokens: float) -> float:
    """The routed experts' part of :func:`decode_weight_bytes`: the experts ``tokens`` tokens
    touch (:func:`weight_bytes_read`'s expectation) at the stored width; 0 for a dense model."""
    if not model.is_moe:
        return 0.0
    bits = stored_bits_per_weight(precision)
    return model.expert_params * touched_expert_share(model, tokens) * bits / 8


def dp_weight_bytes(
    *, model: ModelArch, precision: Precision, tokens: float, dp_attention: int
) -> float:
    """Weight bytes a pass over ``tokens`` tokens streams on all cards with ``dp_attention``
    attention DP ranks: each rank reads the weights it replicates (everything but the routed
    experts and the embedding rows looked up) once, the routed experts are read once in all:
    d x (:func:`decode_weight_bytes` - routed - lookup) + routed + lookup. d = 1:
    :func:`decode_weight_bytes`."""
    whole = decode_weight_bytes(model=model, precision=precision, tokens=tokens)
    if dp_attention <= 1:
        return whole
    routed = routed_expert_bytes(model=model, precision=precision, tokens=tokens)
    lookup = min(tokens, model.vocab_size) * model.hidden_size * 2
    return dp_attention * (whole - routed - lookup) + routed + lookup


#: Bytes per element of the activations a routed expert's GEMMs read, by the precision's
#: compute type: the input is quantised to the tensor-core type before each GEMM (FP8 one byte;
#: NVFP4 E2M1 half a byte plus one E4M3 scale per 16 elements, ``FP4_SCALE_BITS_PER_WEIGHT``:
#: 4.5 / 8 = 0.5625; MXFP4 4.25 / 8), 16-bit otherwise (weight-only kernels multiply BF16 / FP16
#: activations).
def _expert_input_bytes(precision: Precision) -> float:
    if precision.compute == "fp4":
        return (4 + FP4_SCALE_BITS_PER_WEIGHT.get(precision.name, 0.5)) / 8
    if precision.compute in ("fp8", "int8"):
        return 1.0
    return float(ACTIVATION_BYTES)


def moe_glue_bytes(*, model: ModelArch, precision: Precision, tokens: float) -> tuple[float, float]:
    """Activation bytes the routed experts' kernels between and around the two grouped GEMMs
    move for a pass over ``tokens`` tokens, whole model: ``(hidden_part, intermediate_part)``.

    Every token goes to ``experts_per_token`` (k) experts, so each MoE layer handles tokens x k
    rows ("slots"), and the kernels that gather, activate and scatter them stream each row's
    activations through memory, however few FLOPs they carry. TensorRT-LLM's CUTLASS MoE runner
    (``cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_kernels.cu``) runs per layer
    ``expandInputRowsKernel`` (permute each token's row to its k experts and quantise it to the
    GEMM input type), the fc1 grouped GEMM (gate and up, 2 x I outputs written 16-bit),
    ``doActivationKernel`` (SwiGLU: reads 2 x I, writes I quantised), the fc2 grouped GEMM
    (writes h 16-bit per slot) and ``finalizeMoeRoutingKernel`` (reads the k rows of a token,
    weights and sums them, writes one 16-bit row); vLLM's ``fused_moe`` runs the same chain with
    the gather inside fc1 (``invoke_fused_moe_kernel``, ``silu_and_mul``, ``moe_sum``). With
    a the GEMM input's bytes per element (:func:`_expert_input_bytes`), per slot:
    permute 2h read + a h written; fc1 a h read + 4 I written; activation 4 I read + a I
    written; fc2 a I read + 2 h written; finalize 2 h read; per token 2 h written. So
    hidden part = MoE layers x (tokens x k x (6 + 2a) h + tokens x 2 h), intermediate part =
    MoE layers x tokens x k x (8 + 2a) I. The weights are counted in
    :func:`decode_weight_bytes`. Bytes per FLOP are (6 + 2a) / (6 I) + (8 + 2a) / (6 h): large
    for small experts - Qwen3-30B-A3B (h 2,048, I 768, k 8, NVFP4, a = 0.5625) moves 22.1 kB
    per slot (with its share of the token's row) for 9.4 MFLOP, Llama-4-Scout (h 5,120,
    I 8,192, k 1) 121.5 kB for 252 MFLOP: 2.3 against 0.48 bytes per kFLOP.
    ``(0, 0)`` for a dense model.
    """
    if not model.is_moe:
        return 0.0, 0.0
    a = _expert_input_bytes(precision)
    slots = tokens * model.experts_per_token
    layers = model.num_moe_layers
    hidden = layers * (slots * (6 + 2 * a) + tokens * ACTIVATION_BYTES) * model.hidden_size
    intermediate = layers * slots * (8 + 2 * a) * model.intermediate_size
    return hidden, intermediate


def moe_glue_s(
    *,
    model: ModelArch,
    precision: Precision,
    tokens: float,
    tp: int,
    dp_attention: int,
    card_bandwidth: float,
    gathered: bool = False,
) -> float:
    """Seconds of :func:`moe_glue_bytes` on a replica of ``tp`` cards, each streaming
    ``card_bandwidth`` B/s (peak x :data:`BANDWIDTH_EFFICIENCY`). Tensor parallelism splits
    each expert's I across the cards, so every card handles every slot: its hidden part is
    not split, the intermediate part is (hidden + intermediate / tp per card). With attention
    data parallelism the experts are spread over the cards (expert parallelism) and the slots
    with them: (hidden + intermediate) / tp per card. ``gathered`` (attention DP with the
    ``"allgather"`` exchange, :func:`moe_allgather_s`): every card holds every token of the
    pass and its finalize kernel writes each token's 16-bit output row - zeros where none of
    its experts was chosen - for the reduce-scatter (``fused_moe_cutlass.py``: the fused MoE
    op returns one row per gathered token, then ``reducescatter``), so the per-token part of
    the hidden bytes, MoE layers x tokens x 2 h, is not split: it is paid whole on every card.
    """
    hidden, intermediate = moe_glue_bytes(model=model, precision=precision, tokens=tokens)
    if dp_attention > 1 and gathered:
        per_token = model.num_moe_layers * tokens * ACTIVATION_BYTES * model.hidden_size
        return ((hidden - per_token + intermediate) / tp + per_token) / card_bandwidth
    if dp_attention > 1:
        return (hidden + intermediate) / tp / card_bandwidth
    return (hidden + intermediate / tp) / card_bandwidth


def routed_active_params(model: ModelArch) -> int:
    """Routed-expert parameters one token multiplies: MoE layers x k x 3 x hidden x I."""
    if not model.is_moe:
        return 0
    return (
        model.num_moe_layers
        * model.experts_per_token
        * 3
        * model.hidden_size
        * (model.intermediate_size)
    )


def linear_flops_rate(
    *, precision: Precision, gpu: GpuSpec, tflops: float | None, tp: int, efficiency: float
) -> float | None:
    """FLOP/s of the linear layers on a TP group of ``tp`` cards ``gpu`` of ``tflops`` dense
    TFLOPS each at ``precision``: ``tflops x 1e12 x tp x efficiency``, capped at ``tflops x 1e12
    x tp x`` the dense share of the card's FP4 kernels (:func:`pools.sizing.fp4_kernels.
    fp4_kernels`) when the card multiplies in FP4. ``None`` without a rate. One B200 in NVFP4
    at 0.5: min(4.5e15, 9e15 x 0.3377) = 3.039e15 FLOP/s; one RTX PRO 6000 (2,015.2 TFLOPS) at
    0.5: min(1.0076e15, 2.0152e15 x 0.624) = 1.0076e15.
    """
    if not tflops:
        return None
    share = efficiency
    kernels = fp4_kernels(gpu)
    if precision.compute == "fp4" and kernels:
        share = min(share, kernels.dense_gemm)
    return tflops * 1e12 * tp * share


#: Share of a Hopper card's dense FP8 tensor peak that a mixture of experts' routed-expert GEMMs
#: reach when its FP8 checkpoint scales weights in blocks (``ModelArch.fp8_weight_block``:
#: DeepSeek-V3 / R1, Kimi-K2, Qwen3 FP8) - a published kernel measurement, not an end-to-end
#: fit: NVIDIA's aiconfigurator tables of TensorRT-LLM's fused MoE op on an H200
#: (ai-dynamo/aiconfigurator @095f58a5 ``aic-core/src/aiconfigurator_core/systems/data/h200_sxm/
#: moe/trtllm/1.3.0rc20/moe_perf.parquet``, ``moe_dtype`` fp8_block, balanced routing, MoE TP 1).
#: The multiply rate is the slope between two token counts, (FLOPs(n2) - FLOPs(n1)) /
#: (latency(n2) - latency(n1)) with FLOPs = tokens x k x 2 x 3 x hidden x I / EP per card, where
#: the op is compute-bound (at least 512 rows per local expert at n2; n = 4,096 -> 8,192 and
#: 8,192 -> 16,384): the median over the 118 (shape, EP, pair) groups of 12 expert shapes is
#: 472 TFLOPS, 0.2386 of the 1,979 peak (DeepSeek-V3's shape at EP 8: 0.30 - 0.33), against the
#: 0.55 the other layers are given. The same slope gives B200 NVFP4 MoE a median 0.11 - 0.14 of
#: its FP4 peak (``b200_sxm/moe/trtllm/1.3.0rc20``), the share
#: ``fp4_kernels.MOE_FP4_GROUPED_GEMM_PEAK_SHARE`` cites from another publication; per-tensor FP8
#: experts reach 0.35 (median, all shapes; Mixtral-8x7B's wide experts 0.56 - 0.77, above the
#: 0.55), so only block-scaled checkpoints get this share.
MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE = 0.2386


def routed_fp4_stream_bytes(
    *, model: ModelArch, precision: Precision, gpu: GpuSpec, tokens: float
) -> float:
    """The part of :func:`decode_weight_bytes` (and of :func:`dp_weight_bytes`, which counts the
    routed experts once) that streams at the card's FP4 MoE stream share (:func:`weight_stream_s`):
    :func:`routed_expert_bytes` for a mixture of experts in NVFP4 on a card with FP4 tensor
    cores, else 0."""
    if precision.name != "NVFP4" or not fp4_dense_tflops(gpu):
        return 0.0
    return routed_expert_bytes(model=model, precision=precision, tokens=tokens)


def weight_stream_s(
    *, weight_bytes: float, routed_fp4_bytes: float, bandwidth: float, gpu: GpuSpec
) -> float:
    """Seconds to stream ``weight_bytes`` from memory on cards ``gpu`` of ``bandwidth`` B/s of
    peak in all: ``routed_fp4_bytes`` of them (:func:`routed_fp4_stream_bytes`) at the card's FP4
    kernels' MoE stream share (:func:`pools.sizing.fp4_kernels.fp4_kernels`) where that is below
    :data:`BANDWIDTH_EFFICIENCY`, the rest (and all of them elsewhere) at
    :data:`BANDWIDTH_EFFICIENCY`. Qwen3-30B-A3B NVFP4 on one B200 (8 TB/s) with every expert
    touched: 48 x 128 x 3 x 2,048 x 768 x 4.5 / 8 = 16,307,453,952 B of experts take
    16,307,453,952 / (8e12 x 0.397) = 5.1346 ms instead of 2.5480 ms; on an RTX PRO 6000 (0.832
    measured) at 0.8 like the rest."""
    kernels = fp4_kernels(gpu)
    share = min(kernels.moe_stream, BANDWIDTH_EFFICIENCY) if kernels else BANDWIDTH_EFFICIENCY
    rest = weight_bytes - routed_fp4_bytes
    return rest / (bandwidth * BANDWIDTH_EFFICIENCY) + routed_fp4_bytes / (bandwidth * share)


def routed_expert_flops_rate(
    *, model: ModelArch, precision: Precision, gpu: GpuSpec, tp: int, flops_rate: float
) -> float:
    """FLOP/s of the routed-expert GEMMs on a TP group of ``tp`` cards whose other linear
    layers multiply at ``flops_rate`` FLOP/s: ``min(flops_rate, tp x FP4 dense peak x`` the MoE
    share of the card's FP4 kernels ``)`` (:func:`pools.sizing.fp4_kernels.fp4_kernels`) for a
    mixture of experts multiplied in FP4 (NVFP4 / MXFP4 on Blackwell tensor cores),
    ``min(flops_rate, tp x FP8 dense peak x MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE)`` for
    block-scaled FP8 experts on Hopper (:func:`fp8_block_routed`; 8 H200s at 0.55:
    min(8.707e15, 8 x 1.979e15 x 0.2386) = 3.778e15 FLOP/s), else ``flops_rate``. One B200
    (9,000 TFLOPS FP4) at efficiency 0.5: min(4.5e15, 9e15 x 0.1402) = 1.262e15 FLOP/s; one
    RTX PRO 6000 (2,015.2): min(1.0076e15, 2.0152e15 x 0.356) = 7.174e14.
    """
    if fp8_block_routed(model=model, precision=precision, gpu=gpu):
        return min(
            flops_rate, gpu.fp8_dense_tflops * 1e12 * tp * MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE
        )
    kernels = fp4_kernels(gpu)
    if not model.is_moe or precision.compute != "fp4" or not kernels:
        return flops_rate
    return min(flops_rate, fp4_dense_tflops(gpu) * 1e12 * tp * kernels.moe_gemm)


def fp8_block_routed(*, model: ModelArch, precision: Precision, gpu: GpuSpec) -> bool:
    """True when a mixture of experts multiplies block-scaled FP8 experts on a Hopper card
    (``model.fp8_weight_block`` set, FP8 compute, ``hopper`` in the card's architecture, an FP8
    rate known): its routed experts then run at :data:`MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE`."""
    return bool(
        model.is_moe
        and model.fp8_weight_block
        and precision.compute == "fp8"
        and "hopper" in gpu.architecture.lower()
        and gpu.fp8_dense_tflops
    )


def fp4_compute_shares(
    *, model: ModelArch, precision: Precision, gpu: GpuSpec, efficiency: float
) -> tuple[float | None, float | None]:
    """The shares of the FP4 tensor peak a run multiplies at on ``gpu``, a card with FP4 tensor
    cores, as (linear layers, routed experts), for the page's account of the rates used:
    ``(min(efficiency, dense share), min(efficiency, MoE share))`` of the card's FP4 kernels
    (:func:`pools.sizing.fp4_kernels.fp4_kernels`) for an FP4 precision (NVFP4 / MXFP4), the
    second ``None`` for a dense model; ``(None, None)`` for any other precision or a card
    without FP4 tensor cores (every GEMM at ``efficiency`` of its own peak). The same caps as
    :func:`linear_flops_rate` and :func:`routed_expert_flops_rate`. NVFP4 mixture of experts
    at 0.5 on a B200: (0.3377, 0.1402); on an RTX PRO 6000: (0.5, 0.356).
    """
    kernels = fp4_kernels(gpu)
    if precision.compute != "fp4" or not kernels:
        return None, None
    linear = min(efficiency, kernels.dense_gemm)
    routed = min(efficiency, kernels.moe_gemm) if model.is_moe else None
    return linear, routed


def fp8_block_compute_share(
    *, model: ModelArch, precision: Precision, efficiency: float
) -> float | None:
    """The share of the FP8 peak block-scaled FP8 experts multiply at on Hopper cards, for the
    page's account of the rates used: ``min(efficiency,``
    :data:`MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE` ``)`` for a mixture of experts whose FP8
    checkpoint scales weights in blocks (``model.fp8_weight_block``) run in FP8, else ``None``.
    The same cap as :func:`routed_expert_flops_rate` (:func:`fp8_block_routed`, which also needs
    the card). DeepSeek-V3 FP8 at 0.55: 0.2386."""
    if not (model.is_moe and model.fp8_weight_block and precision.compute == "fp8"):
        return None
    return min(efficiency, MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE)


#: TensorRT-LLM's MoE op on Hopper for MXFP4 experts (``W4A16_MXFP4`` on its TRITON backend,
#: :data:`pools.sizing.engines.TENSORRT_LLM_HOPPER_MXFP4_MOE_TRITON`), from NVIDIA's
#: aiconfigurator tables of exactly that op (ai-dynamo/aiconfigurator @095f58a5 ``aic-core/src/
#: aiconfigurator_core/systems/data/{h100_sxm,h200_sxm}/moe/trtllm/1.3.0rc20/moe_perf.parquet``,
#: ``moe_dtype`` w4a16_mxfp4, gpt-oss-20b's and -120b's shapes: hidden 2,880, I 2,880, top 4 of
#: 32 / 128 experts, balanced routing, MoE TP 1, EP 1 - 128; its collector pins TRITON on SM 90,
#: ``collector/trtllm/collect_moe.py``), ``benchmarks/mxfp4_hopper_moe.py``. Where the op is
#: compute bound (at least 512 rows per local expert; n = 4,096 -> 8,192 and 8,192 -> 16,384
#: tokens) the slope per routed slot (a token's row to one of its k experts; every card takes
#: all n x k of them and multiplies those of its E / EP experts) is, least squares over the 39
#: (card, shape, EP, pair) slopes, 6 x hidden x I / EP / (0.4431 x BF16 peak) + 15.80 ns: the
#: local experts' multiplies at 0.4431 of the 989 TFLOPS peak (H100 0.4442, H200 0.4423 when
#: fitted alone), plus a time per slot no EP divides - the slope per card falls from 0.39 of
#: the peak at EP 1 to 0.28 at EP 4 and 0.024 at EP 128, as the two terms give (0.389, 0.285,
#: 0.024). vLLM 0.24.0's kernel for the same checkpoint (OpenAI triton_kernels, EP 1, the same
#: tables' ``moe/vllm/0.24.0``) reaches 0.55 - 0.58 on both cards, so only engines with
#: ``EngineProfile.hopper_mxfp4_moe_triton`` get these figures.
HOPPER_MXFP4_MOE_PEAK_SHARE = 0.4431
HOPPER_MXFP4_MOE_SLOT_S = 15.80e-9


def hopper_mxfp4_routed(
    *, model: ModelArch, precision: Precision, gpu: GpuSpec, triton: bool
) -> bool:
    """True when a mixture of experts' routed experts run as MXFP4 weight-only on a Hopper card
    (``MXFP4-WO``, :func:`precision_on_gpu`; ``hopper`` in the card's architecture, a BF16
    rate known) under an engine whose MoE op for them is TensorRT-LLM's TRITON one
    (``triton``: ``EngineProfile.hopper_mxfp4_moe_triton``)."""
    return bool(
        triton
        and model.is_moe
        and precision.name == "MXFP4-WO"
        and "hopper" in gpu.architecture.lower()
        and (gpu.bf16_dense_tflops or gpu.fp16_dense_tflops)
    )


def hopper_mxfp4_routed_rate(
    *, model: ModelArch, gpu: GpuSpec, tp: int, flops_rate: float
) -> float:
    """FLOP/s of the routed-expert GEMMs of :func:`hopper_mxfp4_routed` on ``tp`` cards whose
    experts are spread over all of them (expert parallelism; one card: EP 1): per slot each
    card takes 6 x hidden x I / tp FLOPs at :data:`HOPPER_MXFP4_MOE_PEAK_SHARE` of its BF16
    peak plus :data:`HOPPER_MXFP4_MOE_SLOT_S`, and a token has k slots of 6 x hidden x I
    FLOPs each, so the replica's rate is ``min(flops_rate, 1 / (1 / (tp x peak x share) +
    slot_s / (6 x hidden x I)))``. gpt-oss-20b (hidden = I = 2,880) on one H200 (989 TFLOPS):
    1 / (1 / 4.38226e14 + 15.80e-9 / 49,766,400) = 3.8470e14 FLOP/s, 0.389 of the peak; on
    four H100s at EP 4: 1.1262e15 FLOP/s, 0.285 of each card's peak.
    """
    peak = (gpu.bf16_dense_tflops or gpu.fp16_dense_tflops) * 1e12
    slot_flops = 6 * model.hidden_size * model.intermediate_size
    rate = 1 / (
        1 / (tp * peak * HOPPER_MXFP4_MOE_PEAK_SHARE) + HOPPER_MXFP4_MOE_SLOT_S / slot_flops
    )
    return min(flops_rate, rate)


#: Share of a Hopper card's peak memory bandwidth at which the routed experts of
#: :func:`hopper_mxfp4_routed` stream, against :data:`BANDWIDTH_EFFICIENCY` (0.8) for every
#: other weight - the same tables and op as :data:`HOPPER_MXFP4_MOE_PEAK_SHARE`, measured as
#: :data:`MOE_FP4_WEIGHT_STREAM_SHARE` is: where the op is weight-stream bound (2 to 32 rows
#: per local expert) its local experts' MXFP4 bytes (E / EP x 3 x hidden x I x 4.25 / 8) over
#: its latency reach a median 0.2917 of the peak (the median of the medians of the 15 (card,
#: shape, EP) groups holding at least 100 MB of them; ``benchmarks/mxfp4_hopper_moe.py``).
#: Single-card groups stream fastest - gpt-oss-120b's 1.69 GB on one H200 0.567, gpt-oss-20b's
#: 0.42 GB 0.379 (H200) and 0.529 (H100) - and the op slows as rows are added well before it is
#: compute bound (gpt-oss-120b on one H200: 0.62 ms at 256 tokens, 1.00 ms at 768 - 1,024),
#: which one share over the regime averages.
HOPPER_MXFP4_MOE_STREAM_SHARE = 0.2917


def hopper_mxfp4_stream_extra_s(
    *,
    model: ModelArch,
    precision: Precision,
    gpu: GpuSpec,
    tokens: float,
    triton: bool,
    bandwidth: float,
) -> float:
    """Seconds the routed experts of :func:`hopper_mxfp4_routed` take to stream beyond what
    :func:`weight_stream_s` gives them (at :data:`BANDWIDTH_EFFICIENCY`): their
    :func:`routed_expert_bytes` at :data:`HOPPER_MXFP4_MOE_STREAM_SHARE` of ``bandwidth``
    instead; 0 for any other run."""
    if not hopper_mxfp4_routed(model=model, precision=precision, gpu=gpu, triton=triton):
        return 0.0
    routed = routed_expert_bytes(model=model, precision=precision, tokens=tokens)
    return routed / (bandwidth * HOPPER_MXFP4_MOE_STREAM_SHARE) - routed / (
        bandwidth * BANDWIDTH_EFFICIENCY
    )


def pass_weight_stream_s(
    *,
    model: ModelArch,
    precision: Precision,
    gpu: GpuSpec,
    weight_bytes: float,
    tokens: float,
    triton: bool,
    bandwidth: float,
) -> float:
    """Seconds a pass of ``tokens`` tokens streams its ``weight_bytes`` on cards ``gpu`` of
    ``bandwidth`` B/s of peak in all: :func:`weight_stream_s` with the routed experts' NVFP4
    share (:func:`routed_fp4_stream_bytes`) plus :func:`hopper_mxfp4_stream_extra_s` - the one
    account of a decode step's and a lone prefill's weight stream."""
    return weight_stream_s(
        weight_bytes=weight_bytes,
        routed_fp4_bytes=routed_fp4_stream_bytes(
            model=model, precision=precision, gpu=gpu, tokens=tokens
        ),
        bandwidth=bandwidth,
        gpu=gpu,
    ) + hopper_mxfp4_stream_extra_s(
        model=model, precision=precision, gpu=gpu, tokens=tokens, triton=triton, bandwidth=bandwidth
    )


def hopper_mxfp4_shares(
    *, model: ModelArch, precision: Precision, triton: bool
) -> tuple[float, float, float] | None:
    """What the page states of :func:`hopper_mxfp4_routed` runs: ``(multiply share of the BF16
    peak, seconds per routed slot, stream share of the bandwidth)`` -
    (:data:`HOPPER_MXFP4_MOE_PEAK_SHARE`, :data:`HOPPER_MXFP4_MOE_SLOT_S`,
    :data:`HOPPER_MXFP4_MOE_STREAM_SHARE`) - for a mixture of experts in MXFP4 (``MXFP4`` or
    ``MXFP4-WO``) under an engine with ``triton`` (``EngineProfile.hopper_mxfp4_moe_triton``),
    else ``None``; like :func:`fp8_block_compute_share` it holds on Hopper cards only, which
    the page says. gpt-oss-120b MXFP4 under TensorRT-LLM: (0.4431, 1.58e-08, 0.2917)."""
    if not (triton and model.is_moe and precision.name in ("MXFP4", "MXFP4-WO")):
        return None
    return HOPPER_MXFP4_MOE_PEAK_SHARE, HOPPER_MXFP4_MOE_SLOT_S, HOPPER_MXFP4_MOE_STREAM_SHARE


def _routed_rate(
    *,
    model: ModelArch,
    precision: Precision,
    gpu: GpuSpec,
    tp: int,
    flops_rate: float,
    triton: bool,
) -> float:
    """The routed experts' FLOP/s: :func:`hopper_mxfp4_routed_rate` where
    :func:`hopper_mxfp4_routed`, else :func:`routed_expert_flops_rate`."""
    if hopper_mxfp4_routed(model=model, precision=precision, gpu=gpu, triton=triton):
        return hopper_mxfp4_routed_rate(model=model, gpu=gpu, tp=tp, flops_rate=flops_rate)
    return routed_expert_flops_rate(
        model=model, precision=precision, gpu=gpu, tp=tp, flops_rate=flops_rate
    )


def linear_compute_s(
    *, model: ModelArch, tokens: float, flops_rate: float, routed_rate: float
) -> float:
    """Seconds of the linear layers' multiplies for ``tokens`` tokens: 2 x (linear params -
    routed-expert params) x tokens / ``flops_rate`` + 2 x routed-expert params x tokens /
    ``routed_rate`` (:func:`routed_expert_flops_rate`); the one rate for both when equal."""
    routed = routed_active_params(model)
    return (
        2 * (_linear_params(model) - routed) * tokens / flops_rate
        + 2 * routed * tokens / routed_rate
    )


def weight_bytes_read(*, model: ModelArch, weight_bits: int, tokens: float) -> float:
    """The seeds' weight bytes for ``tokens`` tokens, whole model: parameters × bits / 8 (the
    decode ceiling uses it; the step time uses :func:`decode_weight_bytes`).

    Dense: every weight. Mixture of experts: the shared weights (attention, shared experts,
    dense layers) plus, per MoE layer, the experts the tokens route to: E × (1 - (1 - k / E) **
    tokens) experts in expectation under uniform routing (k of E per token): an expert is missed
    by one token with probability 1 - k / E, by B independent tokens with (1 - k / E)^B (the
    expected number of occupied bins when B tokens each pick k of E experts; routing is not
    uniform in practice, so this is the expectation for a balanced router). 1 token reads the
    active parameters and large batches read all.
    """
    if not model.is_moe:
        return model.total_params * weight_bits / 8
    shared = model.total_params - model.expert_params
    return (shared + model.expert_params * touched_expert_share(model, tokens)) * weight_bits / 8


def touched_expert_share(model: ModelArch, tokens: float) -> float:
    """The expected share of a mixture of experts' routed experts that ``tokens`` tokens route
    to, 1 - (1 - k / E)^max(tokens, 1) (:func:`weight_bytes_read` says why)."""
    return 1 - (1 - model.experts_per_token / model.num_experts) ** max(tokens, 1.0)


def touched_layer_params(model: ModelArch, tokens: float) -> float:
    """Decoder-layer parameters a pass over ``tokens`` tokens reads: all but the embedding and
    head, the routed experts by :func:`touched_expert_share`."""
    layer_params = model.total_params - embedding_params(model)
    if not model.is_moe:
        return float(layer_params)
    shared = layer_params - model.expert_params
    return shared + model.expert_params * touched_expert_share(model, tokens)


def decode_weight_bytes(*, model: ModelArch, precision: Precision, tokens: float) -> float:
    """Weight bytes one forward pass over ``tokens`` tokens really streams from memory, whole
    model (all TP ranks).

    = decoder-layer linear weights at the stored width (for weight-only group quantisation plus
    (16-bit scale + zero point) / 128 bits per weight), + the output head at 16 bit, + the
    ``tokens`` rows of the embedding table a lookup touches (not the whole table; a tied head is
    the same matrix and is read once, as the head). Mixture of experts: the experts the tokens
    route to, as in :func:`weight_bytes_read`. Llama-3-8B FP16, 1 token: (8,030,261,248 -
    2 x 525,336,576) x 2 + 525,336,576 x 2 + 4,096 x 2 = 15,009,855,488 B.
    """
    table = model.vocab_size * model.hidden_size
    bits = stored_bits_per_weight(precision)
    layer_params = touched_layer_params(model, tokens)
    head_bits = LM_HEAD_BITS if bits < 16 else bits
    lookup = min(tokens, model.vocab_size) * model.hidden_size * 2
    return layer_params * bits / 8 + table * head_bits / 8 + lookup


#: CUDA-core instructions that de-quantising one 4-bit group-quantised weight to FP16 takes. vLLM's
#: AWQ GEMM kernel (``csrc/quantization/awq/gemm_kernels.cu`` with ``dequantize.cuh``, read at
#: vllm-project/vllm@03d9d8e7983c9fb3d78082a108fe7c24ede7c8a1) turns each 32-bit word of eight
#: weights into FP16 with 1 shift, 4 ``lop3`` and 4 FP16x2 sub/fma, then takes off the zero point
#: and applies the scale with 4 ``sub.f16x2`` + 4 ``fma.rn.f16x2``: 17 instructions per 8 weights.
#: Marlin follows the same FasterTransformer interleaved conversion, so the count stands for both.
DEQUANT_INSTRUCTIONS_PER_INT4_WEIGHT = 17 / 8

#: Rows of the FP16 tensor-core instruction weight-only kernels issue (``mma.sync.aligned.m16n8k16``
#: in gemm_kernels.cu and Marlin): a GEMM over fewer tokens pays for 16 rows.
MMA_TILE_ROWS = 16

#: vLLM's AWQ layer (``vllm/model_executor/layers/quantization/awq.py``, ``AWQLinearMethod.apply``:
#: ``FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256``) de-quantises the whole
#: matrix to FP16 (``awq_dequantize``) and runs ``torch.matmul`` from this many tokens on, and its
#: AWQ GEMM kernel below.
AWQ_DEQUANTIZE_MATMUL_MIN_TOKENS = 256


def overlapped_s(memory_s: float, compute_s: float, exponent: float | None) -> float:
    """Seconds of a GEMM whose weight stream takes ``memory_s`` and its multiply ``compute_s``.

    The roofline (Williams, Waterman and Patterson, "Roofline: an insightful visual performance
    model", CACM 2009) bounds a kernel by the slower of the two, reached only when they overlap
    completely; near the ridge point, where both take similar time, kernels reach neither
    bound. (memory^p + compute^p)^(1/p) is the hard max for ``exponent`` ``None`` (p -> inf)
    and the sum (no overlap) for p = 1; p is an engine profile number
    (``EngineProfile.gemm_overlap_exponent``). Memory 3 ms and compute 4 ms: max 4 ms; p = 2:
    5 ms; p = 1: 7 ms.
    """
    if exponent is None or memory_s <= 0 or compute_s <= 0:
        return max(memory_s, compute_s)
    return (memory_s**exponent + compute_s**exponent) ** (1 / exponent)


def quantised_linear_params(*, model: ModelArch, precision: Precision, tokens: float) -> float:
    """Decoder-layer linear weights, whole model, that a pass over ``tokens`` tokens multiplies
    from 4-bit weight-only storage (INT4 / GPTQ / AWQ) and so has to de-quantise; 0 for any other
    precision. The output head stays 16 bit (:data:`LM_HEAD_BITS`); a mixture of experts counts
    the experts the tokens route to, as :func:`weight_bytes_read`.
    """
    if not (precision.weight_only and precision.weight_bits == 4):
        return 0.0
    return touched_layer_params(model, tokens)


def dequant_seconds(
    *,
    model: ModelArch,
    precision: Precision,
    gpu: GpuSpec,
    tp: int,
    tokens: float,
    memory_s: float,
    compute_s: float,
    flops_rate: float | None,
    effective_bandwidth: float,
    awq_kernel: str = "marlin",
) -> tuple[float, float]:
    """``(extra_s, dequant_s)`` of the linear layers of one pass over ``tokens`` tokens on a TP
    group of ``tp`` cards: ``dequant_s`` is the CUDA-core time to de-quantise the 4-bit weights
    once (:func:`quantised_linear_params` / ``tp`` x :data:`DEQUANT_INSTRUCTIONS_PER_INT4_WEIGHT`
    / :func:`pools.sizing.gpus.cuda_core_instructions_per_s`), ``extra_s`` what the layers take
    beyond ``max(memory_s, compute_s)`` (weight bytes / bandwidth, 2 x params x tokens / FLOPS).

    - Marlin-type kernels (``awq_kernel="marlin"``, every GPTQ kernel, and every engine's
      weight-only GEMMs but vLLM's original AWQ one) de-quantise in registers while the next
      weights stream in, so the layers take ``max(memory, compute, dequant)``.
    - vLLM's original AWQ GEMM kernel (``awq_kernel="gemm"``, AWQ only) loads a weight tile,
      de-quantises it into shared memory, synchronises and then multiplies, with no double
      buffering, and each :data:`MMA_TILE_ROWS`-token tile of the input repeats the
      de-quantisation and runs its own 16-row MMAs: memory + tiles x (dequant + 2 x 16 x
      params / FLOPS). From :data:`AWQ_DEQUANTIZE_MATMUL_MIN_TOKENS` tokens on vLLM runs two
      kernels instead: one writes the FP16 matrix, max(memory + 2 bytes per weight /
      bandwidth, dequant), then ``torch.matmul`` reads it, max(2 bytes per weight / bandwidth,
      compute).

    No CUDA-core rate on record for ``gpu``: ``(0, 0)``. Qwen2-7B AWQ at batch 1 on an A100
    SXM: 6.53e9 weights x 17 / 8 / 9.75e12 = 1.42 ms of de-quantisation plus 2 x 16 x 6.53e9 /
    (312e12 x 0.5) = 1.34 ms of padded MMAs on the original kernel.
    """
    params = quantised_linear_params(model=model, precision=precision, tokens=tokens)
    rate = cuda_core_instructions_per_s(gpu)
    if not params or rate is None:
        return 0.0, 0.0
    dequant_s = params / tp * DEQUANT_INSTRUCTIONS_PER_INT4_WEIGHT / rate
    base_s = max(memory_s, compute_s)
    if awq_kernel != "gemm" or precision.name != "INT4-AWQ" or not flops_rate:
        return max(0.0, dequant_s - base_s), dequant_s
    if tokens >= AWQ_DEQUANTIZE_MATMUL_MIN_TOKENS:
        fp16_matrix_s = params * 2 / effective_bandwidth
        dequantize_kernel_s = max(memory_s + fp16_matrix_s, dequant_s)
        matmul_s = max(fp16_matrix_s, compute_s)
        return dequantize_kernel_s + matmul_s - base_s, dequant_s
    tiles = math.ceil(tokens / MMA_TILE_ROWS)
    mma_s = 2 * MMA_TILE_ROWS * params / flops_rate
    return memory_s + tiles * (dequant_s + mma_s) - base_s, tiles * dequant_s


def _linear_params(model: ModelArch) -> int:
    # The input embedding is a table lookup, not a matrix multiply.
    return model.active_params - model.vocab_size * model.hidden_size


def prefill_flops(*, model: ModelArch, input_tokens: int, cached_tokens: int = 0) -> float:
    """FLOPs to prefill ``input_tokens`` of which the first ``cached_tokens`` hit the prompt cache.

    2 × active linear params per new token (kipply, "Transformer Inference Arithmetic") plus
    causal attention over the prefix: 2 × layers × heads × head dim × (input² - cached²).
    """
    new = input_tokens - cached_tokens
    linear = 2 * _linear_params(model) * new
    attention = 2 * model.num_layers * model.attention_width * (input_tokens**2 - cached_tokens**2)
    return float(linear + attention)


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding (``000`` §3.3): a draft proposes ``draft_tokens`` (gamma) tokens per
    sequence, the target model verifies them and one more in a single pass.

    ``acceptance_rate`` (alpha, in [0, 1)): the chance that the target accepts a draft token,
    taken as the same for every position. ``draft_cost_ratio`` (c, in [0, 1]): one draft step's
    time / one target decode step's time. Both are Leviathan, Kalman and Matias, "Fast
    Inference from Transformers via Speculative Decoding", ICML 2023 (arXiv 2211.17192), §3.1
    and §3.4; an EAGLE or MTP head of one layer on an L-layer target is about c = 1 / L.

    ``draft``: the draft model when it is a separate model (``None``: an n-gram / prompt-lookup
    draft or a head counted in the target). Its weights (at the target's weight precision,
    split over the TP group like the target's, as vLLM runs a draft by default) and its KV cache
    per sequence take memory on every card (:func:`pools.sizing.memory.memory_estimate`).
    """

    draft_tokens: int
    acceptance_rate: float
    draft_cost_ratio: float
    draft: ModelArch | None = None

    def tokens_per_step(self) -> float:
        """Expected tokens a sequence gains per verification pass: (1 - alpha^(gamma + 1)) /
        (1 - alpha) (Leviathan et al. 2023, eq. 1). gamma 4, alpha 0.8: (1 - 0.8^5) / 0.2 =
        3.3616; alpha 0: 1 (only the target's own token)."""
        alpha, gamma = self.acceptance_rate, self.draft_tokens
        return (1 - alpha ** (gamma + 1)) / (1 - alpha)


@dataclass(frozen=True)
class ThroughputEstimate:
    """Speed of one replica of ``tp`` cards with ``batch`` sequences in flight.

    Units are in the names: ``_bytes`` (whole TP group), ``_ms`` milliseconds, ``_tok_s`` output
    tokens per second, ``_tflops`` dense peak per card, ``_gbps`` GB/s (1e9 B/s) per card.
    ``decode_ceiling_batch1_*`` is the seeds' bound: bandwidth / weight bytes at batch 1, no
    efficiency factor. ``tokens_per_step`` = batch decode tokens + amortised prefill tokens.
    ``ttft_ms`` is ``None`` when no tensor FLOPS figure is known for the card. ``dequant_ms``:
    CUDA-core time of one decode step's 4-bit de-quantisation (:func:`dequant_seconds`; hidden
    inside ``gemm_ms`` on Marlin-type kernels, added to it on vLLM's original AWQ kernel).
    With speculative decoding a step is one draft-and-verify pass: ``speculative_tokens_per_step``
    output tokens per sequence (1.0 when not credited), ``tpot_ms`` = step / that;
    ``speculative_credited`` says whether it was faster than plain decoding (``None``: not asked).
    ``dp_attention``: attention DP ranks; ``allreduce_ms`` is then inside one rank and
    ``all_to_all_ms`` the MoE exchange of a step (dispatch and combine, or all-gather and
    reduce-scatter; 0 without). ``moe_glue_ms``: the
    part of ``gemm_ms`` a mixture of experts spends moving its routed rows' activations between
    the grouped GEMMs (:func:`moe_glue_s`; 0 for a dense model). ``host_ms``: the engine's
    exposed host (CPU) time of a step, batch / d x its host seconds per sequence (0 for
    engines without one).
    """

    engine: str
    tp: int
    batch: float
    bandwidth_gbps_per_gpu: float
    bandwidth_efficiency: float
    compute_tflops_per_gpu: float | None
    compute_efficiency: float
    decode_ceiling_batch1_ms: float
    decode_ceiling_batch1_tok_s: float
    tokens_per_step: float
    weight_bytes_read_per_step: float
    kv_bytes_read_per_step: float
    gemm_ms: float
    attention_ms: float
    kernel_overhead_ms: float
    allreduce_ms: float
    allreduce_over: str
    step_ms: float
    serial_prefill_ms: float
    prefill_flops_per_request: float
    prefill_ms: float | None
    tpot_ms: float
    ttft_ms: float | None
    output_tok_s_total: float
    output_tok_s_per_gpu: float
    requests_per_s: float
    dequant_ms: float = 0.0
    pp: int = 1
    pipeline_hops_ms: float = 0.0
    speculative_tokens_per_step: float | None = None
    speculative_credited: bool | None = None
    dp_attention: int = 1
    all_to_all_ms: float = 0.0
    moe_glue_ms: float = 0.0
    host_ms: float = 0.0


def _check_lengths(input_tokens: int, output_tokens: int, cached_tokens: int) -> None:
    for name, value in (("input_len", input_tokens), ("output_len", output_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SizingInputError(
                f"{name} must be a positive integer, got {value!r}",
                reason="not_positive",
                field=name,
            )
    if not 0 <= cached_tokens < input_tokens:
        raise SizingInputError(
            "cached input tokens must be at least 0 and fewer than the input tokens",
            reason="out_of_range",
            field="prompt_cache_hit_rate",
        )


def _check_group(*, tp: int, pp: int, dp_attention: int = 1) -> None:
    """Raise :class:`SizingInputError` (reason ``not_positive``) unless ``tp``, ``pp`` and
    ``dp_attention`` are positive integers, ``inconsistent`` unless ``dp_attention`` divides
    ``tp``."""
    for name, value in (("tp", tp), ("pp", pp), ("dp_attention", dp_attention)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SizingInputError(
                f"{name} must be a positive integer, got {value!r}",
                reason="not_positive",
                field=name,
            )
    if tp % dp_attention:
        raise SizingInputError(
            f"dp_attention {dp_attention} does not divide tp {tp}",
            reason="inconsistent",
            field="dp_attention",
        )


def _check_decode(*, batch: float, gpu: GpuSpec) -> None:
    """Raise :class:`SizingInputError` for a batch that is not a positive finite number
    (reason ``not_positive``, field ``concurrency``) or a card without a known memory bandwidth
    (reason ``bandwidth_unknown``)."""
    if not batch > 0 or batch != batch or batch == float("inf"):
        raise SizingInputError(
            f"batch must be positive, got {batch!r}", reason="not_positive", field="concurrency"
        )
    if gpu.memory_bandwidth_gbps is None or gpu.memory_bandwidth_gbps <= 0:
        raise SizingInputError(
            f"{gpu.name} has no memory bandwidth on record; cannot model decode",
            reason="bandwidth_unknown",
            field="gpu",
        )


#: trtllm-bench's share of the free memory it plans the KV cache in when it picks the engine's
#: limits (``--kv_cache_free_gpu_mem_fraction``, default 0.90: perf-overview.md "the default
#: setting of 0.90"; the same share as ``pools.sizing.memory.RESERVE_FRACTION`` leaves).
TRTLLM_BENCH_KV_FRACTION = 0.90

#: trtllm-bench's cap on the sequences its heuristic plans for (``finetune_setting``: "Cap total
#: batch size to avoid decoder buffer size becoming too large", 4096) and on the tokens per step
#: (32768, "avoid TRT activation buffer becoming too large").
TRTLLM_BENCH_MAX_REQUESTS = 4096
TRTLLM_BENCH_MAX_TOKENS = 32768


def _trtllm_bench_bytes(precision: Precision) -> float:
    """trtllm-bench's bytes per weight (``BYTES_PER_ELEM``): FP8 1, NVFP4 0.5, anything else 2
    (16-bit, and the quantisations its table does not list)."""
    if precision.name == "NVFP4":
        return 0.5
    if precision.compute == "fp8" and precision.weight_bits == 8:
        return 1.0
    return 2.0


def trtllm_bench_settings(
    *,
    model: ModelArch,
    precision: Precision,
    kv_bits: int,
    gpu: GpuSpec,
    tp: int,
    pp: int,
    input_tokens: int,
    output_tokens: int,
) -> tuple[int, int] | None:
    """(max_batch_size, max_num_tokens) that ``trtllm-bench throughput`` gives the engine when the
    run sets neither, as NVIDIA's perf-overview runs do; ``None`` when its estimate leaves no KV
    memory (it refuses the run then).

    NVIDIA/TensorRT-LLM ``tensorrt_llm/bench/build/tuning.py``
    @04cba882084a25665e7f80f5bda71b35b9790b6f: ``calc_engine_setting`` takes the weights as
    parameters x bytes per element (:func:`_trtllm_bench_bytes`), the KV bytes per token as
    2 x layers x max(tp, KV heads) x head size x KV bytes (FP8 1, NVFP4 0.5, else 2), the GPUs'
    memory in GiB (``get_device_memory`` x tp x pp), and plans
    :data:`TRTLLM_BENCH_KV_FRACTION` of (memory - weights) as KV for sequences of input + output
    tokens; ``finetune_setting`` then rounds: requests r = min(that, 4096) / pp; batch
    max(64, 32 x ceil(r / 32)) below 256, 128 x ceil(r / 128) below 1024, else 256 x
    ceil(r / 256); tokens t = min(r x (1 + input / output), 32768), max(2048, 256 x ceil(t / 256))
    below 4096, 512 x ceil(t / 512) below 8192, else 1024 x ceil(t / 1024). No activation or
    runtime memory is counted, so the batch it allows is at or above the one the KV cache holds.
    Qwen3-30B-A3B NVFP4 (30,532,110,336 parameters; 48 layers, 4 KV heads of 128, FP8 KV) on
    one B200 (180 GiB) at 128 / 2,048 tokens: 1,497.9 requests -> (1536, 2048).
    """
    gib = 2**30
    weights = model.total_params * _trtllm_bench_bytes(precision) / gib
    kv_bytes = {8: 1.0, 4: 0.5}.get(kv_bits, 2.0)
    per_token = 2 * model.num_layers * max(tp, model.num_kv_heads) * model.head_dim * kv_bytes
    available = gpu.memory_bytes / gib * tp * pp - weights
    requests = (
        available * TRTLLM_BENCH_KV_FRACTION / (per_token / gib * (input_tokens + output_tokens))
    )
    if requests < 1:
        return None
    raw_batch = min(requests, TRTLLM_BENCH_MAX_REQUESTS) / pp
    raw_tokens = min(raw_batch * (1 + input_tokens / output_tokens), TRTLLM_BENCH_MAX_TOKENS)
    if raw_batch < 256:
        batch = max(64, 32 * math.ceil(raw_batch / 32))
    elif raw_batch < 1024:
        batch = 128 * math.ceil(raw_batch / 128)
    else:
        batch = 256 * math.ceil(raw_batch / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return batch, tokens


def cuda_graph_sizes(
    sizes: tuple[int, ...], *, max_batch_size: int, max_num_tokens: int
) -> tuple[int, ...]:
    """The CUDA-graph batch sizes an engine with padding on captures from the configured
    ``sizes`` (ascending): those up to min(``max_batch_size``, ``max_num_tokens``) - the largest
    decode-only batch - and, when a configured size exceeds it, that largest batch itself
    (NVIDIA/TensorRT-LLM ``tensorrt_llm/_torch/pyexecutor/model_engine.py``
    @001e67005b4f64b69b0045456870be48ab7b2cf0, ``_filter_cuda_graph_batch_sizes``: "padding to
    max_cuda_graph_bs is acceptable"). Limits (1536, 2048) with the perf-overview's sizes:
    1, 2, 4, ..., 512, 1024, 1536."""
    largest = min(max_batch_size, max_num_tokens)
    kept = [size for size in sizes if size <= largest]
    if len(kept) < len(sizes) and (not kept or kept[-1] != largest):
        kept.append(largest)
    return tuple(kept)


def padded_batch(batch: float, sizes: tuple[int, ...]) -> float:
    """The batch a decode-only step of ``batch`` sequences runs: the smallest captured size at or
    above it; ``batch`` itself above the largest (the step runs without a graph, unpadded) or
    when nothing is captured. 1,470 with sizes ..., 1024, 1536: 1536."""
    for size in sizes:
        if size >= batch:
            return float(size)
    return batch


def graph_step_share(
    *, batch: float, input_tokens: int, output_tokens: int, max_num_tokens: int
) -> float:
    """Share of decode steps that carry no prompt and so run as a CUDA graph (a step with any
    context request runs without one: TensorRT-LLM ``_torch/pyexecutor/scheduler.py``,
    ``ScheduledRequests.can_run_cuda_graph`` is ``not self.context_requests``).

    batch / output_tokens new requests start per step; a step that takes prompts fills its token
    budget with the queued ones (the micro-batch scheduler adds context requests until
    ``max_num_tokens``, decode tokens included), so it takes max(1, (max_num_tokens - batch) /
    input_tokens) of them, and 1 - (batch / output_tokens) / that share of the steps take none
    (0 when every step must take prompts). Qwen3-30B-A3B at 1,470 sequences, 128 / 2,048 tokens,
    2,048-token budget: 1 - 0.7178 / 4.516 = 0.841."""
    per_step = max(1.0, (max_num_tokens - batch) / input_tokens)
    return max(0.0, 1.0 - batch / output_tokens / per_step)


def cuda_graph_padding_tokens(
    *,
    sizes: tuple[int, ...],
    settings: tuple[int, int] | None,
    batch: float,
    dp: int,
    input_tokens: int,
    output_tokens: int,
    decode_only: bool,
) -> float:
    """Rows a step multiplies beyond its sequences, averaged over the decode steps, because
    decode-only steps run the CUDA graph of a padded batch (:func:`padded_batch` per attention DP
    rank of batch / ``dp`` sequences, over :func:`cuda_graph_sizes` of the engine's ``sizes`` and
    the bench's ``settings``): (padded - batch / dp) x dp x :func:`graph_step_share`, or x 1 when
    ``decode_only`` (every prompt runs in steps of its own). The dummy rows pass through every
    linear layer and the experts they route to (their multiplies and activations); attention
    over their one-token contexts is left out. 0 without ``sizes`` or ``settings``."""
    if not sizes or settings is None:
        return 0.0
    max_batch_size, max_num_tokens = settings
    captured = cuda_graph_sizes(sizes, max_batch_size=max_batch_size, max_num_tokens=max_num_tokens)
    rank_batch = batch / dp
    extra = padded_batch(rank_batch, captured) - rank_batch
    if extra <= 0:
        return 0.0
    share = (
        1.0
        if decode_only
        else graph_step_share(
            batch=rank_batch,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            max_num_tokens=max_num_tokens,
        )
    )
    return extra * dp * share


def decode_attention_flops_per_context_token(model: ModelArch) -> int:
    """FLOPs one decoding query token spends per cached context token, summed over layers.

    Standard attention: 4 x layers x heads x head_dim (QK^T and PV, two FLOPs a multiply-add).
    Multi-head latent attention (``model.is_mla``) decodes in its absorbed form, each query head
    attending to the compressed latent itself: QK^T over ``kv_lora_rank`` + ``qk_rope_head_dim``
    values and PV over ``kv_lora_rank``, so 2 x layers x heads x (2 x ``kv_lora_rank`` +
    ``qk_rope_head_dim``) - DeepSeek-V3 technical report §2.1.1 (arXiv:2412.19437: "W^UK can be
    absorbed into W^Q, and W^UV into W^O"), as TensorRT-LLM's and FlashMLA's decode kernels run
    it; the non-absorbed head_dim of 192 would count 2.8x too few. DeepSeek-V3 (61 layers, 128
    heads, rank 512, rope 64): 2 x 61 x 128 x 1,088 = 16,990,208 (standard form: 4 x 61 x 128 x
    192 = 5,996,544). Prompts attend in the standard form (:func:`prefill_flops`).
    """
    if model.is_mla:
        return (
            2
            * model.num_layers
            * model.num_attention_heads
            * (2 * model.kv_lora_rank + model.qk_rope_head_dim)
        )
    return 4 * model.num_layers * model.attention_width


def decode_attention_rate(
    *, model: ModelArch, gpu: GpuSpec, kv_bits: int, tp: int, efficiency: float, rate: float
) -> float:
    """FLOP/s of the decode attention kernels on ``tp`` cards that multiply 16-bit attention at
    ``rate``: multi-head latent attention against an FP8 KV cache on a card with FP4 tensor cores
    (Blackwell) multiplies in FP8, ``tp`` x FP8 peak x ``efficiency``; everything else at
    ``rate``. Measured: NVIDIA aiconfigurator's tables of TensorRT-LLM's MLA generation op
    (ai-dynamo/aiconfigurator @095f58a5, ``systems/data/{b200_sxm,h200_sxm}/mla/trtllm/
    1.3.0rc20/generation_mla_perf.parquet``, 128 heads, batch 512, context 8,192, FLOPs as
    :func:`decode_attention_flops_per_context_token`): a B200 reaches 2,525 TFLOPS with an FP8
    KV cache - above its 2,250 TFLOPS BF16 peak - and 1,408 with a BF16 one; an H200 700 and 633,
    both within its 989 BF16 peak (Hopper's MLA kernel multiplies in BF16 whatever the cache).
    One B200, 4,500 FP8 TFLOPS, at 0.55: 2.475e15 FLOP/s.
    """
    if model.is_mla and kv_bits == 8 and fp4_dense_tflops(gpu) and gpu.fp8_dense_tflops:
        return gpu.fp8_dense_tflops * 1e12 * tp * efficiency
    return rate


def decode_kv_read_bytes(
    *,
    model: ModelArch,
    profile: EngineProfile,
    gpu: GpuSpec,
    kv_bits: int,
    batch: int,
    group: int,
    context_tokens: int,
) -> float:
    """KV-cache bytes one decode step reads over a replica's cards, ``batch`` sequences of
    ``context_tokens`` on TP groups of ``group`` cards: each card its KV heads' share, once per
    KV head - or once per query head where the engine's kernel gives each query head its own
    pass: every layer (``EngineProfile.decode_kv_reads_per_query_head``: vLLM V0) or a chunked
    layer on a card without trtllm-gen attention (``EngineProfile.chunked_decode_per_query_head``,
    ``pools.sizing.gpus.trtllm_gen_attention``: TensorRT-LLM's MMHA fallback). Llama 4 Scout,
    FP8 KV, one H100, one sequence of 2,000 tokens on TensorRT-LLM: 12 x 2,000 x 2,048 B + 5 x
    36 x 2,000 x 2,048 B = 786,432,000 B (on a B200: 196,608,000 B)."""
    read = (
        batch
        * group
        * kv_bytes_per_sequence(model, context_tokens=context_tokens, kv_bits=kv_bits, tp=group)
    )
    query_heads_per_kv_head = model.num_attention_heads // model.num_kv_heads
    if profile.decode_kv_reads_per_query_head and not model.is_mla:
        return read * query_heads_per_kv_head
    if profile.chunked_decode_per_query_head and model.window_chunked:
        if not trtllm_gen_attention(gpu):
            chunked = window_kv_bytes_per_sequence(
                model, context_tokens=context_tokens, kv_bits=kv_bits, tp=group
            )
            read += batch * group * (query_heads_per_kv_head - 1) * chunked
    return read


def replica_throughput(
    *,
    model: ModelArch,
    precision: Precision,
    gpu: GpuSpec,
    tp: int,
    kv_bits: int,
    input_tokens: int,
    output_tokens: int,
    batch: float,
    engine: str | None = None,
    cached_input_tokens: int = 0,
    pp: int = 1,
    nic_gbps: float | None = None,
    speculation: Speculation | None = None,
    encoder_flops_per_request: float = 0.0,
    dp_attention: int = 1,
    bench_pp: int = 1,
) -> ThroughputEstimate:
    """Step time, TPOT, TTFT and output tok/s of one replica with ``batch`` sequences in flight.

    ``dp_attention`` d > 1 (a mixture of experts, expert parallelism over all ``tp`` cards;
    :func:`pools.sizing.memory.memory_estimate`): each of the d attention DP ranks runs
    batch / d sequences on tp / d cards. A step then streams the replicated weights once per
    rank and the routed experts the whole batch touches once (:func:`dp_weight_bytes`); the KV
    cache of each sequence once on its rank; all-reduces only inside a rank (after attention,
    and after a dense layer's MLP) over batch / d tokens; and per MoE layer the engine's
    exchange (``all_to_all_ms``): an all-to-all dispatch and combine
    (:func:`moe_all_to_all_s`), or, where the engine gathers (``EngineProfile.moe_dp_exchange``
    ``"allgather"``, :func:`moe_dp_exchange`: TensorRT-LLM off an NVL72 rack), an all-gather of
    every rank's tokens and a reduce-scatter of the output (:func:`moe_allgather_s`), each card
    then writing every token's output row (:func:`moe_glue_s` ``gathered``). A request's prefill
    alone runs its replicated part on its own rank's tp / d cards. The multiplies are the same
    in all. Ranks are taken as evenly loaded, as TensorRT-LLM's executor loads them: it tops
    every rank up to the same number of active requests and hands the new prompts, longest first,
    to the rank with the fewest new context tokens so far (``py_executor.py`` @9521caf4,
    ``_fetch_new_requests``: ``expected_num_active_requests``, a heap on ``num_tokens``); each
    rank's scheduler admits up to the engine's cap (``engines.batch_cap``).

    ``pp`` > 1: :func:`pipelined`. ``nic_gbps``: NIC rate per card, Gb/s, for groups that span
    nodes (required then). ``speculation``: speculative decoding, credited only where it is
    faster (:func:`_speculative_step`). ``encoder_flops_per_request``: a multimodal request's
    vision-encoder work (:mod:`pools.sizing.vision`; its visual tokens are in
    ``input_tokens``), run at the card's 16-bit tensor rate before the prefill - added to the
    prefill, so to TTFT, and to the share of prefill work that rides in the decode steps.

    An engine that captures CUDA graphs with padding (``EngineProfile.cuda_graph_batch_sizes``:
    TensorRT-LLM's PyTorch backend) multiplies, in its decode-only steps, the padded batch
    (:func:`cuda_graph_padding_tokens`, with the limits :func:`trtllm_bench_settings` gives it):
    the linear layers and the routed experts' activations count those rows too. Those limits are
    the whole replica's: ``bench_pp`` is its pipeline degree when this call costs one stage's
    micro-batch (:func:`pipelined` passes its ``pp``; trtllm-bench sizes the KV of all tp x pp
    cards and divides the requests by pp, so its max_batch_size is a micro-batch's).

    step = GEMM + attention + kernel latencies + the engine's host time per sequence in flight
    (``host_ms``: ``EngineProfile.host_s_per_sequence``, or ``host_s_per_sequence_grace`` on a
    Grace-hosted card, x batch / d) + all-reduces (module docstring); TPOT = step;
    output tok/s = batch / step; requests/s = that / output tokens; TTFT = prefill alone
    (+ one step when other sequences run). ``precision`` should already be the one the card runs
    (:func:`precision_on_gpu`).
    ``batch`` may be fractional (a time average, as for a request rate). ``cached_input_tokens``
    of each prompt are served from the prompt cache (no prefill FLOPs). Raises
    :class:`SizingInputError` for non-positive lengths, batch or TP, or a card without a known
    memory bandwidth (reason ``bandwidth_unknown``).
    """
    _check_lengths(input_tokens, output_tokens, cached_input_tokens)
    _check_group(tp=tp, pp=pp, dp_attention=dp_attention)
    if pp > 1:
        return pipelined(
            model=model,
            precision=precision,
            gpu=gpu,
            tp=tp,
            pp=pp,
            kv_bits=kv_bits,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            batch=batch,
            engine=engine,
            cached_input_tokens=cached_input_tokens,
            nic_gbps=nic_gbps,
            speculation=speculation,
            encoder_flops_per_request=encoder_flops_per_request,
            dp_attention=dp_attention,
        )
    _check_decode(batch=batch, gpu=gpu)
    dp = dp_attention
    group = tp // dp
    profile = engine_profile(engine)
    bandwidth = gpu.memory_bandwidth_gbps * 1e9 * tp
    effective_bandwidth = bandwidth * BANDWIDTH_EFFICIENCY
    tflops = tensor_tflops(precision, gpu)
    flops_rate = linear_flops_rate(
        precision=precision, gpu=gpu, tflops=tflops, tp=tp, efficiency=profile.compute_efficiency
    )
    # Attention (QK^T, PV) multiplies 16-bit activations with the (de-quantised) KV cache: FP8
    # and INT8 checkpoints quantise the linear layers only (module docstring), so attention
    # runs at the card's 16-bit tensor rate.
    half = gpu.bf16_dense_tflops or gpu.fp16_dense_tflops
    attention_rate = half * 1e12 * tp * profile.compute_efficiency if half else flops_rate
    decode_rate = (
        decode_attention_rate(
            model=model,
            gpu=gpu,
            kv_bits=kv_bits,
            tp=tp,
            efficiency=profile.compute_efficiency,
            rate=attention_rate,
        )
        if attention_rate
        else None
    )
    # A skewed router's cost on the busiest card (pools.sizing.routing): the experts are spread
    # over every card with attention DP (expert parallelism); otherwise each card holds every
    # expert (or a TP slice of each) and pays the skew as one card does. It slows the routed
    # experts' multiplies and their activation traffic (moe_glue_s), not their weight stream.
    skew = skew_factor(model=model, ranks=tp if dp > 1 else 1)
    routed_rate = (
        _routed_rate(
            model=model,
            precision=precision,
            gpu=gpu,
            tp=tp,
            flops_rate=flops_rate,
            triton=profile.hopper_mxfp4_moe_triton,
        )
        / skew
        if flops_rate
        else None
    )

    ceiling_s = weight_bytes_read(model=model, weight_bits=precision.weight_bits, tokens=1) / (
        bandwidth
    )
    # The engine's own limits, as trtllm-bench sets them, fix which CUDA graphs it captures.
    bench_settings = (
        trtllm_bench_settings(
            model=model,
            precision=precision,
            kv_bits=kv_bits,
            gpu=gpu,
            tp=tp,
            pp=bench_pp,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )
        if profile.cuda_graph_batch_sizes
        else None
    )

    new_input = input_tokens - cached_input_tokens
    prefill_tokens_per_step = batch * new_input / output_tokens
    mean_tokens = input_tokens + (output_tokens + 1) // 2
    mean_context = kv_tokens_per_sequence(model, mean_tokens)
    kv_read = decode_kv_read_bytes(
        model=model, profile=profile, gpu=gpu, kv_bits=kv_bits, batch=batch, group=group,
        context_tokens=mean_tokens,
    )  # fmt: skip
    request_prefill_flops = prefill_flops(
        model=model, input_tokens=input_tokens, cached_tokens=cached_input_tokens
    )
    prefill_attention_flops = request_prefill_flops - 2 * _linear_params(model) * new_input
    kernel_s = model.num_layers * profile.step_overhead_s_per_layer
    # The engine's host work per sequence in flight (engines.py), on each attention DP rank's
    # own host loop over its batch / d sequences; TP ranks loop over the same batch in parallel.
    host_per_sequence = (
        profile.host_s_per_sequence_grace if grace_hosted(gpu) else profile.host_s_per_sequence
    )
    host_s = host_per_sequence * batch / dp
    encoder_s = encoder_flops_per_request / attention_rate if attention_rate else 0.0
    # How the MoE layers exchange tokens between attention DP ranks (engines.MOE_DP_EXCHANGES).
    gathered = dp > 1 and (
        moe_dp_exchange(exchange=profile.moe_dp_exchange, model=model, gpu=gpu, ranks=tp)
        == "allgather"
    )

    def communication_s(tokens: float, rank_tokens: float, card_tokens: float) -> tuple:
        """(all-reduce s, all-to-all s) of a pass over ``tokens`` tokens, ``rank_tokens`` of
        them on the busiest attention DP rank and ``card_tokens`` dispatched by each card."""
        if dp == 1:
            message = tokens * model.hidden_size * ACTIVATION_BYTES
            one = allreduce_s(message_bytes=message, tp=tp, gpu=gpu, nic_gbps=nic_gbps)
            return 2 * model.num_layers * one, 0.0
        message = rank_tokens * model.hidden_size * ACTIVATION_BYTES
        one = allreduce_s(message_bytes=message, tp=group, gpu=gpu, nic_gbps=nic_gbps)
        dense_layers = model.num_layers - model.num_moe_layers
        if gathered:
            exchange = moe_allgather_s(
                model=model,
                precision=precision,
                tokens=tokens,
                ranks=tp,
                gpu=gpu,
                nic_gbps=nic_gbps,
            )
        else:
            exchange = moe_all_to_all_s(
                model=model,
                precision=precision,
                tokens_per_card=card_tokens,
                ranks=tp,
                gpu=gpu,
                nic_gbps=nic_gbps,
            )
        return (model.num_layers + dense_layers) * one, exchange

    prefill_alone_s = None
    if flops_rate:
        # A request's prefill alone runs its replicated part on its own DP rank (1 / dp of the
        # cards): its replicated weights, multiplies and attention take dp times as long.
        prefill_weights = dp_weight_bytes(
            model=model, precision=precision, tokens=new_input, dp_attention=dp
        )
        prefill_memory_s = pass_weight_stream_s(
            model=model,
            precision=precision,
            gpu=gpu,
            weight_bytes=prefill_weights,
            tokens=new_input,
            triton=profile.hopper_mxfp4_moe_triton,
            bandwidth=bandwidth,
        )
        # The routed experts' multiplies spread over every card (expert parallelism), the rest
        # on the rank's tp / d cards: dp times as long.
        routed_flops = 2 * routed_active_params(model) * new_input
        prefill_linear_s = (
            dp * (request_prefill_flops - prefill_attention_flops - routed_flops) / flops_rate
            + routed_flops / routed_rate
        )
        prefill_compute_s = prefill_linear_s + dp * prefill_attention_flops / attention_rate
        prefill_dequant_extra_s, _ = dequant_seconds(
            model=model,
            precision=precision,
            gpu=gpu,
            tp=tp,
            tokens=new_input,
            memory_s=prefill_memory_s,
            compute_s=prefill_linear_s,
            flops_rate=flops_rate,
            effective_bandwidth=effective_bandwidth,
            awq_kernel=profile.awq_kernel,
        )
        prefill_alone_s = (
            overlapped_s(
                prefill_memory_s,
                prefill_compute_s,
                profile.gemm_overlap_exponent,
            )
            + prefill_dequant_extra_s
            + skew
            * moe_glue_s(
                model=model,
                precision=precision,
                tokens=new_input,
                tp=tp,
                dp_attention=dp,
                card_bandwidth=effective_bandwidth / tp,
                gathered=gathered,
            )
            + kernel_s
            + dp * encoder_s
            + sum(communication_s(new_input, new_input, new_input / group))
        )

    def step(
        serial_share: float, query_tokens: int = 1, tokens_per_pass: float = 1.0
    ) -> dict[str, float]:
        # ``serial_share`` of the prefill work runs alone; the rest rides in the decode steps.
        # A pass gives each sequence ``tokens_per_pass`` output tokens (1; speculative decoding:
        # more), so it carries that many tokens' share of the prefill work, and multiplies
        # ``query_tokens`` per sequence (speculative verification: gamma + 1) against the KV
        # cache it reads once.
        prefill_share = (1 - serial_share) * tokens_per_pass
        tokens = batch * query_tokens + prefill_tokens_per_step * prefill_share
        weights_read = dp_weight_bytes(
            model=model, precision=precision, tokens=tokens, dp_attention=dp
        )
        decode_attention_flops = (
            decode_attention_flops_per_context_token(model) * batch * query_tokens * mean_context
        )
        # The prompts' attention (and a vision encoder) riding in this step run as their own
        # kernels, after the decode sequences' (see ``attention_s`` below).
        prefill_attention_share = (
            batch
            * prefill_share
            / output_tokens
            * (prefill_attention_flops + encoder_flops_per_request)
        )
        # NVFP4 routed experts stream slower than the other weights on SM100 (fp4_kernels).
        memory_s = pass_weight_stream_s(
            model=model,
            precision=precision,
            gpu=gpu,
            weight_bytes=weights_read,
            tokens=tokens,
            triton=profile.hopper_mxfp4_moe_triton,
            bandwidth=bandwidth,
        )
        # Decode-only steps multiply a CUDA graph's padded batch (engines.EngineProfile).
        padding = (
            cuda_graph_padding_tokens(
                sizes=profile.cuda_graph_batch_sizes,
                settings=bench_settings,
                batch=batch,
                dp=dp,
                input_tokens=new_input,
                output_tokens=output_tokens,
                decode_only=serial_share >= 1.0,
            )
            if query_tokens == 1
            else 0.0
        )
        compute_s = (
            linear_compute_s(
                model=model,
                tokens=tokens + padding,
                flops_rate=flops_rate,
                routed_rate=routed_rate,
            )
            if flops_rate
            else 0.0
        )
        dequant_extra_s, dequant_s = dequant_seconds(
            model=model,
            precision=precision,
            gpu=gpu,
            tp=tp,
            tokens=tokens,
            memory_s=memory_s,
            compute_s=compute_s,
            flops_rate=flops_rate,
            effective_bandwidth=effective_bandwidth,
            awq_kernel=profile.awq_kernel,
        )
        gemm_s = overlapped_s(memory_s, compute_s, profile.gemm_overlap_exponent)
        gemm_s += dequant_extra_s
        glue_s = skew * moe_glue_s(
            model=model,
            precision=precision,
            tokens=tokens + padding,
            tp=tp,
            dp_attention=dp,
            card_bandwidth=effective_bandwidth / tp,
            gathered=gathered,
        )
        gemm_s += glue_s
        # Decode attention reads each sequence's KV cache (bandwidth) for a few FLOPs per byte;
        # the prompts mixed into the step run the context attention kernel (FLOPs) - separate
        # launches one after the other (TensorRT-LLM: context FMHA, then generation XQA /
        # masked MHA, nvidia.github.io/TensorRT-LLM/advanced/gpt-attention.html "Multi-Head,
        # Multi-Query, and Group-Query Attention"), so their times
        # add, as NVIDIA aiconfigurator's TensorRT-LLM backend adds a mixed step's
        # context_attention and generation_attention (sdk/backends/trtllm_backend.py
        # ``_get_mix_step_latency``: "Combine all components (simple addition)").
        attention_s = kv_read / effective_bandwidth
        if flops_rate:
            attention_s = max(attention_s, decode_attention_flops / decode_rate)
            attention_s += prefill_attention_share / attention_rate
        allreduce_step_s, all_to_all_step_s = communication_s(tokens, tokens / dp, tokens / tp)
        # The engine prepares the next step on the host while this one runs on the GPU
        # (TensorRT-LLM's overlap scheduler, on by default): a step lasts the longer of the two.
        decode_step_s = overlapped_s(
            gemm_s + attention_s + kernel_s + allreduce_step_s + all_to_all_step_s,
            host_s,
            profile.host_overlap_exponent,
        )
        serial_prefill_s = 0.0
        if prefill_alone_s is not None:
            serial_prefill_s = (
                batch * serial_share * tokens_per_pass / output_tokens * prefill_alone_s
            )
        # Of the prompts run alone, a sequence's own (1 / batch of them) runs before its first
        # token; the others' run between its tokens, so its time per output token holds them.
        others_prefill_s = serial_prefill_s * (1 - min(1.0, 1.0 / batch) / serial_share)
        return {
            "tokens": tokens,
            "padding_tokens": padding,
            "weights_read": weights_read,
            "gemm_s": gemm_s,
            "dequant_s": dequant_s,
            "moe_glue_s": glue_s,
            "attention_s": attention_s,
            "allreduce_step_s": allreduce_step_s,
            "all_to_all_step_s": all_to_all_step_s,
            "decode_step_s": decode_step_s,
            "serial_prefill_s": serial_prefill_s,
            "between_tokens_s": decode_step_s + others_prefill_s,
            "step_s": decode_step_s + serial_prefill_s,
        }

    # A sequence's own prefill cannot overlap its own decode; it overlaps the other sequences'
    # decode steps (chunked prefill / in-flight batching): with ``batch`` sequences in flight,
    # 1 / batch of the prefill work runs alone (batch 1: all of it, before the first token).
    # Mixing prefill into decode steps also makes them read more experts of a mixture of
    # experts; running every prefill alone is the scheduler's other choice, so the faster of
    # the two is taken (it never makes a larger batch slower than one sequence).
    chosen = min(step(min(1.0, 1.0 / batch)), step(1.0), key=lambda option: option["step_s"])
    per_pass, credited = 1.0, None
    if speculation is not None:
        chosen, per_pass, credited = _speculative_step(step, chosen, batch, speculation)
    tokens, weights_read = chosen["tokens"], chosen["weights_read"]
    gemm_s, attention_s = chosen["gemm_s"], chosen["attention_s"]
    allreduce_step_s, decode_step_s = chosen["allreduce_step_s"], chosen["decode_step_s"]
    serial_prefill_s, step_s = chosen["serial_prefill_s"], chosen["step_s"]
    ttft_s = None
    if prefill_alone_s is not None:
        ttft_s = prefill_alone_s + (decode_step_s if batch > 1 else 0.0)

    output_tok_s = batch * per_pass / step_s
    return ThroughputEstimate(
        engine=profile.name,
        tp=tp,
        batch=batch,
        bandwidth_gbps_per_gpu=gpu.memory_bandwidth_gbps,
        bandwidth_efficiency=BANDWIDTH_EFFICIENCY,
        compute_tflops_per_gpu=tflops,
        compute_efficiency=profile.compute_efficiency,
        decode_ceiling_batch1_ms=ceiling_s * 1e3,
        decode_ceiling_batch1_tok_s=1 / ceiling_s,
        tokens_per_step=tokens,
        weight_bytes_read_per_step=weights_read,
        kv_bytes_read_per_step=kv_read,
        gemm_ms=gemm_s * 1e3,
        attention_ms=attention_s * 1e3,
        kernel_overhead_ms=kernel_s * 1e3,
        allreduce_ms=allreduce_step_s * 1e3,
        allreduce_over=_allreduce_over(gpu, group),
        step_ms=step_s * 1e3,
        prefill_flops_per_request=request_prefill_flops,
        prefill_ms=None if prefill_alone_s is None else prefill_alone_s * 1e3,
        serial_prefill_ms=serial_prefill_s * 1e3,
        tpot_ms=chosen["between_tokens_s"] / per_pass * 1e3,
        ttft_ms=None if ttft_s is None else ttft_s * 1e3,
        output_tok_s_total=output_tok_s,
        output_tok_s_per_gpu=output_tok_s / tp,
        requests_per_s=output_tok_s / output_tokens,
        dequant_ms=chosen["dequant_s"] * 1e3,
        speculative_tokens_per_step=None if speculation is None else per_pass,
        speculative_credited=credited,
        dp_attention=dp,
        all_to_all_ms=chosen["all_to_all_step_s"] * 1e3,
        moe_glue_ms=chosen["moe_glue_s"] * 1e3,
        host_ms=host_s * 1e3,
    )


def _speculative_step(step, plain: dict, batch: float, speculation: Speculation):
    """(pass, output tokens per sequence per pass, credited) with speculative decoding.

    One pass = gamma draft steps, each ``draft_cost_ratio`` x the target's plain decode step,
    then the target verifying gamma + 1 tokens per sequence (``step`` with that many query
    tokens: the same weights and KV cache read once, gamma + 1 times the multiplies); it gives
    :meth:`Speculation.tokens_per_step` tokens per sequence (Leviathan et al. 2023, §3.4:
    walltime improvement (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)) when the target's
    pass costs the same at gamma + 1 tokens). Where the batch already makes the GEMMs compute
    bound the verification costs gamma + 1 times as much and the pass is slower per token than
    ``plain``; then the engine is credited nothing (``000`` §3.3: speculative decoding pays
    only with compute to spare - single-stream, low concurrency) and ``plain`` is returned.
    """
    gamma, expected = speculation.draft_tokens, speculation.tokens_per_step()
    draft_s = gamma * speculation.draft_cost_ratio * plain["decode_step_s"]
    best = min(
        (
            step(share, query_tokens=gamma + 1, tokens_per_pass=expected)
            for share in (min(1.0, 1.0 / batch), 1.0)
        ),
        key=lambda option: option["step_s"],
    )
    best = {
        **best,
        "decode_step_s": best["decode_step_s"] + draft_s,
        "between_tokens_s": best["between_tokens_s"] + draft_s,
        "step_s": best["step_s"] + draft_s,
    }
    if best["step_s"] / expected < plain["step_s"]:
        return best, expected, True
    return plain, 1.0, False


def _allreduce_over(gpu: GpuSpec, tp: int) -> str:
    if tp == 1:
        return "none"
    if tp > node_gpus(gpu):
        return "NIC"
    return "NVLink" if gpu.nvlink_spans(tp) else "PCIe"


def pipeline_hop_s(
    *, message_bytes: float, tp: int, gpu: GpuSpec, crosses_node: bool, nic_gbps: float | None
) -> float:
    """Seconds to hand ``message_bytes`` of activations from one pipeline stage to the next:
    latency + bytes / link. Between nodes the NIC (``nic_gbps`` Gb/s per card, each of the
    ``tp`` cards sends its share: bytes / tp per card, :data:`NIC_LATENCY_S`); inside a node
    NVLink per direction where the card has it, else PCIe (:data:`ALLREDUCE_LATENCY_NVLINK_S`
    / :data:`ALLREDUCE_LATENCY_PCIE_S`). 1,000 tokens of Llama-3-70B (8,192 wide, 16 bit =
    16.4 MB) over one 400 Gb/s NIC: 50 us + 16.4e6 / 50e9 = 378 us.
    """
    if crosses_node:
        return NIC_LATENCY_S + message_bytes / tp / _nic_bytes_per_s(nic_gbps)
    if gpu.has_nvlink:
        return ALLREDUCE_LATENCY_NVLINK_S + message_bytes / (gpu.nvlink_gbps / 2 * 1e9)
    return ALLREDUCE_LATENCY_PCIE_S + message_bytes / (gpu.pcie_gbps * 1e9)


def pipeline_cross_node_hops(*, gpu: GpuSpec, tp: int, pp: int) -> int:
    """Stage boundaries (of ``pp`` - 1) that cross a node: stages are laid out node by node,
    max(1, node cards // ``tp``) per node. TP 8 x PP 2 on H100 (8 per node): 1; TP 4 x PP 2: 0;
    TP 2 x PP 8: 1."""
    per_node = max(1, node_gpus(gpu) // tp)
    return -(-pp // per_node) - 1


def pipelined(*, pp: int, batch: float, nic_gbps: float | None, **replica: object):
    """Speed of a replica of ``pp`` pipeline stages of ``tp`` cards (``000`` §4.1: TP inside
    the node, PP across nodes).

    The engine keeps ``pp`` micro-batches of ``batch`` / ``pp`` sequences in flight, one per
    stage. A stage runs 1 / ``pp`` of the layers, so one micro-batch's pass over every stage
    takes the TP group's step at ``batch`` / ``pp`` (the weights and KV it reads are those of
    one stage, ``pp`` times over), plus the ``pp`` - 1 hand-overs of its activations
    (:func:`pipeline_hop_s`; :func:`pipeline_cross_node_hops` of them over the NIC) during
    which the next stage waits - the pipeline bubble the article names. Every sequence gets a
    token once per such pass: TPOT = step(batch / pp) + hops; output rate = batch / TPOT;
    TTFT = that of the micro-batch + the hand-overs of the prompt's activations.
    ``weight_bytes_read_per_step``, ``kv_bytes_read_per_step``, ``tokens_per_step`` are those
    of one micro-batch pass. Without a hand-over cost, PP 2 at batch 64 runs at the speed of
    one TP group at batch 32 with twice the sequences: twice its tokens per second.
    """
    model, gpu, tp = replica["model"], replica["gpu"], replica["tp"]
    inner = replica_throughput(batch=batch / pp, pp=1, bench_pp=pp, nic_gbps=nic_gbps, **replica)
    cross = pipeline_cross_node_hops(gpu=gpu, tp=tp, pp=pp)

    def hops_s(tokens: float) -> float:
        message = tokens * model.hidden_size * ACTIVATION_BYTES
        common = {"message_bytes": message, "tp": tp, "gpu": gpu, "nic_gbps": nic_gbps}
        seconds = (pp - 1 - cross) * pipeline_hop_s(crosses_node=False, **common)
        if cross:
            seconds += cross * pipeline_hop_s(crosses_node=True, **common)
        return seconds

    step_hops_s = hops_s(inner.tokens_per_step)
    step_s = inner.step_ms / 1e3 + step_hops_s
    per_pass = inner.speculative_tokens_per_step or 1.0
    new_input = replica["input_tokens"] - replica.get("cached_input_tokens", 0)
    ttft_ms = None
    if inner.ttft_ms is not None:
        ttft_ms = inner.ttft_ms + hops_s(new_input) * 1e3 + step_hops_s * 1e3 * (batch > 1)
    output_tok_s = batch * per_pass / step_s
    return replace(
        inner,
        batch=batch,
        step_ms=step_s * 1e3,
        tpot_ms=inner.tpot_ms + step_hops_s / per_pass * 1e3,
        ttft_ms=ttft_ms,
        output_tok_s_total=output_tok_s,
        output_tok_s_per_gpu=output_tok_s / (tp * pp),
        requests_per_s=output_tok_s / replica["output_tokens"],
        pp=pp,
        pipeline_hops_ms=step_hops_s * 1e3,
    )


def decode_ceiling_batch1_tok_s(*, weight_bytes: float, bandwidth_gbps: float) -> float:
    """The seeds' single-stream decode bound: tok/s = bandwidth / bytes read per token.

    7B at FP16 (14e9 B) on an A100 SXM 80GB (2,039 GB/s): 2,039e9 / 14e9 = 145.6 tok/s, i.e.
    6.87 ms per token. It ignores KV reads, kernel latency and achieved bandwidth.
    """
    return bandwidth_gbps * 1e9 / weight_bytes


def batch_for_request_rate(
    *, requests_per_s: float, max_batch: float, **replica: object
) -> tuple[ThroughputEstimate, bool]:
    """The steady state of a replica fed ``requests_per_s`` (open loop, e.g. Poisson arrivals).

    Solves Little's law for the sequences in decode, batch = rate × output tokens × TPOT(batch),
    by bisection on the batch in (0, ``max_batch``]; the output rate is then rate × output
    tokens (prefill is already amortised into the step). Returns ``(estimate, saturated)``: when
    the rate exceeds what ``max_batch`` sequences deliver, the estimate at ``max_batch`` and
    ``True``. ``replica`` holds the other keyword arguments of :func:`replica_throughput`.
    """
    if not requests_per_s > 0 or requests_per_s == float("inf"):
        raise SizingInputError(
            f"request rate must be positive, got {requests_per_s!r}",
            reason="not_positive",
            field="request_rate",
        )
    output_tokens = replica["output_tokens"]

    def excess(batch: float) -> tuple[float, ThroughputEstimate]:
        estimate = replica_throughput(batch=batch, **replica)
        return requests_per_s * output_tokens * estimate.step_ms / 1e3 - batch, estimate

    top_excess, top = excess(max_batch)
    if top_excess > 0 or top.requests_per_s < requests_per_s:
        return top, True
    low, high = min(1e-6, max_batch / 2), float(max_batch)
    estimate = top
    for _ in range(80):
        middle = (low + high) / 2
        gap, estimate = excess(middle)
        if gap > 0:
            low = middle
        else:
            high = middle
        if high - low < 1e-6 * max(1.0, high):
            break
    return estimate, False


def batch_for_targets(
    *,
    max_batch: int,
    tpot_target_ms: float | None,
    ttft_target_ms: float | None,
    **replica: object,
) -> ThroughputEstimate | None:
    """The estimate at the largest whole batch <= ``max_batch`` that meets the latency targets.

    TPOT and TTFT grow with the batch, so a binary search finds it. ``None`` targets are not
    checked (then the answer is ``max_batch``); ``None`` result: even one sequence misses them.
    ``replica`` holds the other keyword arguments of :func:`replica_throughput`.
    """

    def meets(estimate: ThroughputEstimate) -> bool:
        if tpot_target_ms is not None and estimate.tpot_ms > tpot_target_ms:
            return False
        if ttft_target_ms is not None and (
            estimate.ttft_ms is not None and estimate.ttft_ms > ttft_target_ms
        ):
            return False
        return True

    best = replica_throughput(batch=1, **replica)
    if not meets(best):
        return None
    low, high = 1, int(max_batch)
    top = replica_throughput(batch=high, **replica)
    if meets(top):
        return top
    while high - low > 1:
        middle = (low + high) // 2
        estimate = replica_throughput(batch=middle, **replica)
        if meets(estimate):
            low, best = middle, estimate
        else:
            high = middle
    return best
