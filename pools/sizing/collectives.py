"""The bus bandwidth an all-reduce reaches over NVLink, measured, as a share of the link rate.

A tensor-parallel step all-reduces messages of a few KiB (one sequence) to tens of MiB (a full
batch: 3,000 tokens x 8,192 x 2 bytes = 49 MB), and at those sizes a collective is far from the
link rate: eight B200 reach 21 % of NVLink's 900 GB/s at 4 MiB and 39 % at 16 MiB, eight H200
33 % and 54 % of 450 GB/s. One constant share (the ring formula's) is right only for messages
of a GiB.

:data:`ALLREDUCE_BUS_SHARE` is NVIDIA aiconfigurator's measured all-reduce tables
(ai-dynamo/aiconfigurator @095f58a5, ``aic-core/src/aiconfigurator_core/systems/data/<system>/
comm/nccl/<version>/nccl_perf.parquet`` - nccl-tests - and ``.../comm/trtllm/1.3.0rc20/
custom_allreduce_perf.parquet`` - TensorRT-LLM's own all-reduce kernels, BF16), the faster of
the two at each size (TensorRT-LLM's AUTO strategy picks between them), as bus bandwidth
(nccl-tests' busbw: 2 (n - 1) / n x bytes / time) over NVLink per direction, the median over a
generation's systems (Ampere: A100 SXM; Hopper: H100, H200 SXM; Blackwell: B200, B300, GB200,
GB300), for 2, 4 and 8 cards at :data:`ALLREDUCE_SIZES` bytes. ``benchmarks/collective_shares.py``
prints the table from those files (a research aid: it needs pandas and pyarrow).
"""

from __future__ import annotations

import math

#: Message sizes of :data:`ALLREDUCE_BUS_SHARE`, bytes: 1 KiB to 256 MiB in steps of 4.
ALLREDUCE_SIZES: tuple[int, ...] = tuple(1024 * 4**k for k in range(10))

#: (generation, cards) -> bus bandwidth / NVLink per direction at each of
#: :data:`ALLREDUCE_SIZES` (module docstring; ``benchmarks/collective_shares.py``).
# fmt: off
ALLREDUCE_BUS_SHARE: dict[tuple[str, int], tuple[float, ...]] = {
    #                 1 KiB      4 KiB     16 KiB    64 KiB   256 KiB
    #                 1 MiB      4 MiB     16 MiB    64 MiB   256 MiB
    ("Ampere", 2):    (0.0008889, 0.003252, 0.01069 , 0.04284 , 0.142,
                       0.3023  , 0.2575  , 0.4362  , 0.5714  , 0.6257),
    ("Ampere", 4):    (0.001269, 0.004348, 0.01297 , 0.05433 , 0.1399,
                       0.2268  , 0.305   , 0.4571  , 0.6165  , 0.6967),
    ("Ampere", 8):    (0.001302, 0.003941, 0.01141 , 0.04247 , 0.09392,
                       0.1574  , 0.3225  , 0.452   , 0.6576  , 0.7197),
    ("Hopper", 2):    (0.0008435, 0.003225, 0.01283 , 0.0485  , 0.1586,
                       0.3854  , 0.5534  , 0.5018  , 0.5936  , 0.6751),
    ("Hopper", 4):    (0.001166, 0.00434 , 0.01686 , 0.05991 , 0.1603,
                       0.2714  , 0.3704  , 0.5655  , 0.6867  , 0.7578),
    ("Hopper", 8):    (0.001257, 0.004526, 0.01809 , 0.05556 , 0.1006,
                       0.1595  , 0.3333  , 0.5363  , 0.816   , 0.9749),
    ("Blackwell", 2): (0.0002563, 0.0009837, 0.003795, 0.0153  , 0.0607,
                       0.1907  , 0.4029  , 0.4274  , 0.5101  , 0.5752),
    ("Blackwell", 4): (0.0003606, 0.001396, 0.005436, 0.0211  , 0.07617,
                       0.1842  , 0.2631  , 0.3824  , 0.6188  , 0.68),
    ("Blackwell", 8): (0.0003771, 0.00139 , 0.005439, 0.02156 , 0.06557,
                       0.1159  , 0.2071  , 0.3886  , 0.4736  , 0.7297),
}
# fmt: on

_MEASURED_CARDS = (2, 4, 8)


def measured_allreduce_share(
    *, architecture: str, cards: int, message_bytes: float
) -> float | None:
    """Bus bandwidth share of NVLink per direction that an all-reduce of ``message_bytes``
    across ``cards`` NVSwitch-connected cards of ``architecture`` reaches, from
    :data:`ALLREDUCE_BUS_SHARE`; ``None`` for a generation without a table (Volta, Turing).

    Between two measured sizes the share is interpolated on log-log axes (time and share are
    both power laws of the size between neighbouring points). Below 1 KiB the time is the 1 KiB
    time (the latency floor), so the share falls in proportion to the size; above 256 MiB it
    stays at the 256 MiB share. A group of cards not measured takes the measured count at or
    above it (3 -> 4; 5 to 7 -> 8), a group larger than 8 (a GB200 NVL72 domain) the 8-card
    curve. Eight H200, 8 MiB: between 0.3333 (4 MiB) and 0.5363 (16 MiB), halfway on the log
    axis, sqrt(0.3333 x 0.5363) = 0.42279.
    """
    measured = next((n for n in _MEASURED_CARDS if n >= cards), _MEASURED_CARDS[-1])
    row = ALLREDUCE_BUS_SHARE.get((architecture, measured))
    if row is None:
        return None
    sizes = ALLREDUCE_SIZES
    if message_bytes <= sizes[0]:
        return row[0] * message_bytes / sizes[0]
    if message_bytes >= sizes[-1]:
        return row[-1]
    upper = next(i for i, size in enumerate(sizes) if size >= message_bytes)
    lower = upper - 1
    position = math.log(message_bytes / sizes[lower]) / math.log(sizes[upper] / sizes[lower])
    return math.exp(math.log(row[lower]) + position * (math.log(row[upper]) - math.log(row[lower])))
