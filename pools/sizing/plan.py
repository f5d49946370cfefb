"""Estimates people ask for: one configuration (:func:`estimate_replica`) or a plan over GPU
models (:func:`sizing_plan`) with replicas, cards, monthly cost, warnings and a recommendation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pools.sizing import SizingInputError, SizingWarning
from pools.sizing.band import ErrorBand, error_band
from pools.sizing.demand import Demand, cards_for_rate, replicas_for_demand
from pools.sizing.engines import EngineProfile, batch_cap, engine_profile, with_fitted
from pools.sizing.gpus import NVLINK_DOMAIN_GPUS, GpuSpec, node_gpus, trtllm_gen_attention
from pools.sizing.memory import (
    MemoryEstimate,
    Precision,
    check_context,
    check_stages,
    kv_cache_bits,
    kv_cache_dtype_for,
    memory_estimate,
    precision_parse,
    tp_degrees,
)
from pools.sizing.presets import ModelArch, custom_model_arch
from pools.sizing.throughput import (
    MIN_CROSS_NODE_TP_NIC_GBITS,
    Speculation,
    ThroughputEstimate,
    batch_for_request_rate,
    batch_for_targets,
    precision_on_gpu,
    replica_throughput,
    tensor_tflops,
)
from pools.sizing.vision import VisualLoad, visual_load

#: Hours in an average month: 8,760 h a year / 12.
HOURS_PER_MONTH = Decimal("730")

#: Cards per node when the caller does not say: the 8-GPU server (HGX / DGX, most PCIe servers).
DEFAULT_CARDS_PER_NODE = 8

CENT = Decimal("0.01")


def monthly_cost(
    *, cards: int, price_per_card_hour: Decimal | None, hours_per_month: Decimal = HOURS_PER_MONTH
) -> Decimal | None:
    """cards × price per card-hour × hours per month, rounded half-up to cents; ``None`` when
    there is no price (no rate card yet). 463 cards × 2.50 × 730 h = 844,975.00.

    Raises :class:`SizingInputError` (``out_of_range``) for a negative price, count or hours.
    """
    if price_per_card_hour is None:
        return None
    price = Decimal(str(price_per_card_hour))
    hours = Decimal(str(hours_per_month))
    if cards < 0 or price < 0 or hours < 0:
        raise SizingInputError(
            "cards, price and hours must not be negative",
            reason="out_of_range",
            field="price_per_card_hour",
        )
    return (Decimal(cards) * price * hours).quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class ReplicaEstimate:
    """One model on one GPU model at one TP degree, for one workload.

    ``precision`` is what the card runs (FP8 on Ampere becomes FP8-WO), ``requested_precision``
    what was asked. ``batch_limit`` says what set the sequences in flight: ``concurrency``
    (given), ``memory`` (KV cache full), ``engine`` (engine batch cap), ``request_rate``
    (Little's law at the given rate) or ``saturated`` (the rate exceeds what the replica
    serves). ``throughput`` is ``None`` when the model does not fit. ``replicas`` = gpu_count /
    tp; ``output_tok_s_total`` covers all of them. ``band``: where similar published
    measurements fell around ``output_tok_s_total`` (:func:`pools.sizing.band.error_band`).
    ``dp_attention``: attention data-parallel ranks asked for (``None``: none);
    ``kv_cache_dtype_source``: ``request``, ``checkpoint`` (the model's own KV dtype, asked
    for as ``auto`` or not at all) or ``default`` (16-bit).
    """

    model_id: str
    gpu_slug: str
    engine: str
    requested_precision: str
    precision: str
    kv_bits: int
    tp: int
    replicas: int
    input_tokens: int
    output_tokens: int
    memory: MemoryEstimate
    throughput: ThroughputEstimate | None
    batch_limit: str
    warnings: tuple[SizingWarning, ...]
    band: ErrorBand | None = None
    pp: int = 1
    ep: int | None = None
    nic_gbps: float | None = None
    speculation: Speculation | None = None
    encoder_flops_per_request: float = 0.0
    dp_attention: int | None = None
    kv_cache_dtype_source: str = "default"

    @property
    def fits(self) -> bool:
        """The model and the requested KV cache fit on the cards."""
        return self.memory.fits

    @property
    def output_tok_s_total(self) -> float | None:
        """Generated tokens per second of all replicas, ``None`` when it does not fit."""
        if self.throughput is None:
            return None
        return self.throughput.output_tok_s_total * self.replicas


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SizingInputError(
            f"{name} must be a positive integer, got {value!r}", reason="not_positive", field=name
        )
    return value


def _tp_warnings(*, gpu: GpuSpec, tp: int, throughput: ThroughputEstimate) -> list[SizingWarning]:
    # With attention data parallelism only an attention DP rank's cards all-reduce.
    tp = tp // throughput.dp_attention
    if tp > node_gpus(gpu):
        return [
            SizingWarning(
                "cross_node_tp",
                f"TP {tp} spans more than one {node_gpus(gpu)}-card node of {gpu.name}: its "
                f"all-reduces go over the NIC, {throughput.allreduce_ms:.1f} ms of every "
                f"{throughput.step_ms:.1f} ms step. TP inside the node and PP across nodes is "
                "the usual split.",
            )
        ]
    if tp == 1 or gpu.nvlink_spans(tp):
        return []
    return [
        SizingWarning(
            "no_nvlink_tp",
            f"{gpu.name} has no NVLink across {tp} cards: tensor parallelism all-reduces over "
            f"PCIe, {throughput.allreduce_ms:.1f} ms of every {throughput.step_ms:.1f} ms decode "
            "step. "
            "Prefer replicas of a model that fits on one card.",
        )
    ]


def _speculation_warnings(throughput: ThroughputEstimate) -> list[SizingWarning]:
    if throughput.speculative_credited is not False:
        return []
    return [
        SizingWarning(
            "speculation_not_credited",
            f"Speculative decoding is not credited: at {throughput.batch:g} sequences in flight "
            "verifying the draft tokens costs more than they save (seeds/000 §3.3: it pays "
            "only with compute to spare).",
        )
    ]


def _chunked_decode_warnings(
    *, model: ModelArch, gpu: GpuSpec, profile: EngineProfile, throughput: ThroughputEstimate
) -> list[SizingWarning]:
    """``chunked_decode_mmha`` where the engine decodes the model's chunked-attention layers
    once per query head on this card (``EngineProfile.chunked_decode_per_query_head``,
    ``pools.sizing.gpus.trtllm_gen_attention``): Llama 4 on TensorRT-LLM on Hopper."""
    if not (
        profile.chunked_decode_per_query_head
        and model.window_chunked
        and model.sliding_window_tokens
        and not trtllm_gen_attention(gpu)
    ):
        return []
    passes = model.num_attention_heads // model.num_kv_heads
    return [
        SizingWarning(
            "chunked_decode_mmha",
            f"On {gpu.name} TensorRT-LLM decodes {model.name}'s {model.window_layers} "
            "chunked-attention layers on its masked multi-head attention kernel (its XQA "
            f"kernels refuse chunked attention), which reads their KV cache {passes} times, once "
            f"per query head: attention is {throughput.attention_ms:.1f} ms of every "
            f"{throughput.step_ms:.1f} ms decode step. B200, B300, GB200 and GB300 (trtllm-gen "
            "kernels) and vLLM or SGLang read it once.",
        )
    ]


#: The codes of the warnings whose figures are those of one decode step at one batch
#: (:func:`_step_warnings`): a plan row says them again at the batch it runs.
STEP_WARNING_CODES = frozenset(
    {"cross_node_tp", "no_nvlink_tp", "speculation_not_credited", "chunked_decode_mmha"}
)


def _step_warnings(
    *, model: ModelArch, gpu: GpuSpec, tp: int, profile: EngineProfile, step: ThroughputEstimate
) -> list[SizingWarning]:
    """The warnings about ``step``, the decode step at the batch a replica runs: TP over PCIe
    or across nodes, speculation not credited, chunked attention decoded on MMHA (their
    :data:`STEP_WARNING_CODES`), with that step's milliseconds."""
    return [
        *_tp_warnings(gpu=gpu, tp=tp, throughput=step),
        *_speculation_warnings(step),
        *_chunked_decode_warnings(model=model, gpu=gpu, profile=profile, throughput=step),
    ]


def _compute_warnings(precision: Precision, gpu: GpuSpec) -> list[SizingWarning]:
    if tensor_tflops(precision, gpu) is not None:
        return []
    return [
        SizingWarning(
            "compute_unknown",
            f"No tensor TFLOPS on record for {gpu.name}: prefill and compute-bound decode are not "
            "modelled, so TTFT is unknown and the token rate is an upper bound (not ranked).",
        )
    ]


def _check_gpu_count(count: int, *, tp: int, pp: int) -> None:
    """Refuse a ``gpu_count`` that is no whole number of replicas of ``tp`` x ``pp`` cards
    (``inconsistent``, field ``tp``)."""
    if count % (tp * pp):
        raise SizingInputError(
            f"gpu_count {count} is not a multiple of tp x pp = {tp * pp}",
            reason="inconsistent",
            field="tp",
        )


