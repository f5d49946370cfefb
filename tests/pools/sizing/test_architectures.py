"""Issue 34's architectures: a Hugging Face config.json read directly, mixtures of experts with
shared experts and dense first layers, multi-head latent attention, sliding-window layers, and
what cannot be costed refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pools.sizing import SizingInputError
from pools.sizing.gpus import gpu_specs_from_catalogue
from pools.sizing.memory import (
    kv_bytes_per_sequence,
    kv_layer_tokens,
    memory_estimate,
    model_kv_bytes_per_token,
    precision_parse,
)
from pools.sizing.plan import estimate_from_fields, replica_estimate_as_dict
from pools.sizing.presets import (
    arch_fields_from_hf_config,
    custom_arch_errors,
    custom_model_arch,
    model_preset,
    model_presets,
)
from pools.sizing.throughput import weight_bytes_read

#: Qwen3-30B-A3B's config.json (huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json), the
#: keys the reader uses, as published.
QWEN3_30B_A3B = json.loads(
    (
        Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs" / "qwen3_30b_a3b.json"
    ).read_text()
)


def test_a_qwen3_moe_config_reads_as_its_preset():
    custom = custom_model_arch({"config": QWEN3_30B_A3B})
    preset = model_preset("qwen3_30b_a3b")

    assert custom.total_params == preset.total_params
    assert custom.active_params == preset.active_params
    assert (custom.num_experts, custom.experts_per_token, custom.intermediate_size) == (128, 8, 768)
    # pasted as text, the same
    assert custom_model_arch({"config": json.dumps(QWEN3_30B_A3B)}).total_params == (
        preset.total_params
    )


def test_explicit_fields_override_the_config():
    custom = custom_model_arch({"config": QWEN3_30B_A3B, "max_context_tokens": 131_072})

    assert custom.max_context_tokens == 131_072


def test_mla_keeps_the_latent_and_the_rope_key_per_token_and_layer():
    """DeepSeek-V3: 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B = 70,272 B per
    token at FP16 (DeepSeek-V2 paper table 1: (d_c + d_h^R) l), on every TP rank; as GQA it
    would be 2 x 61 x 128 heads x 192 x 2 B = 5,996,544 B."""
    v3 = model_preset("deepseek_v3")

    assert model_kv_bytes_per_token(v3, kv_bits=16) == 61 * 576 * 2 == 70_272
    assert model_kv_bytes_per_token(v3, kv_bits=16, tp=8) == 70_272
    assert model_kv_bytes_per_token(v3, kv_bits=8) == 35_136
    assert kv_bytes_per_sequence(v3, context_tokens=1_000, kv_bits=16) == 70_272_000


def test_sliding_window_layers_cap_their_kv_at_the_window():
    """gpt-oss-120b: 36 layers, 18 sliding (window 128), 8 KV heads x 64: 2 x 8 x 64 x 2 B =
    2,048 B per token and layer. 10,000 tokens: 18 x 10,000 + 18 x 128 = 182,304 layer-tokens
    x 2,048 B = 373,358,592 B (full attention everywhere would be 737,280,000 B)."""
    oss = model_preset("gpt_oss_120b")

    assert kv_layer_tokens(oss, 10_000) == 182_304
    assert kv_bytes_per_sequence(oss, context_tokens=10_000, kv_bits=16) == 373_358_592
    # below the window every layer keeps everything
    assert kv_layer_tokens(oss, 100) == 36 * 100


def test_moe_memory_counts_every_expert_and_a_batch_reads_the_experts_it_touches():
    """Qwen3-30B-A3B at BF16 holds all 30.5 B parameters (61 GB); one token reads the active
    3.3 B and a large batch nearly all: per MoE layer E (1 - (1 - k/E)^B) of E experts in
    expectation (k of E per token, uniform routing: the chance one expert is missed by B
    tokens is (1 - k/E)^B). B = 16: (120/128)^16 = 0.9375^16 = 0.356074 (squared four
    times: 0.878906, 0.772476, 0.596719,
    0.356074), so 0.643926 of the routed experts are read."""
    model = model_preset("qwen3_30b_a3b")
    bf16 = precision_parse("BF16")
    memory = memory_estimate(
        model=model, precision=bf16, kv_bits=16, gpu_memory_bytes=80 * 2**30, tp=1,
        context_tokens=2_000, sequences=1,
    )  # fmt: skip
    shared = model.total_params - model.expert_params

    assert memory.weights_bytes == model.total_params * 2
    one = weight_bytes_read(model=model, weight_bits=16, tokens=1)
    assert one == pytest.approx((shared + model.expert_params * 8 / 128) * 2)
    assert one == pytest.approx(model.active_params * 2, rel=1e-9)
    sixteen = weight_bytes_read(model=model, weight_bits=16, tokens=16)
    assert sixteen == pytest.approx((shared + model.expert_params * 0.643926) * 2, rel=1e-6)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"num_experts_per_tok": 200}, "experts_per_token", "more than the 128 experts"),
        ({"num_key_value_heads": 5}, "num_kv_heads", "do not divide"),
    ],
)
def test_contradictory_configs_are_refused_field_by_field(change, field, words):
    with pytest.raises(SizingInputError) as caught:
        custom_model_arch({"config": {**QWEN3_30B_A3B, **change}})

    assert caught.value.data["field"] == field
    assert words in caught.value.message


def test_every_inconsistency_is_named_at_once():
    errors = custom_arch_errors(
        {"num_attention_heads": 32, "num_kv_heads": 5, "num_experts": 8, "experts_per_token": 9,
         "total_params": 10, "active_params": 20, "kv_lora_rank": 512}
    )  # fmt: skip

    assert set(errors) == {"experts_per_token", "num_kv_heads", "total_params", "qk_rope_head_dim"}


@pytest.mark.parametrize(
    "config",
    [
        {**QWEN3_30B_A3B, "model_type": "jamba"},
        {**QWEN3_30B_A3B, "model_type": "mamba"},
        {**QWEN3_30B_A3B, "model_type": "kimi_linear"},
        {**QWEN3_30B_A3B, "layer_types": ["full_attention", "linear_attention"] * 24},
    ],
)
def test_layers_that_cannot_be_costed_say_so(config):
    with pytest.raises(SizingInputError) as caught:
        arch_fields_from_hf_config(config)

    assert caught.value.data == {"reason": "unsupported_architecture", "field": "config"}
    assert "cannot cost" in caught.value.message
    if config.get("model_type") != QWEN3_30B_A3B["model_type"]:  # quoted as the JSON spells it
        assert caught.value.message.startswith(f'model_type "{config["model_type"]}" has ')


#: Hybrid configs whose ``model_type`` is not on the refused list (a new or renamed family, or
#: code shipped with the checkpoint) still carry the keys of their state-space or
#: linear-attention layers: Nemotron-H's ``hybrid_override_pattern`` and ``mamba_num_heads``,
#: Falcon-H1's ``mamba_d_ssm``, Jamba's ``attn_layer_period``, Qwen3-Next's
#: ``linear_num_value_heads``, Kimi Linear's ``linear_attn_config``, MiniMax-Text-01's
#: ``attn_type_list`` (their published config.json files). Sized as attention alone they got
#: an estimate of another model; they must be refused, naming the key.
HYBRID_MARKERS = [
    {"model_type": "nemotron_h2", "hybrid_override_pattern": "M-M-M-M*-", "mamba_num_heads": 128},
    {"model_type": "falcon_h2", "mamba_d_ssm": 1536, "mamba_d_state": 256},
    {"model_type": "my_hybrid", "attn_layer_period": 8, "attn_layer_offset": 4},
    {"model_type": "qwen3_next_v2", "linear_num_value_heads": 32, "linear_key_head_dim": 128},
    {"model_type": "kimi_linear_v2", "linear_attn_config": {"kda_layers": [1, 2, 3]}},
    {"model_type": "minimax_text", "attn_type_list": [0, 1] * 24},
    {"model_type": "my_ssm", "ssm_state_size": 128},
]


@pytest.mark.parametrize("marker", HYBRID_MARKERS, ids=lambda m: m["model_type"])
def test_a_hybrid_under_an_unlisted_model_type_is_refused_by_its_keys(marker):
    with pytest.raises(SizingInputError) as caught:
        custom_model_arch({"config": {**QWEN3_30B_A3B, **marker}})

    assert caught.value.data == {"reason": "unsupported_architecture", "field": "config"}
    assert "cannot cost" in caught.value.message
    keys = set(marker) - {"model_type"}
    assert any(key in caught.value.message for key in keys)


def test_a_hybrid_inside_a_multimodal_text_config_is_refused_too():
    config = {"model_type": "my_vlm", "text_config": {**QWEN3_30B_A3B, "mamba_d_state": 128}}
    with pytest.raises(SizingInputError) as caught:
        arch_fields_from_hf_config(config)

    assert caught.value.data["reason"] == "unsupported_architecture"
    assert "mamba_d_state" in caught.value.message


def test_the_bundled_and_2026_attention_configs_are_not_taken_for_hybrids():
    """gpt-oss's ``sliding_window`` and ``layer_types``, Llama 4's ``attention_chunk_size``,
    DeepSeek's ``kv_lora_rank`` are attention: still read."""
    qwen = {k: v for k, v in QWEN3_30B_A3B.items() if k != "use_sliding_window"}
    gpt_oss = {**qwen, "model_type": "gpt_oss", "sliding_window": 128,
               "layer_types": ["sliding_attention", "full_attention"] * 24}  # fmt: skip
    assert arch_fields_from_hf_config(gpt_oss)["sliding_window_layers"] == 24
    deepseek = json.loads(
        (Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs" / "deepseek_v3.json")
        .read_text()
    )  # fmt: skip
    assert arch_fields_from_hf_config(deepseek)["kv_lora_rank"] == 512


@pytest.mark.parametrize(
    ("change", "key", "listed"),
    [
        ({"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 9},
         "layer_types", 18),
        ({"attention_chunk_size": 8192, "no_rope_layers": [1, 1, 1, 0] * 3}, "no_rope_layers", 12),
    ],
)  # fmt: skip
def test_a_per_layer_list_of_another_length_than_the_layers_is_refused(change, key, listed):
    """Issue 34, *Bad input*: contradictory fields. gpt-oss's ``layer_types`` and Llama 4's
    ``no_rope_layers`` give one entry per layer; a list of 18 for 48 layers counted 9 sliding
    layers and sized the other 39 as full attention without a word."""
    qwen = {k: v for k, v in QWEN3_30B_A3B.items() if k != "use_sliding_window"}
    with pytest.raises(SizingInputError) as caught:
        custom_model_arch({"config": {**qwen, **change}})

    assert caught.value.data["reason"] == "inconsistent"
    assert caught.value.data["field"] == "config"
    assert f"{key} lists {listed} layers" in caught.value.message
    assert "num_hidden_layers is 48" in caught.value.message


def test_a_mixture_of_experts_on_every_zeroth_layer_is_refused():
    """``decoder_sparse_step`` 0 (experts on every 0th layer: transformers divides by it) was
    read as 1, experts on every layer, without a word; 1 and 2 still read."""
    with pytest.raises(SizingInputError) as caught:
        custom_model_arch({"config": {**QWEN3_30B_A3B, "decoder_sparse_step": 0}})

    assert caught.value.data["reason"] == "inconsistent"
    assert caught.value.data["field"] == "config"
    assert "decoder_sparse_step is 0" in caught.value.message
    every = custom_model_arch({"config": {**QWEN3_30B_A3B, "decoder_sparse_step": 1}})
    second = custom_model_arch({"config": {**QWEN3_30B_A3B, "decoder_sparse_step": 2}})
    assert (every.num_moe_layers, second.num_moe_layers) == (48, 24)


def test_a_config_missing_a_required_key_names_it():
    config = {k: v for k, v in QWEN3_30B_A3B.items() if k != "num_hidden_layers"}
    with pytest.raises(SizingInputError) as caught:
        custom_model_arch({"config": config})

    assert "num_hidden_layers" in caught.value.message
    assert caught.value.data["reason"] == "missing"


def test_bad_json_text_is_refused():
    with pytest.raises(SizingInputError) as caught:
        custom_model_arch({"config": "{not json"})

    assert caught.value.data == {"reason": "invalid_json", "field": "config"}


def test_config_text_nested_past_64_levels_is_refused_as_invalid_json():
    """5000 ``[`` raised RecursionError from json.loads (the sizing page's 500)."""
    with pytest.raises(SizingInputError) as caught:
        custom_model_arch({"config": "[" * 5000})

    assert caught.value.data == {"reason": "invalid_json", "field": "config"}
    assert caught.value.message == "the config.json is not valid JSON: nested deeper than 64 levels"


# --- The checkpoint's own KV-cache dtype (issue 34) ------------------------------------------

#: hf_quant_config.json of an NVIDIA ModelOpt FP8 checkpoint, its quantization block as such
#: files hold it (quant_algo, kv_cache_quant_algo, exclude_modules).
MODELOPT_FP8 = {
    "quant_algo": "FP8",
    "kv_cache_quant_algo": "FP8",
    "exclude_modules": ["lm_head"],
}
LLAMA_8B_CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {
                **LLAMA_8B_CONFIG,
                "quantization_config": {"quant_method": "modelopt", **MODELOPT_FP8},
            },
            "FP8",
        ),
        ({**LLAMA_8B_CONFIG, "quantization": MODELOPT_FP8}, "FP8"),
        (
            {
                **LLAMA_8B_CONFIG,
                "quantization_config": {"kv_cache_scheme": {"num_bits": 8, "type": "float"}},
            },
            "FP8",
        ),
        ({**LLAMA_8B_CONFIG, "quantization_config": {"kv_cache_quant_algo": None}}, None),
        (LLAMA_8B_CONFIG, None),
    ],
)
def test_a_config_names_its_kv_cache_dtype(config, expected):
    assert custom_model_arch({"config": config}).kv_cache_dtype == expected


