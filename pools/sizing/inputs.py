"""An estimate's inputs: one DRF serializer for the API, the page and the service.

:class:`SizingInputsSerializer` declares every input with its default and bounds (the API's
OpenAPI schema is generated from it); :func:`sizing_inputs_clean` runs it on a JSON object or
the page's form and returns the inputs complete, or raises :class:`InvalidInput` naming every
field at fault at once (one message per field; nested fields as ``custom_model.<name>`` and
``prices.<slug>``). What only the model can tell (a consistent custom architecture, the
context within the model's maximum, a sane peak) is checked after the fields, by the same
arithmetic the plan uses.

Numbers may be JSON numbers or numeric strings (``"1,000"`` reads 1000); a blank string is "not
given" (the default), except for the latency targets, where blank means "not checked".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from rest_framework import serializers
from rest_framework.settings import api_settings

from pools.errors import InvalidInput
from pools.inventory.models import GpuModel
from pools.sizing import SizingInputError
from pools.sizing.demand import (
    INPUT_WEIGHT,
    Demand,
    demand_from_output_rate,
    demand_from_traffic,
)
from pools.sizing.engines import ENGINE_PROFILES, engine_profile
from pools.sizing.memory import KV_CACHE_DTYPE_NAMES, kv_cache_bits, precision_parse
from pools.sizing.plan import (
    MAX_DRAFT_TOKENS,
    MAX_IMAGE_SIDE_PX,
    MULTIMODAL_DEFAULTS,
    speculation_from_fields,
    visual_load_from_fields,
)
from pools.sizing.presets import (
    CUSTOM_ARCH_FIELDS,
    REQUIRED_ARCH_FIELDS,
    ModelArch,
    custom_model_arch,
    model_presets,
)
from pools.sizing.throughput import Speculation
from pools.sizing.vision import VisualLoad

#: The seeds' per-card output rate: "7B, FP16, vLLM, A100/H100: conservatively 50-80 tok/s per
#: card; take 60" (seeds/004, token-demand sizing). Shown beside the modelled rate, never used
#: for the modelled cards.
SEED_PER_CARD_TOK_S = 60.0

#: Precisions offered on the page (the core accepts more spellings, see ``precision_parse``).
WEIGHT_PRECISIONS = (
    "BF16",
    "FP16",
    "FP8",
    "INT8",
    "NVFP4",
    "MXFP4",
    "INT4-AWQ",
    "INT4-GPTQ",
    "W8A16",
)
#: ``auto``: the checkpoint's own KV dtype where its config names one, else 16-bit
#: (:func:`pools.sizing.memory.kv_cache_dtype_for`).
KV_PRECISIONS = ("auto", "FP16", "BF16", "FP8", "INT8")

DEMAND_KINDS = {
    "output_rate": "Peak output tokens per second",
    "traffic": "Requests per day and a peak window",
    "concurrency": "Sequences in flight at once",
}
#: The figure each demand kind is given by; the other kinds' figures are ignored.
DEMAND_FIGURES = {
    "output_rate": "output_tok_s",
    "traffic": "requests_per_day",
    "concurrency": "concurrency",
}

#: Custom architecture fields: (name, required when no config.json is given). ``total_params``
#: / ``active_params`` blank = counted from the config; the MoE, MLA and sliding-window fields
#: blank = dense, grouped-query attention, full attention on every layer.
CUSTOM_MODEL_FIELDS = tuple((name, name in REQUIRED_ARCH_FIELDS) for name in CUSTOM_ARCH_FIELDS)

#: Custom fields that may be 0 (the others are counts of at least 1).
ZERO_ALLOWED_ARCH_FIELDS = frozenset(
    {"num_shared_experts", "first_k_dense_layers", "sliding_window_layers"}
)

# Bounds that turn typos into field errors before the arithmetic sees them.
MAX_TOKENS = 10_000_000
MAX_CONCURRENCY = 1_000_000
#: Largest TP, PP or EP degree the inputs take: the 72 GPUs of an NVL72 NVLink domain.
MAX_PARALLEL = 72
MAX_TARGET_MS = 3_600_000
MAX_PRICE = Decimal("100000")
MAX_ARCH_VALUE = 10**13

#: Default TTFT target, ms: seeds/000 section 4.2 "TTFT ... usually kept within 1 second"
#: (通常要求控制在1秒以内); TPOT "generally under 50 ms" gives the TPOT default.
TTFT_TARGET_MS = 1000.0
TPOT_TARGET_MS = 50.0

#: Shares of the peak the page offers beside 100 %: seeds/004 section 2.3 "let the pool carry
#: 85 % of the peak; the other 15 % is queued or served by cheaper standby capacity"
#: (让算力池承载85%的峰值即可) and "keep a 30 % buffer of capacity for sudden spikes"
#: (预留30%的缓冲算力).
SEED_SIZED_SHARE = 0.85
SEED_BUFFER_SHARE = 0.30

#: The speculative-decoding inputs (000 §3.3), as the plan's request fields name them.
SPECULATION_INPUTS = (
    "speculative_draft_tokens",
    "speculative_acceptance_rate",
    "speculative_draft_cost_ratio",
    "speculative_draft_model",
)

#: Inputs where an explicit blank or ``null`` means "none" (not checked), not "the default".
NULLABLE = frozenset({"tpot_target_ms", "ttft_target_ms"})


def is_blank(value: Any) -> bool:
    """``None`` or a string of spaces: "not given"."""
    return value is None or (isinstance(value, str) and not value.strip())


def to_number(value: Any) -> Decimal | None:
    """A JSON number or numeric string (commas as thousands separators) as a finite Decimal;
    ``None`` when it is neither (booleans, NaN and infinities included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            number = Decimal(value.strip().replace(",", ""))
        except InvalidOperation:
            return None
        return number if number.is_finite() else None
    return None


# ---------------------------------------------------------------------------------------------
# Fields


class WholeNumberField(serializers.Field):
    """A whole number in ``[low, high]`` from a JSON number or numeric string (``int``)."""

    default_error_messages = {
        "required": "This field is required.",
        "null": "This field is required.",
        "invalid": "Enter a whole number.",
        "low": "Must be at least {low:,}.",
        "high": "Must be at most {high:,}.",
    }

    def __init__(self, *, low: int = 1, high: int | None = None, **kwargs):
        self.low, self.high = low, high
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        number = to_number(data)
        if number is None or number != number.to_integral_value():
            self.fail("invalid")
        if number < self.low:
            self.fail("low", low=self.low)
        if self.high is not None and number > self.high:
            self.fail("high", high=self.high)
        return int(number)

    def to_representation(self, value: int) -> int:
        return value


class BoundedNumberField(serializers.Field):
    """A number in an interval, each end open or closed (``float``): ``(0, 1e+12]`` by default
    ``low_open=True, high_open=False``; the error names the interval in that notation."""

    default_error_messages = {
        "required": "This field is required.",
        "null": "This field is required.",
        "invalid": "Enter a number.",
        "interval": "Must be in {interval}.",
    }

    def __init__(self, *, low: float, high: float, low_open=True, high_open=False, **kwargs):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        number = to_number(data)
        if number is None:
            self.fail("invalid")
        result = float(number)
        too_low = result <= self.low if self.low_open else result < self.low
        too_high = result >= self.high if self.high_open else result > self.high
        if too_low or too_high:
            lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
            self.fail("interval", interval=f"{lo}{self.low:g}, {self.high:g}{hi}")
        return result

    def to_representation(self, value: float) -> float:
        return value


class ParsedChoiceField(serializers.Field):
    """One of ``allowed`` (what the page offers), or any spelling ``parse`` accepts; the core's
    own message when it refuses. Returns the value stripped."""

    default_error_messages = {"invalid": "Choose one of {allowed}."}

    def __init__(self, *, allowed, parse, **kwargs):
        self.allowed, self.parse = tuple(allowed), parse
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or not data.strip():
            self.fail("invalid", allowed=", ".join(self.allowed))
        try:
            self.parse(data)
        except SizingInputError as exc:
            raise serializers.ValidationError(exc.message) from exc
        return data.strip()

    def to_representation(self, value: str) -> str:
        return value


class GpuModelSlugsField(serializers.Field):
    """GPU model slugs to compare (a list, or a string separated by commas or spaces); empty:
    every model. Returns them sorted, each once."""

    default_error_messages = {
        "invalid": "Give a list of GPU model slugs.",
        "unknown": "Unknown GPU models: {slugs}.",
    }

    def to_internal_value(self, data: Any) -> list[str]:
        if isinstance(data, str):
            data = [s for s in data.replace(",", " ").split() if s]
        if not isinstance(data, list | tuple) or not all(isinstance(s, str) for s in data):
            self.fail("invalid")
        unknown = sorted(set(data) - known_gpu_slugs(self))
        if unknown:
            self.fail("unknown", slugs=", ".join(unknown))
        return sorted(set(data))

    def to_representation(self, value: list[str]) -> list[str]:
        return value


class CardHourPricesField(serializers.Field):
    """``{GPU model slug: price per card-hour}`` (currency of the rate card), 0 to
    :data:`MAX_PRICE`; blank prices are left out. An unknown slug is an error of the field, a
    bad price an error of ``prices.<slug>``. Returns the prices as strings (exact decimals)."""

    default_error_messages = {
        "invalid": "Give prices as {{GPU model slug: price per card-hour}}.",
        "unknown": "Unknown GPU model {slug!r} in prices.",
        "price": f"A price per card-hour is 0 to {MAX_PRICE:,}.",
    }

    def to_internal_value(self, data: Any) -> dict[str, str]:
        if not isinstance(data, Mapping):
            self.fail("invalid")
        known = known_gpu_slugs(self)
        clean, errors = {}, {}
        for slug, value in data.items():
            if is_blank(value):
                continue
            price = to_number(value)
            if slug not in known:
                errors.setdefault(
                    api_settings.NON_FIELD_ERRORS_KEY,
                    [self.error_messages["unknown"].format(slug=slug)],
                )
            elif price is None or price < 0 or price > MAX_PRICE:
                errors[slug] = [self.error_messages["price"]]
            else:
                clean[slug] = str(price)
        if errors:
            raise serializers.ValidationError(errors)
        return clean

    def to_representation(self, value: dict[str, str]) -> dict[str, str]:
        return value


def known_gpu_slugs(field: serializers.Field) -> frozenset[str]:
    """The GPU model slugs in the database, read once per validation (kept on the root)."""
    root = field.root
    if not hasattr(root, "_known_gpu_slugs"):
        root._known_gpu_slugs = frozenset(GpuModel.objects.values_list("slug", flat=True))
    return root._known_gpu_slugs


def _arch_field(name: str) -> WholeNumberField:
    return WholeNumberField(
        low=0 if name in ZERO_ALLOWED_ARCH_FIELDS else 1,
        high=MAX_ARCH_VALUE,
        required=False,
        allow_null=True,
        default=None,
    )


class CustomModelSerializer(serializers.Serializer):
    """A custom architecture, as in a Hugging Face ``config.json`` (counts; ``head_dim`` in
    dimensions, ``max_context_tokens`` and ``sliding_window_tokens`` in tokens, ``total_params``
    / ``active_params`` in parameters), and/or ``config``: the config.json itself (an object,
    or its text pasted), read by :func:`pools.sizing.presets.arch_fields_from_hf_config`; fields
    given here override the config's. Without a config the first eight fields are required."""

    default_error_messages = {"invalid": "Give the custom architecture's fields."}

    name = serializers.CharField(required=False, allow_blank=True, default="Custom model")
    config = serializers.JSONField(required=False, allow_null=True, default=None)
    num_layers = _arch_field("num_layers")
    hidden_size = _arch_field("hidden_size")
    num_attention_heads = _arch_field("num_attention_heads")
    num_kv_heads = _arch_field("num_kv_heads")
    head_dim = _arch_field("head_dim")
    intermediate_size = _arch_field("intermediate_size")
    vocab_size = _arch_field("vocab_size")
    max_context_tokens = _arch_field("max_context_tokens")
    total_params = _arch_field("total_params")
    active_params = _arch_field("active_params")
    num_experts = _arch_field("num_experts")
    experts_per_token = _arch_field("experts_per_token")
    num_shared_experts = _arch_field("num_shared_experts")
    first_k_dense_layers = _arch_field("first_k_dense_layers")
    dense_intermediate_size = _arch_field("dense_intermediate_size")
    kv_lora_rank = _arch_field("kv_lora_rank")
    qk_rope_head_dim = _arch_field("qk_rope_head_dim")
    sliding_window_tokens = _arch_field("sliding_window_tokens")
    sliding_window_layers = _arch_field("sliding_window_layers")

    def validate_name(self, value: str) -> str:
        return (value or "Custom model").strip()[:80] or "Custom model"

    def validate(self, attrs: dict) -> dict:
        if attrs.get("config") is None:
            missing = {
                name: "Required for a custom architecture (or give its config.json)."
                for name in REQUIRED_ARCH_FIELDS
                if attrs.get(name) is None
            }
            if missing:
                raise serializers.ValidationError(missing)
        return attrs


class SizingInputsSerializer(serializers.Serializer):
    """An estimate's inputs. ``model``: a preset id (``qwen2_5_72b``) or ``custom`` with
    ``custom_model``; ``input_len`` / ``output_len``: tokens per request; ``demand_kind`` and
    its figure (``output_tok_s`` output tok/s at the peak, ``requests_per_day`` with
    ``peak_share`` (0, 1] of them in ``peak_hours`` (0, 24], or ``concurrency`` sequences in
    flight); ``prompt_cache_hit_rate`` [0, 1); ``input_weight`` (prefill cost of an input
    token against an output token, 0.5 from seeds/004); ``tpot_target_ms`` /
    ``ttft_target_ms`` (ms, ``null``: not checked); ``gpu_models`` (slugs; empty: all);
    ``only_free_capacity``; ``prices`` per card-hour; ``seed_per_card_tok_s`` (tok/s)."""

    model = serializers.CharField(
        error_messages={
            "required": "Choose a model preset, or 'custom' with its architecture.",
            "null": "Choose a model preset, or 'custom' with its architecture.",
        }
    )
    custom_model = CustomModelSerializer(required=False, allow_null=True, default=None)
    precision = ParsedChoiceField(allowed=WEIGHT_PRECISIONS, parse=precision_parse, default="BF16")
    kv_cache_dtype = ParsedChoiceField(
        allowed=KV_CACHE_DTYPE_NAMES, parse=kv_cache_bits, default="auto"
    )
    engine = ParsedChoiceField(allowed=ENGINE_PROFILES, parse=engine_profile, default="vllm")
    input_len = WholeNumberField(high=MAX_TOKENS)
    output_len = WholeNumberField(high=MAX_TOKENS)
    demand_kind = serializers.ChoiceField(
        choices=list(DEMAND_KINDS),
        default="output_rate",
        error_messages={"invalid_choice": f"Choose one of {', '.join(DEMAND_KINDS)}."},
    )
    output_tok_s = BoundedNumberField(low=0, high=1e12, required=False, default=None)
    requests_per_day = BoundedNumberField(low=0, high=1e15, required=False, default=None)
    concurrency = WholeNumberField(high=MAX_CONCURRENCY, required=False, default=None)
    peak_share = BoundedNumberField(low=0, high=1, default=1.0)
    peak_hours = BoundedNumberField(low=0, high=24, default=24.0)
    prompt_cache_hit_rate = BoundedNumberField(
        low=0, high=1, low_open=False, high_open=True, default=0.0
    )
    input_weight = BoundedNumberField(low=0, high=4, low_open=False, default=INPUT_WEIGHT)
    tpot_target_ms = BoundedNumberField(
        low=0, high=MAX_TARGET_MS, allow_null=True, default=TPOT_TARGET_MS
    )
    ttft_target_ms = BoundedNumberField(
        low=0, high=MAX_TARGET_MS, allow_null=True, default=TTFT_TARGET_MS
    )
    sized_share = BoundedNumberField(
        low=0,
        high=1,
        default=1.0,
        help_text="Share of the peak the cards are sized for (0, 1]; the seed's 0.85 leaves "
        "the top 15 % to queueing or standby capacity.",
    )
    buffer_share = BoundedNumberField(
        low=0,
        high=4,
        low_open=False,
        default=0.0,
        help_text="Extra capacity on top, as a share of the sized replicas [0, 4]; the seed "
        "keeps 0.30 for spikes.",
    )
    tp = WholeNumberField(
        high=MAX_PARALLEL,
        required=False,
        allow_null=True,
        default=None,
        help_text="Tensor-parallel degree per pipeline stage; empty: the cheapest that fits.",
    )
    pp = WholeNumberField(
        high=MAX_PARALLEL,
        default=1,
        help_text="Pipeline stages per replica (000 §4.1: TP inside the node, PP across nodes); "
        "a replica is TP x PP cards.",
    )
    ep = WholeNumberField(
        high=MAX_PARALLEL,
        required=False,
        allow_null=True,
        default=None,
        help_text="Expert-parallel degree (mixture of experts; divides TP and the experts).",
    )
    dp_attention = WholeNumberField(
        high=MAX_PARALLEL,
        required=False,
        allow_null=True,
        default=None,
        help_text="Attention data-parallel ranks (mixture of experts with EP = TP; divides TP): "
        "attention replicated per rank, each rank's KV holds only its own sequences, the "
        "experts exchange tokens all-to-all. Empty: none.",
    )
    nic_gbps = BoundedNumberField(
        low=0,
        high=1e5,
        allow_null=True,
        default=None,
        help_text="NIC rate per card, Gb/s, when a replica spans nodes; TP across nodes needs "
        "at least 400.",
    )
    speculative_draft_tokens = WholeNumberField(
        high=MAX_DRAFT_TOKENS,
        required=False,
        allow_null=True,
        default=None,
        help_text="Speculative decoding (000 §3.3): tokens the draft proposes per pass (gamma); "
        "empty: no speculation.",
    )
    speculative_acceptance_rate = BoundedNumberField(
        low=0,
        high=1,
        low_open=False,
        high_open=True,
        required=False,
        allow_null=True,
        default=None,
        help_text="Chance the target accepts a draft token (alpha), [0, 1).",
    )
    speculative_draft_cost_ratio = BoundedNumberField(
        low=0,
        high=1,
        low_open=False,
        required=False,
        allow_null=True,
        default=None,
        help_text="A draft step's time / a target step's (c), [0, 1]; empty with a draft model: "
        "its active parameters / the target's.",
    )
    speculative_draft_model = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="Preset id of a separate draft model (`llama3_8b` for `llama3_70b`): its "
        "weights and KV cache are counted on every card. Empty: no separate draft (n-gram, or "
        "an MTP / EAGLE head with the cost ratio given).",
    )
    images_per_request = WholeNumberField(
        low=0,
        high=10_000,
        default=0,
        help_text="Images per request (000 §6.3), for a vision-language model: each becomes "
        "visual input tokens, and the vision encoder's work runs before the prefill.",
    )
    image_width_px = WholeNumberField(
        high=MAX_IMAGE_SIDE_PX, default=1024, help_text="Width of an image or video frame, px."
    )
    image_height_px = WholeNumberField(
        high=MAX_IMAGE_SIDE_PX, default=1024, help_text="Height of an image or video frame, px."
    )
    video_seconds_per_request = BoundedNumberField(
        low=0,
        high=86_400,
        low_open=False,
        default=0.0,
        help_text="Seconds of video per request, sampled at video_fps frames per second.",
    )
    video_fps = BoundedNumberField(
        low=0, high=60, default=2.0, help_text="Video frames sampled per second (0, 60]."
    )
    gpu_models = GpuModelSlugsField(
        default=list, help_text='GPU model slugs, not names: `["h100_sxm", "l40s"]`; empty: all.'
    )
    only_free_capacity = serializers.BooleanField(default=False)
    prices = CardHourPricesField(default=dict)
    seed_per_card_tok_s = BoundedNumberField(low=0, high=1e6, default=SEED_PER_CARD_TOK_S)

    def to_internal_value(self, data):
        """The fields, and with their errors the figure the demand kind needs (so every field
        at fault is named at once)."""
        figure = DEMAND_FIGURES.get(data.get("demand_kind", "output_rate"))
        missing = {}
        if figure and data.get(figure) is None:
            missing[figure] = ["This field is required."]
        if data.get("model") == "custom" and data.get("custom_model") is None:
            missing["custom_model"] = [CustomModelSerializer.default_error_messages["invalid"]]
        try:
            clean = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({**missing, **exc.detail}) from exc
        if missing:
            raise serializers.ValidationError(missing)
        return clean

    def validate_model(self, value: str) -> str:
        if value != "custom" and value not in model_presets():
            raise serializers.ValidationError(
                f"Unknown model {value!r}; choose a preset or 'custom'."
            )
        return value

    def validate(self, attrs: dict) -> dict:
        """What only the model and the arithmetic can tell: a consistent architecture, the
        context within the model's maximum, sane traffic."""
        try:
            model = model_arch(attrs)
        except SizingInputError as exc:
            errors = exc.data.get("errors") or {exc.data.get("field"): exc.message}
            raise serializers.ValidationError(
                {
                    f"custom_model.{field}" if field else "custom_model": message
                    for field, message in errors.items()
                }
            ) from exc
        try:
            visual = visual_of(attrs, model)
        except SizingInputError as exc:
            raise serializers.ValidationError(
                {exc.data.get("field") or "images_per_request": exc.message}
            ) from exc
        context = attrs["input_len"] + attrs["output_len"] + (visual.tokens if visual else 0)
        if context > model.max_context_tokens:
            seen = f" (with {visual.tokens:,} visual tokens)" if visual else ""
            raise serializers.ValidationError(
                {
                    "input_len": f"Input + output = {context:,} tokens{seen} exceeds "
                    f"{model.name}'s maximum context of {model.max_context_tokens:,}."
                }
            )
        layout = _layout_errors(model, attrs)
        if layout:
            raise serializers.ValidationError(layout)
        try:
            speculation_of(attrs, model)
        except SizingInputError as exc:
            field = exc.data.get("field") or "speculative_draft_tokens"
            raise serializers.ValidationError({field: exc.message}) from exc
        try:
            demand_of(attrs)
        except SizingInputError as exc:
            field = exc.data.get("field") or "demand_kind"
            if field == "requests_per_day" and attrs["demand_kind"] == "output_rate":
                field = "output_tok_s"  # the core names the traffic field for any absurd peak
            raise serializers.ValidationError({field: exc.message}) from exc
        return attrs


