"""NVIDIA aiconfigurator's measured tables, as the research aids under ``benchmarks/`` read them.

:func:`read_table` reads one table (a parquet file under :data:`BASE`) at :data:`COMMIT` from a
git directory of ai-dynamo/aiconfigurator (``fetch github:ai-dynamo/aiconfigurator``); it needs
pandas and pyarrow, not in the project's requirements.

A MoE table (``moe_perf.parquet``, already filtered to one MoE dtype, balanced routing and MoE TP 1)
holds the op's latency in ms per (hidden size, expert intermediate size, top-k, experts, EP,
tokens). ``benchmarks/fp4_kernel_shares.py`` and ``benchmarks/mxfp4_hopper_moe.py`` read the
same two things from it, by the methods their docstrings state: where the op multiplies, the
time each extra token pair adds; where it streams weights, its local experts' bytes over its
latency.
"""

from __future__ import annotations

import io
import statistics
import subprocess

BASE = "aic-core/src/aiconfigurator_core/systems/data"
COMMIT = "095f58a5"

SHAPE = ["hidden_size", "inter_size", "topk", "num_experts", "moe_ep_size"]
#: Token counts between which the op is timed where it multiplies.
COMPUTE_PAIRS = ((4096, 8192), (8192, 16384))
#: Rows per expert (tokens x k / experts) at the larger count from which the op is compute bound.
MIN_ROWS_COMPUTE = 512
#: Rows per expert where the op streams its weights, and the least local expert bytes counted.
STREAM_ROWS = (2, 32)
MIN_STREAM_BYTES = 100e6


def read_table(repo: str, path: str):
    """The pandas DataFrame of ``path`` (under :data:`BASE`, e.g.
    ``b200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet``) at :data:`COMMIT` in the git directory
    ``repo``. Raises ``subprocess.CalledProcessError`` when the file is not there."""
    import pandas

    blob = subprocess.run(
        ["git", "-C", repo, "show", f"{COMMIT}:{BASE}/{path}"], capture_output=True, check=True
    ).stdout
    return pandas.read_parquet(io.BytesIO(blob))


def compute_bound_steps(table) -> list[tuple[int, int, int, int, int, int, int, float]]:
    """Per shape and pair of :data:`COMPUTE_PAIRS` with at least :data:`MIN_ROWS_COMPUTE` rows
    per expert at the larger count: ``(hidden, inter, k, experts, ep, n1, n2, seconds)``,
    ``seconds`` = latency(n2) - latency(n1) (the fastest of a count's rows), pairs whose latency
    does not grow left out."""
    steps = []
    for (hidden, inter, k, experts, ep), group in table.groupby(SHAPE):
        latency = group.groupby("num_tokens").latency.min() / 1e3
        for n1, n2 in COMPUTE_PAIRS:
            if n1 in latency and n2 in latency and n2 * k / experts >= MIN_ROWS_COMPUTE:
                if latency[n2] > latency[n1]:
                    steps.append((hidden, inter, k, experts, ep, n1, n2, latency[n2] - latency[n1]))
    return steps


def stream_shares(
    table, *, bytes_per_weight: float, bandwidth: float
) -> list[tuple[int, int, float, float]]:
    """Per shape holding at least :data:`MIN_STREAM_BYTES` of local experts (experts / EP x 3 x
    hidden x inter x ``bytes_per_weight``) with rows at :data:`STREAM_ROWS` rows per expert:
    ``(experts, ep, local bytes, median over those rows of bytes / latency / bandwidth)``
    (``bandwidth`` in B/s)."""
    groups = []
    for (hidden, inter, k, experts, ep), group in table.groupby(SHAPE):
        local_bytes = experts / ep * 3 * hidden * inter * bytes_per_weight
        rows = group.num_tokens * k / experts
        bound = group[(rows >= STREAM_ROWS[0]) & (rows <= STREAM_ROWS[1])]
        if local_bytes >= MIN_STREAM_BYTES and len(bound):
            shares = local_bytes / (bound.latency / 1e3) / bandwidth
            groups.append((experts, ep, local_bytes, statistics.median(shares.tolist())))
    return groups