BLOCK_FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}


@pytest.mark.parametrize(
    ("quantization", "expected"),
    [
        ({**BLOCK_FP8, "weight_block_size": [128, 128]}, 128),  # DeepSeek-V3 / Qwen3-FP8
        ({**BLOCK_FP8, "weight_block_size": [128, 64]}, None),  # not square
        ({**BLOCK_FP8, "weight_block_size": [True, True]}, None),
        (BLOCK_FP8, None),  # per-tensor FP8
        ({"quant_method": "compressed-tensors", "weight_block_size": [128, 128]}, None),
        (None, None),
    ],
)
def test_a_config_names_its_fp8_weight_blocks(quantization, expected):
    config = {**LLAMA_8B_CONFIG}
    if quantization is not None:
        config["quantization_config"] = quantization
    assert custom_model_arch({"config": config}).fp8_weight_block == expected


def test_the_presets_with_block_scaled_fp8_checkpoints():
    presets = model_presets()
    blocked = {key for key, model in presets.items() if model.fp8_weight_block}
    assert blocked == {"deepseek_v3", "kimi_k2", "qwen3_30b_a3b", "qwen3_235b_a22b"}
    assert {presets[key].fp8_weight_block for key in blocked} == {128}
    assert all("weight_block_size" in presets[key].sources["fp8_weight_block"] for key in blocked)