def _layout_errors(model: ModelArch, attrs: Mapping[str, Any]) -> dict[str, str]:
    """Field errors of the parallel layout that hold on every GPU model: a TP not dividing the
    attention heads, more stages than layers, EP on a dense model or not dividing TP and the
    experts, attention DP without EP = TP. (Node-dependent checks - TP across nodes, the NIC -
    are the plan's, per GPU.)"""
    errors = {}
    tp, pp, ep = attrs.get("tp"), attrs.get("pp") or 1, attrs.get("ep")
    dp = attrs.get("dp_attention")
    if tp is not None and model.num_attention_heads % tp:
        errors["tp"] = f"TP {tp} does not divide {model.name}'s {model.num_attention_heads} heads."
    if pp > model.num_layers:
        errors["pp"] = f"{pp} stages is more than {model.name}'s {model.num_layers} layers."
    if ep is not None:
        if not model.is_moe:
            errors["ep"] = f"Expert parallelism needs a mixture of experts; {model.name} is dense."
        elif model.num_experts % ep or (tp is not None and tp % ep):
            errors["ep"] = f"EP {ep} must divide TP and {model.name}'s {model.num_experts} experts."
    if dp is not None and dp > 1:
        if not model.is_moe:
            errors["dp_attention"] = (
                f"Attention data parallelism needs a mixture of experts; {model.name} is dense."
            )
        elif ep is None or (tp is not None and (ep != tp or tp % dp)):
            errors["dp_attention"] = (
                "Attention data parallelism needs EP equal to TP, and its ranks must divide TP."
            )
    return errors


