"""The elastic loop's signals and decisions against a real Prometheus whose TSDB is backfilled
with one day of inference traffic of a known daily shape (Monday 2 Nov 2026, UTC, scraped
every 30 s from 23:50 the evening before). Missing Prometheus is a failure, never a skip.

Namespace ``team-infer`` (dcgm-exporter with ``honorLabels: false``: the workload's namespace
arrives as ``exported_namespace``, ``namespace`` is the exporter's ``gpu-operator``), two cards
whose utilisation is the shape -10 and +10 points (mean = the shape), vLLM at 10 requests/s:

| time of day   | utilisation | mean latency | generation tok/s |
|---------------|-------------|--------------|------------------|
| 00:00 - 08:00 | 20 %        | 300 ms       | 100              |
| 08:00 - 10:00 | 60 %        | 500 ms       | 500              |
| 10:00 - 12:00 | 90 %        | 1200 ms      | 1000             |
| 12:00 - 24:00 | 20 %        | 300 ms       | 100              |

A counter's increment from one scrape to the next follows the segment of the earlier scrape.
A third card of ``gpu-operator`` (no pod) reads 0 % and must not show up as a team.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from integration.prometheus.server import backfilled_prometheus, openmetrics

from pools.elastic.policy import Action, ScalingPolicy, evaluate
from pools.elastic.signals import metric_samples
from pools.elastic.whatif import replay
from scheduler_adapters.prometheus import PrometheusAdapter

pytestmark = [pytest.mark.integration]

DAY = datetime(2026, 11, 2, tzinfo=UTC)
T0 = int(DAY.timestamp())
EVERY = 30
NS = "team-infer"


def shape(t: int) -> tuple[float, float, float]:
    """(utilisation %, latency s, generation tok/s) at Unix second ``t``."""
    hour = ((t - T0) % 86_400) / 3600
    if 8 <= hour < 10:
        return 60.0, 0.5, 500.0
    if 10 <= hour < 12:
        return 90.0, 1.2, 1000.0
    return 20.0, 0.3, 100.0


def _history() -> str:
    stamps = range(T0 - 600, T0 + 86_400 + 1, EVERY)
    families: dict[str, list[str]] = {
        name: []
        for name in (
            "DCGM_FI_DEV_GPU_UTIL",
            "vllm:e2e_request_latency_seconds_sum",
            "vllm:e2e_request_latency_seconds_count",
            "vllm:num_requests_waiting",
            "vllm:generation_tokens_total",
            "vllm:prompt_tokens_total",
        )
    }

    def line(metric, labels, value, t):
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        families[metric].append(f"{metric}{{{text}}} {value} {t}")

    exporter = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x1", "job": "dcgm"}
    cards = [
        ({**exporter, "UUID": "GPU-e1", "gpu": "0", "exported_namespace": NS,
          "exported_pod": "vllm-0"}, -10.0),
        ({**exporter, "UUID": "GPU-e2", "gpu": "1", "exported_namespace": NS,
          "exported_pod": "vllm-1"}, +10.0),
    ]  # fmt: skip
    spare = {**exporter, "UUID": "GPU-e3", "gpu": "2"}
    vllm = {"namespace": NS, "pod": "vllm-0", "model_name": "qwen"}
    count = total = generated = prompt = 0.0
    previous = None
    for t in stamps:
        util, latency, gen = shape(t)
        for labels, offset in cards:
            line("DCGM_FI_DEV_GPU_UTIL", labels, util + offset, t)
        line("DCGM_FI_DEV_GPU_UTIL", spare, 0, t)
        if previous is not None:
            _, earlier_latency, earlier_gen = shape(previous)
            count += 10 * EVERY
            total += 10 * EVERY * earlier_latency
            generated += earlier_gen * EVERY
            prompt += 2 * earlier_gen * EVERY
        line("vllm:e2e_request_latency_seconds_sum", vllm, f"{total:.3f}", t)
        line("vllm:e2e_request_latency_seconds_count", vllm, f"{count:.0f}", t)
        line("vllm:num_requests_waiting", vllm, 5 if util > 75 else 0, t)
        line("vllm:generation_tokens_total", vllm, f"{generated:.0f}", t)
        line("vllm:prompt_tokens_total", vllm, f"{prompt:.0f}", t)
        previous = t
    return openmetrics(families)


@pytest.fixture(scope="module")
def elastic_prometheus(tmp_path_factory) -> Iterator[str]:
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus-elastic"), _history()) as url:
        yield url


class Counting(PrometheusAdapter):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.range_queries = 0

    def query_range(self, *args, **kwargs):
        self.range_queries += 1
        return super().query_range(*args, **kwargs)


@pytest.fixture(scope="module")
def day_signals(elastic_prometheus):
    metrics = Counting(elastic_prometheus, timeout_s=30)
    try:
        everything = metrics.inference_signals(
            start=DAY, end=DAY + timedelta(seconds=86_400 - 60), step_s=60
        )
        assert metrics.range_queries == 7  # one per metric, whatever the namespaces
        return everything
    finally:
        metrics.close()


def _at(samples, hh, mm=0):
    t = T0 + hh * 3600 + mm * 60
    return next(s.value for s in samples if s.timestamp == t)


def test_signals_per_namespace_follow_the_shape(day_signals):
    # the spare card's series stays under the exporter's namespace; the workload's cards
    # are found through exported_namespace
    assert set(day_signals) == {NS, "gpu-operator"}
    infer = day_signals[NS]
    assert len(infer.util_pct) == 1440
    assert _at(infer.util_pct, 3) == pytest.approx(20.0)
    assert _at(infer.util_pct, 11) == pytest.approx(90.0)  # mean of 80 and 100
    assert _at(infer.latency_s, 3) == pytest.approx(0.3)
    assert _at(infer.latency_s, 11) == pytest.approx(1.2)
    assert _at(infer.latency_s, 10) == pytest.approx(0.5)  # the window [09:58, 10:00] is old
    assert _at(infer.latency_s, 10, 1) > 0.8  # half or more of the window is the peak
    assert _at(infer.waiting, 11) == 5
    assert _at(infer.generation_tok_s, 11) == pytest.approx(1000.0)
    assert _at(infer.prompt_tok_s, 11) == pytest.approx(2000.0)
    assert _at(infer.request_s, 11) == pytest.approx(10.0)  # vLLM finishes 10 requests/s
    assert _at(day_signals["gpu-operator"].util_pct, 11) == 0.0
    # distinct cards (UUIDs) behind each mean: the team's two, the exporter's spare
    assert _at(infer.cards_reporting, 11) == 2
    assert _at(day_signals["gpu-operator"].cards_reporting, 11) == 1


def test_one_namespace_selectors_find_the_same_series(elastic_prometheus):
    """The what-if narrows every selector to the team's namespace (through the label traps)."""
    metrics = PrometheusAdapter(elastic_prometheus, timeout_s=30)
    try:
        one = metrics.inference_signals(
            start=DAY + timedelta(hours=10, minutes=30),
            end=DAY + timedelta(hours=11),
            step_s=60,
            namespaces=[NS],
        )
    finally:
        metrics.close()
    assert list(one) == [NS]
    assert _at(one[NS].util_pct, 11) == pytest.approx(90.0)
    assert _at(one[NS].latency_s, 11) == pytest.approx(1.2)


