"""``manage.py estimate --json FILE``: LLM sizing estimates for scripts (``-`` reads stdin).

FILE holds one JSON object or a list of them, with the fields of the measurement rows of the shared
sizing dataset: ``model`` (preset id, e.g. ``llama3_8b``, or ``custom`` with ``custom_model``:
the architecture fields - num_layers, hidden_size, num_attention_heads, num_kv_heads, head_dim,
intermediate_size, vocab_size, max_context_tokens, total_params, active_params, num_experts,
experts_per_token, num_shared_experts, first_k_dense_layers, kv_lora_rank, qk_rope_head_dim,
sliding_window_tokens, sliding_window_layers ... - and/or ``config`` (a Hugging Face config.json
object or its text) or ``config_path`` (a config.json file)), ``gpu`` (catalogue slug, e.g.
``h100_sxm``, or the name nvidia-smi prints, e.g. ``NVIDIA H100 80GB HBM3``; a name several SKUs
share is refused with reason ``ambiguous_gpu`` and the candidates; the catalogue as the database
keeps it, admins' edits and additions included, as the sizing page reads it), ``gpu_count``, ``tp``,
``pp`` (pipeline stages; a replica is tp x pp cards), ``ep`` (expert parallel, MoE; divides tp),
``dp_attention`` (attention data-parallel ranks, MoE with ep = tp; divides tp),
``nic_gbps`` (NIC Gb/s per card: needed when the cards span nodes; TP across nodes below 400 is
refused with reason ``nic_too_slow``),
``precision`` (FP16, BF16, FP8, INT8, NVFP4, MXFP4, INT4, or weight-only INT4-AWQ / INT4-GPTQ /
W8A16 / FP8-WO), ``kv_cache_dtype`` (FP16, BF16, FP8 = E4M3), ``input_len``, ``output_len``,
``concurrency`` (sequences in flight on each replica of tp x pp cards, not over all
``gpu_count``; null = saturation). Optional: ``engine`` (vllm, vllm-v0, sglang, tensorrt-llm)
and ``engine_version`` (vLLM below 0.8 selects vllm-v0; one holding no release number, such as
``"banana"``, is refused),
``request_rate`` (requests/s, open loop), ``prompt_cache_hit_rate``, speculative decoding -
``speculative_draft_tokens`` (1-16), ``speculative_acceptance_rate`` in [0, 1) and
``speculative_draft_cost_ratio`` (a draft step / a target step, in [0, 1]), all three or none,
or ``speculative_draft_model`` (a preset id: its weights and KV cache are counted on the cards,
and the cost ratio, when not given, is its active parameters / the target's); credited only
where faster, else the warning ``speculation_not_credited`` -, images and video for a
vision-language model (000 §6.3) - ``images_per_request``, ``video_seconds_per_request`` at
``video_fps`` (2), frames of ``image_width_px`` x ``image_height_px`` (1,024): visual input
tokens and the vision encoder's work before the prefill -, and traffic -
``requests_per_day`` with ``peak_share``, ``peak_hours``, ``input_weight`` - which adds the demand
and the replicas and cards needed.

Prints the same shape it read (an object, or a list of objects): per input ``weights_bytes``,
``kv_cache_bytes``, ``fits``, ``output_tok_s_total``, ``band`` (``low_tok_s`` / ``high_tok_s``:
where 8 of 10 similar published measurements fell, pools/sizing/band.py), ``tpot_ms``,
``ttft_ms``, ``warnings`` and every intermediate number (with traffic also ``cards_needed`` and
``cards_needed_pessimistic``, the cards if the band's low end holds), ``measured_on_fleet``
(what this fleet's serving allocations of the same model, GPU model, precision and engine
measured: ``tok_s_per_card``, ``days``, ``median_ratio`` ... from the calibration records;
``null`` when none did), or
``{"input": ..., "error": {"reason", "field", "message"}}``: one answer names every field at
fault - each field's own fault (``custom_model.<field>`` for the architecture's), and beside them
what the whole tells (TP dividing the heads, EP dividing TP, the context within the model's
maximum ...) wherever the fields it reads passed - ``reason``, ``field`` and ``message`` those of
the first (model, then gpu, then the rest: the one that alone refused the row before), and
``errors`` ``{field: message}`` for all of them when there are several. A field not named here
is refused (reason ``unknown_field``) before any other is read, a custom model's too
(``custom_model.<field>``); so is a number beyond a float's range (``1e400`` reads as infinity:
reason ``not_finite``, the number echoed as written), both in one answer.

Exit status: 0 when every input was estimated, 1 when any was refused, 2 when FILE is unreadable.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import asdict

from django.core.management.base import BaseCommand

from pools.inventory.services.gpu_models import GpuModelResolver
from pools.sizing import SizingInputError
from pools.sizing.demand import demand_from_traffic, replicas_for_demand, traffic_errors
from pools.sizing.inputs import INPUTS
from pools.sizing.plan import (
    REQUEST_FIELDS,
    estimate_from_fields,
    figures_json,
    pessimistic_replicas,
    replica_estimate_as_dict,
)
from pools.sizing.presets import CUSTOM_MODEL_KEYS, json_leaves, model_presets
from pools.sizing.selectors import gpu_specs_by_slug, measured_on_fleet

TRAFFIC_DEFAULTS = {"peak_share": 1.0, "peak_hours": 24.0, "input_weight": 0.5}

#: Every field an input may hold; any other is refused (``unknown_field``), since a misspelt
#: or foreign field that were ignored would give an estimate of something else without a word.
COMMAND_FIELDS = frozenset((*REQUEST_FIELDS, "custom_model", "requests_per_day", *TRAFFIC_DEFAULTS))
#: Every field of ``custom_model`` (the architecture's, its config.json as an object or text, or
#: ``config_path``); any other is refused as ``custom_model.<field>``.
CUSTOM_FIELDS = frozenset((*CUSTOM_MODEL_KEYS, "config_path"))


class Overflow(str):
    """A number of the file beyond a float's range (``1e400``), kept as it was written:
    ``float()`` reads it as infinity, which no estimate takes and JSON cannot write back, so the
    row holding it is refused (:func:`_refuse_unreadable_fields`) and echoed with the text."""


def _read_float(text: str) -> float | Overflow:
    """``parse_float`` of the file: a finite float, or the number's text as :class:`Overflow`."""
    value = float(text)
    return value if math.isfinite(value) else Overflow(text)


