"""Model architectures for sizing: the shipped presets (``models.json``) and custom ones.

Each preset's fields come from the model's published ``config.json`` on its Hugging Face hub page,
cited per field in ``models.json``. Preset ids are the model ids of the shared sizing dataset
(``shared/sizing/sizing_dataset.json``), e.g. ``llama3_8b``, so measurements and presets line up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from pools.sizing import SizingInputError
from pools.sizing.vision import VisionEncoder
from scheduler_adapters.documents import load_json

_MODELS_JSON = Path(__file__).resolve().parent / "models.json"

_POSITIVE_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_context_tokens",
    "total_params",
    "active_params",
)
#: Optional counts of :class:`ModelArch`: positive whole numbers when given.
_OPTIONAL_POSITIVE_FIELDS = (
    "num_experts",
    "experts_per_token",
    "sliding_window_tokens",
    "dense_intermediate_size",
    "kv_lora_rank",
    "qk_rope_head_dim",
)


def _require_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SizingInputError(
            f"{name} must be a positive integer, got {value!r}",
            reason="not_positive",
            field=name,
        )


@dataclass(frozen=True)
class ModelArch:
    """A decoder-only transformer as the estimator sees it.

    Counts are plain integers (``total_params`` and ``active_params`` are parameters, not
    billions). ``num_experts`` / ``experts_per_token`` are ``None`` for dense models; for a
    mixture of experts (MoE) ``total_params`` counts every expert and ``active_params`` the
    ``experts_per_token`` routed per token. ``sliding_window_tokens`` caps the KV cache kept per
    sequence (Mistral-7B-v0.1: 4,096); ``window_chunked``: that window is Llama 4's chunked
    attention (``attention_chunk_size``: a token attends within its chunk), which an engine may
    still allocate in full (``pools.sizing.engines`` ``EngineProfile.window_keeps_full_kv``) or
    decode on a slower kernel (``EngineProfile.chunked_decode_per_query_head``). ``sources``
    maps a field name to its citation.
    ``vision``: a vision-language model's encoder (:class:`pools.sizing.vision.VisionEncoder`),
    counted apart from the language model's ``total_params``. ``kv_cache_dtype``: the KV-cache
    dtype the checkpoint itself names (``FP8``, ``INT8``; ``None``: not stated, 16-bit), used
    when a request leaves the KV dtype to ``auto``
    (:func:`pools.sizing.memory.kv_cache_dtype_for`). ``fp8_weight_block``: the edge of the square
    weight blocks its FP8 checkpoint scales (``quantization_config.weight_block_size`` [128, 128]
    of DeepSeek-V3, Kimi-K2 and Qwen3's FP8 checkpoints: 128); ``None``: per-tensor or
    per-channel scales, or no FP8 checkpoint named. Block-scaled experts multiply slower on
    Hopper (``pools.sizing.throughput.MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE``).

    Raises :class:`SizingInputError` (reason ``not_positive`` or ``inconsistent``) when a count
    is not a positive integer, the attention heads are not a multiple of the KV heads, or the
    active parameters exceed the total.
    """

    id: str
    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_context_tokens: int
    total_params: int
    active_params: int
    num_experts: int | None = None
    experts_per_token: int | None = None
    sliding_window_tokens: int | None = None
    tie_word_embeddings: bool = False
    hf_repo: str = ""
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    num_shared_experts: int = 0
    first_k_dense_layers: int = 0
    dense_intermediate_size: int | None = None
    moe_layer_interval: int = 1
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    sliding_window_layers: int | None = None
    vision: VisionEncoder | None = None
    kv_cache_dtype: str | None = None
    window_chunked: bool = False
    fp8_weight_block: int | None = None

    def __post_init__(self) -> None:
        """Checks in order: field ranges, layer layout, heads and experts; raises
        :class:`SizingInputError` at the first break."""
        self._check_ranges()
        self._check_layers()
        self._check_heads_and_experts()

    def _check_ranges(self) -> None:
        """Required fields > 0, optional ones > 0 when given, shared/dense counts >= 0."""
        for name in _POSITIVE_FIELDS:
            _require_positive_int(name, getattr(self, name))
        for name in (*_OPTIONAL_POSITIVE_FIELDS, "moe_layer_interval", "fp8_weight_block"):
            if getattr(self, name) is not None:
                _require_positive_int(name, getattr(self, name))
        for name in ("num_shared_experts", "first_k_dense_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SizingInputError(
                    f"{name} must be a whole number >= 0, got {value!r}",
                    reason="not_positive",
                    field=name,
                )

    def _check_layers(self) -> None:
        """Dense and sliding-window layers within ``num_layers``; MLA fields together."""
        if self.first_k_dense_layers > self.num_layers:
            raise SizingInputError(
                f"first_k_dense_layers ({self.first_k_dense_layers}) cannot exceed num_layers "
                f"({self.num_layers})",
                reason="inconsistent",
                field="first_k_dense_layers",
            )
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise SizingInputError(
                "kv_lora_rank and qk_rope_head_dim go together (multi-head latent attention)",
                reason="inconsistent",
                field="qk_rope_head_dim" if self.kv_lora_rank else "kv_lora_rank",
            )
        if self.sliding_window_layers is not None:
            if self.sliding_window_tokens is None:
                raise SizingInputError(
                    "sliding_window_layers needs sliding_window",
                    reason="inconsistent",
                    field="sliding_window_layers",
                )
            if not 0 <= self.sliding_window_layers <= self.num_layers:
                raise SizingInputError(
                    f"sliding_window_layers must be 0 to num_layers ({self.num_layers}), got "
                    f"{self.sliding_window_layers!r}",
                    reason="inconsistent",
                    field="sliding_window_layers",
                )

    def _check_heads_and_experts(self) -> None:
        """Query heads a multiple of KV heads; expert fields together and within range; active
        and routed-expert parameters below ``total_params``."""
        if self.num_attention_heads % self.num_kv_heads:
            raise SizingInputError(
                "num_attention_heads must be a multiple of num_kv_heads "
                f"({self.num_attention_heads} vs {self.num_kv_heads})",
                reason="inconsistent",
                field="num_kv_heads",
            )
        if (self.num_experts is None) != (self.experts_per_token is None):
            raise SizingInputError(
                "num_experts and experts_per_token go together (both or neither)",
                reason="inconsistent",
                field="num_experts",
            )
        if self.num_experts is not None and self.experts_per_token > self.num_experts:
            raise SizingInputError(
                "experts_per_token cannot exceed num_experts",
                reason="inconsistent",
                field="experts_per_token",
            )
        if self.active_params > self.total_params:
            raise SizingInputError(
                f"active_params ({self.active_params:,}) cannot exceed total_params "
                f"({self.total_params:,})",
                reason="inconsistent",
                field="total_params",
            )
        if self.expert_params >= self.total_params:
            raise SizingInputError(
                f"the routed experts alone ({self.expert_params:,} parameters: MoE layers x "
                f"experts x 3 x hidden x intermediate) exceed total_params "
                f"({self.total_params:,})",
                reason="inconsistent",
                field="total_params",
            )

    @classmethod
    def from_config(
        cls,
        *,
        id: str,
        name: str,
        num_layers: int,
        hidden_size: int,
        num_attention_heads: int,
        num_kv_heads: int,
        head_dim: int,
        intermediate_size: int,
        vocab_size: int,
        max_context_tokens: int,
        num_experts: int | None = None,
        experts_per_token: int | None = None,
        total_params: int | None = None,
        active_params: int | None = None,
        tie_word_embeddings: bool = False,
        qkv_bias: bool = False,
        sliding_window_tokens: int | None = None,
        sliding_window_layers: int | None = None,
        window_chunked: bool = False,
        num_shared_experts: int | None = None,
        first_k_dense_layers: int | None = None,
        dense_intermediate_size: int | None = None,
        moe_layer_interval: int | None = None,
        kv_lora_rank: int | None = None,
        qk_rope_head_dim: int | None = None,
        q_lora_rank: int | None = None,
        v_head_dim: int | None = None,
        hf_repo: str = "",
        sources: dict[str, str] | None = None,
        kv_cache_dtype: str | None = None,
        fp8_weight_block: int | None = None,
    ) -> ModelArch:
        """The architecture of a Llama-style decoder from its config fields, with its parameters
        counted by :func:`model_params_from_config` — the one way presets and custom models are
        built.

        A given ``total_params`` / ``active_params`` (published counts) are kept; one not given
        is counted: a dense model's active parameters are its total, a mixture of experts' are
        counted from the config (capped at the total). ``qkv_bias``, ``q_lora_rank`` and
        ``v_head_dim`` only enter the count. A mixture of experts (``num_experts`` > 1) with
        ``num_experts`` 1 or ``experts_per_token`` absent is read as dense when both are
        absent. Raises :class:`SizingInputError` as the class does for an inconsistent config.
        """
        config = {
            "num_layers": num_layers,
            "hidden_size": hidden_size,
            "num_attention_heads": num_attention_heads,
            "num_kv_heads": num_kv_heads,
            "head_dim": head_dim,
            "intermediate_size": intermediate_size,
            "vocab_size": vocab_size,
            "tie_word_embeddings": tie_word_embeddings,
            "num_experts": num_experts,
            "experts_per_token": experts_per_token,
            "num_shared_experts": num_shared_experts or 0,
            "first_k_dense_layers": first_k_dense_layers or 0,
            "dense_intermediate_size": dense_intermediate_size,
            "moe_layer_interval": moe_layer_interval or 1,
            "kv_lora_rank": kv_lora_rank,
            "qk_rope_head_dim": qk_rope_head_dim,
        }
        counted_total, counted_active = model_params_from_config(
            **config, qkv_bias=qkv_bias, q_lora_rank=q_lora_rank, v_head_dim=v_head_dim
        )
        if total_params is None:
            total_params = counted_total
        if active_params is None:
            active_params = min(counted_active, total_params) if num_experts else total_params
        return cls(
            id=id,
            name=name,
            hf_repo=hf_repo,
            max_context_tokens=max_context_tokens,
            total_params=total_params,
            active_params=active_params,
            sliding_window_tokens=sliding_window_tokens,
            sliding_window_layers=sliding_window_layers,
            window_chunked=window_chunked,
            sources=dict(sources or {}),
            kv_cache_dtype=kv_cache_dtype,
            fp8_weight_block=fp8_weight_block,
            **config,
        )

    @property
    def is_moe(self) -> bool:
        """True for a mixture of experts (``num_experts`` > 1)."""
        return self.num_experts is not None and self.num_experts > 1

    @property
    def num_moe_layers(self) -> int:
        """Layers with routed experts: every ``moe_layer_interval``-th layer after the first
        ``first_k_dense_layers`` dense ones (DeepSeek-V3 ``first_k_dense_replace`` 3 of 61;
        Llama-4-Maverick ``interleave_moe_layer_step`` 2: 24 of 48). 0 for a dense model."""
        if not self.is_moe:
            return 0
        return (self.num_layers - self.first_k_dense_layers) // self.moe_layer_interval

    @property
    def expert_params(self) -> int:
        """Parameters in the routed experts' gated MLPs, all layers: MoE layers × E × 3 × h × I
        (I per expert). Shared experts are not routed: they are read for every token, like
        attention, and so counted with the shared weights.

        0 for a dense model (its MLP is counted as shared, always-read weights).
        """
        if not self.is_moe:
            return 0
        return (
            self.num_moe_layers * self.num_experts * 3 * self.hidden_size * self.intermediate_size
        )

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): the KV cache keeps one
        compressed latent of ``kv_lora_rank`` plus the ``qk_rope_head_dim`` rotary key per
        token and layer instead of K and V per KV head."""
        return self.kv_lora_rank is not None

    @property
    def window_layers(self) -> int:
        """Layers whose KV is capped at ``sliding_window_tokens``: ``sliding_window_layers``
        when given (gpt-oss: half of them), else all layers when a window is set (Mistral-7B-v0.1),
        else 0."""
        if self.sliding_window_tokens is None:
            return 0
        if self.sliding_window_layers is None:
            return self.num_layers
        return self.sliding_window_layers

    @property
    def attention_width(self) -> int:
        """num_attention_heads × head_dim: the width of Q and of the attention output."""
        return self.num_attention_heads * self.head_dim


def model_params_from_config(
    *,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int,
    head_dim: int,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool = False,
    qkv_bias: bool = False,
    num_experts: int | None = None,
    experts_per_token: int | None = None,
    num_shared_experts: int = 0,
    first_k_dense_layers: int = 0,
    dense_intermediate_size: int | None = None,
    moe_layer_interval: int = 1,
    kv_lora_rank: int | None = None,
    qk_rope_head_dim: int | None = None,
    q_lora_rank: int | None = None,
    v_head_dim: int | None = None,
) -> tuple[int, int]:
    """Return ``(total_params, active_params)`` of a Llama-style decoder from its config fields.

    Counted (h = hidden size, L = layers, V = vocabulary, I = MLP intermediate size):
    token embedding V×h, output head V×h unless tied; per layer Q h×(heads×head_dim),
    K and V h×(kv_heads×head_dim) each, O (heads×head_dim)×h, biases on Q/K/V when ``qkv_bias``
    (Qwen2), a gated MLP 3×h×I per expert (one expert when dense), the router h×E for MoE, two
    RMSNorm weights 2×h; and the final norm h. ``active_params`` counts ``experts_per_token`` of
    the experts. This is the counting rule of the sizing dataset's ``params_method`` and gives
    8,030,261,248 for Llama-3.1-8B (Meta publishes "8B").
    """
    q_width = num_attention_heads * head_dim
    kv_width = num_kv_heads * head_dim
    if kv_lora_rank is not None and qk_rope_head_dim is not None:
        # Multi-head latent attention (DeepSeek-V2 paper, arXiv 2405.04434 section 2.1): Q
        # through an optional low-rank q_lora_rank (with its norm), the joint KV down-projection
        # h x (kv_lora_rank + rope) with its norm, the up-projection kv_lora_rank x heads x
        # (nope + v), and O heads x v x h. ``head_dim`` = nope + rope (the query/key width).
        value_dim = v_head_dim or head_dim - qk_rope_head_dim
        nope = head_dim - qk_rope_head_dim
        if q_lora_rank:
            query = hidden_size * q_lora_rank + q_lora_rank + q_lora_rank * q_width
        else:
            query = hidden_size * q_width
        attention = (
            query
            + hidden_size * (kv_lora_rank + qk_rope_head_dim)
            + kv_lora_rank
            + kv_lora_rank * num_attention_heads * (nope + value_dim)
            + num_attention_heads * value_dim * hidden_size
        )
    else:
        attention = hidden_size * q_width + 2 * hidden_size * kv_width + q_width * hidden_size
        if qkv_bias:
            attention += q_width + 2 * kv_width
    mlp_one = 3 * hidden_size * intermediate_size
    norms = 2 * hidden_size
    embeddings = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    if not num_experts or num_experts <= 1:
        layer = attention + mlp_one + norms
        total = embeddings + num_layers * layer + hidden_size
        return total, total
    moe_layers = (num_layers - first_k_dense_layers) // moe_layer_interval
    dense_layers = num_layers - moe_layers
    dense_mlp = 3 * hidden_size * (dense_intermediate_size or intermediate_size)
    router = hidden_size * num_experts
    shared = num_shared_experts * mlp_one
    common = embeddings + num_layers * (attention + norms) + dense_layers * dense_mlp + hidden_size
    total = common + moe_layers * (router + shared + num_experts * mlp_one)
    active = common + moe_layers * (router + shared + (experts_per_token or 1) * mlp_one)
    return total, active


def _preset_from_entry(entry: dict[str, Any]) -> ModelArch:
    # models.json keeps config.json's names for the context and the sliding window.
    config = dict(entry["config"])
    model = _text_preset(entry, config)
    if entry.get("vision"):
        # A vision-language model: the language model above, and its vision encoder.
        model = replace(model, vision=VisionEncoder(**entry["vision"]))
    return model


def _text_preset(entry: dict[str, Any], config: dict[str, Any]) -> ModelArch:
    return ModelArch.from_config(
        id=entry["id"],
        name=entry["name"],
        hf_repo=entry["hf_repo"],
        sources=entry["sources"],
        max_context_tokens=config.pop("max_position_embeddings"),
        sliding_window_tokens=config.pop("sliding_window"),
        **config,
    )


@cache
def model_presets() -> dict[str, ModelArch]:
    """Return the shipped presets of ``models.json`` by id, in file order (read once, cached)."""
    with _MODELS_JSON.open(encoding="utf-8") as fh:
        entries = json.load(fh)["models"]
    return {entry["id"]: _preset_from_entry(entry) for entry in entries}


def model_preset(model_id: str) -> ModelArch:
    """Return the preset with this id (``llama3_8b``, ``qwen2_5_72b``, ...).

    Raises :class:`SizingInputError` (reason ``unknown_model``) listing the known ids.
    """
    presets = model_presets()
    try:
        return presets[model_id]
    except (KeyError, TypeError):
        raise SizingInputError(
            f"unknown model {model_id!r}; known: {', '.join(presets)}",
            reason="unknown_model",
            field="model",
        ) from None


#: Architecture fields a custom model takes (page, API, ``estimate``), in the order shown.
#: ``total_params`` / ``active_params`` blank: counted from the config. The MoE, MLA and
#: sliding-window fields blank: dense, grouped-query attention, full attention.
CUSTOM_ARCH_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_context_tokens",
    "total_params",
    "active_params",
    "num_experts",
    "experts_per_token",
    "num_shared_experts",
    "first_k_dense_layers",
    "dense_intermediate_size",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "sliding_window_tokens",
    "sliding_window_layers",
)
REQUIRED_ARCH_FIELDS = CUSTOM_ARCH_FIELDS[:8]

