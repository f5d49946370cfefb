"""Multimodal input (seeds/000 §6.3): images and video as input tokens and the vision
encoder's cost, worked by hand on Qwen2.5-VL-7B (its config.json's ``vision_config``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pools.sizing import SizingInputError
from pools.sizing.engines import ENGINE_PROFILES
from pools.sizing.gpus import gpu_spec, gpu_specs_from_catalogue
from pools.sizing.plan import estimate_from_fields, estimate_replica
from pools.sizing.presets import model_preset, model_presets

#: vLLM at half the tensor peak, pinned so the sums below hold whatever is shipped.
HALF = replace(ENGINE_PROFILES["vllm"], compute_efficiency=0.5)


def test_qwen2_5_vl_vision_encoder_parameters_by_hand():
    """vision_config: 32 blocks of hidden 1,280, MLP 3,420 (gated, with biases), a
    Conv3d patch embedding (3 channels x 2 frames x 14 x 14 -> 1,280, no bias) and a merger
    (RMSNorm, 5,120 -> 5,120 -> 3,584 with biases; 5,120 = 4 x 1,280, the 2 x 2 merge)."""
    patch_embed = 3 * 2 * 14 * 14 * 1_280  # 1,505,280
    block = (
        2 * 1_280  # two RMSNorms
        + 1_280 * 3 * 1_280 + 3 * 1_280  # qkv with bias: 4,919,040
        + 1_280 * 1_280 + 1_280  # proj: 1,639,680
        + 2 * (1_280 * 3_420 + 3_420)  # gate and up: 8,762,040
        + 3_420 * 1_280 + 1_280  # down: 4,378,880
    )  # fmt: skip
    merger = 1_280 + (5_120 * 5_120 + 5_120) + (5_120 * 3_584 + 3_584)
    vision = model_preset("qwen2_5_vl_7b").vision

    assert block == 19_702_200
    assert merger == vision.merger_params == 44_574_464
    assert patch_embed + 32 * block + merger == vision.params == 676_550_144
    # with the language model (Qwen2.5-7B's 7,615,616,512): the 8.29 B the model page shows
    assert model_preset("qwen2_5_vl_7b").total_params + vision.params == 8_292_166_656


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (1024, 1024, 1_369),  # round(1,024 / 28) = 37 -> 1,036 px: 74 x 74 patches / 4
        (448, 448, 256),  # 16 x 28 px: 32 x 32 patches / 4
        (1920, 1080, 2_691),  # 69 x 28 = 1,932 and 39 x 28 = 1,092: 138 x 78 / 4
        (10, 10, 1),  # at least one 28-px unit a side: 2 x 2 patches, one token
    ],
)
def test_an_image_is_its_28_pixel_units_in_tokens(width, height, tokens):
    assert model_preset("qwen2_5_vl_7b").vision.tokens(width, height) == tokens


def test_encoder_flops_of_one_1024_pixel_image_by_hand():
    """5,476 patches: 2 x 631,975,680 (parameters outside the merger) x 5,476 =
    6,921,397,647,360; merger 2 x 44,574,464 x 1,369 = 122,044,882,432; attention 4 x 1,280
    x 5,476 x (4 full layers x 5,476 + 28 windowed x (112 / 14)^2 = 64) = 28,037,120 x 23,696
    = 664,367,595,520. Sum 7,707,810,125,312 FLOPs, 7.7 TFLOP."""
    vision = model_preset("qwen2_5_vl_7b").vision

    assert vision.flops(1024, 1024) == 7_707_810_125_312


def _qwen_vl(input_tokens, encoder_flops=0.0):
    return estimate_replica(
        model=model_preset("qwen2_5_vl_7b"),
        gpu=gpu_spec("h100_sxm"),
        precision="BF16",
        kv_cache_dtype=None,
        tp=1,
        input_tokens=input_tokens,
        output_tokens=200,
        concurrency=1,
        engine=HALF,
        encoder_flops_per_request=encoder_flops,
    )


def test_an_image_adds_its_tokens_and_the_encoder_to_the_first_token():
    """One 1,024 x 1,024 image with 200 text tokens: the language model prefills 1,569 tokens,
    and the encoder's 7,707,810,125,312 FLOPs at H100 SXM's 989 BF16 TFLOPS x 0.5 take
    7.7078e12 / 4.945e14 = 15.587 ms more than the same 1,569 tokens of text."""
    request = {
        "model": "qwen2_5_vl_7b",
        "gpu": "h100_sxm",
        "precision": "BF16",
        "input_len": 200,
        "output_len": 200,
        "concurrency": 1,
        "images_per_request": 1,
    }
    with_image = estimate_from_fields(
        request, presets=model_presets(), gpus=gpu_specs_from_catalogue()
    )
    text = _qwen_vl(1_569)
    image = _qwen_vl(1_569, encoder_flops=7_707_810_125_312)

    assert with_image.input_tokens == 1_569
    assert with_image.encoder_flops_per_request == 7_707_810_125_312
    assert image.throughput.ttft_ms - text.throughput.ttft_ms == pytest.approx(15.587, abs=1e-3)


def test_the_vision_encoder_takes_16_bit_weights_on_every_card():
    # 676,550,144 x 2 B = 1,353,100,288 B; TP 2: 676,550,144 B a card
    one = _qwen_vl(1_569).memory
    two = estimate_replica(
        model=model_preset("qwen2_5_vl_7b"),
        gpu=gpu_spec("h100_sxm"),
        precision="FP8",
        kv_cache_dtype=None,
        tp=2,
        input_tokens=1_569,
        output_tokens=200,
    ).memory

    assert one.vision_weights_bytes_per_gpu == 1_353_100_288
    assert two.vision_weights_bytes_per_gpu == 676_550_144
    assert _text_model_memory().vision_weights_bytes_per_gpu == 0


def _text_model_memory():
    return estimate_replica(
        model=model_preset("qwen2_5_7b"),
        gpu=gpu_spec("h100_sxm"),
        precision="BF16",
        kv_cache_dtype=None,
        tp=1,
        input_tokens=200,
        output_tokens=200,
        concurrency=1,
    ).memory


def test_ten_seconds_of_video_at_2_fps_is_ten_frame_groups():
    """20 frames / temporal patch 2 = 10 groups of 448 x 448 px: 10 x 256 = 2,560 tokens."""
    estimate = estimate_from_fields(
        {
            "model": "qwen2_5_vl_7b",
            "gpu": "h100_sxm",
            "input_len": 100,
            "output_len": 100,
            "concurrency": 1,
            "video_seconds_per_request": 10,
            "image_width_px": 448,
            "image_height_px": 448,
        },
        presets=model_presets(),
        gpus=gpu_specs_from_catalogue(),
    )

    assert estimate.input_tokens == 100 + 2_560


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"model": "qwen2_5_7b", "images_per_request": 1}, "images_per_request", "not_multimodal"),
        ({"images_per_request": -1}, "images_per_request", "out_of_range"),
        ({"images_per_request": 1.5}, "images_per_request", "out_of_range"),
        ({"images_per_request": 1, "image_width_px": 0}, "image_width_px", "out_of_range"),
        ({"video_seconds_per_request": 5, "video_fps": 0}, "video_fps", "out_of_range"),
    ],
)
def test_bad_multimodal_fields_are_refused_by_name(fields, field, reason):
    request = {
        "model": "qwen2_5_vl_7b",
        "gpu": "h100_sxm",
        "input_len": 100,
        "output_len": 100,
        **fields,
    }
    with pytest.raises(SizingInputError) as caught:
        estimate_from_fields(request, presets=model_presets(), gpus=gpu_specs_from_catalogue())

    assert (caught.value.data["field"], caught.value.data["reason"]) == (field, reason)


def test_llama4_vision_encoder_parameters_by_hand():
    """Llama 4's vision tower (Scout and Maverick config.json vision_config: 34 layers, hidden
    1,408, MLP 5,632, 336-px images of 14-px patches; transformers' modeling_llama4.py):
    patch embedding 3 x 14 x 14 x 1,408 (no bias) = 827,904; class embedding 1,408; positions
    (24^2 + 1) x 1,408 = 812,416; two LayerNorms 4 x 1,408 = 5,632; per layer q, k, v, o with
    biases 4 x (1,408^2 + 1,408) = 7,935,488, fc1 / fc2 with biases 2 x 1,408 x 5,632 + 5,632 +
    1,408 = 15,866,752 and two LayerNorms 5,632: 23,807,872, x 34 = 809,467,648. Encoder
    811,115,008. Merger: pixel-shuffle MLP 5,632 x 4,096 + 4,096 x 4,096 = 39,845,888 and the
    projector 4,096 x 5,120 = 20,971,520: 60,817,408. Total 871,932,416; with Scout's text
    model (counted from its config) 108.7 B, the published 109 B."""
    layer = 4 * (1408 * 1408 + 1408) + (2 * 1408 * 5632 + 5632 + 1408) + 4 * 1408
    encoder = 3 * 14 * 14 * 1408 + 1408 + 577 * 1408 + 4 * 1408 + 34 * layer
    merger = 5632 * 4096 + 4096 * 4096 + 4096 * 5120
    assert (layer, encoder, merger) == (23_807_872, 811_115_008, 60_817_408)

    for preset in ("llama4_scout", "llama4_maverick"):
        vision = model_preset(preset).vision
        assert (vision.params, vision.merger_params) == (871_932_416, 60_817_408)
    scout = model_preset("llama4_scout")
    assert round((scout.total_params + scout.vision.params) / 1e9) == 109


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (336, 336, 144),  # one tile: 24 x 24 patches, 2 x 2 shuffled into one token
        (1024, 1024, (16 + 1) * 144),  # 4 x 4 tiles and the global one
        (672, 336, (2 + 1) * 144),
        (4000, 3000, (16 + 1) * 144),  # at most 16 tiles
    ],
)
def test_a_llama4_image_is_its_336_pixel_tiles_in_tokens(width, height, tokens):
    assert model_preset("llama4_scout").vision.tokens(width, height) == tokens


def test_a_llama4_request_with_an_image_counts_its_tiles_and_the_encoder():
    """Llama 4 Scout FP8 on one H200 with one 1,024 x 1,024 image: 17 tiles x 144 = 2,448
    input tokens on top of the text, the encoder's 871,932,416 BF16 weights on the card, and
    its work before the first token: 2 x 811,115,008 x 9,792 patches + 2 x 60,817,408 x 2,448
    tokens + 4 x 1,408 x 9,792 x 34 x 576 FLOPs."""
    fields = {
        "model": "llama4_scout",
        "gpu": "h200_sxm",
        "precision": "FP8",
        "input_len": 1_000,
        "output_len": 100,
        "concurrency": 1,
    }
    presets, gpus = model_presets(), gpu_specs_from_catalogue()
    text = estimate_from_fields(fields, presets=presets, gpus=gpus)
    image = estimate_from_fields({**fields, "images_per_request": 1}, presets=presets, gpus=gpus)

    assert image.input_tokens == text.input_tokens + 2_448
    assert image.memory.vision_weights_bytes_per_gpu == 871_932_416 * 2
    assert image.encoder_flops_per_request == pytest.approx(
        2 * 811_115_008 * 9_792 + 2 * 60_817_408 * 2_448 + 4 * 1_408 * 9_792 * 34 * 576
    )
    assert image.throughput.ttft_ms > text.throughput.ttft_ms
