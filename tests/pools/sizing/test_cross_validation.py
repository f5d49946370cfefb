"""The cross-validation in benchmarks/sizing.py fits nothing on the source it scores."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import SimpleNamespace

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


def test_the_size_of_a_published_run_is_read_from_its_row():
    iog = {"input_len": "ShareGPT (~206 mean input tokens over 200 prompts)", "scenario": "x"}
    sweep = {"input_len": 256, "scenario": "online_serving (max concurrency sweep, 300 prompts)"}
    offline = {"input_len": 128, "scenario": "max_throughput_offline (30000 requests)"}

    assert bench.run_requests(iog) == 200
    assert bench.run_requests(sweep) == 300
    assert bench.run_requests(offline) == 30_000
    assert bench.run_requests({"input_len": 128, "scenario": "saturation"}) is None


def _steady(tok_s, tpot_ms):
    return SimpleNamespace(output_tok_s_total=tok_s, throughput=SimpleNamespace(tpot_ms=tpot_ms))


def test_a_finite_open_loop_run_ends_with_the_last_requests_own_decode():
    # 200 requests of 200 tokens at 32 req/s, kept up with (6,400 tok/s), TPOT 12.5 ms: the
    # arrivals take 40,000 / 6,400 = 6.25 s and the last request 200 x 12.5 ms = 2.5 s more, so
    # the run reports 40,000 / 8.75 s = 4,571.4 tok/s.
    request = {"output_len": 200, "concurrency": None, "request_rate": 32.0}
    case = {"requests": 200, "request": request}
    saturated = {"requests": 200, "request": {**request, "request_rate": None}}

    assert bench.finite_run_tok_s(case, _steady(6_400.0, 12.5)) == pytest.approx(40_000 / 8.75)
    assert bench.finite_run_tok_s({**case, "requests": None}, _steady(6_400.0, 12.5)) == 6_400.0
    assert bench.finite_run_tok_s(saturated, _steady(6_400.0, 12.5)) == 6_400.0


def test_a_finite_closed_loop_run_ends_with_a_partial_round(monkeypatch):
    # 300 requests of 128 tokens, 48 at a time: 6 rounds of 48 at 1,600 tok/s (6 x 48 x 128 /
    # 1,600 = 23.04 s) and one of 12 at 600 tok/s (12 x 128 / 600 = 2.56 s): 38,400 / 25.6 s.
    request = {"output_len": 128, "concurrency": 48}
    monkeypatch.setattr(bench, "_estimate", lambda fields, engines: _steady(600.0, 20.0))

    tok_s = bench.finite_run_tok_s({"requests": 300, "request": request}, _steady(1_600.0, 30.0))

    assert tok_s == pytest.approx(38_400 / 25.6)
    assert bench.finite_run_tok_s({"requests": 96, "request": request}, _steady(1_600.0, 30.0)) == (
        1_600.0
    )


def _admitted(tok_s, batch):
    return SimpleNamespace(
        output_tok_s_total=tok_s, throughput=SimpleNamespace(tpot_ms=1.0, batch=batch)
    )


def test_a_saturated_run_of_equal_requests_runs_in_rounds_of_the_admitted_batch(monkeypatch):
    # 3,000 requests of 2,048 output tokens, 1,470.6 sequences admitted at 20,000 tok/s: two
    # rounds of 1,470 (2 x 1,470 x 2,048 / 20,000 = 301.056 s) and one of 60 at 2,400 tok/s
    # (60 x 2,048 / 2,400 = 51.2 s): 6,144,000 tokens / 352.256 s = 17,441.9 tok/s.
    request = {"output_len": 2048, "concurrency": None, "request_rate": None}
    row = {"input_len": 128, "output_len": 2048}
    asked = []

    def tail(fields, engines):
        asked.append(fields["concurrency"])
        return _admitted(2_400.0, fields["concurrency"])

    monkeypatch.setattr(bench, "_estimate", tail)
    case = {"requests": 3000, "request": request, "row": row}

    tok_s = bench.finite_run_tok_s(case, _admitted(20_000.0, 1470.6))

    assert tok_s == pytest.approx(6_144_000 / 352.256)
    assert tok_s == pytest.approx(17_441.9, abs=0.1)
    assert asked == [60]


def test_fewer_equal_requests_than_the_batch_run_as_one_round_of_all_of_them(monkeypatch):
    # 1,500 requests where 3,800 would fit: the run never holds more than 1,500.
    monkeypatch.setattr(
        bench, "_estimate", lambda fields, engines: _admitted(9_000.0, fields["concurrency"])
    )
    request = {"output_len": 4096, "concurrency": None, "request_rate": None}
    case = {"requests": 1500, "request": request, "row": {"input_len": 128, "output_len": 4096}}

    assert bench.finite_run_tok_s(case, _admitted(40_000.0, 3800.0)) == 9_000.0


def test_a_saturated_run_of_varied_lengths_keeps_the_steady_rate(monkeypatch):
    monkeypatch.setattr(bench, "_estimate", lambda fields, engines: _admitted(1.0, 1.0))
    request = {"output_len": 200, "concurrency": None, "request_rate": None}
    sharegpt = {"input_len": "ShareGPT (~206 mean input tokens, 200 prompts)", "output_len": 200}

    case = {"requests": 200, "request": request, "row": sharegpt}

    assert bench.finite_run_tok_s(case, _admitted(6_400.0, 64.0)) == 6_400.0
    assert bench._fixed_lengths({"input_len": 128, "output_len": 2048})
    assert not bench._fixed_lengths(sharegpt)
    assert not bench._fixed_lengths(None)


def test_bands_are_never_written_from_the_unshipped_hard_roofline(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["sizing.py", "--hard-roofline", "--write-bands"])

    with pytest.raises(SystemExit) as exit_info:
        bench.main()

    assert exit_info.value.code == 2
    assert "not shipped" in capsys.readouterr().err
    assert bench.FIT_OVERLAP_GRID == list(bench.OVERLAP_GRID)  # the default fits the overlap


def test_an_unstated_kv_dtype_of_a_modelopt_fp8_or_fp4_run_is_fp8():
    """trtllm-bench keeps the checkpoint's KV dtype and ModelOpt exports FP8 unless told not to,
    so an unstated TensorRT-LLM FP8 / NVFP4 row is FP8; a stated one wins; 16-bit otherwise."""
    pytorch = {"engine": "TensorRT-LLM (PyTorch backend)", "kv_cache_dtype": "not stated"}
    stated = {"engine": "TensorRT-LLM (PyTorch backend)", "kv_cache_dtype": "BF16 (auto)"}
    vllm = {"engine": "vLLM", "kv_cache_dtype": "not stated"}

    assert bench._kv_dtype(pytorch, "NVFP4") == "FP8"
    assert bench._kv_dtype(pytorch, "FP8") == "FP8"
    assert bench._kv_dtype(pytorch, "BF16") == "FP16"
    assert bench._kv_dtype(stated, "NVFP4") == "BF16"
    assert bench._kv_dtype(vllm, "FP8") == "FP16"


def test_the_pytorch_backend_rows_run_its_own_profile():
    assert bench._engine("TensorRT-LLM (PyTorch backend)") == "tensorrt-llm-pytorch"
    assert bench._engine("TensorRT-LLM (PyTorch backend, trtllm-bench)") == "tensorrt-llm-pytorch"
    assert bench._engine("TensorRT-LLM + Triton tensorrtllm_backend") == "tensorrt-llm"
    assert bench._engine("vLLM") == "vllm"


def _moe_row(tp: int) -> dict:
    row = next(
        row
        for row in bench.load_rows([bench.DATASET_2026_MOE])
        if row["model_ref"] == "llama4_maverick" and row["gpu"] == "h200_sxm"
    )
    return {**row, "tp": tp, "gpu_count": tp}


def test_the_1_0_perf_overview_moe_rows_are_scored_with_attention_dp_above_one_card():
    """The 1.0 perf-overview's MoE rows ran with attention DP over their TP cards (the row's
    ``attention_dp``, its notes say why): scored with dp_attention = ep = tp; one card has no
    ranks to split."""
    request, note = bench.request_for(_moe_row(8))
    assert request["dp_attention"] == request["ep"] == 8
    assert "attention DP" in note
    single, _ = bench.request_for(_moe_row(1))
    assert "dp_attention" not in single
    rows = [
        row
        for row in bench.load_rows([bench.DATASET_2026_MOE])
        if row["id"].startswith("trt10_") and row["tp"] > 1
    ]
    assert len(rows) == 70
    assert all(row["attention_dp"] is True and row["ep"] == row["tp"] for row in rows)


def test_bands_are_written_from_every_bundled_set(monkeypatch):
    # The MoE / NVFP4 / Blackwell, other-release and thread files are not in the default run
    # but are in the bands.
    seen = {}
    monkeypatch.setattr(bench, "run", lambda datasets, **options: seen.update(datasets=datasets))
    monkeypatch.setattr("sys.argv", ["sizing.py", "--write-bands"])

    bench.main()

    assert [path.name for path in seen["datasets"]] == [
        "sizing_dataset.json",
        "sizing_dataset_2026.json",
        "sizing_dataset_2026_moe.json",
        "sizing_dataset_2026_trtllm_next.json",
        "sizing_dataset_2026_threads.json",
    ]
    assert bench.DATASET_2026_MOE not in bench.DATASETS
    assert bench.DATASET_2026_TRTLLM_NEXT not in bench.DATASETS


def test_bands_are_never_written_from_a_subset_of_the_sets(monkeypatch, capsys):
    before = bench.BANDS_JSON.read_bytes()
    monkeypatch.setattr(
        "sys.argv",
        [
            "sizing.py",
            "--write-bands",
            "--dataset",
            str(bench.DATASET),
            "--dataset",
            str(bench.DATASET_2026),
        ],
    )

    with pytest.raises(SystemExit) as exit_info:
        bench.main()

    assert exit_info.value.code == 2
    assert "sizing_dataset_2026_moe.json" in capsys.readouterr().err
    assert bench.BANDS_JSON.read_bytes() == before


def test_a_request_costs_its_prefill_and_its_decode_steps_flops():
    """Llama-3-8B (config.json: 8,030,261,248 parameters, vocabulary 128,256, hidden 4,096,
    32 layers of 32 heads x 128), 128 in / 128 out. Linear parameters 8,030,261,248 - 128,256
    x 4,096 = 7,504,924,672. Prefill: 2 x 7,504,924,672 x 128 + 2 x 32 x 4,096 x 128^2 =
    1,921,260,716,032 + 4,294,967,296. Decode, mean context 128 + 64 = 192: 128 x (2 x
    7,504,924,672 + 4 x 32 x 4,096 x 192) = 128 x 15,110,512,640 = 1,934,145,617,920."""
    model = bench.model_presets()["llama3_8b"]

    assert bench.request_flops(model, 128, 128) == 3_859_701_301_248


def test_the_achieved_rate_of_a_row_is_its_requests_flops_per_card():
    """12,800 output tok/s of 128-token answers on two cards: 100 requests/s x
    3,859,701,301,248 FLOP / 2 = 192.985 TFLOP/s per card, against the H100 SXM's dense FP8
    peak of 1,979 TFLOPS (NVIDIA H100 datasheet: 3,958 with sparsity)."""
    case = {
        "request": {
            "model": "llama3_8b",
            "gpu": "h100_sxm",
            "gpu_count": 2,
            "input_len": 128,
            "output_len": 128,
        },
        "estimate": SimpleNamespace(precision="FP8"),
        "measured": 12_800.0,
    }

    achieved, peak = bench.achieved_tflops(case)

    assert achieved == pytest.approx(192.98506506240)
    assert peak == pytest.approx(1979, abs=1)


def _rate_per_sequence(tok_s_per_sequence):
    """An estimator whose steady rate is ``tok_s_per_sequence`` x the concurrency asked."""

    def estimate(fields, engines):
        return SimpleNamespace(output_tok_s_total=tok_s_per_sequence * fields["concurrency"])

    return estimate


def test_the_implied_batch_is_the_fewest_sequences_that_reach_the_measured_rate(monkeypatch):
    """100 tok/s per sequence, 1,062 sequences admitted: 22,550 tok/s needs 225.5, so 226
    sequences (225 give 22,500); 22,500 needs exactly 225; 120,000 is above what the 1,062
    admitted give (106,200): no batch; 50 tok/s is reached by one sequence already."""
    monkeypatch.setattr(bench, "_estimate", _rate_per_sequence(100.0))
    admitted = SimpleNamespace(throughput=SimpleNamespace(batch=1062.4))
    request = {"concurrency": None, "request_rate": None, "output_len": 2048}

    def case(measured):
        return {"estimate": admitted, "measured": measured, "request": request}

    assert bench.implied_batch(case(22_550.0), None) == 226
    assert bench.implied_batch(case(22_500.0), None) == 225
    assert bench.implied_batch(case(120_000.0), None) is None
    assert bench.implied_batch(case(50.0), None) == 1


def test_no_implied_batch_without_a_throughput_estimate_or_a_measurement(monkeypatch):
    monkeypatch.setattr(bench, "_estimate", _rate_per_sequence(100.0))
    request = {"concurrency": None, "request_rate": None}
    no_fit = SimpleNamespace(throughput=None)
    fits = SimpleNamespace(throughput=SimpleNamespace(batch=10.0))

    assert (
        bench.implied_batch({"estimate": no_fit, "measured": 500.0, "request": request}, None)
        is None
    )
    assert (
        bench.implied_batch({"estimate": fits, "measured": None, "request": request}, None) is None
    )


def _steps(full_ms, decode_ms):
    """An estimator whose step is ``full_ms``, or ``decode_ms`` when every prompt but one token
    is served from the prompt cache; it records the fields it was asked for."""
    asked = []

    def estimate(fields, engines):
        asked.append(fields)
        cached = fields.get("prompt_cache_hit_rate") == bench.PROMPT_FREE_HIT_RATE
        step_ms = decode_ms if cached else full_ms
        return SimpleNamespace(throughput=SimpleNamespace(step_ms=step_ms))

    return estimate, asked


def test_the_prefill_split_sets_the_prompt_work_beside_the_step_the_measured_rate_needs(
    monkeypatch,
):
    """648.7 sequences admitted -> 648 in flight. Modelled step 522.7 ms, 146.3 ms of it
    without the prompts: prompts 376.4 ms. 1,001 tok/s at 648 sequences is one step per
    648 / 1,001 s = 647.3527 ms, 124.6527 ms more than modelled."""
    estimate, asked = _steps(522.7, 146.3)
    monkeypatch.setattr(bench, "_estimate", estimate)
    request = {"concurrency": None, "request_rate": None, "input_len": 2048, "output_len": 128}
    case = {
        "estimate": SimpleNamespace(throughput=SimpleNamespace(batch=648.7)),
        "measured": 1001.0,
        "request": request,
    }

    split = bench.prefill_split(case, None)

    assert split["batch"] == 648
    assert split["prompt_ms"] == pytest.approx(376.4)
    assert split["measured_step_ms"] == pytest.approx(647.352647)
    assert split["missing_ms"] == pytest.approx(124.652647)
    assert [fields["concurrency"] for fields in asked] == [648, 648]
    assert "prompt_cache_hit_rate" not in asked[0]


def test_no_prefill_split_without_a_throughput_estimate_or_a_measurement(monkeypatch):
    estimate, asked = _steps(1.0, 0.5)
    monkeypatch.setattr(bench, "_estimate", estimate)
    request = {"concurrency": None, "request_rate": None}
    fits = SimpleNamespace(throughput=SimpleNamespace(batch=10.0))

    no_fit = {"estimate": SimpleNamespace(throughput=None), "measured": 5.0, "request": request}
    assert bench.prefill_split(no_fit, None) is None
    assert (
        bench.prefill_split({"estimate": fits, "measured": None, "request": request}, None) is None
    )
    assert asked == []


def test_one_prompt_token_is_left_uncached_at_the_prompt_free_hit_rate():
    """The estimator caches round(input x rate) tokens, at most input - 1: at the prompt-free
    rate that is input - 1 for every prompt up to 500,000 tokens (20,000 -> 19,999.98 -> 20,000,
    capped to 19,999)."""
    for input_len in (2, 128, 2048, 20_000, 500_000):
        cached = min(input_len - 1, round(input_len * bench.PROMPT_FREE_HIT_RATE))
        assert cached == input_len - 1


def test_a_stated_attention_dp_and_pipeline_are_scored_as_stated():
    """A row whose options file sets enable_attention_dp at the top level says so in its own
    ``attention_dp`` field: scored with dp_attention = ep = tp without --attention-dp; ``pp``
    is passed through; a stated EP without attention DP keeps its own EP."""
    dep4 = {**_moe_row(4), "attention_dp": True, "ep": 4}
    request, note = bench.request_for(dep4)
    assert request["dp_attention"] == request["ep"] == 4
    assert "attention DP" in note

    staged, _ = bench.request_for({**_moe_row(1), "gpu_count": 2, "pp": 2})
    assert staged["pp"] == 2
    assert "dp_attention" not in staged

    expert, _ = bench.request_for({**_moe_row(8), "attention_dp": False, "ep": 2})
    assert expert["ep"] == 2
    assert "dp_attention" not in expert


def _case(profile: str, measured: float, concurrency: int | None = None) -> dict:
    return {"profile": profile, "measured": measured, "request": {"concurrency": concurrency}}


def test_an_engine_with_enough_rows_of_its_own_fits_its_own_efficiency(monkeypatch):
    """Predicted rate = 1,000 x efficiency (a stand-in for the estimate): eight tensorrt-llm
    rows measured at 600 pick 0.60 from the grid; seven vllm rows at 400 are too few and keep
    the shared 0.50; single-stream rows do not count towards the eight."""

    def log_error(case, engines):
        return abs(math.log(1000 * engines[case["profile"]].compute_efficiency / case["measured"]))

    monkeypatch.setattr(bench, "_log_error", log_error)
    cases = [_case("tensorrt-llm", 600.0) for _ in range(8)]
    cases += [_case("vllm", 400.0) for _ in range(7)]
    cases += [_case("vllm", 400.0, concurrency=1) for _ in range(3)]
    engines = {name: ENGINE_PROFILES[name] for name in ("tensorrt-llm", "vllm")}

    fitted = bench.fit_efficiencies(cases, engines)

    assert fitted["tensorrt-llm"].compute_efficiency == pytest.approx(0.60)
    assert fitted["vllm"].compute_efficiency == pytest.approx(0.50)


_ROOT = Path(__file__).resolve().parents[3]
_TRTLLM_NEXT = _ROOT / "tests" / "fixtures" / "sizing_dataset_2026_trtllm_next.json"


def _trtllm_next_rows() -> dict[str, dict]:
    rows = json.loads(_TRTLLM_NEXT.read_text())["measurements"]
    return {row["id"]: row for row in rows}


def test_the_later_trtllm_perf_overview_cells_are_copied_as_published():
    """Cells copied by hand from NVIDIA/TensorRT-LLM docs/source/developer-guide/perf-overview.md
    @03e27c7d (per-GPU tables) and the 0.21 tables (@f6a35f3a, legacy path, whole-run totals).

    - Qwen3 30B A3B, B200 "TP1 (FP4)", 1000/1000: 26,971 tok/s per GPU; one card, so the
      group's rate is 26,971 too.
    - Qwen3 235B A22B, B200 "DEP4 (FP4)", 1000/1000: 5,764 per GPU; 4 cards -> 4 x 5,764 =
      23,056; DEP4 = tp 4, ep 4, attention DP on.
    - Llama 3.3 70B, RTX 6000 Pro Server "2 GPUs TP1,PP2 (FP4)", 1024/1024: 1,887 per GPU;
      2 cards -> 3,774; 1024/1024 ran 3,000 requests (the page's $num_requests table).
    - 0.21, Llama 3.3 70B FP8, H200 TP2, 1000/1000: 4,773.33 tok/s for the run (printed); per
      GPU 4,773.33 / 2 = 2,386.665.
    """
    rows = _trtllm_next_rows()

    qwen30 = rows["trtnext_qwen3_30b_a3b_b200_fp4_tp1_1000_1000"]
    assert (qwen30["gpu"], qwen30["gpu_count"], qwen30["tp"], qwen30["pp"]) == ("b200", 1, 1, 1)
    assert qwen30["output_tok_s_per_gpu"] == 26971.0
    assert qwen30["output_tok_s_total"] == 26971.0

    qwen235 = rows["trtnext_qwen3_235b_a22b_b200_fp4_dep4_1000_1000"]
    assert (qwen235["gpu_count"], qwen235["tp"], qwen235["ep"], qwen235["pp"]) == (4, 4, 4, 1)
    assert qwen235["attention_dp"] is True
    assert qwen235["output_tok_s_per_gpu"] == 5764.0
    assert qwen235["output_tok_s_total"] == 23056.0
    assert bench.run_requests(qwen235) is None  # 1000/1000 is not in the $num_requests table

    rtx = rows["trtnext_llama3_3_70b_rtx_pro_6000_server_fp4_tp1_pp2_1024_1024"]
    assert (rtx["gpu"], rtx["gpu_count"], rtx["tp"], rtx["pp"]) == ("rtx_pro_6000_server", 2, 1, 2)
    assert (rtx["ep"], rtx["attention_dp"]) == (None, False)
    assert rtx["output_tok_s_per_gpu"] == 1887.0
    assert rtx["output_tok_s_total"] == 3774.0
    assert bench.run_requests(rtx) == 3000

    old = rows["trt021_llama3_3_70b_h200_sxm_fp8_tp2_1000_1000"]
    assert (old["gpu_count"], old["tp"], old["engine_version"]) == (2, 2, "0.21.0")
    assert old["output_tok_s_total"] == 4773.33
    assert old["output_tok_s_per_gpu"] == pytest.approx(2386.665, abs=0.006)


def test_every_later_trtllm_row_names_a_preset_a_catalogue_gpu_and_its_group():
    presets = json.loads((_ROOT / "pools/sizing/models.json").read_text())
    models = {m["id"] for m in presets["models"]}
    catalogue = json.loads((_ROOT / "pools/inventory/catalogue/gpu_models.json").read_text())
    gpus = {g["slug"] for g in catalogue["models"]}
    rows = json.loads(_TRTLLM_NEXT.read_text())["measurements"]

    assert len({row["id"] for row in rows}) == len(rows)
    for row in rows:
        assert row["model_ref"] in models, row["id"]
        assert row["gpu"] in gpus, row["id"]
        assert row["gpu_count"] == row["tp"] * row["pp"], row["id"]
        # A per-GPU rate derived from a printed total is kept to 0.01 tok/s: 0.005 per card.
        per_gpu_times_cards = row["output_tok_s_per_gpu"] * row["gpu_count"]
        slack = 0.005 * row["gpu_count"] + 1e-9
        assert row["output_tok_s_total"] == pytest.approx(per_gpu_times_cards, abs=slack), row["id"]
        assert row["attention_dp"] in (True, False, None), row["id"]


def _scored(source, measured, *, version="1.0", error=None, **fields):
    request = {
        "model": "llama4_maverick",
        "gpu": "h200_sxm",
        "precision": "FP8",
        "tp": 8,
        "input_len": 20000,
        "output_len": 2000,
        "engine_version": version,
        **fields,
    }
    return {
        "request": request,
        "profile": "tensorrt-llm-pytorch",
        "source": source,
        "measured": measured,
        "error": error,
        "load": "throughput",
        "precision": "8-bit W8A8",
        "generation": "Hopper",
    }


def test_publications_of_one_input_bound_the_error_any_single_prediction_can_reach():
    cases = [
        _scored("1.0 tables", 4106.0, version="1.0"),
        _scored("0.20 tables", 1764.27, version="0.20.0"),
        _scored("0.20 tables", 1764.27, version="0.20.0"),
        _scored("1.0 tables", 9000.0, tp=4),  # another input, one publication only
    ]

    (cell,) = bench.publication_spread(cases)

    assert cell["rows"] == 3
    assert cell["values"] == {"1.0 tables": 4106.0, "0.20 tables": 1764.27}
    # 4106 / 1764.27 - 1 = 1.3273; (4106 - 1764.27) / (4106 + 1764.27) = 2341.73 / 5870.27.
    assert cell["spread"] == pytest.approx(132.73, abs=0.01)
    assert cell["floor"] == pytest.approx(39.89, abs=0.01)
    # The floor is reached at the harmonic mean, 2 x 4106 x 1764.27 / 5870.27 = 2468.06:
    # 703.79 / 1764.27 and 1637.94 / 4106 are both 39.89 %.
    best = 2 * 4106.0 * 1764.27 / (4106.0 + 1764.27)
    assert best == pytest.approx(2468.06, abs=0.01)
    assert (best - 1764.27) / 1764.27 * 100 == pytest.approx(cell["floor"])
    assert (4106.0 - best) / 4106.0 * 100 == pytest.approx(cell["floor"])


def test_an_input_resolving_to_another_engine_profile_is_another_cell():
    old = _scored("a", 100.0)
    other = {**_scored("b", 300.0), "profile": "tensorrt-llm"}

    assert bench.publication_spread([old, other]) == []


def test_the_layout_table_keeps_the_sign_of_the_errors():
    cases = [
        _scored("a", 1.0, error=+80.0, dp_attention=8),
        _scored("a", 1.0, error=+120.0, dp_attention=8),
        _scored("a", 1.0, error=-10.0),
        _scored("a", 1.0, error=+30.0, tp=1),
    ]

    table = {key: rest for key, *rest in bench.layout_table(cases)}

    assert table["tensorrt-llm-pytorch|8-bit W8A8|Hopper|attention DP"] == [2, 100.0, 100.0, 120.0]
    assert table["tensorrt-llm-pytorch|8-bit W8A8|Hopper|TP"] == [1, -10.0, 10.0, 10.0]
    assert table["tensorrt-llm-pytorch|8-bit W8A8|Hopper|1 card"] == [1, 30.0, 30.0, 30.0]
