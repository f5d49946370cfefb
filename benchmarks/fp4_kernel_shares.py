"""What share of a Blackwell card's peaks TensorRT-LLM's FP4 kernels reach, per chip family.

A research aid (README, *FP4 kernel shares*): its output for the RTX PRO 6000 Blackwell Server is
``pools.sizing.fp4_kernels.SM120_KERNELS``; the same lines for the B200 and GB200 show how far
the SM120 chips' kernels sit from the datacentre ones', whose shares the model takes from other
publications (``pools.sizing.fp4_kernels.SM100_KERNELS``).

Reads ai-dynamo/aiconfigurator @095f58a5, ``aic-core/src/aiconfigurator_core/systems/data/
<system>/{gemm,moe}/trtllm/1.3.0rc20/{gemm,moe}_perf.parquet`` (latency in ms per op) for
``rtx_pro_6000_server``, ``b200_sxm`` and ``gb200``, and prints per system:

- dense NVFP4 GEMM: 2 x m x n x k / latency over the card's dense FP4 peak, median over every
  shape with m, n and k all at least 4,096 (compute bound);
- MoE grouped GEMM (TensorRT-LLM's fused MoE op, NVFP4, balanced routing, MoE TP 1): the
  multiply rate as the slope between two token counts, (FLOPs(n2) - FLOPs(n1)) / (latency(n2) -
  latency(n1)), FLOPs = tokens x k x 2 x 3 x hidden x I / EP, for n = 4,096 -> 8,192 and
  8,192 -> 16,384 where the op has at least 512 rows per expert at n2, over the FP4 peak,
  median over (shape, EP, pair);
- MoE weight stream: the local experts' NVFP4 bytes, E / EP x 3 x hidden x I x 4.5 / 8 (scales
  included), over the latency, where the op has 2 to 32 rows per expert, over the card's peak
  bandwidth; the median of each (shape, EP) group's median, groups holding at least 100 MB.

Peaks: the catalogue's (``pools/inventory/catalogue/gpu_models.json`` bandwidth,
``pools.sizing.gpus.FP4_DENSE_TFLOPS``).

Usage (needs pandas and pyarrow, not in the project's requirements):
    python benchmarks/fp4_kernel_shares.py <aiconfigurator git dir>
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.aiconfigurator_tables import compute_bound_steps, read_table, stream_shares  # noqa: E402

VERSION = "1.3.0rc20"
#: system -> (dense FP4 TFLOPS, peak bandwidth GB/s), as the catalogue holds them.
SYSTEMS = {
    "rtx_pro_6000_server": (2015.2, 1597.0),
    "b200_sxm": (9000.0, 8000.0),
    "gb200": (10000.0, 8000.0),
}
NVFP4_BYTES_PER_WEIGHT = 4.5 / 8


def _table(repo: str, system: str, op: str):
    return read_table(repo, f"{system}/{op}/trtllm/{VERSION}/{op}_perf.parquet")


def dense_share(gemm, peak_tflops: float) -> float:
    big = gemm[
        (gemm.gemm_dtype == "nvfp4") & (gemm.m >= 4096) & (gemm.n >= 4096) & (gemm.k >= 4096)
    ]
    rate = 2 * big.m * big.n * big.k / (big.latency / 1e3)
    return float((rate / 1e12 / peak_tflops).median())


def moe_shares(moe, peak_tflops: float, bandwidth_gbps: float) -> tuple[float, float]:
    ops = moe[
        (moe.moe_dtype == "nvfp4") & (moe.distribution == "balanced") & (moe.moe_tp_size == 1)
    ]
    compute = [
        (n2 - n1) * k * 2 * 3 * hidden * inter / ep / seconds / 1e12 / peak_tflops
        for hidden, inter, k, _experts, ep, n1, n2, seconds in compute_bound_steps(ops)
    ]
    stream = stream_shares(
        ops, bytes_per_weight=NVFP4_BYTES_PER_WEIGHT, bandwidth=bandwidth_gbps * 1e9
    )
    return statistics.median(compute), statistics.median(share for *_, share in stream)


def main() -> int:
    repo = sys.argv[1]
    print(f"{'system':<22} {'dense GEMM':>10} {'MoE GEMM':>9} {'MoE stream':>10}")
    for system, (peak, bandwidth) in SYSTEMS.items():
        dense = dense_share(_table(repo, system, "gemm"), peak)
        grouped, stream = moe_shares(_table(repo, system, "moe"), peak, bandwidth)
        print(f"{system:<22} {dense:>10.3f} {grouped:>9.3f} {stream:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
