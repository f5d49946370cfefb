"""TensorRT-LLM's server (``trtllm-serve``) and Triton with the TensorRT-LLM backend: the names
the family queries read exist, with the label values they select, in an exposition of each
(``tests/fixtures/serving/*.prom``, written in the names and help texts of
``tensorrt_llm/metrics/collector.py`` and of Triton's ``docs/user_guide/metrics.md`` /
``custom_metrics_reporter.cc``), and what a scrape of them gives is read as worked by hand.
The PromQL itself (the KV-block ratio, ``increase``) is proven on a real Prometheus in
``tests/integration/prometheus/test_serving_prometheus.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from serving_support import histogram, term

from pools.serving.rollup import allocation_values
from scheduler_adapters.serving_metrics import SIGNALS, answers_from_series

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serving"
LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")


def exposition(name: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """``metric name -> [(labels, value)]`` of one exposition text (comments skipped)."""
    out: dict[str, list] = {}
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        match = LINE.match(line)
        assert match, line
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        out.setdefault(match.group(1), []).append((labels, float(match.group(3))))
    return out


def read_names(engine: str) -> list[tuple[str, str, str]]:
    """(signal, name, every matcher) the queries read for ``engine``."""
    return [
        (s.key, m.name, ",".join(x for x in (m.matchers, m.over) if x))
        for s in SIGNALS
        for m in s.metrics
        if m.engine == engine
    ]


@pytest.mark.parametrize(
    ("engine", "fixture"), [("trtllm", "trtllm-serve.prom"), ("triton", "triton-trtllm.prom")]
)
def test_every_name_read_is_in_the_engines_exposition(engine, fixture):
    scrape = exposition(fixture)
    names = read_names(engine)
    assert names, engine
    for signal, name, matchers in names:
        assert name in scrape, f"{signal}: {name} is not exported by {fixture}"
        for key, value in re.findall(r'(\w+)="([^"]*)"', matchers):
            assert any(labels.get(key) == value for labels, _ in scrape[name]), (name, key, value)


def test_trtllm_serve_is_read_by_its_own_names():
    """One 5-minute window whose increases equal the recorded totals (the server started in
    it). Running 6, waiting 0, KV 0.41 -> 41 %; finished 912 + 88 = 1,000, errors 2 + 1 = 3;
    prefix hits 103,000 of 412,000 prompt tokens = 25 %. TTFT 610 / 990 / 1,000 under 0.1 /
    0.5 / +Inf: p50 rank 500 in (0, 0.1] = 0.1 x 500/610 = 0.08197 s; p95 rank 950 in
    (0.1, 0.5] = 0.1 + 0.4 x 340/380 = 0.45789 s. TPOT 700 / 1,000 under 25 / 50 ms: p50 rank
    500 = 0.025 x 500/700 = 0.017857 s."""
    scrape = exposition("trtllm-serve.prom")

    def total(name):
        return sum(v for _, v in scrape[name])

    ttft = {labels["le"]: v for labels, v in scrape["trtllm_time_to_first_token_seconds_bucket"]}
    tpot = {labels["le"]: v for labels, v in scrape["trtllm_time_per_output_token_seconds_bucket"]}
    series = [
        term("requests_running", "trtllm", "trtllm_num_requests_running", 6),
        term("requests_waiting", "trtllm", "trtllm_num_requests_waiting", 0),
        term("kv_cache_usage_pct", "trtllm", "trtllm_kv_cache_utilization", 0.41),
        term("generation_tokens", "trtllm", "trtllm_generation_tokens_total",
             total("trtllm_generation_tokens_total")),
        term("prompt_tokens", "trtllm", "trtllm_prompt_tokens_total",
             total("trtllm_prompt_tokens_total")),
        term("prefix_cache_hits", "trtllm", "trtllm_prompt_cached_tokens_total",
             total("trtllm_prompt_cached_tokens_total")),
        term("prefix_cache_queries", "trtllm", "trtllm_prompt_tokens_total",
             total("trtllm_prompt_tokens_total")),
        term("requests_finished", "trtllm", "trtllm_request_success_total",
             total("trtllm_request_success_total")),
        term("requests_failed", "trtllm", "trtllm_request_error_total",
             total("trtllm_request_error_total")),
        *histogram("ttft", "trtllm", "trtllm_time_to_first_token_seconds_bucket", ttft),
        *histogram("itl", "trtllm", "trtllm_time_per_output_token_seconds_bucket", tpot),
    ]  # fmt: skip
    answers = answers_from_series({"engine": series})
    values = allocation_values(list(answers.targets.values()))
    f = values.fields

    assert values.engines == ("trtllm",)
    assert (f["requests_running"], f["requests_waiting"]) == (6, 0)
    assert f["kv_cache_usage_pct"] == pytest.approx(41.0)
    assert (f["generation_tokens"], f["prompt_tokens"]) == (198_000, 412_000)
    assert (f["requests_finished"], f["requests_failed"]) == (1000, 3)
    assert f["prefix_cache_hit_pct"] == pytest.approx(25.0)
    assert f["ttft_p50_s"] == pytest.approx(0.1 * 500 / 610)
    assert f["ttft_p95_s"] == pytest.approx(0.1 + 0.4 * 340 / 380)
    assert f["itl_p50_s"] == pytest.approx(0.025 * 500 / 700)
    assert f["preemptions"] is None
    assert any(m.startswith("preemptions:") for m in values.missing)


def test_triton_first_response_buckets_are_milliseconds():
    """Triton's first-response histogram, 1,500 requests: 410 / 1,390 / 1,496 / 1,500 under
    100 / 500 / 2,000 / 5,000 ms. p50 rank 750 in (100, 500] ms = 100 + 400 x 340/980 =
    238.78 ms = 0.23878 s; p95 rank 1,425 in (500, 2,000] = 500 + 1,500 x 35/106 = 995.28 ms.
    Pending 4 (the queue), 5 active; no token counters: tokens unknown and named."""
    scrape = exposition("triton-trtllm.prom")
    buckets = {
        labels["le"]: v for labels, v in scrape["nv_inference_first_response_histogram_ms_bucket"]
    }
    active = next(
        v for labels, v in scrape["nv_trt_llm_request_metrics"]
        if labels["request_type"] == "active"
    )  # fmt: skip
    series = [
        term("requests_running", "triton", "nv_trt_llm_request_metrics", active),
        term("requests_waiting", "triton", "nv_inference_pending_request_count",
             scrape["nv_inference_pending_request_count"][0][1]),
        *histogram("ttft", "triton", "nv_inference_first_response_histogram_ms_bucket", buckets),
    ]  # fmt: skip
    values = allocation_values(list(answers_from_series({"x": series}).targets.values()))
    f = values.fields

    assert values.engines == ("triton",)
    assert (f["requests_running"], f["requests_waiting"]) == (5, 4)
    assert f["ttft_p50_s"] == pytest.approx((100 + 400 * 340 / 980) / 1000)
    assert f["ttft_p95_s"] == pytest.approx((500 + 1500 * 35 / 106) / 1000)
    assert f["generation_tokens"] is None
    generation = next(m for m in values.missing if m.startswith("generation_tokens:"))
    assert "trtllm_generation_tokens_total" in generation
