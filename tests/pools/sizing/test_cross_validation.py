"""The cross-validation in benchmarks/sizing.py fits nothing on the source it scores."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pools.sizing.engines import ENGINE_PROFILES

_PATH = Path(__file__).resolve().parents[3] / "benchmarks" / "sizing.py"
_spec = importlib.util.spec_from_file_location("benchmarks_sizing", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_a_generation_is_fitted_on_the_median_of_the_other_sources_only():
    cases = [
        {"profile": "vllm-v0", "implied": 100e-6, "source": "a"},
        {"profile": "vllm-v0", "implied": 300e-6, "source": "a"},
        {"profile": "vllm-v0", "implied": 50e-6, "source": "b"},
        {"profile": "vllm", "implied": 1.0, "source": "b"},
    ]

    scoring_b = bench.fit_overhead([case for case in cases if case["source"] != "b"], "vllm-v0")
    scoring_a = bench.fit_overhead([case for case in cases if case["source"] != "a"], "vllm-v0")

    assert scoring_b == pytest.approx(200e-6)  # median of 100 and 300 us, source a only
    assert scoring_a == pytest.approx(50e-6)


def test_without_rows_of_its_generation_the_default_overhead_is_kept():
    fitted = bench.fit_overhead([{"profile": "vllm", "implied": 1.0, "source": "x"}], "vllm-v0")

    assert fitted == pytest.approx(ENGINE_PROFILES["vllm"].step_overhead_s_per_layer)


def test_the_overhead_is_read_only_from_short_single_stream_prompts():
    short = {
        "model": "qwen2_5_7b",
        "gpu": "a100_80g_sxm",
        "precision": "BF16",
        "input_len": 1,
        "output_len": 2048,
        "concurrency": 1,
        "engine": "vllm",
        "engine_version": "0.6.3",
    }
    long = {**short, "input_len": 30720}
    busy = {**short, "concurrency": 8}

    assert bench.implied_overhead_per_layer(short, 84.28) is not None
    assert bench.implied_overhead_per_layer(long, 70.33) is None
    assert bench.implied_overhead_per_layer(busy, 600.0) is None


def test_rows_of_one_publication_share_a_source_key():
    one = {"source": {"repo": "QwenLM/Qwen2.5", "path": "a.rst", "commit": "abc"}, "id": "1"}
    other_file = {"source": {"repo": "QwenLM/Qwen2.5", "path": "b.rst", "commit": "abc"}, "id": "2"}
    other_release = {
        "source": {"repo": "QwenLM/Qwen2.5", "path": "a.rst", "commit": "def"},
        "id": "3",
    }
    issue = {"source": {"url": "https://github.com/NVIDIA/TensorRT-LLM/issues/6294"}, "id": "4"}

    assert bench.source_key(one) == bench.source_key(other_file) == "QwenLM/Qwen2.5@abc"
    assert bench.source_key(other_release) != bench.source_key(one)
    assert bench.source_key(issue) == "https://github.com/NVIDIA/TensorRT-LLM/issues/6294"


def test_the_p90_and_quantiles_by_hand():
    values = [float(v) for v in range(1, 11)]  # 1 .. 10

    assert bench._p90(values) == 9.0  # the 9th of 10 ordered values
    assert bench._quantile(values, 0.1) == pytest.approx(1.9)  # 1 + 0.9 x (2 - 1)
    assert bench._quantile(values, 0.9) == pytest.approx(9.1)