#: Layer kinds a Hugging Face ``layer_types`` list may name that this model can cost.
_ATTENTION_LAYER_TYPES = {"full_attention", "sliding_attention", "chunked_attention"}

#: ``model_type`` values of architectures with state-space, recurrent or linear-attention
#: layers, whose memory and speed these formulas do not describe (no KV cache per token).
UNSUPPORTED_MODEL_TYPES = {
    "mamba": "state-space (Mamba) layers",
    "mamba2": "state-space (Mamba-2) layers",
    "falcon_mamba": "state-space (Mamba) layers",
    "jamba": "state-space (Mamba) layers mixed with attention",
    "zamba": "state-space (Mamba) layers mixed with attention",
    "zamba2": "state-space (Mamba-2) layers mixed with attention",
    "bamba": "state-space (Mamba-2) layers mixed with attention",
    "nemotron_h": "state-space (Mamba-2) layers mixed with attention",
    "falcon_h1": "state-space (Mamba-2) layers mixed with attention",
    "granitemoehybrid": "state-space (Mamba-2) layers mixed with attention",
    "rwkv": "recurrent (RWKV) layers",
    "recurrent_gemma": "recurrent (Griffin) layers",
    "qwen3_next": "linear-attention (Gated DeltaNet) layers",
    "minimax": "linear-attention (lightning attention) layers",
    "minimax_m1": "linear-attention (lightning attention) layers",
    "xlstm": "recurrent (xLSTM) layers",
    "kimi_linear": "linear-attention (Kimi Delta Attention) layers mixed with attention",
}

