"""Elastic signals from Prometheus: six range queries whatever the number of namespaces,
answers grouped by namespace; the fake answers the same shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx

from scheduler_adapters.prometheus import (
    InferenceSignals,
    PrometheusAdapter,
    Sample,
    inference_queries,
)
from scheduler_adapters.prometheus_fake import FakePrometheus

START = datetime(2026, 11, 2, 10, tzinfo=UTC)
END = START + timedelta(minutes=2)
T = START.timestamp()


def _matrix(rows):
    return {"status": "success", "data": {"resultType": "matrix", "result": rows}}


def test_queries_are_grouped_by_namespace_and_follow_the_label_traps():
    queries = inference_queries(rate_window_s=120)
    assert list(queries) == ["util_pct", "cards_reporting", "latency_s", "waiting",
                             "generation_tok_s", "prompt_tok_s", "request_s"]  # fmt: skip
    util = (
        'label_replace(label_replace({__name__=~"DCGM_FI_DEV_GPU_UTIL|'
        'dcgm_fi_dev_gpu_util"}, "namespace", "$1", "pod_namespace", "(.+)"), "namespace", '
        '"$1", "exported_namespace", "(.+)")'
    )
    assert queries["util_pct"] == f"avg by (namespace) ({util})"
    # distinct cards by UUID (either spelling): MIG instances of one card count once
    assert queries["cards_reporting"] == (
        f"count by (namespace) (max by (namespace, UUID, uuid) ({util}))"
    )
    assert queries["latency_s"] == (
        "sum by (namespace) (rate(vllm:e2e_request_latency_seconds_sum[120s])) / "
        "sum by (namespace) (rate(vllm:e2e_request_latency_seconds_count[120s]))"
    )
    assert queries["waiting"] == "sum by (namespace) (vllm:num_requests_waiting)"
    assert queries["generation_tok_s"] == (
        "sum by (namespace) (rate(vllm:generation_tokens_total[120s]))"
    )
    assert queries["request_s"] == (
        "sum by (namespace) (rate(vllm:e2e_request_latency_seconds_count[120s]))"
    )


def _server(namespaces: int, seen: list[str]):
    def handler(request: httpx.Request) -> httpx.Response:
        query = parse_qs(urlsplit(str(request.url)).query)["query"][0]
        seen.append(query)
        value = {"util_pct": "80", "cards_reporting": "2", "latency_s": "0.9", "waiting": "3",
                 "generation_tok_s": "100", "prompt_tok_s": "NaN", "request_s": "12"}  # fmt: skip
        marks = {"count by": "cards_reporting", "DCGM": "util_pct", "_sum": "latency_s",
                 "e2e": "request_s", "waiting": "waiting", "generation": "generation_tok_s",
                 "prompt": "prompt_tok_s"}  # fmt: skip
        key = next(v for k, v in marks.items() if k in query)
        rows = [
            {
                "metric": {"namespace": f"team-{i}"},
                "values": [[T, value[key]], [T + 60, value[key]]],
            }
            for i in range(namespaces)
        ]
        rows.append({"metric": {}, "values": [[T, "1"]]})  # a card no pod holds: dropped
        return httpx.Response(200, content=json.dumps(_matrix(rows)))

    return httpx.MockTransport(handler)


def test_two_thousand_namespaces_take_seven_queries():
    seen: list[str] = []
    adapter = PrometheusAdapter("http://prom", transport=_server(2000, seen))
    signals = adapter.inference_signals(start=START, end=END, step_s=60)
    assert len(seen) == 7
    assert len(signals) == 2000
    one = signals["team-7"]
    assert one.util_pct == (Sample(T, 80.0), Sample(T + 60, 80.0))
    assert one.cards_reporting == (Sample(T, 2.0), Sample(T + 60, 2.0))
    assert one.latency_s[0] == Sample(T, 0.9)
    assert one.prompt_tok_s[0] == Sample(T, None)  # NaN is unknown
    assert one.request_s[0] == Sample(T, 12.0)


def test_namespaces_filter_and_thirty_days_in_chunks():
    seen: list[str] = []
    adapter = PrometheusAdapter("http://prom", transport=_server(3, seen))
    signals = adapter.inference_signals(
        start=START, end=START + timedelta(days=30), step_s=60, namespaces=["team-1"]
    )
    assert list(signals) == ["team-1"]
    # 43,201 steps in pieces of at most 10,000: 5 pieces x 7 metrics
    assert len(seen) == 35
    # one namespace: every selector names it, so Prometheus reads that team's series only
    assert seen[2] == inference_queries(namespace="team-1")["latency_s"]
    assert 'vllm:e2e_request_latency_seconds_sum{namespace="team-1"}[120s]' in seen[2]
    assert 'exported_namespace="team-1"' in seen[0]


def test_a_namespace_that_is_not_a_label_is_refused():
    import pytest

    with pytest.raises(ValueError):
        inference_queries(namespace='x"} or up{')


def test_fake_answers_the_same_shape():
    stored = InferenceSignals("team-a", util_pct=(Sample(T - 60, 1.0), Sample(T, 2.0)))
    fake = FakePrometheus(inference=[stored, InferenceSignals("team-b")])
    got = fake.inference_signals(start=START, end=END, namespaces=["team-a"])
    assert list(got) == ["team-a"]
    assert got["team-a"].util_pct == (Sample(T, 2.0),)


def test_what_if_asks_for_two_metrics_only():
    seen: list[str] = []
    adapter = PrometheusAdapter("http://prom", transport=_server(1, seen))
    signals = adapter.inference_signals(start=START, end=END, metrics=("util_pct", "latency_s"))
    assert seen == [inference_queries()["util_pct"], inference_queries()["latency_s"]]
    assert signals["team-0"].waiting == ()
