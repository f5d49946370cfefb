"""Benchmark of the placement fitter and stranded capacity (issue #20), pure Python, no database.

Fleet: ``BENCH_NODES`` (2,000) nodes x 8 cards of one GPU model, three kinds of board in turn
(8-card NVSwitch: one domain; 4 bridged pairs; 8 cards without NVLink), and ``BENCH_HOLDS``
(10,000) holds of 1, 2, 4 or 8 cards on one node each, windows from 30 days ago to 60 days
ahead (seeded, so every run sees the same fleet). Measured:

- a shape check as approval does it, per request: free cards of every node for the request's
  window (one pass over the holds) and the best-fit placement of its shape (1 x 1, 1 x 2, 1 x 4,
  1 x 8 one domain, 2 x 8, 4 x 2, any 16), ``BENCH_CHECKS`` (300) random requests: p50 / p95 ms;
- (wall time, and this process's CPU time, which a machine shared with other work does not
  inflate);
- the stranded-capacity report over the next 28 days (card-hours per common shape, per node).

Targets (issue #20): shape check p50 < 20 ms; stranded report < 1 s. The database side of the
approval (reading the holds with a constant number of queries under the pool's lock) is measured
by ``benchmarks/approvals.py`` once shapes are stored on requests.
Run: ``.venv/bin/python benchmarks/placement.py``.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pools.capacity.placement import (  # noqa: E402  (after the path is set)
    Hold,
    NodeCards,
    Shape,
    fit_shape,
    free_for_window,
    stranded_card_hours,
)

NODES = int(os.environ.get("BENCH_NODES", "2000"))
HOLDS = int(os.environ.get("BENCH_HOLDS", "10000"))
CHECKS = int(os.environ.get("BENCH_CHECKS", "300"))
NOW = datetime(2026, 12, 7, tzinfo=UTC)
SHAPES = [
    Shape(1, 1),
    Shape(2, 1),
    Shape(4, 1),
    Shape(8, 1, True),
    Shape(8, 2, True),
    Shape(2, 4, True),
    Shape.any(16),
]
EIGHT = frozenset(range(8))
BOARDS = [
    (EIGHT,),
    tuple(frozenset({i, i + 1}) for i in range(0, 8, 2)),
    tuple(frozenset({i}) for i in range(8)),
]


def fleet(rng: random.Random) -> tuple[list[NodeCards], list[Hold]]:
    nodes = [NodeCards(f"node-{i:04d}", EIGHT, BOARDS[i % 3]) for i in range(NODES)]
    holds = []
    for _ in range(HOLDS):
        node = rng.choice(nodes)
        cards = rng.choice((1, 2, 4, 8))
        first = rng.randrange(0, 9 - cards)
        start = NOW + timedelta(hours=rng.randrange(-30 * 24, 60 * 24))
        holds.append(
            Hold(
                node.name,
                frozenset(range(first, first + cards)),
                start,
                start + timedelta(hours=rng.randrange(4, 21 * 24)),
            )
        )
    return nodes, holds


def main() -> None:
    rng = random.Random(20)
    nodes, holds = fleet(rng)
    timings, cpu, fitted = [], [], 0
    for _ in range(CHECKS):
        start = NOW + timedelta(hours=rng.randrange(0, 30 * 24))
        end = start + timedelta(days=rng.randrange(1, 15))
        shape = rng.choice(SHAPES)
        began, began_cpu = time.perf_counter(), time.process_time()
        result = fit_shape(free_for_window(nodes, holds, start, end), shape)
        timings.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
        fitted += result.fits
    began = time.perf_counter()
    report = stranded_card_hours(nodes, holds, NOW, NOW + timedelta(days=28))
    stranded_s = time.perf_counter() - began
    p50 = statistics.median(timings)
    p95 = statistics.quantiles(timings, n=20)[18]
    print(f"fleet: {NODES} nodes x 8 cards, {HOLDS} holds; {CHECKS} shape checks ({fitted} fit)")
    print(f"{'measure':42} {'value':>12} {'target':>10}")
    print(f"{'shape check p50 (ms)':42} {p50:12.2f} {'< 20':>10}")
    print(f"{'shape check p95 (ms)':42} {p95:12.2f} {'':>10}")
    cpu_p50 = statistics.median(cpu)
    print(f"{'shape check p50, CPU time of this process (ms)':42} {cpu_p50:12.2f} {'':>10}")
    print(f"{'stranded report, 28 days (s)':42} {stranded_s:12.3f} {'< 1':>10}")
    print(f"{'stranded card-hours (target shapes)':42} {report.card_hours:12.0f}")
    print(f"{'stranded card-hours for 1 x 8':42} {report.card_hours_for[8]:12.0f}")
    print(f"{'free card-hours':42} {report.free_card_hours:12.0f}")
    ok = p50 < 20 and stranded_s < 1
    print("OK" if ok else "TARGET MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