def _check_heads(model: ModelArch, *, tp: int, dp: int) -> None:
    """Refuse a TP group (``tp`` / ``dp`` attention data-parallel ranks) that does not divide
    ``model``'s attention heads (``inconsistent``, field ``tp``)."""
    if model.num_attention_heads % (tp // dp):
        raise SizingInputError(
            f"tp {tp // dp} does not divide {model.name}'s {model.num_attention_heads} attention "
            "heads",
            reason="inconsistent",
            field="tp",
        )


def _check_parallel_layout(
    *,
    model: ModelArch,
    gpu: GpuSpec,
    tp: int,
    pp: int,
    ep: int | None,
    nic_gbps: float | None,
    dp_attention: int | None = None,
) -> None:
    """Refuse a layout the model cannot cost or the article advises against (estimate_replica)."""
    dp = 1 if dp_attention is None else _positive_int("dp_attention", dp_attention)
    if dp > 1 and (not model.is_moe or ep != tp or tp % dp):
        raise SizingInputError(
            f"dp_attention {dp} (attention data parallelism) needs a mixture of experts with "
            f"ep equal to tp (experts over every card, as SGLang's --enable-dp-attention and "
            f"DeepSeek-V3's EP over all cards) and must divide tp; got tp {tp}, ep {ep}"
            + ("" if model.is_moe else f", and {model.name} is dense"),
            reason="inconsistent",
            field="dp_attention",
        )
    if nic_gbps is not None and (
        isinstance(nic_gbps, bool) or not isinstance(nic_gbps, int | float) or not nic_gbps > 0
    ):
        raise SizingInputError(
            f"nic_gbps must be a positive number of Gb/s, got {nic_gbps!r}",
            reason="not_positive",
            field="nic_gbps",
        )
    node = node_gpus(gpu)
    # The all-reducing group: an attention DP rank's cards (the experts' all-to-all may cross
    # nodes on any NIC; the 400 Gb/s rule is the article's for tensor parallelism).
    if tp // dp > node and (nic_gbps is None or nic_gbps < MIN_CROSS_NODE_TP_NIC_GBITS):
        raise SizingInputError(
            f"tp {tp // dp} spans more than one {node}-card node of {gpu.name}: tensor parallelism "
            f"across nodes needs a NIC of at least {MIN_CROSS_NODE_TP_NIC_GBITS} Gb/s per card "
            f"(000 §4.1), got {'none' if nic_gbps is None else f'{nic_gbps:g}'}; keep TP inside "
            "the node and add pipeline stages (pp) across nodes",
            reason="nic_too_slow",
            field="nic_gbps",
        )
    if tp * pp > node and nic_gbps is None:
        raise SizingInputError(
            f"tp {tp} x pp {pp} spans more than one {node}-card node of {gpu.name}: give the NIC "
            "rate per card (nic_gbps, Gb/s) that carries the pipeline between nodes",
            reason="missing",
            field="nic_gbps",
        )
    if ep is None:
        return
    _positive_int("ep", ep)
    if not model.is_moe:
        raise SizingInputError(
            f"ep (expert parallelism) applies to mixture-of-experts models; {model.name} is dense",
            reason="inconsistent",
            field="ep",
        )
    if tp % ep or model.num_experts % ep:
        raise SizingInputError(
            f"ep {ep} must divide tp {tp} and {model.name}'s {model.num_experts} experts",
            reason="inconsistent",
            field="ep",
        )


def model_as_kept(model: ModelArch, profile: EngineProfile) -> ModelArch:
    """``model`` as ``profile``'s engine allocates its KV cache: without its window (sliding or
    chunked) when the engine keeps every layer's KV to the context anyway
    (``EngineProfile.window_keeps_full_kv``: TensorRT-LLM), else unchanged. For memory only:
    the engine's decode still reads the window. gpt-oss-120b on TensorRT-LLM: 36 layers of the
    whole context kept, 18 of them read at 128 tokens; Llama 4 Scout: 48 layers kept, 36 of them
    read at most 8,192 tokens."""
    if not (model.sliding_window_tokens and profile.window_keeps_full_kv):
        return model
    return replace(model, sliding_window_tokens=None, sliding_window_layers=None)


def estimate_replica(
    *,
    model: ModelArch,
    gpu: GpuSpec,
    precision: str,
    kv_cache_dtype: str | None,
    tp: int,
    input_tokens: int,
    output_tokens: int,
    concurrency: int | None = None,
    request_rate: float | None = None,
    gpu_count: int | None = None,
    engine: str | EngineProfile | None = None,
    cached_input_tokens: int = 0,
    engine_version: str | None = None,
    pp: int = 1,
    ep: int | None = None,
    nic_gbps: float | None = None,
    speculation: Speculation | None = None,
    encoder_flops_per_request: float = 0.0,
    dp_attention: int | None = None,
) -> ReplicaEstimate:
    """Memory and speed of ``model`` on ``tp`` cards of ``gpu`` (the ``estimate`` command's core).

    Parallelism (issue 34, ``000`` §4.1): a replica is ``tp`` x ``pp`` cards - ``pp`` pipeline
    stages (:func:`pools.sizing.throughput.pipelined`, memory per stage
    :func:`pools.sizing.memory.memory_estimate`) of a TP group each. A TP group larger than a
    node (:func:`pools.sizing.gpus.node_gpus`) all-reduces over the NIC: it needs ``nic_gbps``
    (Gb/s per card) of at least :data:`~pools.sizing.throughput.MIN_CROSS_NODE_TP_NIC_GBITS`,
    else it is refused (``nic_too_slow``); stages on other nodes need ``nic_gbps`` too.
    ``ep`` (mixture of experts only) splits the experts over ``ep`` of the ``tp`` ranks
    (TensorRT-LLM's moe_tp x moe_ep = tp): it must divide ``tp`` and the experts. Each card
    still holds 1 / tp of the expert weights, so memory is as for TP; the step is costed as
    TP's (the all-to-all that replaces the MoE all-reduce is not modelled separately) unless
    ``dp_attention`` is given: d attention data-parallel ranks of tp / d cards each, the experts
    over all ``tp`` cards (``ep`` must equal ``tp``; SGLang ``--enable-dp-attention``,
    TensorRT-LLM ``enable_attention_dp``): memory per card and the decode step change as
    :func:`pools.sizing.memory.memory_estimate` and
    :func:`pools.sizing.throughput.replica_throughput` say (replicated attention, KV per rank,
    MoE all-to-all dispatch and combine over NVLink inside the node, the NIC across). TP across
    nodes is then judged on tp / d.

    ``speculation``: speculative decoding (``000`` §3.3), credited only where it is faster than
    plain decoding at the batch the replica runs (else the warning ``speculation_not_credited``;
    :class:`pools.sizing.throughput.Speculation`). A separate draft model
    (``speculation.draft``) takes memory on every card, weights and KV cache
    (:func:`pools.sizing.memory.memory_estimate`).

    Multimodal requests (``000`` §6.3): ``input_tokens`` include the visual tokens and
    ``encoder_flops_per_request`` is the vision encoder's work per request
    (:func:`pools.sizing.vision.visual_load`); a vision-language model's encoder weights are
    counted in memory.

    ``concurrency``: sequences in flight per replica (closed loop); ``None`` = saturation (as many
    as the KV cache and the engine's batch cap allow), unless ``request_rate`` (requests/s per
    replica, open loop) is given. ``gpu_count`` (default ``tp``) must be a multiple of ``tp``;
    the extra cards are further replicas. ``kv_cache_dtype`` ``None`` or ``auto``: the
    checkpoint's own when the model names one (a preset's or a config.json's, cited), else
    16-bit (:func:`pools.sizing.memory.kv_cache_dtype_for`; ``kv_cache_dtype_source`` says
    which).

    Raises :class:`SizingInputError` for unknown precision / KV dtype / engine, non-positive
    sizes, a context above the model's maximum, a TP that does not divide the attention heads,
    or a card without a known memory bandwidth.
    """
    _positive_int("tp", tp)
    _positive_int("pp", pp)
    cards = tp * pp
    count = cards if gpu_count is None else _positive_int("gpu_count", gpu_count)
    _check_gpu_count(count, tp=tp, pp=pp)
    _check_parallel_layout(
        model=model, gpu=gpu, tp=tp, pp=pp, ep=ep, nic_gbps=nic_gbps, dp_attention=dp_attention
    )
    dp = dp_attention or 1
    _check_heads(model, tp=tp, dp=dp)
    for name, value in (("input_len", input_tokens), ("output_len", output_tokens)):
        _positive_int(name, value)
    if concurrency is not None:
        _positive_int("concurrency", concurrency)
    asked = precision_parse(precision)
    runs, warnings = precision_on_gpu(asked, gpu)
    kv_cache_dtype, kv_source = kv_cache_dtype_for(kv_cache_dtype, model)
    kv_bits = kv_cache_bits(kv_cache_dtype)
    profile = engine_profile(engine, engine_version)
    memory = memory_estimate(
        model=model_as_kept(model, profile),
        precision=runs,
        kv_bits=kv_bits,
        gpu_memory_bytes=gpu.memory_bytes,
        tp=tp,
        context_tokens=input_tokens + output_tokens,
        sequences=concurrency,
        engine=profile,
        pp=pp,
        draft=None if speculation is None else speculation.draft,
        dp_attention=dp,
    )
    replica = {
        "model": model,
        "precision": runs,
        "gpu": gpu,
        "tp": tp,
        "kv_bits": kv_bits,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "engine": profile,
        "cached_input_tokens": cached_input_tokens,
        "pp": pp,
        "nic_gbps": nic_gbps,
        "speculation": speculation,
        "encoder_flops_per_request": encoder_flops_per_request,
        "dp_attention": dp,
    }
    throughput = None
    limit = "concurrency"
    if memory.fits:
        cap = memory.max_sequences
        limit = "memory"
        engine_cap = batch_cap(profile, dp)
        if engine_cap is not None and engine_cap < cap:
            cap, limit = engine_cap, "engine"
        if concurrency is not None:
            throughput, limit = replica_throughput(batch=concurrency, **replica), "concurrency"
        elif request_rate is not None:
            throughput, saturated = batch_for_request_rate(
                requests_per_s=request_rate, max_batch=cap, **replica
            )
            limit = "saturated" if saturated else "request_rate"
            if saturated:
                warnings.append(
                    SizingWarning(
                        "saturated",
                        f"{request_rate:g} requests/s is more than one replica serves "
                        f"({throughput.requests_per_s:.2f} requests/s at {cap} sequences).",
                    )
                )
        else:
            throughput = replica_throughput(batch=cap, **replica)
        warnings += _step_warnings(model=model, gpu=gpu, tp=tp, profile=profile, step=throughput)
        warnings += _compute_warnings(runs, gpu)
    else:
        warnings.append(_does_not_fit(memory, gpu, concurrency))
    band = None
    if throughput is not None:
        band = error_band(
            tok_s=throughput.output_tok_s_total * (count // cards),
            batch=throughput.batch,
            precision=runs,
            gpu=gpu,
        )
    return ReplicaEstimate(
        model_id=model.id,
        gpu_slug=gpu.slug,
        engine=profile.name,
        requested_precision=asked.name,
        precision=runs.name,
        kv_bits=kv_bits,
        tp=tp,
        replicas=count // cards,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        memory=memory,
        throughput=throughput,
        batch_limit=limit,
        warnings=tuple(warnings),
        band=band,
        pp=pp,
        ep=ep,
        nic_gbps=nic_gbps,
        speculation=speculation,
        encoder_flops_per_request=encoder_flops_per_request,
        dp_attention=dp_attention,
        kv_cache_dtype_source=kv_source,
    )


def _does_not_fit(memory: MemoryEstimate, gpu: GpuSpec, concurrency: int | None) -> SizingWarning:
    wanted = concurrency or 1
    per_sequence = memory.kv_bytes_per_sequence_per_gpu + memory.draft_kv_bytes_per_sequence_per_gpu
    need = (
        memory.weights_bytes_per_gpu
        + memory.draft_weights_bytes_per_gpu
        + memory.vision_weights_bytes_per_gpu
        + memory.engine_overhead_bytes_per_gpu
        + memory.reserve_bytes_per_gpu
        + wanted * per_sequence
    )
    draft = ""
    if memory.draft_weights_bytes_per_gpu:
        draft = f"draft model {memory.draft_weights_bytes_per_gpu / 1e9:,.1f} GB, "
    return SizingWarning(
        "does_not_fit",
        f"Needs {need / 1e9:,.1f} GB per card at TP {memory.tp} (weights "
        f"{memory.weights_bytes_per_gpu / 1e9:,.1f} GB, {draft}KV {wanted} x "
        f"{per_sequence / 1e9:,.2f} GB, overhead and reserve "
        f"{(memory.engine_overhead_bytes_per_gpu + memory.reserve_bytes_per_gpu) / 1e9:,.1f} GB);"
        f" {gpu.name} has {gpu.memory_bytes / 1e9:,.1f} GB.",
    )


@dataclass(frozen=True)
class PlanRow:
    """The plan for one GPU model. ``estimate`` is at the chosen TP (``None``: nothing fits or
    the card cannot be modelled). ``min_fit_tp`` is the smallest TP degree whose memory fits;
    ``tp`` the degree chosen (the one needing fewest cards that meets the targets).
    ``replica_requests_per_s`` / ``per_card_equivalent_tok_s`` are the modelled rates at the
    largest batch that meets the latency targets. ``monthly_cost`` is Decimal money or ``None``.
    ``band`` is the error band of the replica's output tok/s; ``cards_pessimistic`` the cards
    if every replica serves only the band's low end (replicas re-covered at rate × low factor;
    with a concurrency, replicas hold sequences, so the count stays ``cards``).
    ``replicas_at_peak`` cover the whole peak, ``replicas_sized`` the chosen share of it and
    ``replicas_buffer`` the buffer on top (seeds/004 section 2.3): ``replicas`` =
    ``replicas_sized`` + ``replicas_buffer``.
    """

    gpu_slug: str
    gpu_name: str
    min_fit_tp: int | None
    tp: int | None
    estimate: ReplicaEstimate | None
    replica_requests_per_s: float | None
    per_card_equivalent_tok_s: float | None
    replicas: int | None
    cards: int | None
    free_cards: int | None
    price_per_card_hour: Decimal | None
    monthly_cost: Decimal | None
    meets_targets: bool
    fits_free_capacity: bool | None
    warnings: tuple[SizingWarning, ...]
    band: ErrorBand | None = None
    pp: int = 1
    ep: int | None = None
    nic_gbps: float | None = None
    dp_attention: int | None = None
    replicas_pessimistic: int | None = None
    cards_pessimistic: int | None = None
    replicas_at_peak: int | None = None
    replicas_sized: int | None = None
    replicas_buffer: int | None = None


@dataclass(frozen=True)
class SizingPlan:
    """Rows per GPU model, ranked, with the demand and the seeds' card count beside them.

    ``recommended``: the cheapest row that fits and meets the targets (by monthly cost where
    priced, then by cards). ``recommended_in_free_capacity``: the same among rows whose cards fit
    in today's free capacity. ``seed_rule_cards``: demand / the seeds' per-card rate, when given.
    """

    demand: Demand | None
    seed_per_card_tok_s: float | None
    seed_rule_cards: int | None
    rows: tuple[PlanRow, ...]
    recommended: PlanRow | None
    recommended_in_free_capacity: PlanRow | None


def _option(
    *,
    model: ModelArch,
    gpu: GpuSpec,
    precision: str,
    kv_cache_dtype: str | None,
    tp: int,
    input_tokens: int,
    output_tokens: int,
    engine: str | None,
    cached: int,
    tpot_target_ms: float | None,
    ttft_target_ms: float | None,
    pp: int = 1,
    ep: int | None = None,
    nic_gbps: float | None = None,
    speculation: Speculation | None = None,
    encoder_flops_per_request: float = 0.0,
    dp_attention: int | None = None,
) -> tuple[ReplicaEstimate, ThroughputEstimate | None]:
    base = estimate_replica(
        model=model,
        gpu=gpu,
        precision=precision,
        kv_cache_dtype=kv_cache_dtype,
        tp=tp,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        engine=engine,
        cached_input_tokens=cached,
        pp=pp,
        ep=ep,
        nic_gbps=nic_gbps,
        speculation=speculation,
        encoder_flops_per_request=encoder_flops_per_request,
        dp_attention=dp_attention,
    )
    if not base.fits:
        return base, None
    profile = engine_profile(engine)
    cap = base.memory.max_sequences
    engine_cap = batch_cap(profile, dp_attention or 1)
    if engine_cap is not None:
        cap = min(cap, engine_cap)
    replica = {
        "model": model,
        "precision": precision_on_gpu(precision_parse(precision), gpu)[0],
        "gpu": gpu,
        "tp": tp,
        "kv_bits": base.kv_bits,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "engine": profile,
        "cached_input_tokens": cached,
        "pp": pp,
        "nic_gbps": nic_gbps,
        "speculation": speculation,
        "encoder_flops_per_request": encoder_flops_per_request,
        "dp_attention": dp_attention or 1,
    }
    at_targets = batch_for_targets(
        max_batch=cap, tpot_target_ms=tpot_target_ms, ttft_target_ms=ttft_target_ms, **replica
    )
    return base, at_targets


def sizing_plan(
    *,
    model: ModelArch,
    gpus: Sequence[GpuSpec],
    precision: str,
    kv_cache_dtype: str | None,
    input_tokens: int,
    output_tokens: int,
    demand: Demand | None = None,
    concurrency: int | None = None,
    tpot_target_ms: float | None = None,
    ttft_target_ms: float | None = None,
    engine: str | None = None,
    cards_per_node: int | Mapping[str, int] = DEFAULT_CARDS_PER_NODE,
    free_cards: Mapping[str, int] | None = None,
    prices: Mapping[str, Decimal | None] | None = None,
    hours_per_month: Decimal = HOURS_PER_MONTH,
    seed_per_card_tok_s: float | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    sized_share: float = 1.0,
    buffer_share: float = 0.0,
    tp: int | None = None,
    pp: int = 1,
    ep: int | None = None,
    nic_gbps: float | None = None,
    speculation: Speculation | None = None,
    encoder_flops_per_request: float = 0.0,
    dp_attention: int | None = None,
) -> SizingPlan:
    """One :class:`PlanRow` per GPU model in ``gpus``, ranked, plus the recommendation.

    For each GPU model every TP degree (powers of two up to the node's cards, dividing the
    heads) that fits is tried; at each, the largest batch meeting ``tpot_target_ms`` /
    ``ttft_target_ms`` gives the replica's requests/s, then replicas = ceil(peak requests/s /
    that) and cards = replicas × TP (one replica when ``demand`` is ``None``). With
    ``concurrency`` instead (sequences in flight at once, closed loop) replicas = ceil(concurrency
    / that largest batch); give one of the two, not both. The option with
    fewest cards meeting the targets wins; if none does, the smallest fitting TP is shown with
    warnings. ``cards_per_node`` (int or per slug) bounds TP, except on a card whose NVLink
    domain is larger than a node (GB200 / GB300 NVL72: 72, ``gpus.NVLINK_DOMAIN_GPUS``);
    ``free_cards`` (per slug) adds
    the free-capacity check; ``prices`` (Decimal per card-hour, per slug) gives
    ``monthly_cost``; ``seed_per_card_tok_s`` adds the seeds' rule (demand / that rate).
    ``on_progress(done, total)`` is called after each GPU model (a job reports its progress).
    ``sized_share`` (0, 1] sizes the replicas for that share of the peak (requests/s, or
    sequences in flight) and ``buffer_share`` >= 0 adds ceil(share x those replicas) on top
    (seeds/004 section 2.3: carry 85 % of the peak, keep a 30 % buffer).
    ``tp`` fixes the TP degree instead of trying each; ``pp`` pipeline stages, ``ep``,
    ``dp_attention`` and ``nic_gbps`` as :func:`estimate_replica` (a replica is then tp x pp
    cards). A layout one GPU model cannot run (TP not dividing the heads, TP across its nodes
    on a slow NIC) gives that row a ``layout_refused`` warning instead of refusing the plan.
    ``speculation``: speculative decoding on every option, as :func:`estimate_replica`
    (credited only where it is faster).
    ``encoder_flops_per_request``: a multimodal request's vision-encoder work, its visual
    tokens already in ``input_tokens`` (:func:`estimate_replica`).

    Raises :class:`SizingInputError` for bad precision, KV dtype, engine or lengths, or a
    context above the model's maximum.
    """
    precision_parse(precision)
    kv_cache_bits(kv_cache_dtype)
    engine_profile(engine)
    if concurrency is not None:
        _positive_int("concurrency", concurrency)
        if demand is not None:
            raise SizingInputError(
                "give a demand or a concurrency, not both",
                reason="inconsistent",
                field="concurrency",
            )
    input_len = _positive_int("input_len", input_tokens)
    output_len = _positive_int("output_len", output_tokens)
    if not 0 < sized_share <= 1:
        raise SizingInputError(
            f"sized_share must be in (0, 1], got {sized_share!r}",
            reason="out_of_range",
            field="sized_share",
        )
    if not 0 <= buffer_share <= 4:
        raise SizingInputError(
            f"buffer_share must be in [0, 4], got {buffer_share!r}",
            reason="out_of_range",
            field="buffer_share",
        )
    if input_len + output_len > model.max_context_tokens:
        raise SizingInputError(
            f"context of {input_len + output_len:,} tokens exceeds {model.name}'s maximum of "
            f"{model.max_context_tokens:,}",
            reason="context_too_long",
            field="input_len",
        )
    cached = 0
    if demand is not None:
        cached = min(input_len - 1, round(input_len * demand.prompt_cache_hit_rate))
    rows = []
    for done, gpu in enumerate(gpus, start=1):
        rows.append(
            _plan_row(
                model=model,
                gpu=gpu,
                precision=precision,
                kv_cache_dtype=kv_cache_dtype,
                input_tokens=input_len,
                output_tokens=output_len,
                demand=demand,
                concurrency=concurrency,
                tpot_target_ms=tpot_target_ms,
                ttft_target_ms=ttft_target_ms,
                engine=engine,
                cached=cached,
                max_tp=max(
                    cards_per_node.get(gpu.slug, DEFAULT_CARDS_PER_NODE)
                    if isinstance(cards_per_node, Mapping)
                    else cards_per_node,
                    # a GB200 / GB300 NVL72 rack: TP may span its 72-GPU NVLink domain
                    NVLINK_DOMAIN_GPUS.get(gpu.slug, 0),
                ),
                free=None if free_cards is None else free_cards.get(gpu.slug, 0),
                price=None if prices is None else prices.get(gpu.slug),
                hours_per_month=hours_per_month,
                sized_share=sized_share,
                buffer_share=buffer_share,
                layout={
                    "tp": tp,
                    "pp": pp,
                    "ep": ep,
                    "nic_gbps": nic_gbps,
                    "dp_attention": dp_attention,
                },
                speculation=speculation,
                encoder_flops_per_request=encoder_flops_per_request,
            )
        )
        if on_progress is not None:
            on_progress(done, len(gpus))
    rows.sort(key=_rank_key)
    good = [row for row in rows if row.meets_targets]
    in_free = [row for row in good if row.fits_free_capacity]
    seed_cards = None
    if demand is not None and seed_per_card_tok_s is not None:
        seed_cards = cards_for_rate(
            equivalent_tok_s=demand.peak_equivalent_output_tok_s,
            per_card_tok_s=seed_per_card_tok_s,
        )
    return SizingPlan(
        demand=demand,
        seed_per_card_tok_s=seed_per_card_tok_s,
        seed_rule_cards=seed_cards,
        rows=tuple(rows),
        recommended=good[0] if good else None,
        recommended_in_free_capacity=in_free[0] if in_free else None,
    )


def _rank_key(row: PlanRow) -> tuple:
    return (
        not row.meets_targets,
        row.cards is None,
        row.monthly_cost is None,
        row.monthly_cost or Decimal(0),
        row.cards or 0,
        row.gpu_slug,
    )


def _plan_row(
    *,
    model: ModelArch,
    gpu: GpuSpec,
    precision: str,
    kv_cache_dtype: str | None,
    input_tokens: int,
    output_tokens: int,
    demand: Demand | None,
    concurrency: int | None,
    tpot_target_ms: float | None,
    ttft_target_ms: float | None,
    engine: str | None,
    cached: int,
    max_tp: int,
    free: int | None,
    price: Decimal | None,
    hours_per_month: Decimal,
    sized_share: float = 1.0,
    buffer_share: float = 0.0,
    layout: Mapping[str, Any] | None = None,
    speculation: Speculation | None = None,
    encoder_flops_per_request: float = 0.0,
) -> PlanRow:
    layout = dict(layout or {})
    fixed_tp = layout.pop("tp", None)
    pp = layout.get("pp") or 1
    layout["pp"] = pp

    def row(**fields) -> PlanRow:
        return _row(gpu, free=free, price=price, layout=layout, **fields)

    if gpu.memory_bandwidth_gbps is None:
        return row(
            warnings=(
                SizingWarning(
                    "cannot_estimate",
                    f"{gpu.name} has no memory bandwidth on record; it cannot be sized.",
                ),
            )
        )
    options, failure_warnings = _fitting_options(
        model=model,
        gpu=gpu,
        fixed_tp=fixed_tp,
        max_tp=max_tp,
        layout=layout,
        precision=precision,
        kv_cache_dtype=kv_cache_dtype,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        engine=engine,
        cached=cached,
        tpot_target_ms=tpot_target_ms,
        ttft_target_ms=ttft_target_ms,
        speculation=speculation,
        encoder_flops_per_request=encoder_flops_per_request,
    )
    if not options:
        return row(warnings=failure_warnings)
    min_fit_tp = options[0][0]
    scored = [
        _scored_option(
            option,
            model=model,
            gpu=gpu,
            cached=cached,
            pp=pp,
            demand=demand,
            concurrency=concurrency,
            sized_share=sized_share,
            buffer_share=buffer_share,
        )
        for option in options
    ]
    missed, cards, tp, base, chosen, replicas, counts, buffer = _best(scored, min_fit_tp)
    # The step's warnings (speculation credited or not, all-reduce and attention milliseconds)
    # are those of the batch the replica runs, not of the saturated one.
    step_warnings = _step_warnings(
        model=model, gpu=gpu, tp=tp, profile=engine_profile(base.engine), step=chosen
    )
    warnings = [w for w in base.warnings if w.code not in STEP_WARNING_CODES] + step_warnings
    if missed:
        warnings += _target_warnings(chosen, tpot_target_ms, ttft_target_ms)
    if chosen.ttft_ms is None:
        # Without a tensor rate the speed is an upper bound: shown, never recommended.
        missed = True
    fits_free = None
    if free is not None:
        fits_free = cards <= free
        if not fits_free:
            warnings.append(
                SizingWarning(
                    "fewer_free_cards",
                    f"Needs {cards} {gpu.name} cards; {free} are free in the pool now.",
                )
            )
    equivalent = None
    if demand is not None:
        equivalent = chosen.requests_per_s * demand.equivalent_output_tokens_per_request / (tp * pp)
    band = error_band(
        tok_s=chosen.output_tok_s_total,
        batch=chosen.batch,
        precision=precision_parse(base.precision),
        gpu=gpu,
    )
    replicas_low = replicas
    if band is not None and demand is not None and concurrency is None:
        replicas_low = pessimistic_replicas(
            band,
            demand,
            chosen,
            sized=counts[1],
            sized_share=sized_share,
            buffer_share=buffer_share,
        )
    return row(
        replicas_at_peak=counts[0],
        replicas_sized=counts[1],
        replicas_buffer=buffer,
        band=band,
        replicas_pessimistic=replicas_low,
        cards_pessimistic=replicas_low * tp * pp,
        min_fit_tp=min_fit_tp,
        tp=tp,
        estimate=_at_chosen_batch(base, chosen, model=model, gpu=gpu, band=band),
        replica_requests_per_s=chosen.requests_per_s,
        per_card_equivalent_tok_s=equivalent,
        replicas=replicas,
        cards=cards,
        monthly_cost=monthly_cost(
            cards=cards, price_per_card_hour=price, hours_per_month=hours_per_month
        ),
        meets_targets=not missed,
        fits_free_capacity=fits_free,
        warnings=tuple(warnings),
    )


def _row(
    gpu: GpuSpec,
    *,
    free: int | None,
    price: Decimal | None,
    layout: Mapping[str, Any],
    **fields: Any,
) -> PlanRow:
    """A plan row of ``gpu`` with ``fields``; what they leave out is unknown (``None``), not
    meeting the targets, without warnings."""
    values = {
        "gpu_slug": gpu.slug,
        "gpu_name": gpu.name,
        "min_fit_tp": None,
        "tp": None,
        "estimate": None,
        "replica_requests_per_s": None,
        "per_card_equivalent_tok_s": None,
        "replicas": None,
        "cards": None,
        "free_cards": free,
        "price_per_card_hour": price,
        "monthly_cost": None,
        "meets_targets": False,
        "fits_free_capacity": None,
        "warnings": (),
        **layout,
    }
    values.update(fields)
    return PlanRow(**values)


def _best(scored: list[tuple], min_fit_tp: int) -> tuple:
    """The option to show (see :func:`_scored_option`): the fewest cards meeting the targets
    (then the smaller TP); when none does, the smallest TP that fits, not the cheapest miss."""
    scored = sorted(scored, key=lambda item: (item[0], item[1], item[2]))
    if scored[0][0]:
        return next(s for s in scored if s[2] == min_fit_tp)
    return scored[0]


def _fitting_options(
    *,
    model: ModelArch,
    gpu: GpuSpec,
    fixed_tp: int | None,
    max_tp: int,
    layout: Mapping[str, Any],
    **option_args: Any,
) -> tuple[list[tuple[int, ReplicaEstimate, ThroughputEstimate | None]], tuple]:
    """``([(tp, estimate, at targets or None)], warnings)``: the TP degrees (``fixed_tp``, else
    :func:`tp_degrees`) at which the model fits, smallest first; when none fits, the warnings
    of the largest TP tried that does not fit, else that the layout was refused - and both
    when a layout refused at a larger TP is what would fit (TP 8 x PP 2 across two nodes
    without ``nic_gbps``, where TP 4 x PP 2 in one node is too small). A refused
    layout is skipped only when the layout was chosen (fixed TP, PP > 1 or EP); otherwise
    its :class:`SizingInputError` is raised."""
    options = []
    largest_failure = None
    refused = None
    refused_after_failure = False
    degrees = [fixed_tp] if fixed_tp else tp_degrees(model=model, max_tp=max(1, max_tp))
    for tp in degrees:
        try:
            base, at_targets = _option(model=model, gpu=gpu, tp=tp, **option_args, **layout)
        except SizingInputError as exc:
            chosen = layout.get("ep") is not None or layout.get("dp_attention") is not None
            if not fixed_tp and layout["pp"] == 1 and not chosen:
                raise
            # This GPU model cannot run the layout at this TP (heads, NIC, EP): try the next.
            refused = SizingWarning("layout_refused", exc.message)
            refused_after_failure = largest_failure is not None
            continue
        if not base.fits:
            largest_failure = base
            refused_after_failure = False
            continue
        options.append((tp, base, at_targets))
    warnings = largest_failure.warnings if largest_failure is not None else ()
    if refused is not None and (largest_failure is None or refused_after_failure):
        warnings = (*warnings, refused)
    return options, tuple(warnings)


def _scored_option(
    option: tuple[int, ReplicaEstimate, ThroughputEstimate | None],
    *,
    model: ModelArch,
    gpu: GpuSpec,
    cached: int,
    pp: int,
    demand: Demand | None,
    concurrency: int | None,
    sized_share: float,
    buffer_share: float,
) -> tuple:
    """``(missed targets, cards, tp, estimate, throughput chosen, replicas, (replicas at peak,
    replicas sized), buffer replicas)`` of one fitting TP, sorted on by :func:`_plan_row`."""
    tp, base, at_targets = option
    chosen = at_targets or _batch_one(base, model, gpu, cached)
    counts = (1, 1)
    if concurrency is not None:
        # Whole sequences per replica: batch_for_targets answers the largest whole batch
        # meeting the targets (batch 1 when none does); the sequences are then spread
        # evenly and each replica is costed at the batch it really runs (issue 34: one
        # sequence is batch 1, as ``estimate`` gives it, not the largest batch allowed).
        most = max(1, int(chosen.batch))
        counts = tuple(
            -(-math.ceil(concurrency * share - 1e-9) // most) for share in (1.0, sized_share)
        )
        per_replica = -(-math.ceil(concurrency * sized_share - 1e-9) // counts[1])
        if per_replica != chosen.batch:
            chosen = _at_batch(base, model, gpu, cached, per_replica)
    elif demand is not None:
        counts = tuple(
            replicas_for_demand(
                peak_requests_per_s=demand.peak_requests_per_s * share,
                replica_requests_per_s=chosen.requests_per_s,
            )
            for share in (1.0, sized_share)
        )
    buffer = math.ceil(counts[1] * buffer_share - 1e-9)
    replicas = counts[1] + buffer
    return (at_targets is None, replicas * tp * pp, tp, base, chosen, replicas, counts, buffer)


def pessimistic_replicas(
    band: Any,
    demand: Demand,
    chosen: ThroughputEstimate,
    *,
    sized: int,
    sized_share: float,
    buffer_share: float,
) -> int:
    """Replicas (with the buffer) if each replica served only the band's low factor of its
    requests/s: "N cards if the pessimistic end holds", for the page, the API and the
    ``estimate`` command alike; never fewer than ``sized``. ``sized_share`` is the share of the
    peak the replicas are sized for, ``buffer_share`` the spare replicas on top (both 1 and 0
    for the command, which sizes for the whole peak without a buffer)."""
    low_sized = max(
        sized,
        replicas_for_demand(
            peak_requests_per_s=demand.peak_requests_per_s * sized_share,
            replica_requests_per_s=chosen.requests_per_s * band.low_factor,
        ),
    )
    return low_sized + math.ceil(low_sized * buffer_share - 1e-9)


def _batch_one(
    base: ReplicaEstimate, model: ModelArch, gpu: GpuSpec, cached: int
) -> ThroughputEstimate:
    return _at_batch(base, model, gpu, cached, 1)


def _at_batch(
    base: ReplicaEstimate, model: ModelArch, gpu: GpuSpec, cached: int, batch: int
) -> ThroughputEstimate:
    return replica_throughput(
        dp_attention=base.dp_attention or 1,
        model=model,
        precision=precision_parse(base.precision),
        gpu=gpu,
        tp=base.tp,
        kv_bits=base.kv_bits,
        input_tokens=base.input_tokens,
        output_tokens=base.output_tokens,
        batch=batch,
        engine=base.engine,
        cached_input_tokens=cached,
        pp=base.pp,
        nic_gbps=base.nic_gbps,
        speculation=base.speculation,
        encoder_flops_per_request=base.encoder_flops_per_request,
    )


def _at_chosen_batch(
    base: ReplicaEstimate,
    chosen: ThroughputEstimate,
    *,
    model: ModelArch,
    gpu: GpuSpec,
    band: ErrorBand | None,
) -> ReplicaEstimate:
    """``base`` (the replica at saturation) at the batch its plan row runs, ``chosen``: that
    step, the KV cache of its sequences (not of as many as fit), the row's error band and the
    step's warnings (:func:`_step_warnings`). Llama-3-8B on one H100 run at 182 of the 366
    sequences that fit: its KV total is 182 sequences'."""
    profile = engine_profile(base.engine)
    memory = memory_estimate(
        model=model_as_kept(model, profile),
        precision=precision_parse(base.precision),
        kv_bits=base.kv_bits,
        gpu_memory_bytes=gpu.memory_bytes,
        tp=base.tp,
        context_tokens=base.input_tokens + base.output_tokens,
        sequences=max(1, math.ceil(chosen.batch)),
        engine=profile,
        pp=base.pp,
        draft=None if base.speculation is None else base.speculation.draft,
        dp_attention=base.dp_attention or 1,
    )
    step = _step_warnings(model=model, gpu=gpu, tp=base.tp, profile=profile, step=chosen)
    warnings = (*(w for w in base.warnings if w.code not in STEP_WARNING_CODES), *step)
    return replace(
        base,
        memory=memory,
        throughput=chosen,
        band=band,
        warnings=warnings,
        batch_limit="targets",
    )


def _target_warnings(
    estimate: ThroughputEstimate, tpot_target_ms: float | None, ttft_target_ms: float | None
) -> list[SizingWarning]:
    warnings = []
    if tpot_target_ms is not None and estimate.tpot_ms > tpot_target_ms:
        warnings.append(
            SizingWarning(
                "tpot_over_target",
                f"TPOT {estimate.tpot_ms:.1f} ms at {estimate.batch:g} sequences is over the "
                f"{tpot_target_ms:g} ms target.",
            )
        )
    if (
        ttft_target_ms is not None
        and estimate.ttft_ms is not None
        and estimate.ttft_ms > ttft_target_ms
    ):
        warnings.append(
            SizingWarning(
                "ttft_over_target",
                f"TTFT {estimate.ttft_ms:.0f} ms is over the {ttft_target_ms:g} ms target.",
            )
        )
    return warnings


class _Faults:
    """The faults of one request's fields, gathered in the order its checks run so that one
    :class:`SizingInputError` names them all (issue 34: a bad request "is refused field by
    field"). The first fault found leads - its ``reason``, ``field``, message and any other
    data - as it did when it alone refused the request; ``errors`` maps every field at fault
    to its message (the first for a field refused twice; a fault that names several fields,
    as ``custom_model.*``, brings its own ``errors``)."""

    def __init__(self) -> None:
        self.found: list[SizingInputError] = []
        self.errors: dict[str, str] = {}

    def check(self, check: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``check(*args, **kwargs)``, or ``None`` when it raises :class:`SizingInputError`
        (kept as a fault)."""
        try:
            return check(*args, **kwargs)
        except SizingInputError as exc:
            self.found.append(exc)
            named = exc.data.get("errors") or {exc.data.get("field"): exc.message}
            for field, message in named.items():
                self.errors.setdefault(field, message)
            return None

    def refused(self, *fields: str) -> bool:
        """Whether any of ``fields`` is at fault."""
        return any(field in self.errors for field in fields)

    def refuse(self) -> None:
        """Raise the faults found (nothing when none): a lone fault as it was raised, several
        as one :class:`SizingInputError` led by the first, with ``errors``."""
        if not self.found:
            return
        first = self.found[0]
        if len(self.found) == 1:
            raise first
        raise SizingInputError(first.message, **{**first.data, "errors": dict(self.errors)})


#: Fields of an estimate request, as in the measurement rows of the shared sizing dataset.
REQUEST_FIELDS = (
    "model",
    "gpu",
    "gpu_count",
    "tp",
    "pp",
    "ep",
    "dp_attention",
    "nic_gbps",
    "precision",
    "kv_cache_dtype",
    "input_len",
    "output_len",
    "concurrency",
    "request_rate",
    "engine",
    "engine_version",
    "prompt_cache_hit_rate",
    "speculative_draft_tokens",
    "speculative_acceptance_rate",
    "speculative_draft_cost_ratio",
    "speculative_draft_model",
    "images_per_request",
    "image_width_px",
    "image_height_px",
    "video_seconds_per_request",
    "video_fps",
)

#: The speculative-decoding fields of a request, given all together or not at all (the cost
#: ratio may instead follow from ``speculative_draft_model``: :func:`speculation_from_fields`).
SPECULATION_FIELDS = (
    "speculative_draft_tokens",
    "speculative_acceptance_rate",
    "speculative_draft_cost_ratio",
)
#: Most draft tokens per pass accepted: beyond 16 the expected gain (1 - alpha^(gamma+1)) /
#: (1 - alpha) is within 3 % of its limit 1 / (1 - alpha) for alpha <= 0.8 (0.8^17 = 2.3 %).
MAX_DRAFT_TOKENS = 16


def draft_cost_ratio(*, draft: ModelArch, target: ModelArch) -> float:
    """A separate draft's cost ratio c when none is given: its active parameters / the
    target's. Decode at a small batch reads every active weight once per step, so step times
    scale with the weight bytes read, the same precision for both (Leviathan et al. 2023 §3.4
    define c as the ratio of the two models' step times).
    Llama-3.1-8B for Llama-3.1-70B: 8,030,261,248 / 70,553,706,496 = 0.1138."""
    return min(1.0, draft.active_params / target.active_params)


def speculation_from_fields(
    fields: Mapping[str, object],
    *,
    presets: Mapping[str, ModelArch] | None = None,
    target: ModelArch | None = None,
    target_refused: bool = False,
) -> Speculation | None:
    """The request's speculative decoding: ``speculative_draft_tokens`` (whole, 1 to
    :data:`MAX_DRAFT_TOKENS`), ``speculative_acceptance_rate`` in [0, 1) and
    ``speculative_draft_cost_ratio`` in [0, 1] (:class:`~pools.sizing.throughput.Speculation`),
    all three or none (``None``). ``speculative_draft_model``: a preset id of ``presets`` for a
    separate draft model (fewer active parameters than the target), whose memory is counted;
    then the cost ratio may be left out (:func:`draft_cost_ratio` against ``target``).
    ``target_refused``: the request's own model is at fault (:func:`estimate_from_fields`
    gathering every fault): the fields are checked alone - a draft is not weighed against the
    model and may stand for the cost ratio - and ``None`` is returned when they pass. Raises
    :class:`SizingInputError` naming every field at fault (``errors`` when several; the first
    in the order above leads)."""
    faults = _Faults()
    named = fields.get("speculative_draft_model") not in (None, "")
    draft = faults.check(_draft_model, fields, presets=presets, target=target)
    given = [name for name in SPECULATION_FIELDS if fields.get(name) is not None]
    if not given and not named:
        return None
    # A draft's cost ratio follows from it and the target; a refused draft is refused once.
    if named and (target is not None or target_refused or draft is None):
        given.append(SPECULATION_FIELDS[2])
    for missing in (name for name in SPECULATION_FIELDS if name not in given):
        faults.check(_refuse_missing_speculation, missing)
    gamma = faults.check(_int_field, fields, "speculative_draft_tokens", None)
    if gamma is not None and gamma > MAX_DRAFT_TOKENS:
        faults.check(
            _refuse_out_of_range, "speculative_draft_tokens", gamma, f"at most {MAX_DRAFT_TOKENS}"
        )
    alpha = fields.get("speculative_acceptance_rate")
    cost = fields.get("speculative_draft_cost_ratio")
    for name, value, fits, shown in (
        ("speculative_acceptance_rate", alpha, lambda v: 0 <= v < 1, "[0, 1)"),
        ("speculative_draft_cost_ratio", cost, lambda v: 0 <= v <= 1, "[0, 1]"),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not fits(value):
            faults.check(_refuse_out_of_range, name, value, f"a number in {shown}")
    faults.refuse()
    if target_refused:
        return None  # checked only: there is no target to speculate for
    if cost is None:
        cost = draft_cost_ratio(draft=draft, target=target)
    return Speculation(
        draft_tokens=gamma,
        acceptance_rate=float(alpha),
        draft_cost_ratio=float(cost),
        draft=draft,
    )


def _refuse_missing_speculation(name: str) -> None:
    raise SizingInputError(
        "speculative decoding needs the draft tokens, the acceptance rate and the draft's "
        f"cost ratio (or draft model) together; {name} is missing",
        reason="missing",
        field=name,
    )


def _refuse_out_of_range(name: str, value: object, wanted: str) -> None:
    raise SizingInputError(
        f"{name} must be {wanted}, got {value!r}", reason="out_of_range", field=name
    )


def _draft_model(
    fields: Mapping[str, object],
    *,
    presets: Mapping[str, ModelArch] | None,
    target: ModelArch | None,
) -> ModelArch | None:
    """The preset ``speculative_draft_model`` names (``None`` when not given); refused when
    unknown or not smaller than the target."""
    name = fields.get("speculative_draft_model")
    if name is None or name == "":
        return None
    draft = (presets or {}).get(name) if isinstance(name, str) else None
    if draft is None:
        raise SizingInputError(
            f"unknown draft model {name!r}; give a preset id",
            reason="unknown_model",
            field="speculative_draft_model",
        )
    if target is not None and draft.active_params >= target.active_params:
        raise SizingInputError(
            f"the draft {draft.name} must have fewer active parameters than {target.name}",
            reason="inconsistent",
            field="speculative_draft_model",
        )
    return draft


def _int_field(fields: Mapping[str, object], name: str, default: int | None) -> int | None:
    value = fields.get(name, default)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _positive_int(name, value)


def _rate_field(fields: Mapping[str, object], name: str) -> float | None:
    value = fields.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e12:
        raise SizingInputError(
            f"{name} must be a positive number, got {value!r}", reason="not_positive", field=name
        )
    return float(value)


def _str_field(fields: Mapping[str, object], name: str, default: str | None = None) -> str | None:
    """``fields[name]`` (a falsy value is ``default`` when one is given); raises
    :class:`SizingInputError` ``not_a_string`` when it is neither a string nor ``None``."""
    value = fields.get(name)
    if default is not None:
        value = value or default
    if value is not None and not isinstance(value, str):
        raise SizingInputError(
            f"{name} must be a string, got {value!r}", reason="not_a_string", field=name
        )
    return value


def _hit_rate_field(fields: Mapping[str, object]) -> float:
    """``prompt_cache_hit_rate`` in [0, 1) (absent: 0); raises :class:`SizingInputError`
    ``out_of_range`` otherwise."""
    hit_rate = fields.get("prompt_cache_hit_rate") or 0.0
    if isinstance(hit_rate, bool) or not isinstance(hit_rate, int | float) or not 0 <= hit_rate < 1:
        raise SizingInputError(
            "prompt_cache_hit_rate must be a number in [0, 1)",
            reason="out_of_range",
            field="prompt_cache_hit_rate",
        )
    return hit_rate


def estimate_from_fields(
    fields: Mapping[str, object],
    *,
    presets: Mapping[str, ModelArch],
    gpus: Mapping[str, GpuSpec],
    engines: Mapping[str, EngineProfile] | None = None,
    name_to_slug: Callable[[str], str] | None = None,
) -> ReplicaEstimate:
    """:func:`estimate_replica` for a request given as a JSON-like mapping (see REQUEST_FIELDS).

    ``name_to_slug`` turns a ``gpu`` that is not a key of ``gpus`` into one (the command passes
    :func:`pools.sizing.gpus.gpu_slug_for_name`: nvidia-smi names; it raises for an ambiguous
    or unknown name).

    ``model`` / ``gpu`` are preset and catalogue ids (``llama3_8b``, ``h100_sxm``), or ``model``
    ``custom`` with ``custom_model`` (architecture fields and/or ``config``, a Hugging Face
    config.json object or its text: :func:`pools.sizing.presets.custom_model_arch`); ``tp``
    defaults to 1, ``gpu_count`` to ``tp``, ``precision`` to FP16, ``engine`` to vllm;
    ``concurrency`` null = saturation; ``request_rate`` (requests/s over all ``gpu_count`` cards)
    switches to an open-loop load; ``prompt_cache_hit_rate`` in [0, 1) of the input is cached.
    ``engine_version`` picks the engine generation (vLLM below 0.8: ``vllm-v0``);
    ``ep`` / ``dp_attention`` / ``pp`` / ``nic_gbps`` set the parallel layout
    (:func:`estimate_replica`);
    ``speculative_draft_tokens`` / ``speculative_acceptance_rate`` /
    ``speculative_draft_cost_ratio`` turn on speculative decoding (:func:`speculation_from_fields`).
    ``engines``
    holds refitted profiles by name (the cross-validation passes profiles refitted without the
    source it scores); their fitted numbers replace those of the chosen profile, whose
    version-chosen kernels stay. Keys it does not read are passed over (the ``estimate``
    command refuses them first: its ``COMMAND_FIELDS``).

    Raises :class:`SizingInputError` for anything it cannot use (``not_an_object`` alone), naming
    every field at fault in one answer (issue 34): each field's own fault, and each check of the
    whole that :func:`estimate_replica` makes before its arithmetic (whole replicas, the
    parallel layout, TP dividing the heads, the precision and KV dtype names, stages within the
    layers, the context within the maximum) where the fields it reads passed. ``reason``,
    ``field`` and the message are the first fault's in the order the checks always ran - model,
    gpu, the layout, the lengths, the precisions, the engine, the load, images and video,
    concurrency, speculation, then the whole - so a lone fault is answered as before; ``errors``
    ``{field: message}`` names them all when there are several.
    """
    if not isinstance(fields, Mapping):
        raise SizingInputError("each input must be a JSON object", reason="not_an_object")
    faults = _Faults()
    model, gpu = _model_and_gpu(
        fields, faults, presets=presets, gpus=gpus, name_to_slug=name_to_slug
    )
    asked = _asked_fields(fields, faults)
    values = faults.check(_multimodal_values, fields)
    visual = None if model is None or values is None else faults.check(_visual, values, model)
    asked["concurrency"] = faults.check(_int_field, fields, "concurrency", None)
    speculation = faults.check(
        speculation_from_fields, fields, presets=presets, target=model, target_refused=model is None
    )
    visual_tokens = 0 if visual is None else visual.tokens
    _check_whole(faults, model=model, gpu=gpu, asked=asked, visual_tokens=visual_tokens)
    faults.refuse()
    tp, pp, gpu_count, input_len = asked["tp"], asked["pp"], asked["gpu_count"], asked["input_len"]
    replicas = gpu_count // (tp * pp)
    rate = asked["request_rate"]
    return estimate_replica(
        model=model,
        gpu=gpu,
        precision=asked["precision"],
        kv_cache_dtype=asked["kv_cache_dtype"],
        tp=tp,
        gpu_count=gpu_count,
        input_tokens=input_len + visual_tokens,
        output_tokens=asked["output_len"],
        concurrency=asked["concurrency"],
        request_rate=None if rate is None else rate / replicas,
        engine=with_fitted(asked["engine"], (engines or {}).get(asked["engine"].name)),
        cached_input_tokens=min(input_len - 1, round(input_len * asked["prompt_cache_hit_rate"])),
        pp=pp,
        ep=asked["ep"],
        nic_gbps=asked["nic_gbps"],
        speculation=speculation,
        encoder_flops_per_request=0.0 if visual is None else visual.encoder_flops,
        dp_attention=asked["dp_attention"],
    )


def _asked_fields(fields: Mapping[str, object], faults: _Faults) -> dict[str, Any]:
    """The request's layout, lengths, precisions, engine and load, each checked on its own
    (in the order :func:`estimate_from_fields` always checked them; a field at fault is
    ``None`` and its fault is in ``faults``)."""
    asked: dict[str, Any] = {}
    for name, default in (("tp", 1), ("pp", 1), ("ep", None), ("dp_attention", None)):
        asked[name] = faults.check(_int_field, fields, name, default)
    asked["nic_gbps"] = faults.check(_rate_field, fields, "nic_gbps")
    cards = (asked["tp"] or 1) * (asked["pp"] or 1)
    asked["gpu_count"] = faults.check(_int_field, fields, "gpu_count", cards)
    for name in ("input_len", "output_len"):
        asked[name] = faults.check(_int_field, fields, name, None)
    for name in ("input_len", "output_len"):
        if asked[name] is None and not faults.refused(name):
            faults.check(_refuse_missing, name)
    asked["precision"] = faults.check(_str_field, fields, "precision", "FP16")
    for name in ("kv_cache_dtype", "engine", "engine_version"):
        asked[name] = faults.check(_str_field, fields, name)
    if not faults.refused("engine", "engine_version"):
        asked["engine"] = faults.check(engine_profile, asked["engine"], asked["engine_version"])
    asked["request_rate"] = faults.check(_rate_field, fields, "request_rate")
    asked["prompt_cache_hit_rate"] = faults.check(_hit_rate_field, fields)
    return asked


def _refuse_missing(name: str) -> None:
    raise SizingInputError(f"{name} is required", reason="missing", field=name)


def _check_whole(
    faults: _Faults,
    *,
    model: ModelArch | None,
    gpu: GpuSpec | None,
    asked: Mapping[str, Any],
    visual_tokens: int,
) -> None:
    """What :func:`estimate_replica` checks of the whole request before any arithmetic, in its
    order, each check run when every field it reads passed (its faults go to ``faults``):
    whole replicas in ``gpu_count``, the parallel layout, TP dividing the attention heads, the
    precision and KV-cache dtype names, no more stages than layers and the context within the
    model's maximum (:func:`pools.sizing.memory.memory_estimate`'s first checks)."""

    def passed(*names: str) -> bool:
        return not faults.refused(*names)

    tp, pp, dp = asked["tp"], asked["pp"], asked["dp_attention"]
    layout = ("tp", "pp", "ep", "dp_attention", "nic_gbps", "gpu_count")
    if passed("tp", "pp", "gpu_count"):
        faults.check(_check_gpu_count, asked["gpu_count"], tp=tp, pp=pp)
    if model is not None and gpu is not None and passed(*layout):
        faults.check(
            _check_parallel_layout,
            model=model, gpu=gpu, tp=tp, pp=pp, ep=asked["ep"], nic_gbps=asked["nic_gbps"],
            dp_attention=dp,
        )  # fmt: skip
        if passed(*layout):
            faults.check(_check_heads, model, tp=tp, dp=dp or 1)
    if passed("precision"):
        faults.check(precision_parse, asked["precision"])
    if passed("kv_cache_dtype"):
        faults.check(kv_cache_bits, asked["kv_cache_dtype"])
    if model is not None and passed("pp"):
        faults.check(check_stages, model, pp)
    lengths = ("input_len", "output_len", *MULTIMODAL_DEFAULTS)
    if model is not None and passed(*lengths):
        context = asked["input_len"] + visual_tokens + asked["output_len"]
        faults.check(check_context, model, context)


#: The multimodal fields of a request (000 §6.3) and their defaults: no images, no video,
#: 1,024 x 1,024 px images / frames, video sampled at 2 frames per second (Qwen2.5-VL's
#: qwen-vl-utils default FPS 2.0).
MULTIMODAL_DEFAULTS = {
    "images_per_request": 0,
    "image_width_px": 1024,
    "image_height_px": 1024,
    "video_seconds_per_request": 0.0,
    "video_fps": 2.0,
}
#: Largest image or frame side taken, px (a typo guard: 16K video is 15,360 px wide).
MAX_IMAGE_SIDE_PX = 16_384


def visual_load_from_fields(fields: Mapping[str, object], model: ModelArch) -> VisualLoad | None:
    """The visual load of a request's multimodal fields (:data:`MULTIMODAL_DEFAULTS`; ``None``
    without images or video): whole images >= 0, sides 1 to :data:`MAX_IMAGE_SIDE_PX` px, video
    seconds >= 0 and fps > 0 (:func:`pools.sizing.vision.visual_load`). Raises
    :class:`SizingInputError` naming every field at fault (``errors`` when several), or
    ``not_multimodal`` for a text-only model."""
    return _visual(_multimodal_values(fields), model)


def _multimodal_values(fields: Mapping[str, object]) -> dict[str, object]:
    """The multimodal fields, defaults filled in, each checked (see
    :func:`visual_load_from_fields`; every one at fault in one :class:`SizingInputError`)."""
    values = {
        name: default if fields.get(name) is None else fields[name]
        for name, default in MULTIMODAL_DEFAULTS.items()
    }
    faults = _Faults()
    for name, value in values.items():
        whole = name in ("images_per_request", "image_width_px", "image_height_px")
        low = 1 if name in ("image_width_px", "image_height_px", "video_fps") else 0
        high = (
            MAX_IMAGE_SIDE_PX if name.startswith("image_") and name != "images_per_request" else 1e6
        )
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if (
            not number
            or (whole and float(value) != int(value))
            or not low <= value <= high
            or (name == "video_fps" and value <= 0)
        ):
            kind = "a whole number" if whole else "a number"
            faults.check(_refuse_out_of_range, name, value, f"{kind} from {low:g} to {high:g}")
    faults.refuse()
    return values


def _visual(values: Mapping[str, Any], model: ModelArch) -> VisualLoad | None:
    return visual_load(
        model.vision,
        model_name=model.name,
        images=int(values["images_per_request"]),
        video_seconds=float(values["video_seconds_per_request"]),
        video_fps=float(values["video_fps"]),
        width_px=int(values["image_width_px"]),
        height_px=int(values["image_height_px"]),
    )


def _model_and_gpu(
    fields: Mapping[str, object],
    faults: _Faults,
    *,
    presets: Mapping[str, ModelArch],
    gpus: Mapping[str, GpuSpec],
    name_to_slug: Callable[[str], str] | None,
) -> tuple[ModelArch | None, GpuSpec | None]:
    """The architecture and the GPU a request's ``model`` and ``gpu`` name (see
    :func:`estimate_from_fields`), ``None`` for one at fault: its fault (``missing``,
    ``unknown_model``, ``custom_model.*``; ``missing``, ``unknown_gpu``, ``ambiguous_gpu``) goes
    to ``faults``, the model's before the GPU's."""
    return (
        faults.check(_model_named, fields, presets),
        faults.check(_gpu_named, fields, gpus, name_to_slug),
    )


def _model_named(fields: Mapping[str, object], presets: Mapping[str, ModelArch]) -> ModelArch:
    name = fields.get("model")
    if not isinstance(name, str):
        raise SizingInputError(
            f"model must be a string id, got {name!r}", reason="missing", field="model"
        )
    if name == "custom":
        return _custom_model(fields.get("custom_model"))
    if name not in presets:
        raise SizingInputError(
            f"unknown model {name!r}; known: {', '.join(presets)}",
            reason="unknown_model",
            field="model",
        )
    return presets[name]


def _gpu_named(
    fields: Mapping[str, object],
    gpus: Mapping[str, GpuSpec],
    name_to_slug: Callable[[str], str] | None,
) -> GpuSpec:
    name = fields.get("gpu")
    if not isinstance(name, str):
        raise SizingInputError(
            f"gpu must be a string id, got {name!r}", reason="missing", field="gpu"
        )
    gpu = gpus.get(name)
    if gpu is None and name_to_slug is not None:
        gpu = gpus.get(name_to_slug(name))
    if gpu is None:
        raise SizingInputError(
            f"unknown GPU model {name!r}; known: {', '.join(gpus)}",
            reason="unknown_gpu",
            field="gpu",
        )
    return gpu


def _custom_model(custom: object) -> ModelArch:
    """``custom_model`` of a request as an architecture; its errors name
    ``custom_model.<field>`` (and ``errors`` every field at fault)."""
    if custom is None:
        raise SizingInputError(
            "model 'custom' needs custom_model: the architecture fields and/or its config.json",
            reason="missing",
            field="custom_model",
        )
    try:
        return custom_model_arch(custom)
    except SizingInputError as exc:
        data = dict(exc.data)
        data["field"] = f"custom_model.{data['field']}" if data.get("field") else "custom_model"
        if "errors" in data:
            data["errors"] = {f"custom_model.{k}": v for k, v in data["errors"].items()}
        raise SizingInputError(exc.message, **data) from None


def figures_json(value: Any) -> Any:
    """``value`` JSON-ready as the page, the API and the ``estimate`` command show every
    figure: floats to 6 significant digits, Decimals as strings, mapping keys as strings, other
    objects as their text. Raises :class:`SizingInputError` (reason ``not_finite``) for a NaN
    or infinite float: JSON has none, and an estimate that produced one is no estimate."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SizingInputError("the estimate is not a finite number", reason="not_finite")
        return float(f"{value:.6g}")
    if isinstance(value, Mapping):
        return {str(k): figures_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [figures_json(v) for v in value]
    return str(value)


def replica_estimate_as_dict(estimate: ReplicaEstimate) -> dict[str, object]:
    """A JSON-ready dict: the headline numbers first (``weights_bytes``, ``kv_cache_bytes``,
    ``fits``, ``output_tok_s_total``, ``tpot_ms``, ``ttft_ms``, ``warnings``), then every
    intermediate number under ``memory`` and ``throughput`` (units in the key names).
    """
    throughput = estimate.throughput
    return {
        "model": estimate.model_id,
        "gpu": estimate.gpu_slug,
        "engine": estimate.engine,
        "tp": estimate.tp,
        "pp": estimate.pp,
        "ep": estimate.ep,
        "dp_attention": estimate.dp_attention,
        "nic_gbps": estimate.nic_gbps,
        "replicas": estimate.replicas,
        "requested_precision": estimate.requested_precision,
        "precision": estimate.precision,
        "kv_cache_bits": estimate.kv_bits,
        "kv_cache_dtype_source": estimate.kv_cache_dtype_source,
        "input_len": estimate.input_tokens,
        "output_len": estimate.output_tokens,
        "weights_bytes": estimate.memory.weights_bytes,
        "kv_cache_bytes": estimate.memory.kv_cache_bytes,
        "fits": estimate.fits,
        "batch": None if throughput is None else throughput.batch,
        "batch_limit": estimate.batch_limit,
        "output_tok_s_total": estimate.output_tok_s_total,
        "tpot_ms": None if throughput is None else throughput.tpot_ms,
        "ttft_ms": None if throughput is None else throughput.ttft_ms,
        "band": None if estimate.band is None else estimate.band.as_dict(),
        "warnings": [warning.as_dict() for warning in estimate.warnings],
        "memory": dict(estimate.memory.__dict__),
        "throughput": None if throughput is None else dict(throughput.__dict__),
    }
