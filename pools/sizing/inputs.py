"""An estimate's inputs, checked in plain Python for the API and the page alike.

:data:`INPUTS` declares every input with its default and bounds (the API module builds the
OpenAPI schema's serializer from it, :mod:`pools.sizing.api`); :func:`sizing_inputs_clean`
checks a JSON object or the page's form against it and returns the inputs complete, or raises
:class:`InvalidInput` naming every field at fault at once (one message per field; nested
fields as ``custom_model.<name>`` and ``prices.<slug>``). What only the model can tell (a
consistent custom architecture, the context within the model's maximum, a sane peak) is
checked by the same arithmetic the plan uses, in the same answer: each such check as soon as
the inputs it reads have passed, so one request is told every fault at once.

Numbers may be JSON numbers or numeric strings (``"1,000"`` reads 1000); a blank string is "not
given" (the default), except for the latency targets, where blank means "not checked".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import Any

from pools.common.errors import InvalidInput
from pools.inventory.models import GpuModel
from pools.inventory.services.gpu_models import GpuModelResolver
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
    MAX_HF_COUNT,
    REQUIRED_ARCH_FIELDS,
    ZERO_ALLOWED_ARCH_FIELDS,
    ModelArch,
    custom_model_arch,
    custom_model_errors,
    model_presets,
    non_finite_message,
    non_finite_paths,
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
#: A kind that is none of these, in the API's words (the page words it by the labels).
DEMAND_KIND_REFUSED = f"Choose one of {', '.join(DEMAND_KINDS)}."
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

# Bounds that turn typos into field errors before the arithmetic sees them.
MAX_TOKENS = 10_000_000
MAX_CONCURRENCY = 1_000_000
#: Largest TP, PP or EP degree the inputs take: the 72 GPUs of an NVL72 NVLink domain.
MAX_PARALLEL = 72
MAX_TARGET_MS = 3_600_000
MAX_PRICE = Decimal("100000")
MAX_ARCH_VALUE = MAX_HF_COUNT  # 10**13, a config.json's counts take the same

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
# Inputs: what each takes, its default and its bounds (pools.sizing.api describes them to the
# OpenAPI schema; the checking is here, for the API and the page alike)

REQUIRED = "This field is required."
NOT_NULL = "This field may not be null."
CUSTOM_MODEL_MISSING = "Give the custom architecture's fields."
#: What a boolean input takes: the spellings DRF's ``BooleanField`` accepts
#: (rest_framework/fields.py, ``BooleanField.TRUE_VALUES`` / ``FALSE_VALUES``), so the API reads
#: ``"yes"`` / ``"off"`` / ``1`` as it always has.
TRUE_VALUES = frozenset(
    {"t", "T", "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "1", 1}
)  # 1 stands for True too (1 == True)
FALSE_VALUES = frozenset(
    {"f", "F", "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "0", 0}
)  # 0 stands for 0.0 and False


class FieldError(Exception):
    """An input refused: ``detail`` is its message, or for a group (the custom architecture, the
    prices) ``{part: message}`` with ``""`` for the group as a whole."""

    def __init__(self, detail: str | dict[str, Any]):
        super().__init__(detail)
        self.detail = detail


class Known:
    """What the database tells about inputs, read at most once per check: the GPU model slugs,
    and the names they answer to (read only when an input is no slug)."""

    @cached_property
    def gpu_slugs(self) -> frozenset[str]:
        return frozenset(GpuModel.objects.values_list("slug", flat=True))

    @cached_property
    def gpu_names(self) -> GpuModelResolver:
        return GpuModelResolver.load()


@dataclass(frozen=True, kw_only=True)
class Input:
    """One input. ``required``: no default; ``nullable``: ``None`` is a value (not checked);
    ``default``: the value when absent (a callable makes a fresh one); ``help_text``: for the
    schema; ``then``: run on the clean value (and the default), may tidy it or raise
    :class:`FieldError`; ``required_message`` / ``null_message``: the refusals of an absent
    or ``None`` value."""

    required: bool = False
    nullable: bool = False
    default: Any = None
    help_text: str = ""
    then: Callable[[Any], Any] | None = None
    required_message: str = REQUIRED
    null_message: str = NOT_NULL

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else self.default

    def clean(self, value: Any, known: Known) -> Any:
        """The value clean, or :class:`FieldError`. ``value`` is neither absent nor ``None``."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class WholeNumber(Input):
    """A whole number in ``[low, high]`` from a JSON number or numeric string (``int``)."""

    low: int = 1
    high: int | None = None
    null_message: str = REQUIRED

    def clean(self, value: Any, known: Known) -> int:
        number = to_number(value)
        if number is None or number != number.to_integral_value():
            raise FieldError("Enter a whole number.")
        if number < self.low:
            raise FieldError(f"Must be at least {self.low:,}.")
        if self.high is not None and number > self.high:
            raise FieldError(f"Must be at most {self.high:,}.")
        return int(number)