def test_the_checkpoints_fp8_kv_is_used_when_the_request_leaves_it_to_auto():
    """Llama-3.1-8B with an FP8 KV cache: 2 x 32 layers x 8 KV heads x 128 x 1 B = 65,536 B per
    token (half of 16-bit's 131,072); an explicit FP16 request keeps 131,072."""
    fp8_config = {**LLAMA_8B_CONFIG, "quantization": MODELOPT_FP8}
    fields = {
        "model": "custom",
        "custom_model": {"config": fp8_config},
        "gpu": "h100_sxm",
        "input_len": 1000,
        "output_len": 100,
    }
    presets, gpus = model_presets(), gpu_specs_from_catalogue()

    for kv, per_token, source in (
        (None, 65_536, "checkpoint"),
        ("auto", 65_536, "checkpoint"),
        ("FP16", 131_072, "request"),
    ):
        estimate = estimate_from_fields(
            {**fields, "kv_cache_dtype": kv}, presets=presets, gpus=gpus
        )
        assert estimate.memory.kv_bytes_per_token == per_token
        assert replica_estimate_as_dict(estimate)["kv_cache_dtype_source"] == source
    plain = estimate_from_fields(
        {**fields, "custom_model": {"config": LLAMA_8B_CONFIG}}, presets=presets, gpus=gpus
    )
    assert (plain.memory.kv_bytes_per_token, plain.kv_cache_dtype_source) == (131_072, "default")


def test_a_kv_cache_the_model_cannot_cost_is_refused():
    config = {**LLAMA_8B_CONFIG, "quantization": {**MODELOPT_FP8, "kv_cache_quant_algo": "NVFP4"}}

    with pytest.raises(SizingInputError) as error:
        custom_model_arch({"config": config})

    assert (error.value.data["reason"], error.value.data["field"]) == (
        "unsupported_architecture",
        "config",
    )
    assert error.value.message.startswith('the checkpoint\'s KV cache is "NVFP4", which ')
