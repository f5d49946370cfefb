"""Multimodal input (``000`` §6.3): images and video become input tokens, and the vision
encoder that makes them costs compute and memory of its own.

seeds/000 §6.3: "an ordinary image entering a VLM may be cut into hundreds or even thousands of
visual tokens, a video into tens of thousands ... the vision encoder's compute and memory must
be assessed separately, not only the language model's parameters" (一张普通图片进入VLM后，可能被
切成几百个甚至上千个视觉token ... 需要单独评估视觉编码器的算力消耗和显存占用).

The encoder modelled is a ViT over square patches whose neighbouring ``spatial_merge_size`` x
``spatial_merge_size`` patches are merged into one language-model token, as Qwen2.5-VL's
(Qwen2.5-VL technical report, arXiv 2502.13923, §2.1; its config.json ``vision_config``):

- an image is resized so each side is a multiple of patch x merge pixels (28 for Qwen2.5-VL:
  ``smart_resize`` in its image processor), then cut into 14 x 14 patches; tokens = patches / 4;
- a video is sampled at ``fps`` frames per second and every ``temporal_patch_size`` (2)
  frames make one group of patches, as one image of the frame's size;
- encoder FLOPs per image = 2 x (encoder parameters outside the merger) x patches (one
  multiply-add per parameter per patch, Kaplan et al. 2020, arXiv 2001.08361 §2.1) + 2 x
  merger parameters x tokens + attention 4 x hidden x patches x the patches each attends to
  (all of them in the ``full_attention_layers``, a window of (window / patch)^2 in the others).

Llama 4's encoder (``tile_px``) instead cuts an image into 336-px tiles (at most 16, plus a
global tile of the whole image when there are several; its image processor), 24 x 24 patches
each, attending within the tile, and pixel-shuffles 2 x 2 patches into one token (ratio 0.5):
144 tokens a tile.

Pure: no Django.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pools.sizing import SizingInputError


@dataclass(frozen=True)
class VisionEncoder:
    """A model's vision encoder (see the module docstring). ``params``: every parameter of the
    encoder and its merger (weights kept at 16 bit: quantised checkpoints leave the vision
    tower in BF16); ``merger_params``: the merger's (it runs on the merged tokens);
    ``window_size_px`` ``None``: every layer attends globally. ``tile_px``: the encoder sees
    fixed square tiles instead of the resized image (Llama 4: 336 px, at most ``max_tiles`` 16,
    plus one global tile of the whole image when there is more than one; its image processor's
    ``max_patches`` and ``add_global_tile``), each tile attending within itself."""

    params: int
    merger_params: int
    depth: int
    hidden_size: int
    patch_size: int
    spatial_merge_size: int
    temporal_patch_size: int
    full_attention_layers: int
    window_size_px: int | None = None
    tile_px: int | None = None
    max_tiles: int = 1

    @property
    def unit_px(self) -> int:
        """The side an image is rounded to a multiple of: patch x merge (28 px)."""
        return self.patch_size * self.spatial_merge_size

    def tiles(self, width_px: int, height_px: int) -> int:
        """Tiles of one image for a tiling encoder: ceil(side / tile) per side, the longer side
        giving up a tile until at most ``max_tiles`` remain (an approximation of Llama 4's
        ``get_best_fit`` canvas), plus the global tile when more than one. 1,024 x 1,024 at
        336 px: 4 x 4 = 16 + 1 = 17; 336 x 336: 1."""
        across = math.ceil(width_px / self.tile_px)
        down = math.ceil(height_px / self.tile_px)
        while across * down > self.max_tiles:
            if across >= down:
                across -= 1
            else:
                down -= 1
        local = across * down
        return local + (1 if local > 1 else 0)

    def patches(self, width_px: int, height_px: int) -> int:
        """Patches of one image (or one group of video frames) after the resize: each side
        rounded to the nearest multiple of :attr:`unit_px` (at least one). 1,024 x 1,024:
        round(1,024 / 28) = 37 -> 1,036 px, 74 x 74 = 5,476 patches. A tiling encoder: tiles x
        (tile / patch)^2 (Llama 4, 1,024 x 1,024: 17 x 576 = 9,792)."""
        if self.tile_px is not None:
            return self.tiles(width_px, height_px) * (self.tile_px // self.patch_size) ** 2
        unit = self.unit_px
        width = max(unit, round(width_px / unit) * unit)
        height = max(unit, round(height_px / unit) * unit)
        return (width // self.patch_size) * (height // self.patch_size)

    def tokens(self, width_px: int, height_px: int) -> int:
        """Language-model tokens of one image: patches / merge^2 (5,476 / 4 = 1,369)."""
        return self.patches(width_px, height_px) // self.spatial_merge_size**2

    def flops(self, width_px: int, height_px: int) -> float:
        """Encoder FLOPs of one image (module docstring)."""
        n = self.patches(width_px, height_px)
        window = n
        if self.window_size_px is not None:
            window = min(n, (self.window_size_px // self.patch_size) ** 2)
        attended = self.full_attention_layers * n + (self.depth - self.full_attention_layers) * (
            window
        )
        linear = 2 * (self.params - self.merger_params) * n
        merger = 2 * self.merger_params * (n // self.spatial_merge_size**2)
        return float(linear + merger + 4 * self.hidden_size * n * attended)


@dataclass(frozen=True)
class VisualLoad:
    """What one request's images and video add: ``tokens`` to the language model's input,
    ``encoder_flops`` of vision-encoder work before its prefill, from ``images`` images and
    ``video_groups`` groups of video frames of ``width_px`` x ``height_px``."""

    images: int
    video_groups: int
    width_px: int
    height_px: int
    tokens_per_item: int
    tokens: int
    encoder_flops_per_item: float
    encoder_flops: float


def visual_load(
    encoder: VisionEncoder | None,
    *,
    model_name: str,
    images: int = 0,
    video_seconds: float = 0.0,
    video_fps: float = 2.0,
    width_px: int = 1024,
    height_px: int = 1024,
) -> VisualLoad | None:
    """The visual load of one request (``None`` without images or video). Video: ceil(seconds x
    fps / temporal patch) groups, each costed as one image. Raises :class:`SizingInputError`
    (``images_per_request``, ``not_multimodal``) when the model has no vision encoder.

    Qwen2.5-VL-7B, one 1,024 x 1,024 image: 1,369 tokens; 10 s of video at 2 fps: 20 frames,
    10 groups, 13,690 tokens."""
    if not images and not video_seconds:
        return None
    if encoder is None:
        raise SizingInputError(
            f"{model_name} has no vision encoder: it takes text only",
            reason="not_multimodal",
            field="images_per_request" if images else "video_seconds_per_request",
        )
    groups = math.ceil(video_seconds * video_fps / encoder.temporal_patch_size - 1e-9)
    items = images + groups
    per_item = encoder.tokens(width_px, height_px)
    flops = encoder.flops(width_px, height_px)
    return VisualLoad(
        images=images,
        video_groups=groups,
        width_px=width_px,
        height_px=height_px,
        tokens_per_item=per_item,
        tokens=items * per_item,
        encoder_flops_per_item=flops,
        encoder_flops=items * flops,
    )
