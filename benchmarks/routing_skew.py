"""How much longer TensorRT-LLM's MoE op takes when tokens reach the experts unevenly.

A research aid (README, *measured routing skew*): its output is
``pools.sizing.routing.ROUTING_SKEW_RATIO``.

Reads ai-dynamo/aiconfigurator @095f58a5, ``aic-core/src/aiconfigurator_core/systems/data/
<system>/moe/trtllm/1.3.0rc20/moe_perf.parquet`` for b200_sxm, h200_sxm and h100_sxm: the fused
MoE op's latency (ms) per (MoE dtype, tokens, hidden size, expert intermediate size, top-k,
experts, MoE TP, MoE EP) under three token distributions, ``balanced`` and ``power_law_1.01`` /
``power_law_1.2`` (the collector's ``_generate_power_law_distribution``, ``collector/helper.py``:
tokens per expert drawn from a power law of that exponent, the EP rank with the most tokens
timed). For every point with MoE TP 1 and EP 1, 2, 4 or 8, the ratio power law / balanced. The
model's value per (exponent, EP) is the median over MoE dtypes, expert shapes, the three systems
and the compute-bound token counts (``COMPUTE_BOUND_TOKENS``); the median at each token count of
``TOKENS`` is printed beside it (the ratio rises from below 1 at 128 tokens, where the op streams
weights, to that level).

Usage (needs pandas and pyarrow, not in the project's requirements):
    python benchmarks/routing_skew.py <aiconfigurator git dir>
prints one line per (exponent, EP): the compute-bound ratio, then the ratio at each of ``TOKENS``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.aiconfigurator_tables import read_table  # noqa: E402

SYSTEMS = ("b200_sxm", "h200_sxm", "h100_sxm")
VERSION = "1.3.0rc20"
TOKENS = (128, 160, 192, 256, 320, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
          12288, 16384)  # fmt: skip
#: Where the op is compute bound at every shape: the ratio levels off (the table's value).
COMPUTE_BOUND_TOKENS = (8192, 12288, 16384)
EXPONENTS = ("1.01", "1.2")
RANKS = (1, 2, 4, 8)
KEY = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
       "moe_tp_size", "moe_ep_size"]  # fmt: skip


def main() -> int:
    import pandas as pd

    repo = sys.argv[1]
    frames = []
    for system in SYSTEMS:
        table = read_table(repo, f"{system}/moe/trtllm/{VERSION}/moe_perf.parquet")
        wide = table.pivot_table(index=KEY, columns="distribution", values="latency", aggfunc="min")
        frames.append(wide.reset_index())
    points = pd.concat(frames)
    points = points[(points.moe_tp_size == 1) & points.moe_ep_size.isin(RANKS)]
    bound = points.num_tokens.isin(COMPUTE_BOUND_TOKENS)
    for exponent in EXPONENTS:
        points[exponent] = points[f"power_law_{exponent}"] / points["balanced"]
        medians = points.groupby(["moe_ep_size", "num_tokens"])[exponent].median()
        asymptotes = points[bound].groupby("moe_ep_size")[exponent].median()
        for ranks in RANKS:
            row = ", ".join(f"{medians[(ranks, tokens)]:.3f}" for tokens in TOKENS)
            print(f"({exponent}, {ranks}): {asymptotes[ranks]:.3f}  by tokens: ({row})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
