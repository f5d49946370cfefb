"""Memory per GPU of one serving replica: weights, KV cache, engine overhead, reserve; fit; TP.

Formulas (DESIGN.md "Sizing", after the seed documents, checked against vLLM's cache engine):

- weights bytes = parameters × weight bits / 8;
- KV bytes per token = 2 (K and V) × layers × KV heads × head dim × KV bytes per element;
- KV cache bytes = KV bytes per token × tokens per sequence × sequences.

With tensor parallelism (TP) every card holds weights / TP and the KV of max(1, ceil(KV heads /
TP)) heads: vLLM replicates KV heads when TP exceeds their number (``get_num_kv_heads``), so the
per-card KV stops shrinking there. Sliding-window models keep at most the window per sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pools.sizing import SizingInputError
from pools.sizing.engines import EngineProfile, engine_profile
from pools.sizing.presets import ModelArch

GIB = 1024**3
MIB = 1024**2

#: Engine overhead per card, bytes: CUDA context, CUDA-graph memory pools and the activation
#: workspace of a forward pass. DESIGN.md gives 2-4 GB; vLLM logs "CUDA graphs can take additional
#: 1~3 GiB memory per GPU" and NVIDIA aiconfigurator budgets 3.5 GiB for "others"
#: (shared/research/sizing_anchors.md 2.1, 2.4). 3 GiB is the middle of those.
ENGINE_OVERHEAD_BYTES = 3 * GIB

#: NCCL buffers per card when TP > 1, bytes: aiconfigurator's 342 MB (TP 2) and 392 MB (TP >= 4).
NCCL_BUFFER_BYTES = {2: 342 * MIB}
NCCL_BUFFER_BYTES_LARGE_TP = 392 * MIB

#: Share of memory an engine leaves unused by default: vLLM's gpu_memory_utilization 0.9 is of the
#: card's total memory; TensorRT-LLM's free_gpu_memory_fraction 0.9 is of the memory still free
#: after the weights and activations (sizing_anchors.md 2.1, 2.2). Never below 1 GiB, the low end
#: of DESIGN.md's 1-2 GB system reserve.
RESERVE_FRACTION = 0.10
RESERVE_MIN_BYTES = 1 * GIB


def _key(text: object) -> str:
    return str(text).strip().upper().replace("_", "-").replace(" ", "-")


@dataclass(frozen=True)
class Precision:
    """How the weights are stored and what the matrix multiplies run in.

    ``weight_bits``: bits per weight (16, 8, 4). ``compute``: tensor-core input type of the GEMMs
    (``fp16``, ``bf16``, ``fp8``, ``int8``). ``weight_only``: weights are de-quantised to 16 bit
    before the multiply (AWQ, GPTQ, W8A16), so compute runs at the FP16 rate.
    """

    name: str
    weight_bits: int
    compute: str
    weight_only: bool


_PRECISIONS = {
    "FP16": Precision("FP16", 16, "fp16", False),
    "BF16": Precision("BF16", 16, "bf16", False),
    "FP8": Precision("FP8", 8, "fp8", False),
    "INT8": Precision("INT8", 8, "int8", False),
    "FP8-WO": Precision("FP8-WO", 8, "fp16", True),
    "W8A16": Precision("W8A16", 8, "fp16", True),
    "INT8-WO": Precision("W8A16", 8, "fp16", True),
    "INT4": Precision("INT4", 4, "fp16", True),
    "W4A16": Precision("W4A16", 4, "fp16", True),
    "INT4-AWQ": Precision("INT4-AWQ", 4, "fp16", True),
    "AWQ": Precision("INT4-AWQ", 4, "fp16", True),
    "INT4-GPTQ": Precision("INT4-GPTQ", 4, "fp16", True),
    "GPTQ": Precision("INT4-GPTQ", 4, "fp16", True),
    # Block-scaled 4-bit floats (FP4 E2M1 elements): NVFP4 keeps one FP8 E4M3 scale per 16
    # elements (4.5 bits per weight), MXFP4 (OCP Microscaling v1.0) one E8M0 scale per 32
    # (4.25 bits). Blackwell tensor cores multiply them natively (compute "fp4"); on Hopper
    # and Ampere they run de-quantised to 16 bit (``MXFP4-WO``, vLLM's Marlin MXFP4 path for
    # gpt-oss), see ``pools.sizing.throughput.precision_on_gpu``.
    "NVFP4": Precision("NVFP4", 4, "fp4", False),
    "MXFP4": Precision("MXFP4", 4, "fp4", False),
    "MXFP4-WO": Precision("MXFP4-WO", 4, "fp16", True),
    "NVFP4-WO": Precision("NVFP4-WO", 4, "fp16", True),
}

#: Scale bits per weight of the block-scaled FP4 formats: NVFP4 8-bit scale / 16 elements,
#: MXFP4 8-bit scale / 32 (NVIDIA "Introducing NVFP4" technical blog, 2025; OCP Microscaling
#: Formats (MX) Specification v1.0, section 5: block size 32, E8M0 shared scale).
FP4_SCALE_BITS_PER_WEIGHT = {
    "NVFP4": 8 / 16,
    "NVFP4-WO": 8 / 16,
    "MXFP4": 8 / 32,
    "MXFP4-WO": 8 / 32,
}

#: Quantisation group size of weight-only INT4/INT8 checkpoints (GPTQ, AWQ): 128 weights share
#: one FP16 scale and, for AWQ and asymmetric GPTQ, one zero point of the weight's width
#: (AutoAWQ default ``q_group_size: 128, zero_point: True``; the Qwen2.5 GPTQ/AWQ checkpoints'
#: quantize_config ``group_size: 128``). FP8 checkpoints use per-tensor or per-channel scales.
QUANT_GROUP_SIZE = 128
QUANT_SCALE_BITS = 16
#: The precisions stored that way (integer weight-only checkpoints).
GROUP_QUANTISED = frozenset({"INT4", "W4A16", "INT4-AWQ", "INT4-GPTQ", "W8A16"})

#: Bits of the embedding table and output head (lm_head) in quantised checkpoints: kept at 16
#: bit. NVIDIA ModelOpt FP8 / NVFP4 checkpoints list ``lm_head`` in ``exclude_modules``
#: (nvidia/Llama-3.1-8B-Instruct-FP8 hf_quant_config.json) and quantise linear layers only, so
#: the embedding (a lookup table, not a linear layer) stays 16 bit too; GPTQ and AWQ quantise
#: the decoder layers' linear modules only; openai/gpt-oss-* quantise the MoE experts only.
LM_HEAD_BITS = 16


#: KV-cache element sizes in bits. ``AUTO`` follows the 16-bit activations, as vLLM's "auto" does.
_KV_BITS = {
    "FP16": 16,
    "BF16": 16,
    "AUTO": 16,
    "FP8": 8,
    "FP8-E4M3": 8,
    "FP8-E5M2": 8,
    "INT8": 8,
}

PRECISION_NAMES = tuple(_PRECISIONS)
#: The KV-cache dtypes offered (any case is read), ``auto`` spelt as vLLM's and SGLang's
#: ``--kv-cache-dtype auto`` (the API's default, so the schema's enum holds it).
KV_CACHE_DTYPE_NAMES = tuple("auto" if name == "AUTO" else name for name in _KV_BITS)


def precision_parse(text: str) -> Precision:
    """Return the :class:`Precision` named ``text`` (case-insensitive).

    Accepted: FP16, BF16, FP8 (W8A8, FP8 tensor cores), INT8 (W8A8, SmoothQuant-style), and the
    weight-only forms INT4 / W4A16 / INT4-AWQ / INT4-GPTQ / AWQ / GPTQ (4-bit), W8A16 / INT8-WO /
    FP8-WO (8-bit). Plain INT4 means weight-only 4-bit, the form vLLM and TensorRT-LLM serve.
    Raises :class:`SizingInputError` (reason ``unknown_precision``).
    """
    try:
        return _PRECISIONS[_key(text)]
    except KeyError:
        raise SizingInputError(
            f"unknown precision {text!r}; use one of {', '.join(PRECISION_NAMES)}",
            reason="unknown_precision",
            field="precision",
        ) from None


def kv_cache_bits(text: str | None) -> int:
    """Bits per KV-cache element for ``text`` (FP16, BF16, FP8, INT8; ``None``/``auto`` = 16).

    Raises :class:`SizingInputError` (reason ``unknown_kv_cache_dtype``).
    """
    if text is None:
        return 16
    try:
        return _KV_BITS[_key(text)]
    except KeyError:
        raise SizingInputError(
            f"unknown KV-cache dtype {text!r}; use one of {', '.join(KV_CACHE_DTYPE_NAMES)}",
            reason="unknown_kv_cache_dtype",
            field="kv_cache_dtype",
        ) from None


def kv_cache_dtype_for(requested: str | None, model: ModelArch) -> tuple[str | None, str]:
    """``(KV dtype to use, where it came from)``: the one asked for (``"request"``); when none
    or ``auto`` is asked, the checkpoint's own (``model.kv_cache_dtype``, ``"checkpoint"``) -
    a ModelOpt checkpoint names it in ``hf_quant_config.json`` ``kv_cache_quant_algo``, and
    TensorRT-LLM's PyTorch backend reads it from there when no KV dtype is given ("TensorRT LLM
    allows you to enable the FP8 KV cache manually, even for checkpoints that do not have it
    enabled by default", nvidia.github.io/TensorRT-LLM features/quantization.html) - else
    16-bit (``"default"``). Unknown names raise as :func:`kv_cache_bits` does."""
    kv_cache_bits(requested)
    if (requested is None or _key(requested) == "AUTO") and model.kv_cache_dtype:
        return model.kv_cache_dtype, "checkpoint"
    return requested, "request" if requested is not None else "default"


def weights_bytes(*, params: int, weight_bits: int) -> int:
    """Bytes of ``params`` weights stored at ``weight_bits`` each: params × bits / 8, rounded up.

    7e9 parameters at FP16 → 14e9 B (14 GB): the seeds' rule of thumb (``004`` §2.1), and the
    size of a 16-bit encoder. A quantised checkpoint's size is :func:`checkpoint_bytes`.
    """
    return -(-params * weight_bits // 8)


def stored_bits_per_weight(precision: Precision) -> float:
    """Bits one decoder-layer linear weight takes in a checkpoint of ``precision``, its scales
    included: the element width, + :data:`FP4_SCALE_BITS_PER_WEIGHT` for the block-scaled FP4
    formats (NVFP4 4.5, MXFP4 4.25), + (16-bit scale + zero point) / :data:`QUANT_GROUP_SIZE`
    for weight-only group quantisation (:data:`GROUP_QUANTISED`; INT4 AWQ / GPTQ: 4 + 20 / 128 =
    4.156; W8A16 8.188). FP8 (also run weight-only, ``FP8-WO``: the same checkpoint), INT8 W8A8
    and 16-bit: the width (per-tensor or per-channel scales are negligible)."""
    bits = precision.weight_bits
    if precision.name in FP4_SCALE_BITS_PER_WEIGHT:
        return bits + FP4_SCALE_BITS_PER_WEIGHT[precision.name]
    if precision.name in GROUP_QUANTISED:
        return bits + (QUANT_SCALE_BITS + bits) / QUANT_GROUP_SIZE
    return float(bits)


def embedding_params(model: ModelArch) -> int:
    """Parameters of the input embedding and output head: vocab x hidden, twice unless the
    head is tied to the embedding (``tie_word_embeddings``)."""
    table = model.vocab_size * model.hidden_size
    return table if model.tie_word_embeddings else 2 * table


def checkpoint_bytes(model: ModelArch, precision: Precision) -> int:
    """Bytes of ``model``'s weights in a checkpoint of ``precision``, whole model, rounded up:
    decoder-layer weights at :func:`stored_bits_per_weight`, the embedding and head
    (:func:`embedding_params`) at :data:`LM_HEAD_BITS` (or the width, when that is wider).

    16-bit: total params x 2 (Llama-3-8B 16,060,522,496 B). Llama-3.1-8B INT4 AWQ: (8,030,261,248
    - 1,050,673,152) x 4.15625 / 8 + 1,050,673,152 x 2 = 5,727,460,432 B, where params x 4 / 8
    gives 4,015,130,624 B. Quantised checkpoints keep the embedding and head 16 bit: "Only the
    weights of the linear operators within transformers blocks are quantized"
    (RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16 model card), and :data:`LM_HEAD_BITS`.
    Memory and the decode weight stream (``pools.sizing.throughput.decode_weight_bytes``)
    count alike.
    """
    heads = embedding_params(model)
    bits = stored_bits_per_weight(precision)
    head_bits = max(LM_HEAD_BITS, precision.weight_bits)
    return math.ceil((model.total_params - heads) * bits / 8) + -(-heads * head_bits // 8)


def routed_checkpoint_bytes(model: ModelArch, precision: Precision) -> int:
    """Bytes of a mixture of experts' routed experts in a checkpoint of ``precision``, rounded
    up (all of them, at :func:`stored_bits_per_weight`); 0 for a dense model."""
    return math.ceil(model.expert_params * stored_bits_per_weight(precision) / 8)


def kv_bytes_per_token(*, num_layers: int, num_kv_heads: int, head_dim: int, kv_bits: int) -> int:
    """KV-cache bytes one token adds: 2 × layers × KV heads × head dim × bits / 8.

    Llama-3-8B (32 layers, 8 KV heads, head dim 128) at FP16: 131,072 B (128 KiB) per token.
    """
    return 2 * num_layers * num_kv_heads * head_dim * kv_bits // 8


def kv_cache_bytes(*, kv_bytes_per_token: int, tokens_per_sequence: int, sequences: int) -> int:
    """KV-cache bytes for ``sequences`` sequences of ``tokens_per_sequence`` tokens each.

    Llama-3-8B FP16, 2,048 tokens × 32 sequences: 131,072 × 2,048 × 32 = 8,589,934,592 B (8 GiB).
    """
    return kv_bytes_per_token * tokens_per_sequence * sequences


def kv_heads_per_gpu(*, num_kv_heads: int, tp: int) -> int:
    """KV heads each card of a TP group stores: max(1, ceil(KV heads / TP)) (vLLM replicates)."""
    return max(1, -(-num_kv_heads // tp))


def model_kv_bytes_per_token(model: ModelArch, *, kv_bits: int, tp: int = 1) -> int:
    """KV-cache bytes one token adds on one card of a TP group of ``tp``, over all layers.

    - Grouped-query / multi-head attention: 2 × layers × :func:`kv_heads_per_gpu` × head dim
      × bits / 8 (:func:`kv_bytes_per_token`).
    - Multi-head latent attention (``model.is_mla``): layers × (``kv_lora_rank`` +
      ``qk_rope_head_dim``) × bits / 8 - one compressed latent and the rotary key per token
      and layer (DeepSeek-V2 paper, arXiv 2405.04434 table 1: (d_c + d_h^R) l elements per
      token; vLLM's MLA backends cache exactly ``kv_lora_rank + qk_rope_head_dim`` per token).
      The latent is not split across TP ranks: every rank keeps the whole of it.
      DeepSeek-V3 (61 layers, 512 + 64) at FP16: 61 × 576 × 2 = 70,272 B per token.
    """
    if model.is_mla:
        return model.num_layers * (model.kv_lora_rank + model.qk_rope_head_dim) * kv_bits // 8
    return kv_bytes_per_token(
        num_layers=model.num_layers,
        num_kv_heads=kv_heads_per_gpu(num_kv_heads=model.num_kv_heads, tp=tp),
        head_dim=model.head_dim,
        kv_bits=kv_bits,
    )


def kv_layer_tokens(model: ModelArch, context_tokens: int) -> int:
    """Σ over layers of the tokens each keeps for one sequence of ``context_tokens``: full
    attention layers keep the context, sliding-window (or chunked) layers at most the window.
    gpt-oss-120b (36 layers, 18 with a 128-token window), 10,000 tokens: 18 × 10,000 + 18 ×
    128 = 182,304."""
    window = model.window_layers
    kept = min(context_tokens, model.sliding_window_tokens or context_tokens)
    return (model.num_layers - window) * context_tokens + window * kept


def kv_tokens_per_sequence(model: ModelArch, context_tokens: int) -> int:
    """Tokens of KV kept per sequence, as if every layer kept the same: :func:`kv_layer_tokens`
    / layers, rounded up (the context; the window when every layer slides)."""
    return -(-kv_layer_tokens(model, context_tokens) // model.num_layers)


def kv_bytes_per_sequence(
    model: ModelArch, *, context_tokens: int, kv_bits: int, tp: int = 1
) -> int:
    """KV-cache bytes of one sequence of ``context_tokens`` on one card of a TP group:
    :func:`model_kv_bytes_per_token` / layers × :func:`kv_layer_tokens` (exact: the bytes per
    token are a whole number per layer)."""
    per_layer = model_kv_bytes_per_token(model, kv_bits=kv_bits, tp=tp) // model.num_layers
    return per_layer * kv_layer_tokens(model, context_tokens)


def window_kv_bytes_per_sequence(
    model: ModelArch, *, context_tokens: int, kv_bits: int, tp: int = 1
) -> int:
    """The part of :func:`kv_bytes_per_sequence` on the windowed (sliding or chunked) layers:
    bytes per token per layer x window layers x min(context, window); 0 without a window.
    Llama 4 Scout, FP8 KV, one card, 2,000 tokens: 2,048 B x 36 x 2,000 = 147,456,000 B."""
    if not model.sliding_window_tokens:
        return 0
    per_layer = model_kv_bytes_per_token(model, kv_bits=kv_bits, tp=tp) // model.num_layers
    return per_layer * model.window_layers * min(context_tokens, model.sliding_window_tokens)


def engine_overhead_bytes(*, tp: int) -> int:
    """Per-card overhead, bytes: :data:`ENGINE_OVERHEAD_BYTES`, plus NCCL buffers if TP > 1."""
    if tp <= 1:
        return ENGINE_OVERHEAD_BYTES
    return ENGINE_OVERHEAD_BYTES + NCCL_BUFFER_BYTES.get(tp, NCCL_BUFFER_BYTES_LARGE_TP)


def reserve_bytes(
    *, gpu_memory_bytes: int, used_bytes: int = 0, profile: EngineProfile | None = None
) -> int:
    """Per-card memory the engine leaves unused, bytes (:data:`RESERVE_FRACTION`, >= 1 GiB).

    10 % of the card's total memory (vLLM, SGLang; the default), or 10 % of what is left after
    ``used_bytes`` (weights and overhead) for an engine with ``reserve_of_free`` (TensorRT-LLM).
    """
    base = gpu_memory_bytes
    if profile is not None and profile.reserve_of_free:
        base = max(0, gpu_memory_bytes - used_bytes)
    return max(RESERVE_MIN_BYTES, int(base * RESERVE_FRACTION))


def tp_degrees(*, model: ModelArch, max_tp: int) -> list[int]:
    """Tensor-parallel degrees to consider: powers of two up to ``max_tp`` (the node's cards)
    that divide the attention heads (engines shard heads evenly; Qwen2.5-7B's 28 heads rule out 8).
    """
    degrees = []
    tp = 1
    while tp <= max_tp:
        if model.num_attention_heads % tp == 0:
            degrees.append(tp)
        tp *= 2
    return degrees


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory of one replica (a TP group of ``tp`` cards) for one workload; bytes unless named.

    ``sequences`` is the requested concurrency per replica (``None`` = saturation: as many as
    fit, then ``max_sequences``). ``kv_cache_bytes_per_gpu`` is the KV for ``sequences`` (for
    saturation: for ``max_sequences``). ``kv_budget_bytes_per_gpu`` is what is left for KV after
    weights, overhead and reserve (0 when nothing is left). ``fits``: the weights, overhead,
    reserve and the requested KV (saturation: one full-context sequence) fit on every card.
    """

    tp: int
    weight_bits: int
    kv_bits: int
    weights_bytes: int
    weights_bytes_per_gpu: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    context_tokens: int
    kv_tokens_per_sequence: int
    kv_bytes_per_sequence_per_gpu: int
    sequences: int | None
    kv_cache_bytes: int
    kv_cache_bytes_per_gpu: int
    engine_overhead_bytes_per_gpu: int
    reserve_bytes_per_gpu: int
    gpu_memory_bytes: int
    total_bytes_per_gpu: int
    kv_budget_bytes_per_gpu: int
    max_sequences: int
    fits: bool
    pp: int = 1
    draft_weights_bytes_per_gpu: int = 0
    draft_kv_bytes_per_sequence_per_gpu: int = 0
    vision_weights_bytes_per_gpu: int = 0
    dp_attention: int = 1
    expert_weights_bytes_per_gpu: int = 0


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SizingInputError(
            f"{name} must be a positive integer, got {value!r}", reason="not_positive", field=name
        )


def check_stages(model: ModelArch, pp: int) -> None:
    """Refuse more pipeline stages ``pp`` than ``model`` has layers: :class:`SizingInputError`
    ``inconsistent``, field ``pp``."""
    if pp > model.num_layers:
        raise SizingInputError(
            f"pp {pp} exceeds {model.name}'s {model.num_layers} layers",
            reason="inconsistent",
            field="pp",
        )


def check_context(model: ModelArch, context_tokens: int) -> None:
    """Refuse ``context_tokens`` (input + output, visual tokens included) above ``model``'s
    maximum context: :class:`SizingInputError` ``context_too_long``, field ``input_len``."""
    if context_tokens > model.max_context_tokens:
        raise SizingInputError(
            f"context of {context_tokens:,} tokens exceeds {model.name}'s maximum of "
            f"{model.max_context_tokens:,}",
            reason="context_too_long",
            field="input_len",
        )


def memory_estimate(
    *,
    model: ModelArch,
    precision: Precision,
    kv_bits: int,
    gpu_memory_bytes: int,
    tp: int,
    context_tokens: int,
    sequences: int | None,
    engine: str | None = None,
    overhead_bytes: int | None = None,
    reserve: int | None = None,
    pp: int = 1,
    draft: ModelArch | None = None,
    dp_attention: int = 1,
) -> MemoryEstimate:
    """Weights, KV cache, overhead and reserve per card for ``sequences`` of ``context_tokens``.

    ``pp`` pipeline stages split the layers (issue 34; ``000`` §4.1): a card of a replica of
    ``tp`` x ``pp`` cards holds the weights and KV cache of ceil(layers / ``pp``) layers of its
    TP share - weights ceil(weights / tp x ceil(layers / pp) / layers), KV likewise (the
    embedding and head, on the first and last stage, are spread as if they were layers).
    Llama-3-70B (80 layers) at pp 3: 27 layers per card, 27 / 80 of the TP share.

    ``context_tokens`` = input + output tokens of one request (the KV a sequence reaches).
    ``engine`` (vllm, sglang, tensorrt-llm) picks the reserve rule; ``overhead_bytes`` /
    ``reserve`` override :func:`engine_overhead_bytes` / :func:`reserve_bytes`.
    ``draft``: a speculative-decoding draft model (``000`` §3.3) served beside the target. Its
    weights, at the target's weight precision and split over the same ``tp`` cards (vLLM's
    ``speculative_draft_tensor_parallel_size`` defaults to the target's), sit whole on the
    first stage's cards (``draft_weights_bytes_per_gpu``, counted on the busiest card), and
    each sequence keeps a draft KV cache of the same context
    (``draft_kv_bytes_per_sequence_per_gpu``), so fewer sequences fit: max sequences = KV
    budget // (target + draft KV per sequence). Llama-3.1-8B drafting for Llama-3.1-70B at
    FP16, TP 4: 16,060,522,496 B / 4 = 4,015,130,624 B per card.

    ``dp_attention`` (d > 1, a mixture of experts with expert parallelism over all ``tp`` cards:
    SGLang's ``--enable-dp-attention``, TensorRT-LLM's ``enable_attention_dp``; DeepSeek-V3
    technical report, arXiv 2412.19437 §3.4: attention TP4 x DP80, MoE EP320): the routed
    experts are split over every card (1 / ``tp`` of them each), while everything else -
    attention, dense-layer MLPs, shared experts, embeddings and head - is replicated per
    attention DP rank and split only over its tp / d cards; each DP rank keeps the KV cache of
    its own sequences only, split over those tp / d cards (an MLA latent, which TP copies to
    every card, is then held once per sequence). So max sequences = d x (KV budget // KV per
    sequence at tp / d) and the busiest card holds ceil(sequences / d) of them.
    DeepSeek-V3 FP8 on 16 H200 at EP 16, DP 16: routed experts 58 x 256 x 3 x 7,168 x 2,048
    x 1 B / 16 = 40,869,298,176 B per card, and the other 671,026,404,352 - 653,908,770,816 =
    17,117,633,536 B whole on every card: 57,986,931,712 B of weights per card.

    Raises :class:`SizingInputError`: ``not_positive`` for a size, TP, memory or sequence count
    below 1; ``context_too_long`` above the model's maximum context; ``unknown_engine``;
    ``inconsistent`` (field ``dp_attention``) for a ``dp_attention`` not dividing ``tp``.
    """
    _check_positive("context_tokens", context_tokens)
    _check_positive("tp", tp)
    _check_positive("pp", pp)
    _check_positive("dp_attention", dp_attention)
    if tp % dp_attention:
        raise SizingInputError(
            f"dp_attention {dp_attention} does not divide tp {tp}",
            reason="inconsistent",
            field="dp_attention",
        )
    # The cards one attention DP rank spans: attention, dense weights and KV split over them.
    group = tp // dp_attention
    _check_positive("gpu_memory_bytes", gpu_memory_bytes)
    check_stages(model, pp)
    profile = engine_profile(engine)
    if sequences is not None:
        _check_positive("concurrency", sequences)
    check_context(model, context_tokens)
    weights = checkpoint_bytes(model, precision)
    stage_layers = -(-model.num_layers // pp)

    def stage_share(whole: int) -> int:
        # The busiest stage's part of a per-card TP share: ceil(whole x stage layers / layers).
        return -(-whole * stage_layers // model.num_layers)

    routed = routed_checkpoint_bytes(model, precision)
    experts_per_gpu = stage_share(-(-routed // tp))
    if dp_attention > 1:
        weights_per_gpu = experts_per_gpu + stage_share(-(-(weights - routed) // group))
    else:
        weights_per_gpu = stage_share(-(-weights // tp))
    per_token = model_kv_bytes_per_token(model, kv_bits=kv_bits)
    per_token_per_gpu = stage_share(model_kv_bytes_per_token(model, kv_bits=kv_bits, tp=group))
    kept = kv_tokens_per_sequence(model, context_tokens)
    per_sequence_per_gpu = stage_share(
        kv_bytes_per_sequence(model, context_tokens=context_tokens, kv_bits=kv_bits, tp=group)
    )
    overhead = engine_overhead_bytes(tp=tp) if overhead_bytes is None else overhead_bytes
    if reserve is None:
        kept_free = reserve_bytes(
            gpu_memory_bytes=gpu_memory_bytes,
            used_bytes=weights_per_gpu + overhead,
            profile=profile,
        )
    else:
        kept_free = reserve
    draft_weights_per_gpu = draft_per_sequence_per_gpu = 0
    if draft is not None:
        draft_weights_per_gpu = -(-checkpoint_bytes(draft, precision) // group)
        draft_per_sequence_per_gpu = kv_bytes_per_sequence(
            draft, context_tokens=context_tokens, kv_bits=kv_bits, tp=group
        )
    # A vision-language model's encoder (000 §6.3), kept at 16 bit and split over the TP group
    # like the language model (vLLM shards Qwen2.5-VL's vision blocks), on the first stage.
    vision_weights_per_gpu = 0
    if model.vision is not None:
        vision_weights_per_gpu = -(
            -weights_bytes(params=model.vision.params, weight_bits=16) // group
        )
    budget = max(
        0,
        gpu_memory_bytes
        - weights_per_gpu
        - draft_weights_per_gpu
        - vision_weights_per_gpu
        - overhead
        - kept_free,
    )
    max_sequences = dp_attention * (budget // (per_sequence_per_gpu + draft_per_sequence_per_gpu))
    counted = sequences if sequences is not None else max_sequences
    needed = sequences if sequences is not None else 1
    # The busiest card: its DP rank's share of the sequences (all of them when d = 1).
    on_card = -(-counted // dp_attention)
    kv_per_gpu = (per_sequence_per_gpu + draft_per_sequence_per_gpu) * on_card
    return MemoryEstimate(
        tp=tp,
        weight_bits=precision.weight_bits,
        kv_bits=kv_bits,
        weights_bytes=weights,
        weights_bytes_per_gpu=weights_per_gpu,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_per_gpu=per_token_per_gpu,
        context_tokens=context_tokens,
        kv_tokens_per_sequence=kept,
        kv_bytes_per_sequence_per_gpu=per_sequence_per_gpu,
        sequences=sequences,
        kv_cache_bytes=(
            kv_bytes_per_sequence(model, context_tokens=context_tokens, kv_bits=kv_bits)
            + (
                0
                if draft is None
                else kv_bytes_per_sequence(draft, context_tokens=context_tokens, kv_bits=kv_bits)
            )
        )
        * counted,
        kv_cache_bytes_per_gpu=kv_per_gpu,
        engine_overhead_bytes_per_gpu=overhead,
        reserve_bytes_per_gpu=kept_free,
        gpu_memory_bytes=gpu_memory_bytes,
        total_bytes_per_gpu=weights_per_gpu
        + draft_weights_per_gpu
        + vision_weights_per_gpu
        + kv_per_gpu
        + overhead
        + kept_free,
        kv_budget_bytes_per_gpu=budget,
        max_sequences=max_sequences,
        fits=max_sequences >= needed,
        pp=pp,
        dp_attention=dp_attention,
        expert_weights_bytes_per_gpu=experts_per_gpu,
        draft_weights_bytes_per_gpu=draft_weights_per_gpu,
        draft_kv_bytes_per_sequence_per_gpu=draft_per_sequence_per_gpu,
        vision_weights_bytes_per_gpu=vision_weights_per_gpu,
    )
