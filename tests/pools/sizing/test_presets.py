"""Model presets: the issue's required list, every field from the published config, params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pools.sizing import SizingInputError
from pools.sizing.presets import (
    ModelArch,
    custom_model_errors,
    model_params_from_config,
    model_preset,
    model_presets,
)

REQUIRED = {
    "llama2_7b": "Llama-2-7B",
    "llama2_13b": "Llama-2-13B",
    "llama2_70b": "Llama-2-70B",
    "llama3_8b": "Llama-3.1-8B",
    "llama3_70b": "Llama-3.1-70B",
    "qwen2_5_7b": "Qwen2.5-7B",
    "qwen2_5_14b": "Qwen2.5-14B",
    "qwen2_5_32b": "Qwen2.5-32B",
    "qwen2_5_72b": "Qwen2.5-72B",
    "mistral_7b": "Mistral-7B-v0.1",
    "mixtral_8x7b": "Mixtral-8x7B-v0.1",
}

CONFIG_FIELDS = {
    "num_layers": "num_layers",
    "hidden_size": "hidden_size",
    "num_attention_heads": "num_attention_heads",
    "num_kv_heads": "num_kv_heads",
    "head_dim": "head_dim",
    "intermediate_size": "intermediate_size",
    "vocab_size": "vocab_size",
    "max_context_tokens": "max_position_embeddings",
    "num_experts": "num_experts",
    "experts_per_token": "experts_per_token",
}


#: The 2025-2026 presets and their published parameter counts in billions (total, active), as
#: their model cards state them (cited per preset in models.json). Counted from config.json, a
#: preset must land within the tolerance: the cards round (DeepSeek-V3 "671B", "37B") and some
#: count parts the text model leaves out (Llama 4's vision encoder, GLM-4.5's MTP layer) or
#: leave out the embedding (gpt-oss's active count: 5.13 B + 0.58 B embedding = 5.71 B here).
PUBLISHED_2025_2026 = {
    "deepseek_v3": (671, 37, 0.02),
    "qwen3_30b_a3b": (30.5, 3.3, 0.02),
    "qwen3_235b_a22b": (235, 22, 0.02),
    "gpt_oss_20b": (20.91, 3.61 + 0.58, 0.01),
    "gpt_oss_120b": (116.83, 5.13 + 0.58, 0.01),
    "llama4_scout": (109, 17, 0.02),
    "llama4_maverick": (400, 17, 0.02),
    "kimi_k2": (1000, 32, 0.04),
    "glm4_5": (355, 32, 0.06),
}

DATASET = Path(__file__).resolve().parents[2] / "fixtures" / "sizing_dataset.json"


@pytest.fixture(scope="module")
def dataset_models():
    data = json.loads(DATASET.read_text(encoding="utf-8"))
    return {row["id"]: row for row in data["models"]}


def test_every_required_model_is_a_preset_under_the_dataset_id():
    presets = model_presets()

    assert {model_id: presets[model_id].name for model_id in REQUIRED} == REQUIRED


#: Vision-language presets (000 §6.3), counted in tests/pools/sizing/test_vision.py.
VISION_LANGUAGE = {"qwen2_5_vl_7b"}


def test_preset_ids_are_the_dataset_model_ids_and_the_2025_2026_models(dataset_models):
    assert set(model_presets()) == (
        set(dataset_models) | set(PUBLISHED_2025_2026) | VISION_LANGUAGE
    )


def test_the_vision_language_preset_cites_its_hub_config():
    preset = model_preset("qwen2_5_vl_7b")
    config_url = "https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/config.json"

    for field in ("num_layers", "hidden_size", "num_kv_heads", "intermediate_size", "vision"):
        assert preset.sources[field].startswith(config_url), field
    assert preset.total_params == 7_615_616_512  # the language model: Qwen2.5-7B's count
    assert model_preset("qwen2_5_7b").vision is None


@pytest.mark.parametrize("model_id", sorted(REQUIRED))
def test_config_fields_match_the_dataset_and_cite_the_hub_config(model_id, dataset_models):
    preset, row = model_preset(model_id), dataset_models[model_id]

    for field, dataset_field in CONFIG_FIELDS.items():
        assert getattr(preset, field) == row[dataset_field], field
    config_url = f"https://huggingface.co/{row['hf_repo']}/blob/main/config.json"
    for field in (*CONFIG_FIELDS.values(), "tie_word_embeddings", "qkv_bias", "sliding_window"):
        assert preset.sources[field].startswith(config_url), field
    assert preset.sources["total_params"]
    assert preset.sources["active_params"]


@pytest.mark.parametrize("model_id", sorted(REQUIRED))
def test_parameter_counts_match_the_dataset_to_half_a_million(model_id, dataset_models):
    preset, row = model_preset(model_id), dataset_models[model_id]

    assert abs(preset.total_params - row["total_params_b"] * 1e9) <= 0.5e6
    assert abs(preset.active_params - row["active_params_b"] * 1e9) <= 0.5e6


def test_llama3_8b_parameters_by_hand():
    embeddings = 2 * 128_256 * 4_096  # embed + untied lm_head
    attention = 4_096 * 4_096 + 2 * 4_096 * 1_024 + 4_096 * 4_096  # q, k, v, o
    mlp = 3 * 4_096 * 14_336
    layer = attention + mlp + 2 * 4_096
    expected = embeddings + 32 * layer + 4_096

    total, active = model_params_from_config(
        num_layers=32,
        hidden_size=4_096,
        num_attention_heads=32,
        num_kv_heads=8,
        head_dim=128,
        intermediate_size=14_336,
        vocab_size=128_256,
    )

    assert total == active == expected == 8_030_261_248


def test_mixtral_counts_all_experts_in_total_and_two_in_active():
    mixtral = model_preset("mixtral_8x7b")
    per_expert = 32 * 3 * 4_096 * 14_336

    assert mixtral.is_moe
    assert mixtral.expert_params == 8 * per_expert
    assert mixtral.total_params - mixtral.active_params == 6 * per_expert


def test_mistral_keeps_its_sliding_window_and_the_others_have_none():
    windows = {
        model_id: preset.sliding_window_tokens for model_id, preset in model_presets().items()
    }

    assert windows.pop("mistral_7b") == 4_096
    # gpt-oss: sliding_window 128 on the layer_types' sliding layers; Llama 4: chunked attention
    # of attention_chunk_size 8,192 on three layers in four (no_rope_layers)
    assert windows.pop("gpt_oss_20b") == windows.pop("gpt_oss_120b") == 128
    assert windows.pop("llama4_scout") == windows.pop("llama4_maverick") == 8_192
    assert set(windows.values()) == {None}


def test_unknown_model_is_a_clear_error():
    with pytest.raises(SizingInputError) as error:
        model_preset("gpt5")

    assert error.value.data == {"reason": "unknown_model", "field": "model"}
    assert "llama3_8b" in error.value.message


def _custom(**changes):
    fields = {
        "id": "custom",
        "name": "Custom",
        "num_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 1_000,
        "max_context_tokens": 2_048,
        "total_params": 1_000_000,
        "active_params": 1_000_000,
    }
    fields.update(changes)
    return ModelArch(**fields)


def test_a_custom_architecture_is_accepted():
    assert _custom().attention_width == 64


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"num_layers": 0}, "not_positive"),
        ({"hidden_size": -64}, "not_positive"),
        ({"head_dim": 1.5}, "not_positive"),
        ({"num_kv_heads": 3}, "inconsistent"),
        ({"active_params": 2_000_000}, "inconsistent"),
        ({"num_experts": 8}, "inconsistent"),
        ({"num_experts": 2, "experts_per_token": 4}, "inconsistent"),
    ],
)
def test_a_custom_architecture_with_bad_fields_is_refused(changes, reason):
    with pytest.raises(SizingInputError) as error:
        _custom(**changes)

    assert error.value.data["reason"] == reason


def _tiny_moe(**changes):
    # 2 layers, h 64, 4 heads × 16 (KV 2 × 16), I 128, V 1,000, untied; 4 experts, 2 per token.
    fields = {
        "id": "custom",
        "name": "Tiny MoE",
        "num_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 1_000,
        "max_context_tokens": 2_048,
        "num_experts": 4,
        "experts_per_token": 2,
    }
    fields.update(changes)
    return ModelArch.from_config(**fields)


# By hand: embeddings 2 × 1,000 × 64 = 128,000; attention 64×64 + 2×64×32 + 64×64 = 12,288;
# one expert's MLP 3 × 64 × 128 = 24,576; router 64 × 4 = 256; norms 2 × 64 = 128; final norm 64.
TINY_MOE_TOTAL = 128_000 + 2 * (12_288 + 4 * 24_576 + 256 + 128) + 64  # 350,016
TINY_MOE_ACTIVE = 128_000 + 2 * (12_288 + 2 * 24_576 + 256 + 128) + 64  # 251,712


def test_from_config_counts_the_parameters_when_no_total_is_given():
    arch = _tiny_moe()

    assert (arch.total_params, arch.active_params) == (350_016, 251_712)
    assert (TINY_MOE_TOTAL, TINY_MOE_ACTIVE) == (350_016, 251_712)


def test_from_config_keeps_a_published_total_and_caps_the_counted_active_at_it():
    assert (_tiny_moe(total_params=400_000).active_params) == 251_712
    assert (_tiny_moe(total_params=200_000).active_params) == 200_000
    dense = _tiny_moe(num_experts=None, experts_per_token=None, total_params=123_456)
    assert (dense.total_params, dense.active_params) == (123_456, 123_456)


def test_from_config_counts_a_qkv_bias_and_a_tied_head():
    plain = _tiny_moe(num_experts=None, experts_per_token=None)
    biased = _tiny_moe(num_experts=None, experts_per_token=None, qkv_bias=True)
    tied = _tiny_moe(num_experts=None, experts_per_token=None, tie_word_embeddings=True)

    assert biased.total_params - plain.total_params == 2 * (64 + 2 * 32)  # q, k, v biases
    assert plain.total_params - tied.total_params == 1_000 * 64  # one V × h table fewer
    assert tied.tie_word_embeddings and not plain.tie_word_embeddings


@pytest.mark.parametrize("model_id", sorted(PUBLISHED_2025_2026))
def test_2025_2026_presets_count_their_published_parameters_and_cite_the_hub_config(model_id):
    preset = model_preset(model_id)
    total_b, active_b, tolerance = PUBLISHED_2025_2026[model_id]

    assert preset.is_moe
    assert abs(preset.total_params / 1e9 - total_b) <= tolerance * total_b
    assert abs(preset.active_params / 1e9 - active_b) <= max(tolerance * active_b, 0.05 * active_b)
    config_url = f"https://huggingface.co/{preset.hf_repo}/blob/main/config.json"
    for field in ("num_layers", "num_experts", "experts_per_token", "intermediate_size"):
        assert preset.sources[field].startswith(config_url), field
    assert "published" in preset.sources["total_params"]


def test_deepseek_v3_by_hand():
    """DeepSeek-V3's config.json: 61 layers, the first 3 dense (intermediate 18,432), 58 MoE
    layers of 256 routed experts (8 per token) + 1 shared expert of 2,048; hidden 7,168."""
    v3 = model_preset("deepseek_v3")
    per_expert = 3 * 7_168 * 2_048

    assert (v3.num_moe_layers, v3.num_shared_experts, v3.first_k_dense_layers) == (58, 1, 3)
    assert v3.expert_params == 58 * 256 * per_expert
    assert v3.total_params - v3.active_params == 58 * (256 - 8) * per_expert
    assert (v3.kv_lora_rank, v3.qk_rope_head_dim, v3.head_dim) == (512, 64, 192)


@pytest.mark.parametrize(
    ("custom", "refused", "errors"),
    [
        # an unreadable config.json: the typed fields that passed are checked among themselves
        # (10 experts per token of 8), a check reading a field the config would have given
        # is not (experts per token typed, the experts left to the config)
        ({"config": "{bad", "num_experts": 8, "experts_per_token": 10},
         {"hidden_size"},
         {"config": "the config.json is not valid JSON: Expecting property name enclosed in "
                    "double quotes: line 1 column 2 (char 1)",
          "experts_per_token": "10 experts per token is more than the 8 experts."}),
        ({"config": "{bad", "experts_per_token": 10},
         {"hidden_size"},
         {"config": "the config.json is not valid JSON: Expecting property name enclosed in "
                    "double quotes: line 1 column 2 (char 1)"}),
        # a config's 0 KV heads, in ModelArch's words; its 5 KV heads of 32 are not checked
        # against typed heads that were refused
        ({"config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                     "num_key_value_heads": 0, "intermediate_size": 128, "vocab_size": 100,
                     "max_position_embeddings": 512}},
         {"hidden_size"},
         {"num_kv_heads": "num_kv_heads must be a positive integer, got 0"}),
        ({"config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 32,
                     "num_key_value_heads": 5, "intermediate_size": 128, "vocab_size": 100,
                     "max_position_embeddings": 512}},
         {"num_attention_heads"},
         {}),
    ],
)  # fmt: skip
def test_custom_model_errors_beside_refused_fields_read_no_value_the_user_did_not_mean(
    custom, refused, errors
):
    assert custom_model_errors(custom, refused=frozenset(refused)) == errors
