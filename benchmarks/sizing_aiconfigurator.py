"""Check the sizing estimator's mixture-of-experts rows against NVIDIA's aiconfigurator (issue 34).

A research aid, not part of the project: it needs ``aiconfigurator-core`` 0.12.0 (PyPI; the
Python package of ai-dynamo/aiconfigurator, whose ``aic-core/src/aiconfigurator_core`` at
@095f58a51c4ca8e61b66ec108d86f223f8d559ce is the same code and kernel tables) with pandas and
pyarrow, in a virtual environment of their own - never the project's::

    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator-core==0.12.0 pandas pyarrow
    /tmp/aic/bin/python benchmarks/sizing_aiconfigurator.py imbalance
    /tmp/aic/bin/python benchmarks/sizing_aiconfigurator.py cells

**imbalance** prints, from aiconfigurator's TensorRT-LLM 1.3.0rc20 tables of the fused MoE op
(``systems/data/<card>/moe/trtllm/1.3.0rc20/moe_perf.parquet``, latency in ms per op, the
CUTLASS kernel), the op's time under the skewed routing aiconfigurator costs every
Mixtral / Llama 4 / Qwen3-MoE model with (``sdk/models/moe.py``: ``_power_law_alpha = 1.2``; the
collector, ``collector/helper.py`` ``_generate_power_law_distribution``, draws tokens per expert
from a power law with that exponent and puts the busiest expert-parallel rank's experts on the
measured rank) over its time under balanced routing, for the shapes of Llama 4 Maverick / Scout
and Qwen3-30B-A3B / 235B-A22B, at 1 to 8,192 tokens. Found (H100 / H200 FP8, B200 / GB200
NVFP4): at Maverick's shape (128 experts, top 1) the skewed op is *faster* from 64 to 2,048
tokens (0.46-0.9 x: fewer distinct experts to stream) and 1.0-1.3 x above; Scout's (16
experts) mostly 0.7-1.2 x up to 512 tokens, 1.3-4.2 x from 1,024 at EP 4-8; Qwen3's 0.7-1.1 x
up to 512 tokens, 1.2-2.0 x from 1,024 at EP 4-8. The skewed tables of H200 Maverick at EP 8
(4-7 x) and B200 Scout at EP 4 (1.6-2.0 x) at every size look like artefacts. Expert load
imbalance therefore lengthens only large prefill-heavy steps, and at Maverick's decode sizes it
shortens them.

**cells** predicts the TensorRT-LLM 1.0 perf-overview MoE cells of
``tests/fixtures/sizing_dataset_2026_moe.json`` with aiconfigurator alone: the layout the
page's MoE options name (attention DP = EP = TP for TP > 1), its KV budget
(``sdk/memory.py KVCacheEstimator``, 0.9 of the free memory) over input + output tokens per
sequence, capped by trtllm-bench's ``max_batch_size`` (:func:`trtllm_bench_settings`) and the
cell's request count per rank; a step is its ``mixed_step_latency`` with b x input / output
prompt tokens riding in; tok/s = ranks x b / step. It prints the error and the per-rank batch
that would give the measured rate under its step model. Found: Llama 4 Maverick FP8 on 8 x
H100 +72 ... +132 %, on 8 x H200 +23 ... +73 %, Scout FP8 on 4 x H100 +51 ... +89 % (its H200
Scout table gives 47 ms steps at 16 sequences, an artefact, so those cells are not
comparable), Qwen3-235B FP8 on 8 x H100 +32 ... +48 %; Qwen3-235B NVFP4 on 8 x B200 -6 ...
+35 %, Maverick NVFP4 on 8 x B200 +7 ... +45 % (128 / 128 +77 %), Scout / Qwen3-30B-A3B NVFP4 on
one B200 -17 ... +40 %, on one GB200 +4 ... +159 %. At the same per-rank batch its decode step
for Maverick / Scout on H100, H200 and B200 is within 13 % of this project's attention-DP step
(:func:`pools.sizing.throughput.replica_throughput`; aiconfigurator's mostly the shorter, 16 to
1,024 sequences per rank): NVIDIA's own model, with the skewed routing, misses the Llama 4
Hopper cells by as much as this one does; the batch that would give the measured rate is
0.3-0.5 of the one its KV memory holds at the output-heavy cells, on H100 and H200 alike.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pools.sizing.gpus import gpu_specs_from_catalogue  # noqa: E402
from pools.sizing.memory import precision_parse  # noqa: E402
from pools.sizing.presets import model_presets  # noqa: E402
from pools.sizing.throughput import trtllm_bench_settings  # noqa: E402

MOE_DATASET = ROOT / "tests" / "fixtures" / "sizing_dataset_2026_moe.json"
#: aiconfigurator's TensorRT-LLM version whose kernel tables cover H100, H200, B200 and GB200.
AIC_VERSION = "1.3.0rc20"
#: Hugging Face ids of the presets, as aiconfigurator ships their ``config.json``
#: (``aiconfigurator_core/model_configs``).
MODEL_PATHS = {
    "llama4_maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "llama4_scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "qwen3_235b_a22b": "Qwen/Qwen3-235B-A22B",
    "qwen3_30b_a3b": "Qwen/Qwen3-30B-A3B",
}
#: Catalogue slug -> aiconfigurator system name.
SYSTEMS = {"h100_sxm": "h100_sxm", "h200_sxm": "h200_sxm", "b200": "b200_sxm", "gb200": "gb200"}
#: (hidden, expert MLP size, experts per token, experts) of each preset's MoE layers, from
#: their ``config.json`` (``pools/sizing/models.json``).
MOE_SHAPES = {
    "llama4_maverick": (5120, 8192, 1, 128),
    "llama4_scout": (5120, 8192, 1, 16),
    "qwen3_30b_a3b": (2048, 768, 8, 128),
    "qwen3_235b_a22b": (4096, 1536, 8, 128),
}
#: The card's MoE weight type in the perf-overview's checkpoints (FP8 on Hopper, NVFP4 else).
CARD_DTYPES = {"h100_sxm": "fp8", "h200_sxm": "fp8", "b200_sxm": "nvfp4", "gb200": "nvfp4"}
TOKENS = (1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
#: aiconfigurator's KV share of free memory for TensorRT-LLM (the perf-overview's default).
KV_FRACTION = 0.9


def _moe_table(system: str):
    import aiconfigurator_core
    import pandas

    base = Path(aiconfigurator_core.__file__).parent / "systems" / "data" / system
    return pandas.read_parquet(base / "moe" / "trtllm" / AIC_VERSION / "moe_perf.parquet")


def imbalance() -> None:
    """Print power_law_1.2 / balanced latency of the fused MoE op per shape, card, TP x EP."""
    for system, dtype in CARD_DTYPES.items():
        table = _moe_table(system)
        cutlass = table.kernel_source == "moe_torch_flow_cutlass"
        table = table[(table.moe_dtype == dtype) & cutlass]
        for name, (hidden, inter, topk, experts) in MOE_SHAPES.items():
            shape = table[
                (table.hidden_size == hidden)
                & (table.inter_size == inter)
                & (table.topk == topk)
                & (table.num_experts == experts)
                & (table.moe_tp_size == 1)
            ]
            for ep, group in shape.groupby("moe_ep_size"):
                if ep not in (1, 4, 8):
                    continue
                pivot = group.pivot_table(
                    index="num_tokens", columns="distribution", values="latency", aggfunc="min"
                )
                if "balanced" not in pivot or "power_law_1.2" not in pivot:
                    continue
                ratios = (pivot["power_law_1.2"] / pivot["balanced"]).reindex(TOKENS)
                cells = " ".join(f"{t}:{r:.2f}" for t, r in ratios.items() if r == r)
                print(f"{system:9} {name:16} EP{ep}: power-law 1.2 / balanced  {cells}")


def _engine(ref: str, gpu: str, tp: int, dtype: str):
    from aiconfigurator_core.sdk.engine import EngineHandle
    from aiconfigurator_core.sdk.memory import KVCacheEstimator

    dp = tp if tp > 1 else 1
    layout = dict(
        tp_size=tp // dp,
        attention_dp_size=dp,
        moe_tp_size=1,
        moe_ep_size=tp,
        gemm_quant_mode=dtype,
        moe_quant_mode=dtype,
        kvcache_quant_mode="fp8",
    )
    system = SYSTEMS[gpu]
    engine = EngineHandle.compile(
        MODEL_PATHS[ref], system, "trtllm", backend_version=AIC_VERSION, **layout
    )
    memory = KVCacheEstimator.from_request(
        MODEL_PATHS[ref],
        system,
        "trtllm",
        AIC_VERSION,
        max_num_tokens=8192,
        max_batch_size=512,
        **layout,
    )
    kv = memory.estimate(
        is_of_free=True, fraction=KV_FRACTION, gpu_memory_capacity_bytes_override=None
    )
    return engine, kv["total_kv_size_tokens"], dp


def _rate(engine, batch: int, isl: int, osl: int, ranks: int) -> tuple[float, float]:
    step_ms = engine.mixed_step_latency(round(batch * isl / osl), batch, isl, osl)
    return ranks * batch / step_ms * 1e3, step_ms


def cells() -> None:
    """Print aiconfigurator's prediction of every MoE perf-overview cell it has tables for."""
    rows = json.loads(MOE_DATASET.read_text(encoding="utf-8"))["measurements"]
    presets, gpus = model_presets(), gpu_specs_from_catalogue()
    engines: dict[tuple, tuple] = {}
    for row in rows:
        ref, gpu, tp = row["model_ref"], row["gpu"], row["tp"]
        if ref not in MODEL_PATHS or gpu not in SYSTEMS:
            continue
        dtype = "nvfp4" if "FP4" in row["precision"].upper() else "fp8"
        key = (ref, gpu, tp, dtype)
        if key not in engines:
            engines[key] = _engine(ref, gpu, tp, dtype)
        engine, kv_tokens, ranks = engines[key]
        isl, osl, measured = row["input_len"], row["output_len"], row["output_tok_s_total"]
        found = re.search(r"(\d[\d,]*) requests", row.get("scenario", ""))
        requests = int(found.group(1).replace(",", "")) if found else 10**9
        settings = trtllm_bench_settings(
            model=presets[ref],
            precision=precision_parse("NVFP4" if dtype == "nvfp4" else "FP8"),
            kv_bits=8,
            gpu=gpus[gpu],
            tp=tp,
            pp=1,
            input_tokens=isl,
            output_tokens=osl,
        )
        cap = settings[0] if settings else 10**9
        batch = max(1, min(kv_tokens // (isl + osl), cap, requests // ranks))
        predicted, step_ms = _rate(engine, batch, isl, osl, ranks)
        low, high = 1, 4 * batch
        while low < high:
            middle = (low + high) // 2
            if _rate(engine, middle, isl, osl, ranks)[0] < measured:
                low = middle + 1
            else:
                high = middle
        print(
            f"{ref:16} {gpu:9} TP{tp} {isl:>5}/{osl:<5} measured {measured:>9,.0f} "
            f"aiconfigurator {predicted:>9,.0f} ({(predicted / measured - 1) * 100:+6.1f} %) "
            f"batch/rank {batch:>5} (KV {kv_tokens // (isl + osl)}, cap {cap}) "
            f"implied {low:>5} step {step_ms:7.2f} ms"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("imbalance", "cells"))
    args = parser.parse_args()
    try:
        import aiconfigurator_core  # noqa: F401
    except ImportError:
        parser.error("needs aiconfigurator-core 0.12.0, pandas and pyarrow (module docstring)")
    if args.what == "imbalance":
        imbalance()
    else:
        cells()
    return 0


if __name__ == "__main__":
    sys.exit(main())