#: Keys (and key prefixes) only the configs of state-space or linear-attention layers carry,
#: whatever their ``model_type`` says: a hybrid under a type not in
#: :data:`UNSUPPORTED_MODEL_TYPES` (a new family, or code shipped with the checkpoint) would
#: otherwise be sized as its attention layers alone. From the published config.json files:
#: Mamba (``state-spaces/mamba-*-hf``: ``time_step_rank``), Jamba (``mamba_d_state``,
#: ``attn_layer_period``), Zamba2 (``layers_block_type``), Nemotron-H
#: (``hybrid_override_pattern``, ``mamba_num_heads``, ``ssm_state_size``), Falcon-H1
#: (``mamba_d_ssm``), Qwen3-Next (``linear_num_value_heads``, ``linear_key_head_dim``), Kimi
#: Linear (``linear_attn_config``), MiniMax-Text-01 (``attn_type_list``).
_HYBRID_KEYS = frozenset(
    {"hybrid_override_pattern", "attn_layer_period", "attn_layer_offset", "attn_type_list",
     "layers_block_type", "time_step_rank"}
)  # fmt: skip
_HYBRID_KEY_PREFIXES = ("mamba_", "ssm_", "linear_attn", "linear_num_", "linear_key_",
                        "linear_value_", "linear_conv")  # fmt: skip


