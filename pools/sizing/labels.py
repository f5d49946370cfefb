"""How the sizing page names its inputs: the form's labels (``templates/pools/sizing/sizing.html``)
by the service's input names, and the service's messages worded with them.

The API answers with its field names, in the errors' keys and in the messages (``nic_gbps``,
``speculative_draft_cost_ratio``: what a script sends); a person at the page reads the form,
whose labels say "NIC per card (Gb/s)" and "Draft cost ratio (c)". :func:`page_message` is the
one place the page turns a message into the form's words; the error list, the rows' refusals
and warnings and a failed estimate's reason all go through it.
"""

from __future__ import annotations

import re

from pools.sizing import inputs as sizing_inputs

#: The custom architecture's fields as the form labels them (``custom_model.<name>``).
CUSTOM_LABELS = {
    "num_layers": "Layers",
    "hidden_size": "Hidden size",
    "num_attention_heads": "Attention heads",
    "num_kv_heads": "KV heads",
    "head_dim": "Head dim",
    "intermediate_size": "MLP intermediate size",
    "vocab_size": "Vocabulary",
    "max_context_tokens": "Max context (tokens)",
    "total_params": "Total parameters (blank: counted)",
    "active_params": "Active parameters (blank: counted)",
    "num_experts": "Routed experts (MoE only)",
    "experts_per_token": "Experts per token (MoE)",
    "num_shared_experts": "Shared experts (MoE)",
    "first_k_dense_layers": "First dense layers (MoE)",
    "dense_intermediate_size": "Dense layers' MLP size (MoE)",
    "kv_lora_rank": "KV latent rank (MLA)",
    "qk_rope_head_dim": "RoPE key dim (MLA)",
    "sliding_window_tokens": "Sliding window (tokens)",
    "sliding_window_layers": "Layers that slide (blank: all)",
    "config": "config.json",
}

#: The inputs as the form labels them (units left out), in the form's order: the error list's
#: order.
FIELD_LABELS = {
    "model": "Model",
    "custom_model": "Custom architecture",
    "precision": "Weights",
    "kv_cache_dtype": "KV cache",
    "engine": "Engine",
    "input_len": "Input tokens",
    "output_len": "Output tokens",
    "demand_kind": "Load",
    "output_tok_s": "Peak output tokens / s",
    "requests_per_day": "Requests / day",
    "peak_share": "Share in the peak",
    "peak_hours": "Peak length",
    "concurrency": "Sequences in flight",
    "prompt_cache_hit_rate": "Prompt-cache hit rate",
    "input_weight": "Input-token weight",
    "tpot_target_ms": "TPOT target",
    "ttft_target_ms": "TTFT target",
    "sized_share": "Size for this share of the peak",
    "buffer_share": "Buffer on top",
    "tp": "Tensor parallel (TP)",
    "pp": "Pipeline stages (PP)",
    "ep": "Expert parallel (EP, MoE)",
    "dp_attention": "Attention data parallel (DP)",
    "nic_gbps": "NIC per card",
    "speculative_draft_tokens": "Draft tokens per pass",
    "speculative_acceptance_rate": "Acceptance rate",
    "speculative_draft_cost_ratio": "Draft cost ratio",
    "speculative_draft_model": "Draft model",
    "images_per_request": "Images per request",
    "image_width_px": "Image width",
    "image_height_px": "Image height",
    "video_seconds_per_request": "Video seconds per request",
    "video_fps": "Video frames per second",
    "seed_per_card_tok_s": "Per-card output tok/s (the seed's rule of thumb)",
    "gpu_models": "GPU models",
    "prices": "Prices",
}

#: Service messages that name the API's values, as the page's users read them: a load kind
#: edited into an address is refused by the labels of the page's Load buttons.
PAGE_MESSAGES = {
    sizing_inputs.DEMAND_KIND_REFUSED: "Choose one of the loads the form offers: "
    + "; ".join(sizing_inputs.DEMAND_KINDS.values())
    + ".",
}


#: Messages that name an input but name a pasted config.json's own keys (``intermediate_size``
#: there is the JSON's key, which the user must find in what they pasted): kept as they are.
VERBATIM_FIELDS = frozenset({"custom_model.config"})


def _without_hint(label: str) -> str:
    """A label as a sentence names it: without the hint in parentheses at its end
    ("Total parameters (blank: counted)" -> "Total parameters")."""
    return re.sub(r"\s*\([^()]*\)$", "", label)


#: How a message on the page names an input: the input's label without its hint
#: (``nic_gbps`` -> "NIC per card", ``kv_lora_rank`` -> "KV latent rank"); the parallel
#: degrees by the abbreviations their labels give ("Tensor parallel (TP)": ``tp 8 x pp 2``
#: reads "TP 8 x PP 2", as the page's results write a layout). Only names no sentence uses as
#: a word: those with an underscore, and tp / pp / ep (``model``, ``precision`` and ``config``
#: read as words in the messages, and stay).
NAMES_IN_MESSAGES = {
    **{
        name: _without_hint(label)
        for name, label in {**CUSTOM_LABELS, **FIELD_LABELS}.items()
        if "_" in name
    },
    "tp": "TP",
    "pp": "PP",
    "ep": "EP",
}

# An input's name standing alone: not part of a longer name, a hyphenated flag or a quoted
# value the user typed ('input_len' in "Unknown model 'input_len'" is theirs).
_NAME = re.compile(
    r"(?<![\w'-])("
    + "|".join(re.escape(name) for name in sorted(NAMES_IN_MESSAGES, key=len, reverse=True))
    + r")(?![\w'-])"
)


def page_message(message: str, field: str | None = None) -> str:
    """``message`` (a refusal or warning of the service, in the API's words) as the page shows
    it: a whole message the page words otherwise (:data:`PAGE_MESSAGES`), else every input
    name in it as the form labels the input (:data:`NAMES_IN_MESSAGES`). ``field``: the input
    the message is about, when it is a field error (a config.json's own keys are kept,
    :data:`VERBATIM_FIELDS`)."""
    if message in PAGE_MESSAGES:
        return PAGE_MESSAGES[message]
    if field in VERBATIM_FIELDS:
        return message
    return _NAME.sub(lambda match: NAMES_IN_MESSAGES[match.group(1)], message)
