"""Error bands: regime lookup with fallback, the arithmetic, and pessimistic cards, by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pools.sizing import band as band_module
from pools.sizing.band import error_band, gpu_generation, load_regime, precision_class
from pools.sizing.demand import demand_from_traffic
from pools.sizing.gpus import gpu_spec
from pools.sizing.memory import precision_parse
from pools.sizing.plan import sizing_plan
from pools.sizing.presets import model_preset

BANDS = {
    "all": {"rows": 100, "p10_ratio": 0.5, "p90_ratio": 1.5},
    "batch-1": {"rows": 40, "p10_ratio": 0.7, "p90_ratio": 1.2},
    "batch-1|weight-only": {"rows": 30, "p10_ratio": 0.6, "p90_ratio": 1.1},
    "batch-1|weight-only|Ampere": {"rows": 3, "p10_ratio": 0.1, "p90_ratio": 9.0},
    "throughput|16-bit|Hopper": {"rows": 12, "p10_ratio": 0.8, "p90_ratio": 1.05},
}


@pytest.fixture
def bands(monkeypatch):
    monkeypatch.setattr(band_module, "_bands", lambda: BANDS)


def test_regimes_are_named_from_the_load_precision_and_card():
    assert load_regime(1) == "batch-1" and load_regime(1.5) == "throughput"
    assert precision_class(precision_parse("BF16")) == "16-bit"
    assert precision_class(precision_parse("FP8")) == "8-bit W8A8"
    assert precision_class(precision_parse("INT4-AWQ")) == "weight-only"
    assert precision_class(precision_parse("W8A16")) == "weight-only"
    assert gpu_generation(gpu_spec("h100_sxm")) == "Hopper"
    assert gpu_generation(gpu_spec("a100_80g_sxm")) == "Ampere"


def test_the_most_specific_regime_with_enough_rows_answers(bands):
    # Ampere weight-only batch 1 has only 3 rows (< 8): its quantiles are not used.
    band = error_band(
        tok_s=200.0, batch=1, precision=precision_parse("INT4-GPTQ"), gpu=gpu_spec("a100_80g_sxm")
    )

    assert band.regime == "batch-1|weight-only" and band.rows == 30
    assert (band.low_tok_s, band.high_tok_s) == pytest.approx((120.0, 220.0))


def test_a_regime_with_its_own_rows_and_the_fallback_to_all(bands):
    hopper = error_band(
        tok_s=1000.0, batch=64, precision=precision_parse("FP16"), gpu=gpu_spec("h100_sxm")
    )
    fp8 = error_band(
        tok_s=1000.0, batch=64, precision=precision_parse("FP8"), gpu=gpu_spec("h100_sxm")
    )

    assert (hopper.regime, hopper.low_tok_s, hopper.high_tok_s) == (
        "throughput|16-bit|Hopper",
        800.0,
        1050.0,
    )
    assert (fp8.regime, fp8.low_tok_s, fp8.high_tok_s) == ("all", 500.0, 1500.0)


def test_the_shipped_bands_bracket_the_estimate():
    band = error_band(
        tok_s=100.0, batch=1, precision=precision_parse("BF16"), gpu=gpu_spec("a100_80g_sxm")
    )

    assert band is not None and band.rows >= band_module.MIN_ROWS
    assert band.low_tok_s < 100.0 < band.high_tok_s


def test_pessimistic_cards_cover_the_peak_at_the_low_end_of_the_band(bands):
    demand = demand_from_traffic(
        requests_per_day=1_000_000,
        input_tokens=1000,
        output_tokens=500,
        peak_share=0.5,
        peak_hours=4,
    )
    plan = sizing_plan(
        model=model_preset("llama3_8b"),
        gpus=[gpu_spec("h100_sxm")],
        precision="FP16",
        kv_cache_dtype=None,
        input_tokens=1000,
        output_tokens=500,
        demand=demand,
        tpot_target_ms=50,
    )
    row = plan.rows[0]

    # 500,000 requests in 14,400 s = 34.72 requests/s at the peak.
    assert demand.peak_requests_per_s == pytest.approx(500_000 / 14_400)
    assert row.band.regime == "throughput|16-bit|Hopper"
    assert row.cards == math.ceil(demand.peak_requests_per_s / row.replica_requests_per_s) * row.tp
    low = row.replica_requests_per_s * 0.8
    assert row.cards_pessimistic == math.ceil(demand.peak_requests_per_s / low) * row.tp
    assert row.cards_pessimistic >= row.cards


def test_an_nvfp4_estimate_on_blackwell_reads_its_own_regimes_band():
    """The shipped bands are written from every bundled set, so the 247 published FP4 rows
    (NVFP4, and gpt-oss's MXFP4) on B200 / GB200 / RTX PRO 6000 (none in the first two files:
    78 in the MoE file, 169 in the other releases' tables and a thread) are a regime of their
    own instead of falling back to the throughput band."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    fp4_rows = [
        row
        for name in (
            "sizing_dataset.json",
            "sizing_dataset_2026.json",
            "sizing_dataset_2026_moe.json",
            "sizing_dataset_2026_trtllm_next.json",
            "sizing_dataset_2026_threads.json",
        )
        for row in json.loads((fixtures / name).read_text())["measurements"]
        if "FP4" in row["precision"].upper()
        and row["gpu"] in ("b200", "gb200", "rtx_pro_6000_server")
    ]

    band = error_band(
        tok_s=1000.0, batch=64, precision=precision_parse("NVFP4"), gpu=gpu_spec("b200")
    )

    assert len(fp4_rows) == 247
    assert band.regime == "throughput|4-bit W4A4|Blackwell"
    assert band.rows == len(fp4_rows)
    assert band.low_tok_s < 1000.0 < band.high_tok_s