def _first(config: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def arch_fields_from_hf_config(config: Any) -> dict[str, Any]:
    """The custom-architecture fields (:data:`CUSTOM_ARCH_FIELDS` plus ``name``,
    ``tie_word_embeddings``, ``qkv_bias``, ``q_lora_rank``, ``v_head_dim``,
    ``moe_layer_interval``) read from a Hugging Face ``config.json`` (a dict).

    Read directly, by the names the transformers configurations use: ``num_hidden_layers``,
    ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads`` (absent: the attention
    heads), ``head_dim`` (absent: hidden / heads; MLA: ``qk_nope_head_dim`` +
    ``qk_rope_head_dim``), ``intermediate_size`` (MoE: ``moe_intermediate_size`` per expert
    where given - DeepSeek, Qwen3-MoE, GLM-4.5 - the dense layers keeping
    ``intermediate_size``; Llama 4: ``intermediate_size`` per expert, ``intermediate_size_mlp``
    dense), ``vocab_size``, ``max_position_embeddings``, experts from ``n_routed_experts`` /
    ``num_experts`` / ``num_local_experts``, ``num_experts_per_tok`` / ``experts_per_token``,
    ``n_shared_experts``, ``first_k_dense_replace``, ``interleave_moe_layer_step``,
    ``kv_lora_rank``, ``qk_rope_head_dim``, the checkpoint's KV-cache dtype
    (:func:`hf_kv_cache_dtype`), ``sliding_window`` (ignored when
    ``use_sliding_window`` is false, as Qwen2 does) with ``layer_types`` saying which layers
    slide, Llama 4's ``attention_chunk_size`` on the layers ``no_rope_layers`` marks 1.
    A multimodal config's ``text_config`` is read for the language model.

    Raises :class:`SizingInputError`: ``unsupported_architecture`` (field ``config``) for
    state-space, recurrent or linear-attention layers; ``missing`` naming the config key a
    required field comes from; ``inconsistent`` for a mixture of experts whose
    ``interleave_moe_layer_step`` / ``decoder_sparse_step`` is 0; the class's own errors are
    raised later by :meth:`ModelArch.from_config`.
    """
    outer = config
    name, config = _language_config(config)
    model_type = str(config.get("model_type") or "").lower()
    _check_attention_only(config, model_type)
    _check_whole_numbers(config)
    required = _required_hf_fields(config)
    _check_per_layer_lists(config, required["num_layers"])
    kv_lora = config.get("kv_lora_rank")
    rope = config.get("qk_rope_head_dim") if kv_lora is not None else None
    window, window_layers = _hf_window(config)
    experts, per_token, shared = _hf_experts(config, model_type)
    interval = _first(config, "interleave_moe_layer_step", "decoder_sparse_step")
    if experts and interval == 0:
        # transformers places experts on layers where (index + 1) % step == 0: a step of 0
        # divides by zero there, so no checkpoint has one.
        raise SizingInputError(
            "the config.json's "
            + " / ".join(
                k for k in ("interleave_moe_layer_step", "decoder_sparse_step") if k in config
            )
            + " is 0: experts sit on every n-th layer, so it must be at least 1",
            reason="inconsistent",
            field="config",
        )
    bias = config.get("attention_bias")
    if bias is None:
        bias = model_type.startswith("qwen2")
    return {
        "name": name.rsplit("/", 1)[-1] or "Custom model",
        "num_layers": required["num_layers"],
        "hidden_size": required["hidden_size"],
        "num_attention_heads": required["num_attention_heads"],
        "num_kv_heads": _kv_heads(config, required),
        "head_dim": _hf_head_dim(config, required, rope),
        "intermediate_size": required["intermediate_size"],
        "vocab_size": required["vocab_size"],
        "max_context_tokens": required["max_context_tokens"],
        "total_params": None,
        "active_params": None,
        "num_experts": experts,
        "experts_per_token": per_token if experts else None,
        "num_shared_experts": shared if experts else None,
        "first_k_dense_layers": _first(config, "first_k_dense_replace") if experts else None,
        "dense_intermediate_size": required["dense_intermediate_size"] if experts else None,
        "moe_layer_interval": interval if experts else None,
        "kv_lora_rank": kv_lora,
        "qk_rope_head_dim": rope,
        "q_lora_rank": config.get("q_lora_rank") if kv_lora is not None else None,
        "v_head_dim": config.get("v_head_dim") if kv_lora is not None else None,
        "sliding_window_tokens": window,
        "sliding_window_layers": window_layers,
        "window_chunked": window is not None and window == config.get("attention_chunk_size"),
        "tie_word_embeddings": bool(config.get("tie_word_embeddings") or False),
        "qkv_bias": bool(bias),
        "kv_cache_dtype": hf_kv_cache_dtype(outer),
        "fp8_weight_block": hf_fp8_weight_block(outer),
    }


#: ModelOpt ``kv_cache_quant_algo`` values this model costs, as KV dtype names
#: (:data:`pools.sizing.memory.KV_CACHE_DTYPE_NAMES`).
_KV_QUANT_ALGOS = {"FP8": "FP8", "INT8": "INT8"}


def hf_kv_cache_dtype(config: Any) -> str | None:
    """The KV-cache dtype a checkpoint names, or ``None`` (not stated: 16-bit):

    - NVIDIA ModelOpt: ``kv_cache_quant_algo`` of ``hf_quant_config.json``'s ``quantization``
      (pasted as is), or of ``config.json``'s ``quantization_config`` (transformers copies it
      there for ``quant_method`` ``modelopt``): ``FP8`` or ``INT8``;
    - compressed-tensors (llm-compressor): ``quantization_config.kv_cache_scheme``
      ``{"num_bits": 8, "type": "float"}`` = FP8, ``"int"`` = INT8.

    Raises :class:`SizingInputError` ``unsupported_architecture`` (field ``config``) for a KV
    quantisation it cannot cost (e.g. ModelOpt's ``NVFP4`` KV cache)."""
    if not isinstance(config, Mapping):
        return None
    for key in ("quantization", "quantization_config"):
        block = config.get(key)
        if not isinstance(block, Mapping):
            continue
        algo = block.get("kv_cache_quant_algo")
        scheme = block.get("kv_cache_scheme")
        if isinstance(scheme, Mapping) and scheme.get("num_bits") == 8:
            algo = {"float": "FP8", "int": "INT8"}.get(str(scheme.get("type")), scheme.get("type"))
        if algo is None:
            continue
        if str(algo).upper() not in _KV_QUANT_ALGOS:
            raise SizingInputError(
                f"the checkpoint's KV cache is {_as_json(algo)}, which this sizing model "
                f"cannot cost (it knows {', '.join(_KV_QUANT_ALGOS)} and 16-bit)",
                reason="unsupported_architecture",
                field="config",
            )
        return _KV_QUANT_ALGOS[str(algo).upper()]
    return None


def hf_fp8_weight_block(config: Any) -> int | None:
    """The edge of the square blocks an FP8 checkpoint scales its weights in, or ``None``:
    ``quantization_config`` ``{"quant_method": "fp8", "weight_block_size": [b, b]}`` (the format
    DeepSeek-V3's own ``config.json`` and Qwen3's ``-FP8`` checkpoints publish; transformers'
    ``FineGrainedFP8Config``) gives ``b``; another method, no block size, or blocks that are not
    two equal positive whole numbers give ``None`` (costed as per-tensor scales)."""
    if not isinstance(config, Mapping):
        return None
    block = config.get("quantization_config")
    if not isinstance(block, Mapping) or str(block.get("quant_method")).lower() != "fp8":
        return None
    size = block.get("weight_block_size")
    if (
        isinstance(size, list)
        and len(size) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
        and size[0] == size[1]
    ):
        return size[0]
    return None


def _language_config(config: Any) -> tuple[str, Mapping[str, Any]]:
    """``(_name_or_path, the language model's config)``: a multimodal config's
    ``text_config`` with the outer ``model_type`` and ``tie_word_embeddings`` as defaults.
    Raises :class:`SizingInputError` ``not_an_object`` when ``config`` is no mapping."""
    if not isinstance(config, Mapping):
        raise _config_not_an_object(config)
    name = str(_first(config, "_name_or_path") or "")
    if isinstance(config.get("text_config"), Mapping):
        outer = config
        config = {**config["text_config"]}
        config.setdefault("model_type", outer.get("model_type"))
        config.setdefault("tie_word_embeddings", outer.get("tie_word_embeddings"))
    return name, config


def _as_json(value: Any) -> str:
    """``value`` as the config.json spells it (``true``, ``"4096"``, ``null``), not as Python
    does (``True``, ``'4096'``, ``None``): what the user pasted is quoted back in its words."""
    return json.dumps(value, ensure_ascii=False)


def json_leaves(value: Any, keep: Callable[[Any], bool], path: str = "") -> list[tuple[str, Any]]:
    """``(path, leaf)`` of every leaf of a parsed JSON value (objects, lists) for which
    ``keep(leaf)`` holds, paths dotted (``rope_scaling.factor``, ``layer_types.3``; ``""`` for
    ``value`` itself), in document order."""
    if keep(value):
        return [(path, value)]
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return []
    found = []
    for key, inner in items:
        found.extend(json_leaves(inner, keep, f"{path}.{key}" if path else str(key)))
    return found


def non_finite_paths(value: Any) -> list[str]:
    """Where a parsed JSON value holds a NaN or an infinity, as dotted paths (``rope_theta``,
    ``rope_scaling.factor``, ``layer_types.3``; ``""`` for ``value`` itself), in document order.
    Python's JSON reader takes ``NaN`` / ``Infinity`` and reads a number beyond a float's range
    (``1e999``) as infinity; JSON itself has neither, so what holds one can be neither stored
    (PostgreSQL's jsonb, SQLite's JSON_VALID refuse it) nor written back (``allow_nan=False``)."""
    return [path for path, _ in json_leaves(value, _non_finite)]


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def non_finite_message(paths: list[str], what: str = "") -> str:
    """The refusal of JSON holding NaN or infinity at ``paths`` (:func:`non_finite_paths`):
    ``what`` names the document (``"the config.json"``), the paths are quoted in it."""
    where = ", ".join(p or "(the value itself)" for p in paths[:5])
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return (
        f"{what or 'The value'} holds a number that is not finite at {where}{more}: a number "
        "beyond a float's range (above about 1.8e308, e.g. 1e999) reads as infinity, and JSON "
        "has no infinity or NaN; give a finite number."
    )


def _config_not_an_object(config: Any) -> SizingInputError:
    """The refusal of a config.json that is valid JSON but no object (``null``, a list, a
    number): said as what a config.json is, not as the fields a ``null`` leaves missing
    (``num_layers is required …`` eight times)."""
    example = '{"num_hidden_layers": …, "hidden_size": …, …}'
    return SizingInputError(
        f"a config.json must be a JSON object of the model's fields ({example}), not "
        f"{_shortened(_as_json(config))}",
        reason="not_an_object",
        field="config",
    )


def _check_attention_only(config: Mapping[str, Any], model_type: str) -> None:
    """Raises :class:`SizingInputError` ``unsupported_architecture`` for a ``model_type`` of
    :data:`UNSUPPORTED_MODEL_TYPES`, a key of such layers (:data:`_HYBRID_KEYS`,
    :data:`_HYBRID_KEY_PREFIXES`; not ``null``) or ``layer_types`` other than attention
    layers."""
    if model_type in UNSUPPORTED_MODEL_TYPES:
        raise SizingInputError(
            f"model_type {_as_json(config['model_type'])} has "
            f"{UNSUPPORTED_MODEL_TYPES[model_type]}, which this sizing model cannot cost (it "
            "counts attention KV caches and weight streams)",
            reason="unsupported_architecture",
            field="config",
        )
    hybrid = sorted(
        str(key)
        for key, value in config.items()
        if value is not None and (key in _HYBRID_KEYS or str(key).startswith(_HYBRID_KEY_PREFIXES))
    )
    if hybrid:
        raise SizingInputError(
            f"the config.json's {', '.join(hybrid)} mark state-space or linear-attention "
            "layers, which this sizing model cannot cost (it counts attention KV caches and "
            "weight streams)",
            reason="unsupported_architecture",
            field="config",
        )
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list):
        unknown = sorted({str(t) for t in layer_types} - _ATTENTION_LAYER_TYPES)
        if unknown:
            raise SizingInputError(
                f"layer_types names {', '.join(unknown)}: layers this sizing model cannot cost "
                "(it knows full, sliding-window and chunked attention)",
                reason="unsupported_architecture",
                field="config",
            )


