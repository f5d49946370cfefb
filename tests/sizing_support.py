"""A pasted config.json as long as real ones get, for the sizing page's tests."""

from __future__ import annotations

import json
from pathlib import Path

HF_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "hf_configs"

#: DeepSeek-V3 as its published config.json counts it (the preset's own count, tested in
#: tests/pools/sizing/test_parallelism.py), as the page's weights line names it at 16 bit.
DEEPSEEK_V3_PARAMS = "671\u202f026\u202f404\u202f352"  # grouped as the page groups

#: DeepSeek-V3's decoder-layer weights, as the page's weights line names them for a quantised
#: precision: those parameters less the embedding and head, 2 x 129,280 x 7,168 =
#: 1,853,358,080, which checkpoints keep 16 bit.
DEEPSEEK_V3_LAYER_PARAMS = "669\u202f173\u202f046\u202f272"  # grouped as the page groups


def deepseek_v3_config_text() -> str:
    """DeepSeek-V3's published config.json (1,729 bytes), with the per-layer module names a
    quantized checkpoint's config lists as left unquantized (``modules_to_not_convert``: each
    layer's latent KV projection, each MoE layer's router, the head) - such lists are what make
    the longest configs people paste. Over 5,000 bytes, indented as Hugging Face writes it; the
    sizing reads none of the added names (it takes the KV dtype from ``kv_cache_*`` keys only)."""
    config = json.loads((HF_CONFIGS / "deepseek_v3.json").read_text())
    modules = [f"model.layers.{i}.self_attn.kv_a_proj_with_mqa" for i in range(61)]
    modules += [f"model.layers.{i}.mlp.gate" for i in range(3, 61)]
    config["quantization_config"]["modules_to_not_convert"] = [*modules, "lm_head"]
    text = json.dumps(config, indent=2)
    assert len(text.encode()) > 5_000
    return text