@dataclass(frozen=True, kw_only=True)
class BoundedNumber(Input):
    """A number in an interval, each end open or closed (``float``): ``(0, 1e+12]`` by default
    ``low_open=True, high_open=False``; the refusal names the interval in that notation."""

    low: float
    high: float
    low_open: bool = True
    high_open: bool = False
    null_message: str = REQUIRED

    def clean(self, value: Any, known: Known) -> float:
        number = to_number(value)
        if number is None:
            raise FieldError("Enter a number.")
        result = float(number)
        too_low = result <= self.low if self.low_open else result < self.low
        too_high = result >= self.high if self.high_open else result > self.high
        if too_low or too_high:
            lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
            raise FieldError(f"Must be in {lo}{self.low:g}, {self.high:g}{hi}.")
        return result


@dataclass(frozen=True, kw_only=True)
class ParsedChoice(Input):
    """One of ``allowed`` (what the page offers), or any spelling ``parse`` accepts; the core's
    own message when it refuses. The value stripped."""

    allowed: tuple[str, ...]
    parse: Callable[[str], Any]

    def clean(self, value: Any, known: Known) -> str:
        if not isinstance(value, str) or not value.strip():
            raise FieldError(f"Choose one of {', '.join(self.allowed)}.")
        try:
            self.parse(value)
        except SizingInputError as exc:
            raise FieldError(exc.message) from exc
        return value.strip()


@dataclass(frozen=True, kw_only=True)
class Choice(Input):
    """One of ``choices`` exactly (a value's ``str`` is compared); ``message`` when not."""

    choices: tuple[str, ...]
    message: str

    def clean(self, value: Any, known: Known) -> str:
        if str(value) not in self.choices:
            raise FieldError(self.message)
        return str(value)


@dataclass(frozen=True, kw_only=True)
class Text(Input):
    """A string (a number is taken as its digits), stripped; blank only if ``allow_blank``."""

    allow_blank: bool = False

    def clean(self, value: Any, known: Known) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise FieldError("Not a valid string.")
        text = str(value).strip()
        if not text and not self.allow_blank:
            raise FieldError("This field may not be blank.")
        return text


@dataclass(frozen=True, kw_only=True)
class Boolean(Input):
    """``true`` / ``false`` in any spelling of :data:`TRUE_VALUES` / :data:`FALSE_VALUES`."""

    def clean(self, value: Any, known: Known) -> bool:
        try:
            if value in TRUE_VALUES:
                return True
            if value in FALSE_VALUES:
                return False
        except TypeError:  # a list or an object: unhashable
            pass
        raise FieldError("Must be a valid boolean.")


@dataclass(frozen=True, kw_only=True)
class Json(Input):
    """Any JSON value (an object, or text to be read later), kept as given. A NaN or an
    infinity anywhere in it is refused naming where (:func:`non_finite_paths`: a number such
    as ``1e999`` arrives as infinity, which the database's JSON refuses); ``what`` names the
    value in that refusal."""

    what: str = "The value"

    def clean(self, value: Any, known: Known) -> Any:
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise FieldError("Value must be valid JSON.") from exc
        bad = non_finite_paths(value)
        if bad:
            raise FieldError(non_finite_message(bad, self.what))
        return value