#: Every input with its default; ``None`` where the input is required (or, for the latency
#: targets, not checked). Read off the serializer, so the two cannot disagree.
DEFAULT_INPUTS: dict[str, Any] = {
    name: (field.get_default() if not field.required else None)
    for name, field in SizingInputsSerializer().fields.items()
}


def _given(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The keys the caller gave a value: blanks left out (they take the default), the latency
    targets' blanks kept as ``None``, the other demand kinds' figures and a preset's
    ``custom_model`` ignored."""
    data = {
        k: (None if is_blank(v) else v) for k, v in raw.items() if not is_blank(v) or k in NULLABLE
    }
    figure = DEMAND_FIGURES.get(data.get("demand_kind", "output_rate"))
    for other in set(DEMAND_FIGURES.values()) - {figure}:
        data.pop(other, None)
    if data.get("model") != "custom":
        data.pop("custom_model", None)
    elif isinstance(data.get("custom_model"), Mapping):
        # A blank architecture field is "not given" as a top-level one is: the page sends the
        # MoE / MLA / sliding-window fields blank for a dense model (issue 34).
        data["custom_model"] = {k: v for k, v in data["custom_model"].items() if not is_blank(v)}
    return data


def _flat(detail, prefix: str = "") -> dict[str, str]:
    """DRF's nested error detail as ``{"field": message}``, one message per field; a nested
    field as ``parent.child``, a nested non-field error under the parent's name."""
    flat: dict[str, str] = {}
    for key, value in detail.items():
        name = prefix if key == api_settings.NON_FIELD_ERRORS_KEY and prefix else key
        if prefix and name != prefix:
            name = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            for inner, message in _flat(value, name).items():
                flat.setdefault(inner, message)
        else:
            messages = value if isinstance(value, list) else [value]
            flat.setdefault(name, str(messages[0]))
    return flat


def sizing_inputs_clean(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check an estimate's inputs (the keys of :class:`SizingInputsSerializer`; unknown keys
    are ignored) and return them complete: every key of :data:`DEFAULT_INPUTS`, the figures of
    the other demand kinds ``None``, ``custom_model`` ``None`` for a preset.

    Raises :class:`InvalidInput` with ``errors`` ``{field: message}`` naming every field at
    fault (custom fields as ``custom_model.<name>``, prices as ``prices.<slug>``).
    """
    if not isinstance(raw, Mapping):
        raise InvalidInput("The estimate's inputs must be a JSON object.", errors={})
    serializer = SizingInputsSerializer(data=_given(raw))
    if not serializer.is_valid():
        raise InvalidInput("The estimate has invalid inputs.", errors=_flat(serializer.errors))
    clean = dict(serializer.validated_data)
    if clean["custom_model"] is not None:
        clean["custom_model"] = dict(clean["custom_model"])
    for other in set(DEMAND_FIGURES.values()) - {DEMAND_FIGURES[clean["demand_kind"]]}:
        clean[other] = None
    return clean


# ---------------------------------------------------------------------------------------------
# Clean inputs read as the core's types


def model_arch(inputs: Mapping[str, Any]) -> ModelArch:
    """The architecture named by clean inputs (a preset, or the custom fields and config.json,
    :func:`pools.sizing.presets.custom_model_arch`; parameters left blank are counted from the
    config). Raises :class:`SizingInputError` for an inconsistent config (``errors`` names
    every field at fault)."""
    if inputs["model"] != "custom":
        return model_presets()[inputs["model"]]
    return custom_model_arch(inputs["custom_model"])


def visual_of(inputs: Mapping[str, Any], model: ModelArch) -> VisualLoad | None:
    """The visual load of clean inputs' images and video (``None``: none;
    :func:`pools.sizing.plan.visual_load_from_fields`). Raises :class:`SizingInputError`
    naming the field at fault (a text-only model: ``images_per_request``)."""
    return visual_load_from_fields({name: inputs.get(name) for name in MULTIMODAL_DEFAULTS}, model)


def speculation_of(inputs: Mapping[str, Any], model: ModelArch) -> Speculation | None:
    """The speculative decoding clean inputs ask for (``None``: none), with the draft model's
    preset (:func:`pools.sizing.plan.speculation_from_fields`). Raises
    :class:`SizingInputError` naming the field at fault."""
    return speculation_from_fields(
        {name: inputs.get(name) for name in SPECULATION_INPUTS},
        presets=model_presets(),
        target=model,
    )


def demand_of(inputs: Mapping[str, Any]) -> Demand | None:
    """The token demand clean inputs describe (:mod:`pools.sizing.demand`), or ``None`` for a
    fixed concurrency. Raises :class:`SizingInputError` for a peak beyond any deployment."""
    common = {
        "input_tokens": inputs["input_len"],
        "output_tokens": inputs["output_len"],
        "input_weight": inputs["input_weight"],
        "prompt_cache_hit_rate": inputs["prompt_cache_hit_rate"],
    }
    if inputs["demand_kind"] == "output_rate":
        return demand_from_output_rate(output_tok_s=inputs["output_tok_s"], **common)
    if inputs["demand_kind"] == "traffic":
        return demand_from_traffic(
            requests_per_day=inputs["requests_per_day"],
            peak_share=inputs["peak_share"],
            peak_hours=inputs["peak_hours"],
            **common,
        )
    return None
