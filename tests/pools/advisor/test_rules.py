"""The advisor's rules on hand-built series: each fires where the seeds' symptom is, stays
quiet on a near miss, and is undecided (never healthy) when a signal it needs is missing.
Default thresholds (:class:`Thresholds`) unless a test says otherwise."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from pools.advisor.rules import (
    RULES,
    Bucket,
    DaySummary,
    DecaySignals,
    FabricSignals,
    Finding,
    NeighbourSignals,
    PromptBloatSignals,
    Rule,
    ScaleChange,
    ScalingSignals,
    Severity,
    Thresholds,
    Undecided,
    WindowSignals,
    rule_batching,
    rule_cold_start,
    rule_interconnect,
    rule_memory_decay,
    rule_memory_pressure,
    rule_noisy_neighbour,
    rule_outside_gpu,
    rule_prompt_bloat,
    rule_queue_avalanche,
    rule_saturation,
    rule_scaling_churn,
)

T = Thresholds()
END = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)  # the newest bucket starts at 11:55
HEALTHY = {
    "gpu_util_pct": 60.0,
    "requests_running": 20.0,
    "requests_waiting": 0.0,
    "kv_cache_usage_pct": 50.0,
    "ttft_p95_s": 0.4,
    "itl_p95_s": 0.03,
    "e2e_p95_s": 4.0,
    "requests_finished": 600.0,
    "requests_failed": 0.0,
    "preemptions": 0.0,
    "fb_used_mib": 60000.0,
    "fb_free_mib": 20000.0,
    "nvlink_bytes_s": 5e9,
}


def buckets(n: int, *, end: datetime = END, cards: int = 4, **overrides) -> list[Bucket]:
    """``n`` consecutive 5-minute buckets ending at ``end``, healthy unless ``overrides``
    says (a value, or a function of the bucket's index from the oldest, 0-based)."""
    out = []
    for i in range(n):
        at = end - timedelta(minutes=5 * (n - i))
        values = dict(HEALTHY)
        for name, value in overrides.items():
            values[name] = value(i) if callable(value) else value
        out.append(Bucket(at, cards, **values))
    return out


def window(items) -> WindowSignals:
    return WindowSignals(buckets=tuple(items))


def test_every_rule_has_a_source_and_the_eleven_are_listed():
    assert len(RULES) == 11 == len(Rule)
    assert all(info.source and info.title and info.source_in_words for info in RULES)


def test_a_rules_source_says_the_article_section_and_row_beside_the_citation():
    """004 §5.1 is the seed's troubleshooting table (高频问题排查速查表); its row 1 reads
    "GPU利用率低，但请求排队严重". A rule citing three passages of one seed names it once."""
    rules = {info.rule: info for info in RULES}
    batching = rules[Rule.BATCHING]
    assert batching.source == "004 §5.1 row 1"
    assert batching.source_in_words == (
        "Enterprise GPU pools, §5.1 “Troubleshooting table of frequent problems”, row 1: "
        "GPU utilisation is low but requests queue badly"
    )
    assert rules[Rule.PROMPT_BLOAT].source == "004 §5.1 row 5, §4.1, §4.3"
    assert rules[Rule.NOISY_NEIGHBOUR].source == "004 §5.1 row 2, 000 §5.4"
    assert rules[Rule.NOISY_NEIGHBOUR].source_in_words.endswith(
        "; AI-native compute, §5.4 “Multi-tenant QoS isolation is harder than it looks”"
    )
    assert rules[Rule.OUTSIDE_GPU].source == "004 §5.2 habit 1"


def test_thresholds_are_the_seeds_where_they_give_numbers():
    """004 §2.3: above 90 % for long; 000 §5.2: TTFT of tens of seconds; 004 §4.3's case."""
    assert T.saturation_util_pct == 90.0
    assert T.avalanche_ttft_s == 10.0
    assert T.sustain_buckets * 5 == 15  # minutes: the seeds' 10-15 min cooldown


# ------------------------------------------------------------------------- 1 batching


def test_batching_fires_when_the_gpu_idles_with_a_queue_and_kv_room():
    """12 healthy buckets, then 4 with utilisation 25 % (< 40), 12 waiting (>= 5) and the
    KV cache at 35 % (< 80): a run of 4 >= 3 buckets, since the first of them (11:40)."""
    series = buckets(16, gpu_util_pct=lambda i: 25.0 if i >= 12 else 60.0,
                     requests_waiting=lambda i: 12.0 if i >= 12 else 0.0,
                     kv_cache_usage_pct=lambda i: 35.0 if i >= 12 else 50.0)  # fmt: skip
    out = rule_batching(window(series), T)
    assert isinstance(out, Finding)
    assert out.since == datetime(2026, 12, 4, 11, 40, tzinfo=UTC)
    assert out.numbers == {
        "minutes": 20,
        "gpu_util_pct_mean": 25.0,
        "requests_waiting_mean": 12.0,
        "kv_cache_usage_pct_max": 35.0,
    }
    assert out.severity is Severity.WARNING


def test_batching_near_miss_kv_cache_full_is_memory_not_batching():
    """Same queue and idle GPU, but the KV cache at 85 % (>= 80): no room, so batch limits
    are not the cause (rule 3's territory)."""
    series = buckets(6, gpu_util_pct=25.0, requests_waiting=12.0, kv_cache_usage_pct=85.0)
    assert rule_batching(window(series), T) is None


def test_batching_near_miss_two_buckets_are_not_sustained():
    """Only the newest 2 buckets qualify: 2 < 3."""
    series = buckets(6, gpu_util_pct=lambda i: 25.0 if i >= 4 else 60.0,
                     requests_waiting=lambda i: 12.0 if i >= 4 else 0.0)  # fmt: skip
    assert rule_batching(window(series), T) is None


def test_batching_without_a_kv_gauge_is_undecided_not_healthy():
    """Idle GPU and a queue, KV cache unknown: the AND is unknown, so undecided."""
    series = buckets(6, gpu_util_pct=25.0, requests_waiting=12.0, kv_cache_usage_pct=None)
    assert isinstance(rule_batching(window(series), T), Undecided)


def test_batching_missing_kv_with_a_busy_gpu_is_healthy():
    """Utilisation 60 % is not below 40: the AND is false whatever the KV cache says."""
    series = buckets(6, kv_cache_usage_pct=None)
    assert rule_batching(window(series), T) is None


def test_no_rollups_or_stale_ones_are_undecided():
    assert isinstance(rule_batching(window([]), T), Undecided)
    stale = WindowSignals(buckets=tuple(buckets(6)), fresh=False)
    assert rule_batching(stale, T).reason == "serving rollups are stale"


def test_a_gap_in_the_buckets_breaks_a_run_as_unknown():
    """Buckets 11:35, 11:40, then 11:55 (two missing): the run from the newest is 1, and
    the gap before it is unknown, so undecided rather than healthy."""
    series = buckets(5, gpu_util_pct=25.0, requests_waiting=12.0, kv_cache_usage_pct=30.0)
    del series[2:4]
    assert isinstance(rule_batching(window(series), T), Undecided)


# ------------------------------------------------------------------------- 2 noisy neighbour


def neighbour_case(spike_at: set[int], busy_at: set[int], *, own_running=20.0):
    """12 buckets; ITL p95 0.03 s, 0.09 s in ``spike_at``; neighbours' busy cards 2, 6 in
    ``busy_at``."""
    series = buckets(12, itl_p95_s=lambda i: 0.09 if i in spike_at else 0.03,
                     requests_running=own_running)  # fmt: skip
    loads = tuple(6.0 if i in busy_at else 2.0 for i in range(12))
    return NeighbourSignals(tuple(series), loads, neighbours=1, shared="node", hosts=("n1",))


def test_noisy_neighbour_fires_when_spikes_meet_the_neighbours_load():
    """Median ITL p95 0.03 s (9 of 12 buckets); spikes 0.09 >= 2 x 0.03 in buckets 3, 7, 10;
    the neighbour's busy cards 6 >= 1.5 x median 2 in all three: 3 of 3 coincide (>= 75 %)."""
    out = rule_noisy_neighbour(neighbour_case({3, 7, 10}, {3, 7, 10}), T)
    assert isinstance(out, Finding)
    assert out.numbers["spikes"] == 3 and out.numbers["coinciding"] == 3
    assert out.numbers["itl_p95_s_median"] == 0.03
    assert out.since == END - timedelta(minutes=5 * (12 - 3))


def test_noisy_neighbour_near_miss_spikes_mostly_without_the_neighbour():
    """Spikes in 3, 7, 10, the neighbour busy only in 3: 1 of 3 = 33 % < 75 %."""
    assert rule_noisy_neighbour(neighbour_case({3, 7, 10}, {3}), T) is None


def test_noisy_neighbour_own_load_is_not_a_neighbour():
    """The allocation's own running requests 30 > 1.2 x median 20 in the spike buckets:
    self-inflicted, not counted; 0 spikes."""
    case = neighbour_case({3, 7}, {3, 7})
    own = tuple(b._replace(requests_running=30.0) if i in {3, 7} else b
                for i, b in enumerate(case.buckets))  # fmt: skip
    assert rule_noisy_neighbour(replace(case, buckets=own), T) is None


def test_noisy_neighbour_without_neighbours_is_healthy_and_unknown_placement_undecided():
    case = neighbour_case({3, 7}, {3, 7})
    assert rule_noisy_neighbour(replace(case, neighbours=0), T) is None
    assert isinstance(rule_noisy_neighbour(replace(case, neighbours=None), T), Undecided)
    unknown_load = replace(case, neighbour_busy_cards=tuple(None for _ in range(12)))
    assert isinstance(rule_noisy_neighbour(unknown_load, T), Undecided)


# ------------------------------------------------------------------------- 3 memory pressure


def test_memory_pressure_fires_on_frequent_preemptions_with_a_full_kv_cache():
    """Buckets 2, 5, 8 with 10 preemptions and the KV cache at 99 % (>= 98): 3 >= 3
    qualifying buckets, 30 preemptions, KV full in 3: both, so critical."""
    series = buckets(12, preemptions=lambda i: 10.0 if i in {2, 5, 8} else 0.0,
                     kv_cache_usage_pct=lambda i: 99.0 if i in {2, 5, 8} else 50.0)  # fmt: skip
    out = rule_memory_pressure(window(series), T)
    assert isinstance(out, Finding) and out.severity is Severity.CRITICAL
    assert out.numbers["buckets"] == 3 and out.numbers["preemptions"] == 30
    assert out.numbers["kv_full_buckets"] == 3
    assert out.since == END - timedelta(minutes=5 * (12 - 2))


def test_memory_pressure_summary_groups_its_thousands():
    """Buckets 0..11 (12 >= 3) with 1,028.75 preemptions each: 12 x 1,028.75 = 12,345, said
    "12 345" (narrow no-break space, as the evidence beside it), never "12345"."""
    series = buckets(12, preemptions=1028.75, kv_cache_usage_pct=99.0)
    out = rule_memory_pressure(window(series), T)
    assert out.summary == (
        "Memory ran out in 12 five-minute buckets: 12\u202f345 preemptions, KV cache full in 12."
    )


def test_memory_pressure_framebuffer_near_full_alone_is_a_warning():
    """Framebuffer 77,000 used of 80,000 MiB = 96.25 % (>= 95) in 4 buckets, no preemption,
    KV 50 %: a warning."""
    series = buckets(12, fb_used_mib=lambda i: 77000.0 if i < 4 else 60000.0,
                     fb_free_mib=lambda i: 3000.0 if i < 4 else 20000.0)  # fmt: skip
    out = rule_memory_pressure(window(series), T)
    assert out.severity is Severity.WARNING and out.numbers["fb_used_pct_max"] == 96.2


def test_memory_pressure_near_miss_two_buckets_are_not_frequent():
    """KV at 99 % in 2 buckets: 2 < 3."""
    series = buckets(12, kv_cache_usage_pct=lambda i: 99.0 if i in {2, 5} else 97.0)
    assert rule_memory_pressure(window(series), T) is None


def test_memory_pressure_unknown_gauges_are_undecided():
    series = buckets(12, preemptions=None, kv_cache_usage_pct=None, fb_used_mib=None)
    assert isinstance(rule_memory_pressure(window(series), T), Undecided)


# ------------------------------------------------------------------------- 4 interconnect


def test_interconnect_fires_on_two_busy_nodes_without_nvlink_traffic():
    """2 nodes, utilisation 60 % (>= 50) and NVLink 0 B/s (< 1 MB/s) in all 6 buckets."""
    s = FabricSignals(2, ("a", "b"), None, tuple(buckets(6, nvlink_bytes_s=0.0)))
    out = rule_interconnect(s, T)
    assert isinstance(out, Finding) and out.numbers["minutes"] == 30
    assert out.numbers["nvlink_bytes_s_max"] == 0


def test_interconnect_fires_on_nodes_without_a_fast_fabric():
    s = FabricSignals(2, ("a", "b"), False, tuple(buckets(6)))
    out = rule_interconnect(s, T)
    assert isinstance(out, Finding) and out.numbers["fast_fabric"] is False


def test_interconnect_near_misses():
    """Traffic 5 GB/s on two nodes: talking over NVLink; one node: healthy by shape."""
    assert rule_interconnect(FabricSignals(2, ("a", "b"), True, tuple(buckets(6))), T) is None
    one = FabricSignals(1, ("a",), None, tuple(buckets(6, nvlink_bytes_s=0.0)))
    assert rule_interconnect(one, T) is None


def test_interconnect_unknown_traffic_or_placement_is_undecided():
    s = FabricSignals(2, ("a", "b"), None, tuple(buckets(6, nvlink_bytes_s=None)))
    assert isinstance(rule_interconnect(s, T), Undecided)
    assert isinstance(rule_interconnect(FabricSignals(0, (), None, ()), T), Undecided)


# ------------------------------------------------------------------------- 5 prompt bloat

SEED_CASE = PromptBloatSignals(
    tasks=200,
    calls_per_task_mean=12.0,
    input_tokens_first_call_mean=3000.0,
    input_tokens_last_call_mean=7500.0,
    tool_return_tokens_mean=800.0,
    cached_share=0.55,
    retry_share=7 / 12,
)


def test_prompt_bloat_fires_on_the_seeds_case_of_wasted_retries():
    """004 §4.3: 12 calls per task, 7 of them tool retries: 7/12 = 0.583 > 0.25. Growth
    7,500 / 3,000 = 2.5 < 3, tool returns 800 < 2,000, cache 55 % >= 30 %: only retries."""
    out = rule_prompt_bloat(SEED_CASE, T, since=END)
    assert isinstance(out, Finding)
    assert out.numbers["triggers"] == ["retries"]
    assert out.numbers["retry_share"] == 0.583 and out.numbers["input_growth"] == 2.5
    assert out.summary == "Agent tasks make 12.0 calls each; many retries."


def test_prompt_bloat_fires_on_growing_prompts_and_near_miss_after_the_fix():
    """Input tokens 3,000 -> 9,300 (x3.1 >= 3) fires; the seed's fix (4 calls, no retries,
    prompts 3,000 -> 6,000: x2) is healthy."""
    grown = replace(SEED_CASE, input_tokens_last_call_mean=9300.0, retry_share=0.0)
    assert rule_prompt_bloat(grown, T, since=END).numbers["triggers"] == ["growth"]
    fixed = replace(SEED_CASE, calls_per_task_mean=4.0, input_tokens_last_call_mean=6000.0,
                    retry_share=0.0)  # fmt: skip
    assert rule_prompt_bloat(fixed, T, since=END) is None


def test_prompt_bloat_unknown_shares_and_few_tasks_are_undecided():
    unknown = replace(SEED_CASE, retry_share=None, cached_share=None)
    assert isinstance(rule_prompt_bloat(unknown, T, since=END), Undecided)
    assert isinstance(rule_prompt_bloat(replace(SEED_CASE, tasks=9), T, since=END), Undecided)


# ------------------------------------------------------------------------- 6 scaling churn


def test_scaling_churn_fires_on_reversals_within_twice_the_cooldown():
    """Cooldown 900 s: up at 10:00, down 10:20 (1,200 s <= 1,800), up 10:40 (1,200 s),
    down 11:30 (3,000 s > 1,800): 2 reversals >= 2."""
    at = [datetime(2026, 12, 4, 10, m, tzinfo=UTC) for m in (0, 20, 40)]
    events = (ScaleChange(at[0], 4, 6), ScaleChange(at[1], 6, 4), ScaleChange(at[2], 4, 6),
              ScaleChange(datetime(2026, 12, 4, 11, 30, tzinfo=UTC), 6, 4))  # fmt: skip
    out = rule_scaling_churn(ScalingSignals(900, events, tuple(buckets(36))), T)
    assert isinstance(out, Finding) and out.numbers["reversals"] == 2
    assert out.since == at[0]


def test_scaling_churn_fires_when_scale_ups_change_no_latency():
    """Two ups at 10:00 and 11:00, e2e p95 4.0 s before and after both: gain 0 < 10 %."""
    events = (ScaleChange(datetime(2026, 12, 4, 10, tzinfo=UTC), 4, 6),
              ScaleChange(datetime(2026, 12, 4, 11, tzinfo=UTC), 6, 8))  # fmt: skip
    out = rule_scaling_churn(ScalingSignals(900, events, tuple(buckets(36))), T)
    assert out.numbers["latency_gain_per_up"] == [0.0, 0.0]
    assert out.summary == "None of 2 scale-ups lowered latency by 10 % or more."


def test_scaling_churn_says_the_gain_it_missed_when_scale_ups_helped_a_little():
    """e2e p95 4.0 s before each up and 3.88 s after: 1 - 3.88 / 4.0 = 0.03, a 3 % gain
    < 10 %: it fires, and its summary names the 10 % the ups missed - not "lowered latency"
    outright, which the 3 % in its evidence contradicts."""
    ups = [datetime(2026, 12, 4, 10, tzinfo=UTC), datetime(2026, 12, 4, 11, tzinfo=UTC)]
    start = END - timedelta(minutes=5 * 36)

    def e2e(i):
        at = start + timedelta(minutes=5 * i)
        return 3.88 if any(u <= at < u + timedelta(minutes=15) for u in ups) else 4.0

    events = (ScaleChange(ups[0], 4, 6), ScaleChange(ups[1], 6, 8))
    out = rule_scaling_churn(ScalingSignals(900, events, tuple(buckets(36, e2e_p95_s=e2e))), T)
    assert out.numbers["latency_gain_per_up"] == [0.03, 0.03]
    assert out.summary == "None of 2 scale-ups lowered latency by 10 % or more."


def test_scaling_churn_near_miss_scale_ups_that_help():
    """e2e p95 8 s before each up and 4 s after: gain 50 % >= 10 %; one reversal < 2."""
    ups = [datetime(2026, 12, 4, 10, tzinfo=UTC), datetime(2026, 12, 4, 11, tzinfo=UTC)]
    start = END - timedelta(minutes=5 * 36)

    def e2e(i):
        at = start + timedelta(minutes=5 * i)
        return 8.0 if any(u - timedelta(minutes=15) <= at < u for u in ups) else 4.0

    events = (ScaleChange(ups[0], 4, 6), ScaleChange(ups[1], 6, 8))
    assert (
        rule_scaling_churn(ScalingSignals(900, events, tuple(buckets(36, e2e_p95_s=e2e))), T)
        is None
    )
    assert rule_scaling_churn(ScalingSignals(None, events, ()), T) is None  # not elastic


# ------------------------------------------------------------------------- 7 cold start


def test_cold_start_fires_when_ttft_jumps_after_a_scale_up():
    """Scale-up at 11:00; TTFT p95 0.4 s elsewhere, 6 s in 11:00-11:10: 6 >= 3 x 0.4 and
    >= 2 s."""
    up = datetime(2026, 12, 4, 11, tzinfo=UTC)
    start = END - timedelta(minutes=5 * 24)
    series = buckets(24, ttft_p95_s=lambda i: 6.0 if up <= start + timedelta(minutes=5 * i)
                     < up + timedelta(minutes=10) else 0.4)  # fmt: skip
    out = rule_cold_start(ScalingSignals(900, (ScaleChange(up, 4, 6),), tuple(series)), T)
    assert isinstance(out, Finding) and out.since == up
    assert out.numbers["ttft_p95_s_after"] == 6.0 and out.numbers["ttft_p95_s_baseline"] == 0.4


def test_cold_start_fires_on_errors_after_a_deploy():
    """Deploy at 11:00; 60 failed of 600 finished + 60 in the 15 minutes after: 9.1 % > 5 %:
    critical."""
    deploy = datetime(2026, 12, 4, 11, tzinfo=UTC)
    start = END - timedelta(minutes=5 * 24)

    def failed(i):
        at = start + timedelta(minutes=5 * i)
        return 20.0 if deploy <= at < deploy + timedelta(minutes=15) else 0.0

    series = buckets(24, requests_failed=failed, requests_finished=200.0)
    out = rule_cold_start(ScalingSignals(None, (), tuple(series), deploys=(deploy,)), T)
    assert out.severity is Severity.CRITICAL and out.numbers["error_share_after"] == 0.091


def test_cold_start_near_miss_ttft_doubles_only():
    """TTFT 0.8 s after the up: 2 x 0.4 < 3 x, and below 2 s."""
    up = datetime(2026, 12, 4, 11, tzinfo=UTC)
    start = END - timedelta(minutes=5 * 24)
    series = buckets(24, ttft_p95_s=lambda i: 0.8 if up <= start + timedelta(minutes=5 * i)
                     < up + timedelta(minutes=10) else 0.4)  # fmt: skip
    assert rule_cold_start(ScalingSignals(900, (ScaleChange(up, 4, 6),), tuple(series)), T) is None
    no_ttft = buckets(24, ttft_p95_s=None, requests_finished=None, requests_failed=None)
    out = rule_cold_start(ScalingSignals(900, (ScaleChange(up, 4, 6),), tuple(no_ttft)), T)
    assert isinstance(out, Undecided)


# ------------------------------------------------------------------------- 8 queue avalanche


def test_queue_avalanche_fires_on_a_long_queue_with_ttft_in_tens_of_seconds():
    """4 buckets with 70 waiting (>= 20, > 64 running) and TTFT p95 18 s (>= 10): 4 >= 3,
    critical."""
    hot = {5, 6, 7, 8}
    series = buckets(12, requests_waiting=lambda i: 70.0 if i in hot else 0.0,
                     requests_running=64.0,
                     ttft_p95_s=lambda i: 18.0 if i in hot else 0.5)  # fmt: skip
    out = rule_queue_avalanche(window(series), T)
    assert isinstance(out, Finding) and out.severity is Severity.CRITICAL
    assert out.numbers == {"buckets": 4, "requests_waiting_max": 70, "ttft_p95_s_max": 18.0}


def test_queue_avalanche_near_miss_queue_shorter_than_what_runs():
    """70 waiting but 80 running: the engine keeps up (70 < 80)."""
    series = buckets(12, requests_waiting=70.0, requests_running=80.0, ttft_p95_s=18.0)
    assert rule_queue_avalanche(window(series), T) is None


def test_queue_avalanche_near_miss_ttft_of_nine_seconds():
    series = buckets(12, requests_waiting=70.0, requests_running=64.0, ttft_p95_s=9.0)
    assert rule_queue_avalanche(window(series), T) is None


# ------------------------------------------------------------------------- 9 memory decay


def days(free: list[float], speed: list[float | None]) -> DecaySignals:
    pairs = enumerate(zip(free, speed, strict=True))
    return DecaySignals(tuple(DaySummary(date(2026, 11, 20 + i), f, s) for i, (f, s) in pairs))


def test_memory_decay_fires_like_the_seeds_two_weeks():
    """000 §5.3: free 3,072 MiB -> 400 MiB per card (-87 % >= 50 %), falling day by day;
    throughput 1,000 -> 560 tok/s per busy card (-44 % >= 10 %)."""
    out = rule_memory_decay(days([3072, 2400, 1500, 900, 400], [1000, 950, 800, 700, 560]), T)
    assert isinstance(out, Finding)
    assert out.since == datetime(2026, 11, 20, tzinfo=UTC)
    assert out.numbers["fb_free_mib_per_card_last"] == 400
    assert out.summary == (
        "Free framebuffer per card fell from 3\u202f072 to 400 MiB in 5 days and throughput "
        "with it."
    )


def test_memory_decay_near_misses():
    """Memory falls but throughput only 1,000 -> 950 (-5 % < 10 %); a restart in between
    (1,500 -> 3,000: more than 10 % up) breaks the trend; two days are too few."""
    assert rule_memory_decay(days([3072, 2400, 1500, 900, 400], [1000] * 4 + [950]), T) is None
    restart = days([3072, 1500, 3000, 2000, 1200], [1000, 800, 1000, 800, 700])
    assert rule_memory_decay(restart, T) is None
    assert isinstance(rule_memory_decay(days([3072, 400], [1000, 500]), T), Undecided)


# ------------------------------------------------------------------------- 10 outside the GPU


def test_outside_gpu_fires_when_slow_with_idle_cards_and_no_queue():
    """e2e p95 14 s (>= 10), utilisation 8 % (< 20), 0 waiting (< 1), 6 buckets >= 3."""
    series = buckets(6, e2e_p95_s=14.0, gpu_util_pct=8.0, requests_waiting=0.0)
    out = rule_outside_gpu(window(series), T)
    assert isinstance(out, Finding) and out.numbers["minutes"] == 30


def test_outside_gpu_near_miss_a_queue_means_the_gpu_side():
    """Same, but 3 requests waiting (>= 1): the engine is the bottleneck."""
    series = buckets(6, e2e_p95_s=14.0, gpu_util_pct=8.0, requests_waiting=3.0)
    assert rule_outside_gpu(window(series), T) is None


# ------------------------------------------------------------------------- 11 saturation


def test_saturation_fires_on_an_hour_above_ninety_percent():
    """Buckets 6..17 (12 in a row = 60 min) at 95 % (> 90) in 24 buckets."""
    series = buckets(24, gpu_util_pct=lambda i: 95.0 if 6 <= i < 18 else 60.0)
    out = rule_saturation(window(series), T)
    assert isinstance(out, Finding) and out.severity is Severity.INFO
    assert out.numbers["minutes"] == 60


def test_saturation_over_a_day_says_its_minutes_grouped():
    """288 buckets of 5 min (a day) all at 95 %: 288 x 5 = 1,440 minutes."""
    out = rule_saturation(window(buckets(288, gpu_util_pct=95.0)), T)
    assert out.summary == "Utilisation stayed above 90 % for 1\u202f440 minutes."


def test_saturation_near_miss_fifty_five_minutes():
    """11 in a row (55 min) at 95 %, and exactly 90 % is not above 90."""
    series = buckets(24, gpu_util_pct=lambda i: 95.0 if 6 <= i < 17 else 90.0)
    assert rule_saturation(window(series), T) is None


@pytest.mark.parametrize("name", sorted(Thresholds.names()))
def test_every_threshold_is_a_number(name):
    assert isinstance(getattr(T, name), int | float)