POLICY = ScalingPolicy(floor_cards=2, ceiling_cards=8, step_cards=2)


def test_the_loop_scales_up_five_minutes_into_the_peak(day_signals):
    samples = metric_samples(day_signals[NS], cards_held=2)
    # both signals high from 10:01 (latency crosses 800 ms one step after utilisation)
    at_1005 = evaluate(POLICY, samples, cards_now=2, now=T0 + 10 * 3600 + 5 * 60)
    assert (at_1005.action, at_1005.up_held_s) == (Action.HOLD, 240)
    at_1006 = evaluate(POLICY, samples, cards_now=2, now=T0 + 10 * 3600 + 6 * 60)
    assert (at_1006.action, at_1006.cards_to, at_1006.up_held_s) == (Action.UP, 4, 300)
    # 09:00: 60 % with 500 ms, nothing; 03:00 low for hours but at the floor
    assert evaluate(POLICY, samples, cards_now=2, now=T0 + 9 * 3600).reason == "steady"
    assert evaluate(POLICY, samples, cards_now=2, now=T0 + 3 * 3600).reason == "at_floor"


def test_what_if_over_the_day(day_signals):
    """Ups at 10:06, 10:21, 10:36 (cooldown 15 min; 8 = ceiling), downs at 12:30, 13:00,
    13:30 (30 min low since 12:00, then since each change). Card-minutes over the 1,439
    counted minutes: 2x606 + 4x15 + 6x15 + 8x114 + 6x30 + 4x30 + 2x629 = 3,832. A fixed
    allocation of 8 cards: 11,512. Latency above 800 ms at the steps 10:01 ... 12:00: 120 min."""
    result = replay(POLICY, metric_samples(day_signals[NS], cards_held=2))
    hhmm = [
        (e.action, datetime.fromtimestamp(e.at, UTC).strftime("%H:%M"), e.cards_to)
        for e in result.events
    ]
    assert hhmm == [
        (Action.UP, "10:06", 4),
        (Action.UP, "10:21", 6),
        (Action.UP, "10:36", 8),
        (Action.DOWN, "12:30", 6),
        (Action.DOWN, "13:00", 4),
        (Action.DOWN, "13:30", 2),
    ]
    assert (result.scale_ups, result.scale_downs, result.min_cards, result.max_cards) == (
        3,
        3,
        2,
        8,
    )
    assert result.card_hours * 60 == pytest.approx(3832)
    assert result.fixed_card_hours * 60 == pytest.approx(11512)
    assert result.breach_minutes == 120
    assert result.unknown_minutes == 0


def test_a_mean_over_fewer_cards_than_held_scales_nothing(day_signals):
    """Issue 27 item 1: Prometheus has series for 2 cards; an allocation holding 4 cannot be
    judged by their mean (03:00, 20 % for hours, would scale down from 4 to 2)."""
    at_0300 = T0 + 3 * 3600
    seen_all = evaluate(
        POLICY, metric_samples(day_signals[NS], cards_held=2), cards_now=4, now=at_0300
    )
    assert (seen_all.action, seen_all.cards_to) == (Action.DOWN, 2)
    half = evaluate(POLICY, metric_samples(day_signals[NS], cards_held=4), cards_now=4, now=at_0300)
    assert (half.action, half.reason) == (Action.HOLD, "unknown")