@dataclass(frozen=True, kw_only=True)
class GpuModelSlugs(Input):
    """GPU model slugs to compare (a list, or a string separated by commas or spaces); empty:
    every model. Sorted, each once. In a list, an item may also be a name the model answers to
    - the name nvidia-smi prints, a Kubernetes label value, a Slurm GRES type - matched as the
    inventory matches it (``GpuModelResolver``; ``manage.py estimate`` takes the same); a name
    several SKUs share (``NVIDIA H100``) is refused naming them, so the caller chooses."""

    def clean(self, value: Any, known: Known) -> list[str]:
        if isinstance(value, str):
            value = [s for s in value.replace(",", " ").split() if s]
        if not isinstance(value, list | tuple) or not all(isinstance(s, str) for s in value):
            raise FieldError("Give a list of GPU model slugs.")
        slugs, unknown, ambiguous = set(), [], []
        for item in value:
            if item in known.gpu_slugs:
                slugs.add(item)
                continue
            found = known.gpu_names.match(item)
            if found.gpu_model is not None:
                slugs.add(found.gpu_model.slug)
            elif found.candidates:
                ambiguous.append(
                    f"'{item}' names several GPU models: {', '.join(found.candidates)}; "
                    "choose one of them."
                )
            else:
                unknown.append(item)
        if ambiguous:
            raise FieldError(" ".join(ambiguous))
        if unknown:
            raise FieldError(f"Unknown GPU models: {', '.join(sorted(unknown))}.")
        return sorted(slugs)


@dataclass(frozen=True, kw_only=True)
class CardHourPrices(Input):
    """``{GPU model slug: price per card-hour}`` (currency of the rate card), 0 to
    :data:`MAX_PRICE`; blank prices are left out. An unknown slug is a refusal of the whole
    input (the first one named), a bad price one of ``prices.<slug>``. Prices as strings
    (exact decimals)."""

    def clean(self, value: Any, known: Known) -> dict[str, str]:
        if not isinstance(value, Mapping):
            raise FieldError("Give prices as {GPU model slug: price per card-hour}.")
        clean, errors = {}, {}
        for slug, given in value.items():
            if is_blank(given):
                continue
            price = to_number(given)
            if slug not in known.gpu_slugs:
                errors.setdefault("", f"Unknown GPU model {slug!r} in prices.")
            elif price is None or price < 0 or price > MAX_PRICE:
                errors[slug] = f"A price per card-hour is 0 to {MAX_PRICE:,}."
            else:
                clean[slug] = str(price)
        if errors:
            raise FieldError(errors)
        return clean


@dataclass(frozen=True, kw_only=True)
class Group(Input):
    """An object of inputs ``parts``, then ``check(clean, refused)`` on the parts that passed
    (``refused``: the names of those that did not), ``{part: message}`` of what only the whole
    can tell, empty when sound; both in one refusal. ``message`` when it is no object.
    ``name`` and ``description``: for the schema (``CustomModel``)."""

    name: str
    parts: Mapping[str, Input]
    check: Callable[[dict[str, Any], frozenset[str]], dict[str, str]]
    message: str
    description: str = ""

    def clean(self, value: Any, known: Known) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise FieldError({"": self.message})
        clean, errors = check_inputs(self.parts, value, known)
        for part, message in self.check(clean, frozenset(errors)).items():
            errors.setdefault(part, message)
        if errors:
            raise FieldError(errors)
        return clean


