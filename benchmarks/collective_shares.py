"""The NVLink bus bandwidth collectives reach, from aiconfigurator's measured collective tables.

A research aid (README, *measured collectives*): its all-reduce lines are
``pools.sizing.collectives.ALLREDUCE_BUS_SHARE``, which times tensor-parallel all-reduces; the
other collectives' shares are not used by the model.

Reads ai-dynamo/aiconfigurator @095f58a5, ``aic-core/src/aiconfigurator_core/systems/data/<system>/
comm/nccl/<version>/nccl_perf.parquet`` (nccl-tests ``*_perf`` out-of-place time, ``latency`` in
ms, ``message_size`` in elements of ``nccl_dtype``: half = 2 bytes, the whole buffer - the
gathered tensor for all-gather, the input for reduce-scatter, the send buffer for all-to-all;
``collector/network/collect_nccl.py``) and ``.../comm/trtllm/<version>/custom_allreduce_perf
.parquet`` (TensorRT-LLM's custom all-reduce, bfloat16 elements; ``collect_all_reduce.py``).

For every point: bus bandwidth = factor x bytes / time (nccl-tests' busbw: all-reduce 2 (n - 1)
/ n, the others (n - 1) / n), as a share of the card's NVLink per direction (A100 SXM 300 GB/s,
H100/H200 SXM 450, B200/B300/GB200/GB300 900). All-reduce takes the faster of NCCL and the
custom kernel at each size (TensorRT-LLM's AUTO strategy picks between them). The share is the
median over a generation's systems (Ampere: a100_sxm; Hopper: h100_sxm, h200_sxm; Blackwell:
b200_sxm, b300_sxm, gb200, gb300) at each rank count and message size, one NCCL version per
system (the newest: 2.29.2, a100 2.27.3) and TensorRT-LLM 1.3.0rc20 (a100 1.0.0).

Usage (needs pandas and pyarrow, not in the project's requirements):
    python benchmarks/collective_shares.py <aiconfigurator git dir>
prints one line per (generation, collective, ranks): the share at each of ``SIZES``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from statistics import median

from benchmarks.aiconfigurator_tables import read_table  # noqa: E402

#: NVLink GB/s per direction of each system (NVIDIA datasheets; the catalogue's nvlink_gbps / 2).
NVLINK_PER_DIRECTION = {
    "a100_sxm": 300,
    "h100_sxm": 450,
    "h200_sxm": 450,
    "b200_sxm": 900,
    "b300_sxm": 900,
    "gb200": 900,
    "gb300": 900,
}
GENERATION = {
    "a100_sxm": "Ampere",
    "h100_sxm": "Hopper",
    "h200_sxm": "Hopper",
    "b200_sxm": "Blackwell",
    "b300_sxm": "Blackwell",
    "gb200": "Blackwell",
    "gb300": "Blackwell",
}
NCCL = {"a100_sxm": "2.27.3"}
CUSTOM = {"a100_sxm": "1.0.0"}
#: Message sizes kept, bytes: 1 KiB to 256 MiB in steps of 4.
SIZES = [1024 * 4**k for k in range(10)]
OPS = ("all_gather", "reduce_scatter", "all_reduce", "alltoall")


def _factor(op: str, ranks: int) -> float:
    return (2 if op == "all_reduce" else 1) * (ranks - 1) / ranks


def shares(repo: str) -> dict:
    """{(generation, op, ranks): [share at each of SIZES]}."""
    found: dict = {}
    for system, per_dir in NVLINK_PER_DIRECTION.items():
        nccl = read_table(
            repo, f"{system}/comm/nccl/{NCCL.get(system, '2.29.2')}/nccl_perf.parquet"
        )
        nccl = nccl[nccl.nccl_dtype == "half"]
        custom = read_table(
            repo,
            f"{system}/comm/trtllm/{CUSTOM.get(system, '1.3.0rc20')}/custom_allreduce_perf.parquet",
        )
        for op in OPS:
            for ranks in sorted(nccl.num_gpus.unique()):
                times = []
                for size in SIZES:
                    rows = nccl[(nccl.op_name == op) & (nccl.num_gpus == ranks)]
                    t = rows[rows.message_size * 2 == size].latency.median()
                    if op == "all_reduce":
                        c = custom[(custom.num_gpus == ranks) & (custom.message_size * 2 == size)]
                        t = min(t, c.latency.median()) if len(c) else t
                    times.append(t * 1e-3)
                share = [
                    _factor(op, ranks) * s / t / (per_dir * 1e9)
                    for s, t in zip(SIZES, times, strict=True)
                ]
                found.setdefault((GENERATION[system], op, int(ranks)), []).append(share)
    return {
        key: [median(col) for col in zip(*rows, strict=True)] for key, rows in sorted(found.items())
    }


if __name__ == "__main__":
    for (generation, op, ranks), row in shares(sys.argv[1]).items():
        print(f'    ("{generation}", "{op}", {ranks}): ({", ".join(f"{s:.4g}" for s in row)}),')
