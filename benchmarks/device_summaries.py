"""CPU of the idle scan's ``device_summaries`` at fleet size, on synthetic answers (issue #29
item 7); no Prometheus. Prints a table.

The 7 answers of ``summary_queries([1800])`` for ``BENCH_GPUS`` (100,800) cards are written as
Prometheus' JSON and decoded as the adapter does (``json.loads``, collector paused): the two
series answers with the labels of ``benchmarks/reclamation.py``'s exporter (a quarter of the
cards scraped with ``honorLabels: false``), the rest with the device's labels only, in the same
order, every card with 31 steps; a 97th of them with a mean of exactly 30 % (read per step).
``device_summaries`` then runs ``BENCH_RUNS`` (5) times on freshly decoded answers; reported:
CPU seconds per call (``time.process_time``: the machine's load changes it less than wall
time), min and median, and the devices and per-step keys it returns. Beside it, the adapter's
work around each answer: decoding the 7 (``json.loads``), searching their raw bytes for an
escaped NUL (``\\u0000``, done on every answer), and cleaning the largest one as an answer
holding a NUL is cleaned (rare: that answer only).

Run: ``.venv/bin/python benchmarks/device_summaries.py``.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GPUS = int(os.environ.get("BENCH_GPUS", "100800"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
END = 1_800_000_000.0
WINDOW = 1800
STEP_S = 60


def full_labels(c: int) -> dict[str, str]:
    """Card ``c``'s exporter labels (``Hostname`` or ``hostname``, a quarter renamed)."""
    labels = {
        "gpu": str(c % 8),
        "UUID": f"GPU-{c:08x}-0000-4000-8000-{c:012x}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname" if c % 4 < 2 else "hostname": f"node-{c // 8:05d}",
    }
    if c % 4 == 3:  # honorLabels: false
        labels |= {
            "exported_namespace": f"team-{c % 100}",
            "exported_pod": f"p-{c // 8}",
            "namespace": "gpu-operator",
            "pod": f"nvidia-dcgm-exporter-{c // 8:05x}",
        }
    else:
        labels |= {"namespace": f"team-{c % 100}", "pod": f"p-{c // 8}"}
    return labels | {"job": "dcgm-exporter", "instance": f"10.0.{c // 2000}.{c % 250}:9400"}


def answer_texts(gpus: int) -> dict[tuple[str, str, int], str]:
    """Each summary query's JSON answer: ``{"status": ..., "data": {"result": [...]}}``."""
    from scheduler_adapters.prometheus import _DEVICE_LABELS

    fulls = [full_labels(c) for c in range(gpus)]
    shorts = [{k: v for k, v in labels.items() if k in _DEVICE_LABELS} for labels in fulls]

    def text(rows) -> str:
        result = [{"metric": labels, "value": [END, value]} for labels, value in rows]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})

    # sum of 31 ratios: mean (c % 97) %, so c % 97 == 30 sits on the 30 % threshold
    return {
        ("prof", "series", WINDOW): text((labels, "31") for labels in fulls),
        ("fb", "series", WINDOW): text((labels, "31") for labels in fulls),
        ("dev", "count", WINDOW): text((labels, "31") for labels in shorts),
        ("prof", "sum", WINDOW): text((s, f"{(c % 97) * 0.31:.6g}") for c, s in enumerate(shorts)),
        ("prof", "max", WINDOW): text(
            (s, f"{(c % 97 + 0.1) / 100:.6g}") for c, s in enumerate(shorts)
        ),
        ("fb", "max", WINDOW): text((s, str(20000 + c % 5000)) for c, s in enumerate(shorts)),
        ("fb", "nonfinite", WINDOW): text([]),
    }


def main() -> None:
    from scheduler_adapters.prometheus import _without_nul, device_summaries

    texts = answer_texts(GPUS)
    raws = [text.encode() for text in texts.values()]  # what the adapter's HTTP client holds
    seconds, decoding, checks, read = [], [], [], None
    for _ in range(RUNS):
        gc.disable()
        started = time.process_time()
        nul = [b"\\" in raw and b"\\u0000" in raw for raw in raws]  # the adapter's (_get)
        checks.append(time.process_time() - started)
        assert not any(nul)
        started = time.process_time()
        answers = {name: json.loads(text)["data"]["result"] for name, text in texts.items()}
        decoding.append(time.process_time() - started)
        started = time.process_time()
        read = device_summaries(
            answers, windows=[WINDOW], end=END, step_s=STEP_S, min_coverage=0.9, near_pct=[30.0]
        )
        seconds.append(time.process_time() - started)
        gc.enable()
        del answers
    load = os.getloadavg()[0]
    print(f"device_summaries, {GPUS:,} GPUs, {RUNS} runs (load {load:.1f})")
    print(f"  CPU s per call: min {min(seconds):.3f}, median {statistics.median(seconds):.3f}")
    print(f"  devices {len(read.devices):,}, read per step {len(read.per_step):,}")
    print(
        f"  CPU s to decode the 7 answers: median {statistics.median(decoding):.3f};"
        f" to search them for a NUL: median {statistics.median(checks):.4f}"
    )
    # the slow path, taken only by an answer with a NUL: the largest answer walked whole
    gc.disable()
    body = json.loads(texts[("prof", "series", WINDOW)])
    started = time.process_time()
    _without_nul(body)
    print(f"  CPU s to clean one series answer holding a NUL: {time.process_time() - started:.3f}")
    gc.enable()


if __name__ == "__main__":
    main()