#: The config.json keys read as counts (layers, widths, heads, experts, tokens): each, when
#: present and not ``null``, must be a whole number from 0 to :data:`MAX_HF_COUNT`.
_HF_COUNT_KEYS = (
    "num_hidden_layers", "n_layer", "num_layers", "hidden_size", "n_embd", "d_model",
    "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "head_dim",
    "qk_nope_head_dim", "qk_rope_head_dim", "kv_lora_rank", "q_lora_rank", "v_head_dim",
    "intermediate_size", "intermediate_size_mlp", "moe_intermediate_size", "ffn_dim", "n_inner",
    "vocab_size", "max_position_embeddings", "max_sequence_length", "sliding_window",
    "attention_chunk_size", "n_routed_experts", "num_experts", "num_local_experts",
    "num_experts_per_tok", "experts_per_token", "moe_topk", "n_shared_experts",
    "num_shared_experts", "first_k_dense_replace", "interleave_moe_layer_step",
    "decoder_sparse_step",
)  # fmt: skip
#: Largest count a config.json may give, the custom fields' bound too
#: (``pools.sizing.inputs.MAX_ARCH_VALUE``): 10**13, far above any real width or vocabulary.
MAX_HF_COUNT = 10**13


def _shortened(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_whole_numbers(config: Mapping[str, Any]) -> None:
    """Raises :class:`SizingInputError` ``not_a_count`` (field ``config``) naming every key of
    :data:`_HF_COUNT_KEYS` whose value is not a whole number from 0 to :data:`MAX_HF_COUNT`
    (text, a list, an object, a boolean, a fraction, a negative): the parameter count would
    add them to numbers (``"128" + 64`` was a TypeError, a 500, before anything was written).
    A 0 the architecture cannot use is the arch's own error later."""
    wrong = [
        f"{key} is {_shortened(_as_json(config[key]))}"
        for key in _HF_COUNT_KEYS
        if config.get(key) is not None
        and (
            isinstance(config[key], bool)
            or not isinstance(config[key], int)
            or not 0 <= config[key] <= MAX_HF_COUNT
        )
    ]
    if wrong:
        raise SizingInputError(
            f"the config.json's {'; '.join(wrong)}: each must be a whole number from 0 to "
            f"{MAX_HF_COUNT:,}",
            reason="not_a_count",
            field="config",
        )


def _required_hf_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """The required fields plus ``dense_intermediate_size``, by field name; raises
    :class:`SizingInputError` ``missing`` naming the config keys of every absent one."""
    missing = []

    def need(field_name: str, *keys: str) -> Any:
        value = _first(config, *keys)
        if value is None:
            missing.append(f"{field_name} ({' / '.join(keys)})")
        return value

    fields = {
        "num_layers": need("num_layers", "num_hidden_layers", "n_layer", "num_layers"),
        "hidden_size": need("hidden_size", "hidden_size", "n_embd", "d_model"),
        "num_attention_heads": need("num_attention_heads", "num_attention_heads", "n_head"),
        "vocab_size": need("vocab_size", "vocab_size"),
        "max_context_tokens": need(
            "max_context_tokens", "max_position_embeddings", "max_sequence_length"
        ),
        "dense_intermediate_size": _first(config, "intermediate_size_mlp"),
    }
    moe_size = _first(config, "moe_intermediate_size")
    if moe_size is not None:
        fields["intermediate_size"] = moe_size
        fields["dense_intermediate_size"] = config.get("intermediate_size")
    else:
        fields["intermediate_size"] = need(
            "intermediate_size", "intermediate_size", "ffn_dim", "n_inner"
        )
    if missing:
        raise SizingInputError(
            "the config.json lacks " + "; ".join(missing),
            reason="missing",
            field="config",
        )
    return fields


#: config.json keys that list one entry per layer (gpt-oss, Gemma, Qwen3-Next ``layer_types``;
#: Llama 4 ``no_rope_layers``): read to count the sliding or chunked layers.
_PER_LAYER_KEYS = ("layer_types", "no_rope_layers")


def _check_per_layer_lists(config: Mapping[str, Any], num_layers: Any) -> None:
    """Raises :class:`SizingInputError` ``inconsistent`` (field ``config``) naming each list of
    :data:`_PER_LAYER_KEYS` whose length is not ``num_hidden_layers``: the window's layers
    would be counted from a list of another model (18 entries for 48 layers counted 9)."""
    if not isinstance(num_layers, int):
        return
    wrong = [
        f"{key} lists {len(config[key])} layers"
        for key in _PER_LAYER_KEYS
        if isinstance(config.get(key), list) and len(config[key]) != num_layers
    ]
    if wrong:
        raise SizingInputError(
            f"the config.json's {'; '.join(wrong)} but its num_hidden_layers is {num_layers}",
            reason="inconsistent",
            field="config",
        )


def _kv_heads(config: Mapping[str, Any], required: dict[str, Any]) -> Any:
    """``num_key_value_heads``; absent: the attention heads (multi-head attention). A 0 given
    is kept for :class:`ModelArch` to refuse (``or`` once read it as absent: 32 KV heads)."""
    kv_heads = _first(config, "num_key_value_heads", "num_kv_heads")
    return required["num_attention_heads"] if kv_heads is None else kv_heads


def _hf_head_dim(config: Mapping[str, Any], required: dict[str, Any], rope: Any) -> Any:
    """``head_dim``; MLA: ``qk_nope_head_dim`` + ``qk_rope_head_dim``; absent: hidden / heads."""
    head_dim = config.get("head_dim")
    if rope is not None and config.get("qk_nope_head_dim") is not None:
        head_dim = config["qk_nope_head_dim"] + rope
    hidden, heads = required["hidden_size"], required["num_attention_heads"]
    if head_dim is None and isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        head_dim = hidden // heads
    return head_dim


def _hf_window(config: Mapping[str, Any]) -> tuple[Any, int | None]:
    """``(sliding_window_tokens, sliding_window_layers)``: ``sliding_window`` unless
    ``use_sliding_window`` is false, its layers counted in ``layer_types``; else Llama 4's
    ``attention_chunk_size`` on the layers ``no_rope_layers`` marks 1."""
    window = config.get("sliding_window")
    if config.get("use_sliding_window") is False:
        window = None
    window_layers = None
    layer_types = config.get("layer_types")
    if window is not None and isinstance(layer_types, list):
        window_layers = sum(1 for t in layer_types if t == "sliding_attention")
    chunk = config.get("attention_chunk_size")
    if window is None and chunk is not None:
        # Llama 4: chunked attention on the RoPE layers (no_rope_layers 1), full on the rest;
        # a chunk holds at most chunk tokens of KV, as a window does.
        window = chunk
        flags = config.get("no_rope_layers")
        if isinstance(flags, list) and flags:
            window_layers = sum(1 for flag in flags if flag)
    return window, window_layers


def _hf_experts(config: Mapping[str, Any], model_type: str) -> tuple[Any, Any, Any]:
    """``(num_experts, experts_per_token, num_shared_experts)``; 0 or 1 expert is dense."""
    experts = _first(config, "n_routed_experts", "num_experts", "num_local_experts")
    per_token = _first(config, "num_experts_per_tok", "experts_per_token", "moe_topk")
    if experts in (0, 1):
        experts = per_token = None
    shared = config.get("n_shared_experts") or config.get("num_shared_experts")
    if shared is None and model_type in ("llama4", "llama4_text") and experts:
        shared = 1  # Llama 4's MoE layer adds one shared expert (Llama4TextMoe.shared_expert)
    return experts, per_token, shared


#: Keys a custom model may give besides :data:`CUSTOM_ARCH_FIELDS` (they only enter the
#: parameter count or come from a config.json).
_EXTRA_ARCH_KEYS = (
    "tie_word_embeddings",
    "qkv_bias",
    "q_lora_rank",
    "v_head_dim",
    "moe_layer_interval",
    "fp8_weight_block",
)

#: Every key of a custom model :func:`custom_model_arch` reads; any other is a misspelling.
CUSTOM_MODEL_KEYS = ("name", "config", *CUSTOM_ARCH_FIELDS, *_EXTRA_ARCH_KEYS)


def custom_arch_errors(
    fields: Mapping[str, Any], *, unknown: frozenset[str] = frozenset()
) -> dict[str, str]:
    """Every inconsistency of a custom architecture at once, ``{field: message}`` (empty when
    none): experts per token above the experts, or one without the other; KV heads that do not
    divide the attention heads; active parameters above the total; MLA's two fields apart;
    first dense layers or sliding layers beyond the layers. Fields not given are not checked.
    ``unknown``: fields whose value is not known (typed and refused, or left to a config.json
    that could not be read): a check that reads one of them is skipped, not run on a value
    the user did not mean (:func:`custom_model_errors`).
    """
    errors: dict[str, str] = {}

    def known(*names: str) -> bool:
        return unknown.isdisjoint(names)

    def number(name: str) -> int | None:
        value = fields.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    if known("num_experts", "experts_per_token"):
        errors.update(_experts_errors(number("num_experts"), number("experts_per_token")))
    heads, kv_heads = number("num_attention_heads"), number("num_kv_heads")
    if known("num_attention_heads", "num_kv_heads") and heads and kv_heads and heads % kv_heads:
        errors["num_kv_heads"] = (
            f"{kv_heads} KV heads do not divide the {heads} attention heads evenly."
        )
    total, active = number("total_params"), number("active_params")
    if known("total_params", "active_params") and total is not None and active is not None:
        if active > total:
            errors["total_params"] = (
                f"The total ({total:,}) is below the active parameters ({active:,})."
            )
    mla = ("kv_lora_rank", "qk_rope_head_dim")
    if known(*mla) and (number(mla[0]) is None) != (number(mla[1]) is None):
        missing = "qk_rope_head_dim" if number("kv_lora_rank") else "kv_lora_rank"
        errors[missing] = "Latent attention (MLA) needs both kv_lora_rank and qk_rope_head_dim."
    layers = number("num_layers")
    for name in ("first_k_dense_layers", "sliding_window_layers"):
        value = number(name)
        if known("num_layers", name) and layers and value is not None and value > layers:
            errors[name] = f"{value} is more than the {layers} layers."
    window = ("sliding_window_layers", "sliding_window_tokens")
    if known(*window) and number(window[0]) is not None and number(window[1]) is None:
        errors["sliding_window_tokens"] = "Sliding-window layers need the window's length."
    return errors


def _experts_errors(experts: int | None, per_token: int | None) -> dict[str, str]:
    """:func:`custom_arch_errors`' check of the routed experts and the experts per token."""
    if experts is not None and per_token is not None and per_token > experts:
        return {
            "experts_per_token": f"{per_token} experts per token is more than the {experts} "
            "experts."
        }
    if experts is not None and experts > 1 and per_token is None:
        return {"experts_per_token": "A mixture of experts needs its experts per token."}
    if per_token is not None and experts is None:
        return {"num_experts": "Experts per token needs the number of experts."}
    return {}


#: Fields :class:`ModelArch` takes only as positive whole numbers (when given): a config.json
#: may give 0 (its counts are checked only as whole numbers from 0, ``_check_whole_numbers``).
_POSITIVE_ARCH_FIELDS = (
    *(name for name in _POSITIVE_FIELDS if name not in ("total_params", "active_params")),
    *_OPTIONAL_POSITIVE_FIELDS,
)


def custom_config_fields(custom: Mapping[str, Any]) -> dict[str, Any] | None:
    """The architecture fields a custom model's ``config`` gives
    (:func:`arch_fields_from_hf_config`, those it leaves ``None`` left out), ``None`` without a
    config. ``config``: a dict or its JSON text. Raises :class:`SizingInputError` (field
    ``config``): ``invalid_json`` for unreadable text or text nested deeper than 64 levels;
    ``not_an_object`` for JSON that is no object (``null`` included: not read as "no config");
    ``not_finite`` for a NaN or an infinity anywhere in it (:func:`non_finite_paths`); the
    config reader's errors."""
    config = custom.get("config")
    if isinstance(config, str):
        try:
            config = load_json(config)  # bounded nesting: 5000 "[" was a RecursionError, a 500
        except ValueError as exc:  # TooDeep is one
            raise SizingInputError(
                f"the config.json is not valid JSON: {exc}", reason="invalid_json", field="config"
            ) from None
        if not isinstance(config, Mapping):  # pasted null: no config, and no fields either
            raise _config_not_an_object(config)
    bad = non_finite_paths(config)
    if bad:  # pasted text reads 1e999 and NaN as floats: never stored, never written back
        raise SizingInputError(
            non_finite_message(bad, "the config.json"), reason="not_finite", field="config"
        )
    if config is None:
        return None
    return {k: v for k, v in arch_fields_from_hf_config(config).items() if v is not None}


def custom_model_errors(custom: Mapping[str, Any], *, refused: frozenset[str]) -> dict[str, str]:
    """The faults a custom model shows beside the fields of it already refused, ``{field:
    message}`` (empty when none): what can be told without the values the user meant there.

    ``custom``: the fields that passed (``config`` and :data:`CUSTOM_ARCH_FIELDS`, ``None``
    where not given); ``refused``: the names of those that did not (a typed ``hidden_size`` of
    -3). The rule - no check runs on a value the user did not give:

    - the config.json alone: its reading (:func:`custom_config_fields`: unreadable JSON, no
      object, state-space or linear-attention layers, a count that is no whole number, a
      required key missing, per-layer lists of another length, an MoE step of 0, a KV
      quantisation not costed), each independent of the typed fields, under ``config``;
    - the architecture the config and the typed fields that passed make (a typed field over
      the config's): :func:`custom_arch_errors`, each check only when none of the fields it
      reads is unknown - refused, or, when the config could not be read, neither typed nor
      counted (the config would have given it); and a count of 0 that :class:`ModelArch`
      refuses (only a config gives one: typed counts are at least 1), in its words.

    What needs the whole architecture (the parameter count: routed experts outweighing the
    total) waits for every field to pass: :func:`custom_model_arch` then tells it."""
    errors: dict[str, str] = {}
    config_read = "config" not in refused
    config_fields: dict[str, Any] = {}
    if config_read:
        try:
            config_fields = custom_config_fields(custom) or {}
        except SizingInputError as exc:
            errors["config"] = exc.message
            config_read = False
    typed = {
        name: custom[name]
        for name in CUSTOM_ARCH_FIELDS
        if name not in refused and custom.get(name) is not None
    }
    unknown = set(refused)
    if not config_read:
        unknown.update(name for name in CUSTOM_ARCH_FIELDS if name not in typed)
    fields = {**config_fields, **typed}
    unknown_now = frozenset(unknown)
    for name in _POSITIVE_ARCH_FIELDS:
        value = fields.get(name)
        if name not in unknown_now and isinstance(value, int) and value < 1:
            errors.setdefault(name, f"{name} must be a positive integer, got {value!r}")
    for name, message in custom_arch_errors(fields, unknown=unknown_now).items():
        errors.setdefault(name, message)
    return errors


#: Typed custom fields that may be 0 (no shared expert, no dense layer, no sliding layer); the
#: other :data:`CUSTOM_ARCH_FIELDS` are counts of at least 1 (the page's inputs too).
ZERO_ALLOWED_ARCH_FIELDS = frozenset(
    {"num_shared_experts", "first_k_dense_layers", "sliding_window_layers"}
)


def _refuse_bad_typed_fields(custom: Mapping[str, Any]) -> None:
    """Raise :class:`SizingInputError` (reason ``not_positive``, ``errors`` every field at
    fault) when a typed field of :data:`CUSTOM_ARCH_FIELDS` is no whole number of at least 1
    (0 for :data:`ZERO_ALLOWED_ARCH_FIELDS`): the field itself, and beside it what the rest shows
    without it (:func:`custom_model_errors`: the config.json's own faults, the checks that do
    not read a refused field), as the page and the API answer. Without this, a typed
    ``hidden_size`` of -3 over a config.json with 5 KV heads of 32 named only the KV heads."""
    refused = {}
    for name in CUSTOM_ARCH_FIELDS:
        value = custom.get(name)
        if value is None:
            continue
        low = 0 if name in ZERO_ALLOWED_ARCH_FIELDS else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            kind = "a positive integer" if low else "a whole number from 0"
            refused[name] = f"{name} must be {kind}, got {value!r}"
    if not refused:
        return
    passed = {key: value for key, value in custom.items() if key not in refused}
    errors = dict(refused)
    for name, message in custom_model_errors(passed, refused=frozenset(refused)).items():
        errors.setdefault(name, message)
    first = next(iter(errors))
    raise SizingInputError(errors[first], reason="not_positive", field=first, errors=errors)


def custom_model_arch(custom: Mapping[str, Any], *, id: str = "custom") -> ModelArch:
    """A custom architecture from its fields (:data:`CUSTOM_ARCH_FIELDS`, ``name``) and/or a
    Hugging Face ``config`` (a dict, or its JSON text): the config's fields
    (:func:`arch_fields_from_hf_config`), then the fields given explicitly on top.

    Raises :class:`SizingInputError`: a typed field that is no whole number of at least 1
    (``not_positive``, with what the rest shows beside it, :func:`_refuse_bad_typed_fields`);
    the config's own errors (field ``config``, :func:`custom_config_fields`); ``missing``
    (field named) for a required field that neither gives; ``inconsistent`` with ``errors``
    ``{field: message}`` for every inconsistency :func:`custom_arch_errors` finds (``field`` the
    first of them).
    """
    if not isinstance(custom, Mapping):
        raise SizingInputError(
            "a custom model is an object of architecture fields", reason="not_an_object",
            field="custom_model",
        )  # fmt: skip
    _refuse_bad_typed_fields(custom)
    fields: dict[str, Any] = custom_config_fields(custom) or {}
    for key in (*CUSTOM_ARCH_FIELDS, *_EXTRA_ARCH_KEYS, "name"):
        if custom.get(key) is not None:
            fields[key] = custom[key]
    missing = {
        key: f"{key} is required for a custom architecture (or give its config.json)"
        for key in REQUIRED_ARCH_FIELDS
        if fields.get(key) is None
    }
    if missing:
        first = next(iter(missing))
        raise SizingInputError(missing[first], reason="missing", field=first, errors=missing)
    errors = custom_arch_errors(fields)
    if errors:
        first = next(iter(errors))
        raise SizingInputError(errors[first], reason="inconsistent", field=first, errors=errors)
    name = str(fields.pop("name", "") or "Custom model").strip()[:80] or "Custom model"
    max_context = fields.pop("max_context_tokens")
    arch = {key: fields[key] for key in fields if key in (*CUSTOM_ARCH_FIELDS, *_EXTRA_ARCH_KEYS)}
    # The checkpoint's KV-cache dtype comes only from its config (hf_kv_cache_dtype), cited so.
    kv_dtype = fields.get("kv_cache_dtype")
    sources = {}
    if kv_dtype is not None:
        sources["kv_cache_dtype"] = (
            "the config.json given: kv_cache_quant_algo / kv_cache_scheme of its quantization block"
        )
    return ModelArch.from_config(
        id=id,
        name=name,
        max_context_tokens=max_context,
        kv_cache_dtype=kv_dtype,
        sources=sources,
        **arch,
    )
