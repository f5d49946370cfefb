"""How fast TensorRT-LLM's MoE op runs gpt-oss's MXFP4 experts on Hopper (W4A16, TRITON backend).

A research aid: its output is ``pools.sizing.engines.TRTLLM_HOPPER_MXFP4_MOE_PEAK_SHARE`` and
``TRTLLM_HOPPER_MXFP4_MOE_STREAM_SHARE``.

What runs: TensorRT-LLM loads an MXFP4 checkpoint (openai/gpt-oss-*, ``quant_method`` mxfp4) as
``W4A16_MXFP4`` below SM 100 - MXFP4 weights, BF16 activations (``tensorrt_llm/_torch/
model_config.py``, ``ModelConfig.get_mxfp4_quant_algo``) - and on Hopper its MoE backend is
TRITON (perf-overview.md's GPT-OSS options file, "# Hopper: use TRITON"; the gpt-oss example's
support matrix, ``examples/models/core/gpt_oss/README.md``: Hopper, activation bf16, weight
mxfp4, TRITON). NVIDIA's aiconfigurator times exactly that op: its collector pins the TRITON
backend for gpt-oss shapes on SM 90 (``collector/trtllm/collect_moe.py``).

Reads ai-dynamo/aiconfigurator @095f58a5 ``aic-core/src/aiconfigurator_core/systems/data/
{h100_sxm,h200_sxm}/moe/trtllm/1.3.0rc20/moe_perf.parquet``, rows ``moe_dtype`` w4a16_mxfp4
(gpt-oss-20b's and -120b's shapes: hidden 2,880, expert intermediate 2,880, top 4 of 32 / 128
experts), balanced routing, MoE TP 1, every EP; latency in ms per op. The same two measures as
``throughput.MOE_FP8_BLOCK_GROUPED_GEMM_PEAK_SHARE`` and ``MOE_FP4_WEIGHT_STREAM_SHARE``:

- multiply rate: the slope (FLOPs(n2) - FLOPs(n1)) / (latency(n2) - latency(n1)), FLOPs = n x
  k x 2 x 3 x hidden x I / EP per card, for n = 4,096 -> 8,192 and 8,192 -> 16,384 where n2
  gives at least 512 rows per local expert (compute bound), over the card's dense BF16 peak
  (989 TFLOPS, H100 and H200 SXM); the median over the (card, shape, EP, pair) groups.
- weight stream: the local experts' MXFP4 bytes (E / EP x 3 x hidden x I x 4.25 / 8, the E8M0
  scale per 32 weights included) / latency / peak bandwidth (3.35 / 4.8 TB/s) at 2 to 32 rows
  per local expert (every local expert touched, little to multiply); the median per (card,
  shape, EP) group holding at least 100 MB of experts, then the median of those medians.

For comparison it prints the same slope for vLLM 0.24.0's gpt-oss kernel on the same cards
(``moe/vllm/0.24.0``, OpenAI's triton_kernels ``matmul_ogs``, EP 1).

Usage (needs pandas and pyarrow, not in the project's requirements):
    python benchmarks/mxfp4_hopper_moe.py <aiconfigurator git dir>
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.aiconfigurator_tables import compute_bound_steps, read_table, stream_shares  # noqa: E402

VERSION = "1.3.0rc20"
#: Dense BF16 tensor peak (TFLOPS) and memory bandwidth (B/s) of the cards, NVIDIA datasheets
#: (the catalogue's values).
CARDS = {"h100_sxm": (989e12, 3.35e12), "h200_sxm": (989e12, 4.8e12)}
MXFP4_BITS = 4 + 8 / 32


def _table(repo: str, system: str, engine: str, version: str):

    table = read_table(repo, f"{system}/moe/{engine}/{version}/moe_perf.parquet")
    keep = (
        (table.moe_dtype == "w4a16_mxfp4")
        & (table.distribution == "balanced")
        & (table.moe_tp_size == 1)
    )
    return table[keep]


def _slopes(table, peak: float) -> list[tuple]:
    return [
        (experts, ep, n1, n2, (n2 - n1) * k * 2 * 3 * hidden * inter / ep / seconds / peak)
        for hidden, inter, k, experts, ep, n1, n2, seconds in compute_bound_steps(table)
    ]


def _streams(table, bandwidth: float) -> list[tuple]:
    return stream_shares(table, bytes_per_weight=MXFP4_BITS / 8, bandwidth=bandwidth)


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares line y = a x + b: (a, b)."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    a = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    return a, mean_y - a * mean_x


def _slot_points(table, peak: float) -> tuple[list[float], list[float]]:
    """Per compute-bound slope: (seconds per routed slot if the local experts' share of its
    FLOPs ran at the BF16 peak, seconds per routed slot measured); a slot is a token's row
    to one of its k experts, n x k per op on every card."""
    steps = compute_bound_steps(table)
    xs = [2 * 3 * hidden * inter / ep / peak for hidden, inter, _k, _e, ep, *_ in steps]
    ys = [seconds / ((n2 - n1) * k) for _h, _i, k, _e, _ep, n1, n2, seconds in steps]
    return xs, ys


def main() -> int:
    repo = sys.argv[1]
    slopes, streams, xs, ys = [], [], [], []
    for system, (peak, bandwidth) in CARDS.items():
        table = _table(repo, system, "trtllm", VERSION)
        more_x, more_y = _slot_points(table, peak)
        xs += more_x
        ys += more_y
        for experts, ep, n1, n2, share in _slopes(table, peak):
            slopes.append(share)
            print(f"{system} E {experts} EP {ep} slope {n1}->{n2}: {share:.3f} of BF16 peak")
        for experts, ep, local_bytes, share in _streams(table, bandwidth):
            streams.append(share)
            print(f"{system} E {experts} EP {ep} stream ({local_bytes / 1e6:.0f} MB): {share:.3f}")
        vllm = _table(repo, system, "vllm", "0.24.0")
        for experts, _ep, n1, n2, share in _slopes(vllm[vllm.moe_ep_size == 1], peak):
            if experts in (32, 128):
                print(f"  vLLM 0.24.0 {system} E {experts} slope {n1}->{n2}: {share:.3f}")
    a, b = _fit(xs, ys)
    print(
        f"per-card slope = slot FLOPs / EP / ({1 / a:.4f} x BF16 peak) + {b * 1e9:.2f} ns per "
        f"slot, least squares over {len(xs)} slopes"
    )
    print(f"multiply: median {statistics.median(slopes):.4f} of BF16 peak over {len(slopes)}")
    print(f"stream: median {statistics.median(streams):.4f} of bandwidth over {len(streams)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
