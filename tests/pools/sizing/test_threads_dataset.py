"""The issue-thread measurement set (sizing_dataset_2026_threads.json) is well formed.

Three rows are checked against values copied by hand from their threads; every row must name a
model preset and a catalogue GPU, cite one GitHub thread, and carry the fields of the other sets.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pools.sizing.gpus import gpu_specs_from_catalogue
from pools.sizing.presets import model_presets

DATASET = Path(__file__).resolve().parents[2] / "fixtures" / "sizing_dataset_2026_threads.json"
FIELDS = {
    "id",
    "model",
    "model_ref",
    "gpu",
    "gpu_count",
    "tp",
    "pp",
    "ep",
    "attention_dp",
    "engine",
    "engine_version",
    "precision",
    "kv_cache_dtype",
    "kv_cache_source",
    "input_len",
    "output_len",
    "concurrency",
    "scenario",
    "output_tok_s_total",
    "output_tok_s_per_gpu",
    "tpot_ms",
    "ttft_ms",
    "source",
    "notes",
    "kind",
    "confidence",
}
ENGINES = {"TensorRT-LLM (PyTorch backend)", "TensorRT-LLM", "vLLM", "SGLang"}
THREAD_URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$")


def _data() -> dict:
    return json.loads(DATASET.read_text(encoding="utf-8"))


def _rows() -> dict[str, dict]:
    return {row["id"]: row for row in _data()["measurements"]}


def test_the_gb200_deepseek_run_of_pull_request_7104_is_copied_as_printed():
    row = _rows()["trtissue7104_deepseek_r1_gb200_fp4_tp4_ep4_1024_1024"]

    # "TensorRT-LLM Version: 1.1.0rc1 ... KV Cache Dtype: FP8 ... Quantization: NVFP4 ...
    # TP Size: 4 ... EP Size: 4 ... Total Output Throughput (tokens/sec): 7517.2584"
    assert (row["gpu"], row["gpu_count"], row["tp"], row["pp"], row["ep"]) == ("gb200", 4, 4, 1, 4)
    assert row["engine"] == "TensorRT-LLM (PyTorch backend)"
    assert row["engine_version"] == "1.1.0rc1"
    assert row["kv_cache_dtype"] == "FP8"
    assert (row["input_len"], row["output_len"]) == (1024, 1024)
    assert row["output_tok_s_total"] == 7517.2584
    assert row["output_tok_s_per_gpu"] == pytest.approx(1879.3146)  # 7517.2584 / 4 by hand
    assert row["source"]["url"] == "https://github.com/NVIDIA/TensorRT-LLM/pull/7104"


def test_the_h800_fp8_and_w4a8_runs_of_issue_2300_are_copied_as_printed():
    rows = _rows()
    fp8 = rows["trtissue2300_llama2_7b_h800_fp8_tp1_128_128"]
    w4a8 = rows["trtissue2300_llama2_7b_h800_w4a8_awq_tp1_128_128"]

    # "| llama-2-7b | 128/128 | 1 | 18758 | 10146 | 11116 |" (FP8, W4A8_AWQ, FP16), v0.12.0
    assert fp8["output_tok_s_total"] == 18758.0
    assert w4a8["output_tok_s_total"] == 10146.0
    for row in (fp8, w4a8):
        assert (row["model_ref"], row["gpu"], row["tp"]) == ("llama2_7b", "h800_sxm", 1)
        assert (row["engine"], row["engine_version"]) == ("TensorRT-LLM", "0.12.0")
        assert (row["input_len"], row["output_len"], row["concurrency"]) == (128, 128, None)
        assert "3000 requests" in row["scenario"]


def test_every_row_names_a_preset_a_catalogue_gpu_and_one_thread():
    presets, gpus = model_presets(), gpu_specs_from_catalogue()
    rows = _data()["measurements"]

    assert rows
    assert len({row["id"] for row in rows}) == len(rows)
    for row in rows:
        assert set(row) == FIELDS, row["id"]
        assert row["model_ref"] in presets, row["id"]
        assert row["gpu"] in gpus, row["id"]
        assert row["engine"] in ENGINES, row["id"]
        assert set(row["source"]) == {"title", "url"}, row["id"]
        assert THREAD_URL.match(row["source"]["url"]), row["id"]
        assert row["tp"] * row["pp"] <= row["gpu_count"], row["id"]
        assert row["attention_dp"] in (True, False, None), row["id"]
        assert row["ep"] is None or isinstance(row["ep"], int), row["id"]


def test_the_per_gpu_rate_is_the_only_derived_number():
    for row in _data()["measurements"]:
        total, count = row["output_tok_s_total"], row["gpu_count"]
        assert row["output_tok_s_per_gpu"] == pytest.approx(total / count), row["id"]


def test_every_run_left_out_names_its_thread_and_why():
    for entry in _data()["meta"]["not_included"]:
        assert entry["thread"].startswith("https://github.com/")
        assert entry["runs"] and entry["reason"]