def _finite_float(text: str) -> float:
    """``parse_float`` of a config.json file: a finite float, else :class:`ValueError`."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond a float's range (it reads as infinity)")
    return value


def _overflow_errors(fields) -> dict[str, str]:
    """``{field: message}`` for every field holding a number beyond a float's range: the
    top-level field, or ``custom_model.<field>`` for the architecture's (its config.json's
    under ``custom_model.config``; ``""`` for a row that is such a number), each message naming
    where and the number as written."""
    found: dict[str, list[str]] = {}
    for path, text in json_leaves(fields, lambda value: isinstance(value, Overflow)):
        parts = path.split(".")
        field = ".".join(parts[:2]) if parts[0] == "custom_model" and len(parts) > 1 else parts[0]
        found.setdefault(field, []).append(f"{path or 'the input'} = {text}")
    return {
        field: f"{'; '.join(where)}: beyond a float's range (above about 1.8e308 a number reads "
        "as infinity, which no estimate takes); give a finite number"
        for field, where in found.items()
    }


def _refuse_unreadable_fields(fields) -> None:
    """Raise :class:`SizingInputError` when ``fields`` holds a key this command does not read
    (reason ``unknown_field``, ``field`` the first in alphabetical order) or a number beyond a
    float's range (reason ``not_finite``, :func:`_overflow_errors`); ``errors`` one message per
    field for both, in one answer. A field of the sizing page and API's plan (``output_tok_s``,
    ``tpot_target_ms`` ...) is named as such: this command estimates one replica at a given
    load, and sizes for demand from ``requests_per_day``."""
    overflow = _overflow_errors(fields)
    unknown = sorted(set(fields) - COMMAND_FIELDS, key=str) if isinstance(fields, dict) else []
    custom = fields.get("custom_model") if isinstance(fields, dict) else None
    if isinstance(custom, dict):
        unknown += sorted(f"custom_model.{key}" for key in set(custom) - CUSTOM_FIELDS)
    if overflow and not unknown:
        first = next(iter(overflow))
        raise SizingInputError(
            overflow[first],
            reason="not_finite",
            field=first or None,
            errors={field or "input": message for field, message in overflow.items()},
        )
    if not unknown:
        return
    errors = {}
    for name in unknown:
        if name in INPUTS:
            errors[name] = (
                f"{name} is a field of the sizing page and API's plan, not of this command "
                "(one replica at the load given; demand as requests_per_day)"
            )
        elif str(name).startswith("custom_model."):
            errors[name] = f"{name} is not a field of a custom model; it reads: " + ", ".join(
                sorted(CUSTOM_FIELDS)
            )
        else:
            errors[name] = f"{name} is not a field of this command"
    for field, message in overflow.items():
        errors.setdefault(field, message)
    raise SizingInputError(
        f"unknown field(s) {', '.join(map(str, unknown))}; this command reads: "
        + ", ".join(sorted(COMMAND_FIELDS)),
        reason="unknown_field",
        field=str(unknown[0]),
        errors=errors,
    )


def _traffic_errors(fields) -> dict[str, str]:
    """Every traffic field out of its bounds, in one answer (:func:`pools.sizing.demand.
    traffic_errors`); empty without ``requests_per_day`` (the traffic fields are then not read)."""
    if not isinstance(fields, dict) or fields.get("requests_per_day") is None:
        return {}
    return traffic_errors(fields)


def _version_errors(fields) -> dict[str, str]:
    """``{"engine_version": message}`` when it is given but holds no version number: the engine
    profile reads the digits of ``"0.6.3"`` (vLLM below 0.8 is ``vllm-v0``), and ``"banana"``,
    holding none, was read as no version at all without a word."""
    version = fields.get("engine_version") if isinstance(fields, dict) else None
    if not isinstance(version, str) or re.search(r"\d", version):
        return {}  # a number or a list is plan's to refuse (its _str_field)
    return {
        "engine_version": f"engine_version {version!r} is no release number; give the engine's "
        'version as it prints it (e.g. "0.6.3"; vLLM below 0.8 is sized as vllm-v0), or leave '
        "it out"
    }


def _with_faults(exc: SizingInputError | None, faults: dict[str, str]) -> SizingInputError:
    """``exc`` (the estimate's refusal, or ``None``) with ``faults`` found beside it named in
    its ``errors``: one answer for the row. ``reason`` and ``field`` stay the estimate's first;
    without it, the first fault's (reason ``out_of_range``)."""
    if exc is None:
        first = next(iter(faults))
        return SizingInputError(faults[first], reason="out_of_range", field=first, errors=faults)
    data = dict(exc.data)
    errors = dict(data.get("errors") or {data.get("field"): exc.message})
    for field, message in faults.items():
        errors.setdefault(field, message)
    data["errors"] = errors
    return SizingInputError(exc.message, **data)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number this command accepts")


def _error(exc: SizingInputError) -> dict:
    error = {
        "reason": exc.data.get("reason", exc.code),
        "field": exc.data.get("field"),
        "message": exc.message,
    }
    for extra in ("candidates", "errors"):  # an ambiguous GPU's SKUs; every field at fault
        if exc.data.get(extra):
            error[extra] = exc.data[extra]
    return error


def _traffic(fields: dict, result: dict, estimate) -> None:
    if fields.get("requests_per_day") is None:
        return
    options = {key: fields.get(key, default) for key, default in TRAFFIC_DEFAULTS.items()}
    demand = demand_from_traffic(
        requests_per_day=fields["requests_per_day"],
        input_tokens=estimate.input_tokens,
        output_tokens=estimate.output_tokens,
        prompt_cache_hit_rate=fields.get("prompt_cache_hit_rate") or 0.0,
        **options,
    )
    result["demand"] = asdict(demand)
    if estimate.throughput is None:
        result["replicas_needed"] = None
        result["cards_needed"] = None
        result["cards_needed_pessimistic"] = None
        return
    replicas = replicas_for_demand(
        peak_requests_per_s=demand.peak_requests_per_s,
        replica_requests_per_s=estimate.throughput.requests_per_s,
    )
    result["replicas_needed"] = replicas
    result["cards_needed"] = replicas * estimate.tp * estimate.pp
    result["cards_needed_pessimistic"] = result["cards_needed"]
    if estimate.band is not None:
        pessimistic = pessimistic_replicas(
            estimate.band, demand, estimate.throughput, sized=replicas, sized_share=1.0,
            buffer_share=0.0,
        )  # fmt: skip
        result["cards_needed_pessimistic"] = pessimistic * estimate.tp * estimate.pp


def _with_config_file(fields):
    """``custom_model.config_path``: a Hugging Face config.json on disk, read into
    ``custom_model.config`` (an unreadable file is refused with field ``custom_model.config``)."""
    custom = fields.get("custom_model") if isinstance(fields, dict) else None
    if not isinstance(custom, dict) or custom.get("config_path") is None:
        return fields
    path = custom["config_path"]
    try:
        with open(str(path), encoding="utf-8") as fh:
            config = json.load(fh, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SizingInputError(
            f"cannot read the config.json {path}: {exc}",
            reason="unreadable_config",
            field="custom_model.config",
        ) from None
    return {**fields, "custom_model": {**custom, "config": config}}


class Command(BaseCommand):
    help = "Estimate memory, TP, throughput, TPOT and TTFT for LLM serving requests in JSON."
    stealth_options = ("stdin",)
    # A pure computation over the catalogue: no system checks, which import every URLconf and
    # through it the Kubernetes client (2 s of a 2.5 s run for one input).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", required=True, dest="json_file", metavar="FILE", help="JSON file, - = stdin"
        )

    def handle(self, *args, json_file, **options):
        try:
            if json_file == "-":
                text = (options.get("stdin") or sys.stdin).read()
            else:
                with open(json_file, encoding="utf-8") as fh:
                    text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            self.stderr.write(f"estimate: cannot read {json_file}: {exc}")
            sys.exit(2)
        try:
            data = json.loads(text, parse_constant=_refuse_constant, parse_float=_read_float)
        except ValueError as exc:
            self._write({"input": None, "error": {"reason": "invalid_json", "message": str(exc)}})
            sys.exit(1)
        inputs = data if isinstance(data, list) else [data]
        presets, gpus = model_presets(), gpu_specs_by_slug()
        results = [self._one(fields, presets, gpus) for fields in inputs]
        self._write(results if isinstance(data, list) else results[0])
        if any("error" in result for result in results):
            sys.exit(1)

    def _one(self, fields, presets, gpus) -> dict:
        try:
            _refuse_unreadable_fields(fields)
            fields = _with_config_file(fields)
            faults = _traffic_errors(fields) | _version_errors(fields)
            try:
                estimate = estimate_from_fields(
                    fields, presets=presets, gpus=gpus, name_to_slug=self._slug_for_name
                )
            except SizingInputError as exc:
                raise (_with_faults(exc, faults) if faults else exc) from None
            if faults:
                raise _with_faults(None, faults)
            result = {"input": fields, **replica_estimate_as_dict(estimate)}
            result["measured_on_fleet"] = self._measured(estimate, list(gpus))
            _traffic(fields, result, estimate)
            return figures_json(result)
        except SizingInputError as exc:
            return {"input": fields, "error": _error(exc)}

    def _slug_for_name(self, name: str) -> str:
        """The slug of the GPU model ``name`` names - the name nvidia-smi prints, a Kubernetes
        label value, a Slurm GRES type, an admin's alias - matched as the inventory matches it
        (``GpuModelResolver``, the database's aliases, loaded once for the run). Raises
        :class:`SizingInputError` (field ``gpu``): ``ambiguous_gpu`` with the ``candidates``
        when several SKUs share the name (``NVIDIA H100``), ``unknown_gpu`` when none has it."""
        resolver = self.__dict__.get("_resolver") or GpuModelResolver.load()
        self.__dict__["_resolver"] = resolver
        found = resolver.match(name)
        if found.gpu_model is not None:
            return found.gpu_model.slug
        if found.candidates:
            raise SizingInputError(
                f"GPU {name!r} names several catalogue models: {', '.join(found.candidates)}; "
                "give one of these slugs",
                reason="ambiguous_gpu",
                field="gpu",
                candidates=list(found.candidates),
            )
        raise SizingInputError(
            f"unknown GPU model {name!r}: give a catalogue slug or the name nvidia-smi prints",
            reason="unknown_gpu",
            field="gpu",
        )

    def _measured(self, estimate, gpu_slugs: list[str]) -> dict | None:
        """The fleet's calibration record for the estimate's model, precision, engine and GPU:
        one query per (model, precision, engine) for every GPU model, kept for the run (1,000
        inputs of a few models then cost a few queries, not 1,000)."""
        key = (estimate.model_id, estimate.requested_precision, estimate.engine)
        cache = self.__dict__.setdefault("_fleet", {})
        if key not in cache:
            cache[key] = measured_on_fleet(
                model_id=key[0], precision=key[1], engine=key[2], gpu_slugs=gpu_slugs
            )
        return cache[key].get(estimate.gpu_slug)

    def _write(self, payload) -> None:
        self.stdout.write(json.dumps(payload, indent=2, allow_nan=False))