def check_inputs(
    inputs: Mapping[str, Input], data: Mapping[str, Any], known: Known
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each input of ``inputs`` read from ``data`` (keys not among them ignored): ``(clean,
    errors)``, ``clean`` with every input that passed (its default when absent), ``errors``
    ``{name: FieldError.detail}`` for the others, in the order of ``inputs``."""
    clean: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    for name, spec in inputs.items():
        try:
            if name not in data:
                if spec.required:
                    raise FieldError(spec.required_message)
                value = spec.default_value()
            elif data[name] is None:
                if not spec.nullable:
                    raise FieldError(spec.null_message)
                value = None
            else:
                value = spec.clean(data[name], known)
            clean[name] = spec.then(value) if spec.then else value
        except FieldError as exc:
            errors[name] = exc.detail
    return clean, errors


def _arch_input(name: str) -> WholeNumber:
    return WholeNumber(
        low=0 if name in ZERO_ALLOWED_ARCH_FIELDS else 1, high=MAX_ARCH_VALUE, nullable=True
    )


def _custom_model_name(value: str) -> str:
    return (value or "Custom model").strip()[:80] or "Custom model"


def _custom_model_check(clean: dict[str, Any], refused: frozenset[str]) -> dict[str, str]:
    """Without a config.json, the fields :data:`REQUIRED_ARCH_FIELDS` must be given (a field
    already refused, or a config.json refused, is not also "missing"). Beside a refused field
    (a typed ``hidden_size`` of -3), the faults the rest shows without it
    (:func:`pools.sizing.presets.custom_model_errors`: the config.json's own, and the
    contradictions of the config and the typed fields that passed that do not read a refused
    one); with none refused, the whole architecture is checked later (:func:`_whole_errors`)."""
    errors = {}
    if clean.get("config") is None and "config" not in refused:
        errors = {
            name: "Required for a custom architecture (or give its config.json)."
            for name in REQUIRED_ARCH_FIELDS
            if name not in refused and clean.get(name) is None
        }
    if refused:
        for name, message in custom_model_errors(clean, refused=refused).items():
            errors.setdefault(name, message)
    return errors


def _known_model(value: str) -> str:
    if value != "custom" and value not in model_presets():
        raise FieldError(f"Unknown model {value!r}; choose a preset or 'custom'.")
    return value


#: The custom architecture as the schema describes it (its line breaks kept).
CUSTOM_MODEL_DESCRIPTION = """\
A custom architecture, as in a Hugging Face ``config.json`` (counts; ``head_dim`` in
dimensions, ``max_context_tokens`` and ``sliding_window_tokens`` in tokens, ``total_params``
/ ``active_params`` in parameters), and/or ``config``: the config.json itself (an object,
or its text pasted), read by :func:`pools.sizing.presets.arch_fields_from_hf_config`; fields
given here override the config's. Without a config the first eight fields are required."""

CUSTOM_MODEL = Group(
    name="CustomModel",
    nullable=True,
    message=CUSTOM_MODEL_MISSING,
    check=_custom_model_check,
    description=CUSTOM_MODEL_DESCRIPTION,
    parts={
        "name": Text(allow_blank=True, default="Custom model", then=_custom_model_name),
        "config": Json(nullable=True, what="The config.json"),
        **{name: _arch_input(name) for name in CUSTOM_ARCH_FIELDS},
    },
)

#: Every input of an estimate, in the order the API's schema lists them. ``model``: a preset
#: id (``qwen2_5_72b``) or ``custom`` with ``custom_model``; ``input_len`` / ``output_len``:
#: tokens per request; ``demand_kind`` and its figure (``output_tok_s`` output tok/s at the
#: peak, ``requests_per_day`` with ``peak_share`` (0, 1] of them in ``peak_hours`` (0, 24], or
#: ``concurrency`` sequences in flight); ``prompt_cache_hit_rate`` [0, 1); ``input_weight``
#: (prefill cost of an input token against an output token, 0.5 from seeds/004);
#: ``tpot_target_ms`` / ``ttft_target_ms`` (ms, ``null``: not checked); ``gpu_models`` (slugs;
#: empty: all); ``only_free_capacity``; ``prices`` per card-hour; ``seed_per_card_tok_s``.
INPUTS: dict[str, Input] = {
    "model": Text(
        required=True,
        then=_known_model,
        required_message="Choose a model preset, or 'custom' with its architecture.",
        null_message="Choose a model preset, or 'custom' with its architecture.",
    ),
    "custom_model": CUSTOM_MODEL,
    "precision": ParsedChoice(allowed=WEIGHT_PRECISIONS, parse=precision_parse, default="BF16"),
    "kv_cache_dtype": ParsedChoice(
        allowed=KV_CACHE_DTYPE_NAMES, parse=kv_cache_bits, default="auto"
    ),
    "engine": ParsedChoice(allowed=ENGINE_PROFILES, parse=engine_profile, default="vllm"),
    "input_len": WholeNumber(required=True, high=MAX_TOKENS),
    "output_len": WholeNumber(required=True, high=MAX_TOKENS),
    "demand_kind": Choice(
        choices=tuple(DEMAND_KINDS), default="output_rate", message=DEMAND_KIND_REFUSED
    ),
    "output_tok_s": BoundedNumber(low=0, high=1e12),
    "requests_per_day": BoundedNumber(low=0, high=1e15),
    "concurrency": WholeNumber(high=MAX_CONCURRENCY),
    "peak_share": BoundedNumber(low=0, high=1, default=1.0),
    "peak_hours": BoundedNumber(low=0, high=24, default=24.0),
    "prompt_cache_hit_rate": BoundedNumber(
        low=0, high=1, low_open=False, high_open=True, default=0.0
    ),
    "input_weight": BoundedNumber(low=0, high=4, low_open=False, default=INPUT_WEIGHT),
    "tpot_target_ms": BoundedNumber(
        low=0, high=MAX_TARGET_MS, nullable=True, default=TPOT_TARGET_MS
    ),
    "ttft_target_ms": BoundedNumber(
        low=0, high=MAX_TARGET_MS, nullable=True, default=TTFT_TARGET_MS
    ),
    "sized_share": BoundedNumber(
        low=0,
        high=1,
        default=1.0,
        help_text="Share of the peak the cards are sized for (0, 1]; the seed's 0.85 leaves "
        "the top 15 % to queueing or standby capacity.",
    ),
    "buffer_share": BoundedNumber(
        low=0,
        high=4,
        low_open=False,
        default=0.0,
        help_text="Extra capacity on top, as a share of the sized replicas [0, 4]; the seed "
        "keeps 0.30 for spikes.",
    ),
    "tp": WholeNumber(
        high=MAX_PARALLEL,
        nullable=True,
        default=None,
        help_text="Tensor-parallel degree per pipeline stage; empty: the cheapest that fits.",
    ),
    "pp": WholeNumber(
        high=MAX_PARALLEL,
        default=1,
        help_text="Pipeline stages per replica (000 §4.1: TP inside the node, PP across nodes); "
        "a replica is TP x PP cards.",
    ),
    "ep": WholeNumber(
        high=MAX_PARALLEL,
        nullable=True,
        default=None,
        help_text="Expert-parallel degree (mixture of experts; divides TP and the experts).",
    ),
    "dp_attention": WholeNumber(
        high=MAX_PARALLEL,
        nullable=True,
        default=None,
        help_text="Attention data-parallel ranks (mixture of experts with EP = TP; divides TP): "
        "attention replicated per rank, each rank's KV holds only its own sequences, the "
        "experts exchange tokens all-to-all. Empty: none.",
    ),
    "nic_gbps": BoundedNumber(
        low=0,
        high=1e5,
        nullable=True,
        default=None,
        help_text="NIC rate per card, Gb/s, when a replica spans nodes; TP across nodes needs "
        "at least 400.",
    ),
    "speculative_draft_tokens": WholeNumber(
        high=MAX_DRAFT_TOKENS,
        nullable=True,
        default=None,
        help_text="Speculative decoding (000 §3.3): tokens the draft proposes per pass (gamma); "
        "empty: no speculation.",
    ),
    "speculative_acceptance_rate": BoundedNumber(
        low=0,
        high=1,
        low_open=False,
        high_open=True,
        nullable=True,
        default=None,
        help_text="Chance the target accepts a draft token (alpha), [0, 1).",
    ),
    "speculative_draft_cost_ratio": BoundedNumber(
        low=0,
        high=1,
        low_open=False,
        nullable=True,
        default=None,
        help_text="A draft step's time / a target step's (c), [0, 1]; empty with a draft model: "
        "its active parameters / the target's.",
    ),
    "speculative_draft_model": Text(
        nullable=True,
        allow_blank=True,
        default=None,
        help_text="Preset id of a separate draft model (`llama3_8b` for `llama3_70b`): its "
        "weights and KV cache are counted on every card. Empty: no separate draft (n-gram, or "
        "an MTP / EAGLE head with the cost ratio given).",
    ),
    "images_per_request": WholeNumber(
        low=0,
        high=10_000,
        default=0,
        help_text="Images per request (000 §6.3), for a vision-language model: each becomes "
        "visual input tokens, and the vision encoder's work runs before the prefill.",
    ),
    "image_width_px": WholeNumber(
        high=MAX_IMAGE_SIDE_PX, default=1024, help_text="Width of an image or video frame, px."
    ),
    "image_height_px": WholeNumber(
        high=MAX_IMAGE_SIDE_PX, default=1024, help_text="Height of an image or video frame, px."
    ),
    "video_seconds_per_request": BoundedNumber(
        low=0,
        high=86_400,
        low_open=False,
        default=0.0,
        help_text="Seconds of video per request, sampled at video_fps frames per second.",
    ),
    "video_fps": BoundedNumber(
        low=0, high=60, default=2.0, help_text="Video frames sampled per second (0, 60]."
    ),
    "gpu_models": GpuModelSlugs(
        default=list, help_text='GPU model slugs, not names: `["h100_sxm", "l40s"]`; empty: all.'
    ),
    "only_free_capacity": Boolean(default=False),
    "prices": CardHourPrices(default=dict),
    "seed_per_card_tok_s": BoundedNumber(low=0, high=1e6, default=SEED_PER_CARD_TOK_S),
}


def _figure(data: Mapping[str, Any]) -> str | None:
    """The input naming the demand kind's figure (``None`` for an unknown kind)."""
    kind = data.get("demand_kind", "output_rate")
    return DEMAND_FIGURES.get(kind) if isinstance(kind, str) else None


#: The inputs each check of the whole reads besides the model (``model``, ``custom_model``).
CONTEXT_INPUTS = ("input_len", "output_len")
LAYOUT_INPUTS = ("tp", "pp", "ep", "dp_attention")
DEMAND_INPUTS = (
    "input_len",
    "output_len",
    "input_weight",
    "prompt_cache_hit_rate",
    "demand_kind",
    *DEMAND_FIGURES.values(),
    "peak_share",
    "peak_hours",
)


def _whole_errors(clean: Mapping[str, Any], refused: frozenset[str]) -> dict[str, str]:
    """What only the model and the arithmetic can tell about the inputs: a consistent
    architecture, images for a model that sees them, the context within the model's maximum, a
    parallel layout that divides, a sane speculation and traffic. Each check runs when every
    input it reads passed (``refused``: the inputs already at fault; ``clean``: those that
    passed) - a check that needs the model, when the model is known; without it, the
    speculation's own faults - so one answer names every fault the inputs show, each check's
    every fault (:func:`_fault_fields`): ``{field: message}``, empty when sound."""

    def passed(*names: str) -> bool:
        return refused.isdisjoint(names)

    errors: dict[str, str] = {}
    model = None
    if passed("model", "custom_model"):
        try:
            model = model_arch(clean)
        except SizingInputError as exc:
            errors.update(_fault_fields(exc, _custom_model_field))
    if model is not None:
        errors.update(_model_errors(model, clean, passed))
    elif passed(*SPECULATION_INPUTS):
        # Without the model, the speculation's own faults: an input missing, an unknown draft.
        try:
            speculation_of(clean, None)
        except SizingInputError as exc:
            errors.update(_fault_fields(exc, _speculation_field))
    if passed(*DEMAND_INPUTS):
        try:
            demand_of(clean)
        except SizingInputError as exc:
            field = exc.data.get("field") or "demand_kind"
            if field == "requests_per_day" and clean["demand_kind"] == "output_rate":
                field = "output_tok_s"  # the core names the traffic field for any absurd peak
            errors.setdefault(field, exc.message)
    return errors


def _model_errors(
    model: ModelArch, clean: Mapping[str, Any], passed: Callable[..., bool]
) -> dict[str, str]:
    """The checks of :func:`_whole_errors` that need the model: the visual load, the context,
    the layout and the speculation, each when ``passed(*its inputs)``."""
    errors: dict[str, str] = {}
    visual, seen = None, passed(*MULTIMODAL_DEFAULTS)
    if seen:
        try:
            visual = visual_of(clean, model)
        except SizingInputError as exc:
            errors.update(_fault_fields(exc, _visual_field))
            seen = False
    if seen and passed(*CONTEXT_INPUTS):
        context = clean["input_len"] + clean["output_len"] + (visual.tokens if visual else 0)
        if context > model.max_context_tokens:
            with_visual = f" (with {visual.tokens:,} visual tokens)" if visual else ""
            errors["input_len"] = (
                f"Input + output = {context:,} tokens{with_visual} exceeds "
                f"{model.name}'s maximum context of {model.max_context_tokens:,}."
            )
    if passed(*LAYOUT_INPUTS):
        errors.update(_layout_errors(model, clean))
    if passed(*SPECULATION_INPUTS):
        try:
            speculation_of(clean, model)
        except SizingInputError as exc:
            errors.update(_fault_fields(exc, _speculation_field))
    return errors


def _custom_model_field(field: str | None) -> str:
    """A custom-architecture fault's field as the inputs name it: ``custom_model.<field>``."""
    return f"custom_model.{field}" if field else "custom_model"


def _speculation_field(field: str | None) -> str:
    """A speculation fault's field: the plan names the inputs as they are named here
    (:data:`SPECULATION_INPUTS`); one that names none (or another) is the draft tokens'."""
    return field if field in SPECULATION_INPUTS else "speculative_draft_tokens"


def _visual_field(field: str | None) -> str:
    """A visual-load fault's field: one of :data:`MULTIMODAL_DEFAULTS`, else the images'."""
    return field if field in MULTIMODAL_DEFAULTS else "images_per_request"


def _fault_fields(exc: SizingInputError, field_of: Callable[[str | None], str]) -> dict[str, str]:
    """Every field a :class:`SizingInputError` of the core names, ``{input: message}``: its
    ``errors`` when it gathered several faults (:func:`pools.sizing.plan.speculation_from_fields`,
    :func:`~pools.sizing.plan.visual_load_from_fields`, the custom architecture), else its lone
    ``field``; each core field name turned into the input's by ``field_of`` (the first message
    kept for a field named twice)."""
    found = exc.data.get("errors") or {exc.data.get("field"): exc.message}
    errors: dict[str, str] = {}
    for field, message in found.items():
        errors.setdefault(field_of(field), message)
    return errors


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
#: targets, not checked). Read off :data:`INPUTS`, so the two cannot disagree.
DEFAULT_INPUTS: dict[str, Any] = {
    name: (None if spec.required else spec.default_value()) for name, spec in INPUTS.items()
}


def _given(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The keys the caller gave a value: blanks left out (they take the default), the latency
    targets' blanks kept as ``None``, the other demand kinds' figures and a preset's
    ``custom_model`` ignored."""
    data = {
        k: (None if is_blank(v) else v) for k, v in raw.items() if not is_blank(v) or k in NULLABLE
    }
    figure = _figure(data)
    for other in set(DEMAND_FIGURES.values()) - {figure}:
        data.pop(other, None)
    if data.get("model") != "custom":
        data.pop("custom_model", None)
    elif isinstance(data.get("custom_model"), Mapping):
        # A blank architecture field is "not given" as a top-level one is: the page sends the
        # MoE / MLA / sliding-window fields blank for a dense model (issue 34).
        data["custom_model"] = {k: v for k, v in data["custom_model"].items() if not is_blank(v)}
    return data


def _flat(errors: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Errors of :func:`check_inputs` as ``{"field": message}``, one message per field: a part of
    a group as ``parent.child``, the group as a whole (``""``) under the parent's name."""
    flat: dict[str, str] = {}
    for key, value in errors.items():
        name = f"{prefix}.{key}" if prefix and key else prefix or key
        if isinstance(value, Mapping):
            for inner, message in _flat(value, name).items():
                flat.setdefault(inner, message)
        else:
            flat.setdefault(name, value)
    return flat


def _unknown_errors(data: Mapping[str, Any], extra: Collection[str]) -> dict[str, str]:
    """``{field: message}`` for each key of ``data`` that is no input (nor one of ``extra``,
    what the caller reads itself), and each key of a custom ``custom_model`` that is no field of
    it (``custom_model.<key>``): ignored, a misspelt ``tpot_taget_ms`` would size for the
    default target without a word. Each message says what is read, as ``manage.py estimate``
    does."""
    reads = ", ".join([*INPUTS, *extra])
    errors = {
        str(key): f"Not an input of an estimate; the inputs are: {reads}."
        for key in data
        if key not in INPUTS and key not in extra
    }
    custom = data.get("custom_model")
    if data.get("model") == "custom" and isinstance(custom, Mapping):
        fields = ", ".join(CUSTOM_MODEL.parts)
        for key in custom:
            if key not in CUSTOM_MODEL.parts:
                errors[f"custom_model.{key}"] = (
                    f"Not a field of a custom architecture; its fields are: {fields}."
                )
    return errors


def sizing_inputs_clean(
    raw: Mapping[str, Any],
    *,
    refuse_unknown: bool = False,
    extra_fields: Collection[str] = (),
    faults: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Check an estimate's inputs (the keys of :data:`INPUTS`) and return them complete: every
    key of :data:`DEFAULT_INPUTS`, the figures of the other demand kinds ``None``,
    ``custom_model`` ``None`` for a preset. Plain Python: the API and the page both reach it
    through the service, so they refuse the same input with the same words.

    Unknown keys are ignored (the page sends only its form's inputs), or with
    ``refuse_unknown`` (the API) each refused by name (:func:`_unknown_errors`; a custom
    model's unknown fields as ``custom_model.<key>``), ``extra_fields`` excepted: those the
    caller reads itself (the API's ``team``). ``faults``: ``{field: message}`` the caller found
    in those (a team the user cannot see), answered in the same refusal as the inputs' own.

    Raises :class:`InvalidInput` with ``errors`` ``{field: message}`` naming every field at
    fault in one answer (custom fields as ``custom_model.<name>``, prices as
    ``prices.<slug>``): the fields' own faults and, beside them, what only the whole can tell
    (:func:`_whole_errors`) of the inputs that passed - a custom field refused, what the rest
    of the architecture and its config.json tell without it (:func:`_custom_model_check`);
    every fault a check of several inputs finds (a speculation missing two inputs names both).
    """
    if not isinstance(raw, Mapping):
        raise InvalidInput("The estimate's inputs must be a JSON object.", errors={})
    data = _given(raw)
    missing = {}
    figure = _figure(data)
    if figure and data.get(figure) is None:
        missing[figure] = REQUIRED
    if data.get("model") == "custom" and data.get("custom_model") is None:
        missing["custom_model"] = CUSTOM_MODEL_MISSING
    clean, errors = check_inputs(INPUTS, data, Known())
    refused = frozenset(missing) | frozenset(errors)  # a group's name for any of its parts
    errors = {**(faults or {}), **_flat({**missing, **errors})}
    for field, message in _whole_errors(clean, refused).items():
        errors.setdefault(field, message)
    if refuse_unknown:
        for field, message in _unknown_errors(data, extra_fields).items():
            errors.setdefault(field, message)
    if errors:
        raise InvalidInput("The estimate has invalid inputs.", errors=errors)
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
    naming every field at fault (``errors`` when several; a text-only model:
    ``images_per_request``)."""
    return visual_load_from_fields({name: inputs.get(name) for name in MULTIMODAL_DEFAULTS}, model)


def speculation_of(inputs: Mapping[str, Any], model: ModelArch | None) -> Speculation | None:
    """The speculative decoding clean inputs ask for (``None``: none), with the draft model's
    preset (:func:`pools.sizing.plan.speculation_from_fields`). ``model`` ``None``: the
    request's model is at fault, the inputs are only checked (``None`` when they pass). Raises
    :class:`SizingInputError` naming every field at fault (``errors`` when several)."""
    return speculation_from_fields(
        {name: inputs.get(name) for name in SPECULATION_INPUTS},
        presets=model_presets(),
        target=model,
        target_refused=model is None,
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
