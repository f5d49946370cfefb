"""Validate the sizing estimator against published measurements (issue #5).

Runs :func:`pools.sizing.plan.estimate_from_fields` over every measurement of
``tests/fixtures/sizing_dataset.json`` (a copy of ``shared/sizing/sizing_dataset.json``) and prints
one line per row: model, GPU, TP, precision, lengths, load, measured and predicted output tok/s of
the whole GPU group, and the error; then TPOT / TTFT where a row has them, and the median absolute
percentage error (MdAPE) of decode throughput. Target: MdAPE <= 25 %.

No constant is fitted to these rows: the estimator's efficiency constants are the cited ones in
``pools/sizing/throughput.py`` and ``pools/sizing/memory.py``. The dataset's rows are written by
hand from their sources, so some conditions come as prose; this script turns them into estimator
inputs with the rules below and says so in the table (``note``) when it assumes something:

- precision: "16-bit" and "not stated (16-bit assumed)" -> FP16; "FP8 (ModelOpt)" -> FP8;
  "GPTQ 4-bit" -> INT4-GPTQ.
- KV-cache dtype "not stated": FP8 for TensorRT-LLM FP8 runs (its docs: "If you specify FP8
  quantization, the KV cache will automatically be set to FP8 as well"), else 16-bit.
- lengths given as "ShareGPT (~206 mean input tokens ...)" -> the stated mean (206); rows whose
  lengths are "not stated" cannot be estimated and are listed as skipped.
- engine: TensorRT-LLM -> tensorrt-llm profile; vLLM -> vllm; Hugging Face TGI -> vllm (TGI also
  batches continuously with paged attention).
- load: ``concurrency`` -> closed loop at that many sequences; ``request_rate_qps`` -> open loop at
  that rate (Little's law); neither, or "INF" -> saturation.

Usage: ``python benchmarks/sizing.py [--dataset PATH]``; exit status 0 when MdAPE <= 25 %, else 1.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pools.sizing import SizingInputError  # noqa: E402
from pools.sizing.gpus import gpu_specs_from_catalogue  # noqa: E402
from pools.sizing.plan import estimate_from_fields  # noqa: E402
from pools.sizing.presets import model_presets  # noqa: E402

DATASET = ROOT / "tests" / "fixtures" / "sizing_dataset.json"
#: The second part of the validation set (issue 17): current engines, weight-only quantisation.
DATASET_2026 = ROOT / "tests" / "fixtures" / "sizing_dataset_2026.json"
DATASETS = (DATASET, DATASET_2026)
TARGET_MDAPE = 25.0


def _precision(text: str) -> str:
    upper = text.upper()
    if "GPTQ" in upper and "INT8" in upper:
        return "W8A16"
    if "GPTQ" in upper:
        return "INT4-GPTQ"
    if "AWQ" in upper:
        return "INT4-AWQ"
    if "FP8" in upper:
        return "FP8"
    if "BF16" in upper:
        return "BF16"
    return "FP16"


def _kv_dtype(row: dict, precision: str) -> str:
    text = str(row.get("kv_cache_dtype") or "").upper()
    if "FP8" in text:
        return "FP8"
    if "BF16" in text:
        return "BF16"
    if "not stated".upper() in text and precision == "FP8" and "TensorRT" in row["engine"]:
        return "FP8"
    return "FP16"


def _engine(text: str) -> str:
    return "tensorrt-llm" if "tensorrt" in text.lower() else "vllm"


def _length(value: object) -> int | None:
    if isinstance(value, int):
        return value
    match = re.search(r"~\s*(\d+)", str(value))
    return int(match.group(1)) if match else None


def _rate(row: dict) -> float | None:
    value = row.get("request_rate_qps")
    if value is None:
        return None
    try:
        rate = float(value)
    except ValueError:
        return None
    return rate if 0 < rate < float("inf") else None  # "INF": saturation


def request_for(row: dict) -> tuple[dict | None, str]:
    """The estimator input for a measurement row, or ``None`` and why it is skipped."""
    input_len, output_len = _length(row["input_len"]), _length(row["output_len"])
    if input_len is None or output_len is None:
        return None, "lengths not stated"
    precision = _precision(str(row["precision"]))
    notes = []
    if not isinstance(row["input_len"], int):
        notes.append("mean lengths")
    if "not stated" in str(row["kv_cache_dtype"]):
        notes.append("KV dtype assumed")
    if "assumed" in str(row["precision"]):
        notes.append("precision assumed")
    request = {
        "model": row["model_ref"],
        "gpu": row["gpu"],
        "gpu_count": row["gpu_count"],
        "tp": row["tp"],
        "precision": precision,
        "kv_cache_dtype": _kv_dtype(row, precision),
        "input_len": input_len,
        "output_len": output_len,
        "concurrency": row.get("concurrency"),
        "request_rate": None if row.get("concurrency") else _rate(row),
        "engine": _engine(row["engine"]),
    }
    return request, ", ".join(notes)


def _load(request: dict) -> str:
    if request["concurrency"]:
        return f"c={request['concurrency']}"
    if request["request_rate"]:
        return f"{request['request_rate']:g} req/s"
    return "saturation"


def _load_kind(request: dict) -> str:
    if request["concurrency"]:
        return "fixed concurrency"
    if request["request_rate"]:
        return "request rate (open loop)"
    return "saturation (offline)"


def _pct(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured * 100


def load_rows(datasets: list[Path]) -> list[dict]:
    """The measurement rows of every file in ``datasets``, in order."""
    rows = []
    for dataset in datasets:
        rows += json.loads(dataset.read_text(encoding="utf-8"))["measurements"]
    return rows


def run(datasets: list[Path]) -> int:
    """Print the table and summary for ``datasets``; return 0 when MdAPE <= 25 %, else 1."""
    rows = load_rows(datasets)
    presets, gpus = model_presets(), gpu_specs_from_catalogue()
    header = (
        f"{'model':<13} {'gpu':<14} {'tp':>2} {'prec':<9} {'in/out':>11} {'load':>11} "
        f"{'meas tok/s':>10} {'pred tok/s':>10} {'err %':>7}  {'TPOT m/p ms':>13}  "
        f"{'TTFT m/p ms':>13}  note"
    )
    print(header)
    print("-" * len(header))
    throughput_errors, tpot_errors, ttft_errors, skipped = [], [], [], []
    by_load: dict[str, list[float]] = {}
    signed = []
    ttft_alone_errors = []
    for row in rows:
        request, note = request_for(row)
        if request is None:
            skipped.append((row["id"], note))
            continue
        try:
            estimate = estimate_from_fields(request, presets=presets, gpus=gpus)
        except SizingInputError as exc:
            skipped.append((row["id"], exc.message))
            continue
        throughput = estimate.throughput
        if throughput is None:
            note = ", ".join(filter(None, [note, "does not fit"]))
        measured = row.get("output_tok_s_total")
        predicted = estimate.output_tok_s_total
        error = _pct(predicted, measured)
        if error is not None:
            signed.append(error)
            throughput_errors.append(abs(error))
            by_load.setdefault(_load_kind(request), []).append(abs(error))
        tpot_m = row.get("tpot_ms")
        ttft_m = row.get("ttft_ms") or row.get("ttft_ms_mean")
        tpot_p = throughput.tpot_ms if throughput else None
        ttft_p = throughput.ttft_ms if throughput else None
        if _pct(tpot_p, tpot_m) is not None:
            tpot_errors.append(abs(_pct(tpot_p, tpot_m)))
        if _pct(ttft_p, ttft_m) is not None:
            ttft_errors.append(abs(_pct(ttft_p, ttft_m)))
            if request["concurrency"] == 1:
                ttft_alone_errors.append(abs(_pct(ttft_p, ttft_m)))

        def num(value: float | None, width: int, digits: int = 0) -> str:
            return f"{value:>{width},.{digits}f}" if value is not None else f"{'-':>{width}}"

        lengths = f"{request['input_len']}/{request['output_len']}"
        print(
            f"{request['model']:<13} {request['gpu']:<14} {request['tp']:>2} "
            f"{estimate.precision:<9} {lengths:>11} {_load(request):>11} "
            f"{num(measured, 10)} {num(predicted, 10)} {num(error, 7, 1)}  "
            f"{num(tpot_m, 6, 1)}/{num(tpot_p, 6, 1)}  {num(ttft_m, 6, 0)}/{num(ttft_p, 6, 0)}  "
            f"{note}"
        )
    print()
    for row_id, why in skipped:
        print(f"skipped {row_id}: {why}")
    mdape = statistics.median(throughput_errors) if throughput_errors else float("nan")
    print()
    print(
        f"decode throughput: MdAPE {mdape:.1f} % over {len(throughput_errors)} rows "
        f"(target <= {TARGET_MDAPE:.0f} %); within 25 %: "
        f"{sum(e <= 25 for e in throughput_errors)}, within 50 %: "
        f"{sum(e <= 50 for e in throughput_errors)}"
    )
    if signed:
        print(f"  median signed error {statistics.median(signed):+.1f} % (+ = over-prediction)")
    for kind, errors in sorted(by_load.items()):
        print(f"  {kind}: MdAPE {statistics.median(errors):.1f} % over {len(errors)} rows")
    if tpot_errors:
        print(f"TPOT: MdAPE {statistics.median(tpot_errors):.1f} % over {len(tpot_errors)} rows")
    if ttft_errors:
        print(
            f"TTFT: MdAPE {statistics.median(ttft_errors):.1f} % over {len(ttft_errors)} rows "
            "(online rows include queueing, which the estimate leaves out)"
        )
    if ttft_alone_errors:
        print(
            f"TTFT of a lone request: MdAPE {statistics.median(ttft_alone_errors):.1f} % over "
            f"{len(ttft_alone_errors)} rows"
        )
    return 0 if mdape <= TARGET_MDAPE else 1


def main() -> int:
    """Command-line entry point: ``--dataset PATH`` (default: the tests' fixture copy)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, action="append")
    return run(parser.parse_args().dataset or list(DATASETS))


if __name__ == "__main__":
    sys.exit(main())
