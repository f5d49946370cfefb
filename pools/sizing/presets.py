"""Model architectures for sizing: the shipped presets (``models.json``) and custom ones.

Each preset's fields come from the model's published ``config.json`` on its Hugging Face hub page,
cited per field in ``models.json``. Preset ids are the model ids of the shared sizing dataset
(``shared/sizing/sizing_dataset.json``), e.g. ``llama3_8b``, so measurements and presets line up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pools.sizing import SizingInputError

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
    sequence (Mistral-7B-v0.1: 4,096). ``sources`` maps a field name to its citation.

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

    def __post_init__(self) -> None:
        for name in _POSITIVE_FIELDS:
            _require_positive_int(name, getattr(self, name))
        for name in ("num_experts", "experts_per_token", "sliding_window_tokens"):
            if getattr(self, name) is not None:
                _require_positive_int(name, getattr(self, name))
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
                "active_params cannot exceed total_params",
                reason="inconsistent",
                field="active_params",
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
        tie_word_embeddings: bool = False,
        qkv_bias: bool = False,
        sliding_window_tokens: int | None = None,
        hf_repo: str = "",
        sources: dict[str, str] | None = None,
    ) -> ModelArch:
        """The architecture of a Llama-style decoder from its config fields, with its parameters
        counted by :func:`model_params_from_config` — the one way presets and custom models are
        built.

        A given ``total_params`` (a published count) is kept: a dense model's active parameters
        are then the total, a mixture of experts' are counted from the config and capped at the
        total. ``qkv_bias`` only enters the count. Raises :class:`SizingInputError` as the
        class does for an inconsistent config.
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
        }
        active_params = total_params
        if total_params is None:
            total_params, active_params = model_params_from_config(**config, qkv_bias=qkv_bias)
        elif num_experts:
            _, active_params = model_params_from_config(**config, qkv_bias=qkv_bias)
            active_params = min(active_params, total_params)
        return cls(
            id=id,
            name=name,
            hf_repo=hf_repo,
            max_context_tokens=max_context_tokens,
            total_params=total_params,
            active_params=active_params,
            sliding_window_tokens=sliding_window_tokens,
            sources=dict(sources or {}),
            **config,
        )

    @property
    def is_moe(self) -> bool:
        """True for a mixture of experts (``num_experts`` > 1)."""
        return self.num_experts is not None and self.num_experts > 1

    @property
    def expert_params(self) -> int:
        """Parameters in the routed experts' gated MLPs, all layers: L × E × 3 × h × I.

        0 for a dense model (its MLP is counted as shared, always-read weights).
        """
        if not self.is_moe:
            return 0
        return self.num_layers * self.num_experts * 3 * self.hidden_size * self.intermediate_size

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
    attention = hidden_size * q_width + 2 * hidden_size * kv_width + q_width * hidden_size
    if qkv_bias:
        attention += q_width + 2 * kv_width
    mlp_one = 3 * hidden_size * intermediate_size
    experts = num_experts or 1
    active_experts = experts_per_token or 1
    router = hidden_size * experts if num_experts else 0
    norms = 2 * hidden_size
    embeddings = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    total = embeddings + num_layers * (attention + experts * mlp_one + router + norms) + hidden_size
    active = (
        embeddings
        + num_layers * (attention + active_experts * mlp_one + router + norms)
        + hidden_size
    )
    return total, active


def _preset_from_entry(entry: dict[str, Any]) -> ModelArch:
    # models.json keeps config.json's names for the context and the sliding window.
    config = dict(entry["config"])
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
