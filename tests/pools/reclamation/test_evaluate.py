"""Pure idle evaluation: busy / idle / unknown per card and per group (C21, C23)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from pools.reclamation.evaluate import (
    GroupEvaluation,
    Thresholds,
    Verdict,
    coverage,
    evaluate_group,
    split_group,
    utilisation_sparkline,
)
from scheduler_adapters.prometheus import DeviceUsage, Sample

END = 1_800_000_000.0
T = Thresholds()  # idle < 30 % mean over 1800 s, step 60 s -> 31 steps, coverage >= 90 %


def device(uuid="GPU-a", values=None, *, fb=0.0, instance=None, source="prof", step=60):
    """A device with one sample per step over the last 30 min (``values`` cycled)."""
    values = values if values is not None else [2.0]
    stamps = [END - 1800 + i * step for i in range(1800 // step + 1)]
    util = tuple(Sample(t, values[i % len(values)]) for i, t in enumerate(stamps))
    memory = tuple(Sample(t, fb) for t in stamps) if fb is not None else ()
    return DeviceUsage(
        hostname="n1",
        uuid=uuid,
        gpu="0",
        model_name="NVIDIA A100-SXM4-80GB",
        gpu_instance_id=instance,
        mig_profile="3g.40gb" if instance else None,
        namespace="team-a",
        pods=("p",),
        hpc_jobs=(),
        util_source=source,
        util_pct=util,
        fb_used_mib=memory,
    )


def test_idle_and_certainly_idle():
    group = evaluate_group([device(values=[2.0], fb=0.0)], held=1, end=END, t=T)
    assert group.verdict == Verdict.IDLE
    assert group.certainly_idle
    assert group.cards_busy == 0
    assert group.mean_util_pct == 2.0


def test_idle_but_not_certain_when_memory_held_or_a_peak():
    held = evaluate_group([device(values=[2.0], fb=20_000.0)], held=1, end=END, t=T)
    assert (held.verdict, held.certainly_idle) == (Verdict.IDLE, False)
    peak = evaluate_group([device(values=[1.0] * 30 + [40.0], fb=0.0)], held=1, end=END, t=T)
    assert (peak.verdict, peak.certainly_idle) == (Verdict.IDLE, False)  # mean 2.26 %, peak 40
    no_memory_series = evaluate_group([device(values=[1.0], fb=None)], held=1, end=END, t=T)
    assert (no_memory_series.verdict, no_memory_series.certainly_idle) == (Verdict.IDLE, False)


def test_threshold_is_strict_below():
    assert evaluate_group([device(values=[30.0])], held=1, end=END, t=T).verdict == Verdict.BUSY
    assert evaluate_group([device(values=[29.9])], held=1, end=END, t=T).verdict == Verdict.IDLE


def test_c21_mig_card_busy_when_one_instance_busy():
    """C21: instance 1 at 81.23 %, instance 2 at 0 % -> the card is NOT idle."""
    group = evaluate_group(
        [device(values=[81.23], instance="1"), device(values=[0.0], instance="2")],
        held=1,
        end=END,
        t=T,
    )
    assert group.verdict == Verdict.BUSY
    assert group.cards_busy == 1
    assert len(group.cards) == 1  # two instances, one card


def test_c21_consumer_card_is_low_confidence():
    group = evaluate_group([device(values=[3.0], source="dev")], held=1, end=END, t=T)
    assert group.verdict == Verdict.IDLE and group.cards[0].low_confidence


def test_c23_gappy_series_is_unknown():
    """C23 C: samples for 75 % of the window (< 90 %) -> inconclusive, not idle."""
    gappy = device(values=[0.0])
    kept = tuple(s for i, s in enumerate(gappy.util_pct) if i % 4 != 0)  # drop 8 of 31 steps
    gappy = DeviceUsage(**{**gappy.__dict__, "util_pct": kept})
    assert round(coverage(kept, end=END, t=T), 3) == round(23 / 31, 3)
    group = evaluate_group([gappy], held=1, end=END, t=T)
    assert group.verdict == Verdict.UNKNOWN
    assert "cover 74%" in group.reason


def test_c23_stale_and_absent_series_are_unknown():
    stale = device(values=[0.0])
    # the exporter stopped 10 min ago: 21 of 31 steps, newest sample 600 s old
    kept = tuple(s for s in stale.util_pct if s.timestamp <= END - 600)
    stale = DeviceUsage(**{**stale.__dict__, "util_pct": kept})
    assert evaluate_group([stale], held=1, end=END, t=T).verdict == Verdict.UNKNOWN
    assert evaluate_group([], held=1, end=END, t=T).verdict == Verdict.UNKNOWN
    # 8 cards allocated, the exporter reports one idle card and the others not at all:
    # the scan only sees what is attributed, and an unknown card makes the group unknown
    vanished = DeviceUsage(**{**device("GPU-b").__dict__, "util_pct": ()})
    group = evaluate_group([device("GPU-a"), vanished], held=2, end=END, t=T)
    assert group.verdict == Verdict.UNKNOWN


def test_partly_busy_group_split_oldest_first():
    devices = [device("GPU-a", [90.0]), device("GPU-b", [1.0]), device("GPU-c", [1.0])]
    group = evaluate_group(devices, held=3, end=END, t=T)
    assert (group.verdict, group.cards_busy) == (Verdict.IDLE, 1)
    shares = split_group(group, [(10, 1), (11, 2)])
    assert [(s.allocation_id, s.verdict, s.cards_in_use) for s in shares] == [
        (10, Verdict.BUSY, 1),
        (11, Verdict.IDLE, 0),
    ]


def test_cards_held_without_a_series_are_unknown():
    """Issue 27 item 1: 8 cards held, series for 4. All 4 idle -> unknown (not "0 of 8 in use");
    all 4 busy at 90 % -> unknown (not "4 busy, 4 idle"). Series for all 8 -> judged."""
    four_idle = [device(f"GPU-{i}", [1.0]) for i in range(4)]
    four_busy = [device(f"GPU-{i}", [90.0]) for i in range(4)]
    for devices in (four_idle, four_busy):
        group = evaluate_group(devices, held=8, end=END, t=T)
        assert (group.verdict, group.cards_known) == (Verdict.UNKNOWN, 0)
        assert group.reason == "series for 4 of the 8 cards held; 4 without any, so unknown"
        shares = split_group(group, [(1, 8)])
        assert [(s.verdict, s.cards_in_use) for s in shares] == [(Verdict.UNKNOWN, 0)]
    all_eight = four_busy + [device(f"GPU-{i}", [1.0]) for i in range(4, 8)]
    group = evaluate_group(all_eight, held=8, end=END, t=T)
    assert (group.verdict, group.cards_busy, group.cards_known) == (Verdict.IDLE, 4, 8)
    # MIG: two instances of one card are one card, not two
    mig = [device("GPU-0", [1.0], instance="1"), device("GPU-0", [1.0], instance="2")]
    assert evaluate_group(mig, held=2, end=END, t=T).verdict == Verdict.UNKNOWN


def test_split_group_shares_nothing_it_does_not_cover():
    """A group whose known cards (4) are fewer than its allocations hold (3 + 5 = 8) is unknown
    for both, whatever it says; a busy group keeps every allocation whole."""
    partial = GroupEvaluation(Verdict.BUSY, (), 4, False, 90.0, "4 cards busy", 4)
    assert [s.verdict for s in split_group(partial, [(1, 3), (2, 5)])] == [Verdict.UNKNOWN] * 2
    busy = GroupEvaluation(Verdict.BUSY, (), 8, False, 90.0, "8 cards busy", 8)
    assert [(s.verdict, s.cards_in_use) for s in split_group(busy, [(1, 3), (2, 5)])] == [
        (Verdict.BUSY, 3),
        (Verdict.BUSY, 5),
    ]


utilisation = st.one_of(st.none(), st.floats(min_value=0, max_value=100))


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(utilisation, min_size=0, max_size=31),
    keep=st.lists(st.booleans(), min_size=31, max_size=31),
    extra_unknown=st.booleans(),
)
def test_missing_data_never_yields_idle(values, keep, extra_unknown):
    """Property: whenever fewer than 90 % of the steps carry a value, or another card of the
    group has no samples at all, the verdict is never idle."""
    stamps = [END - 1800 + i * 60 for i in range(31)]
    util = tuple(
        Sample(t, values[i] if i < len(values) else None) for i, t in enumerate(stamps) if keep[i]
    )
    base = device(values=[0.0])
    card = DeviceUsage(**{**base.__dict__, "util_pct": util})
    present = sum(1 for s in util if s.value is not None)
    devices = [card]
    if extra_unknown:
        devices.append(DeviceUsage(**{**device("GPU-z").__dict__, "util_pct": ()}))
    verdict = evaluate_group(devices, held=len(devices), end=END, t=T).verdict
    if present < 0.9 * 31 or extra_unknown:
        assert verdict != Verdict.IDLE


def test_sparkline_is_the_mean_over_the_cards_at_each_step():
    # two cards, 30-min window at 60 s: 31 steps; card a alternates 0/10 %, card b stays at 4 %
    points = utilisation_sparkline(
        [device("GPU-a", [0.0, 10.0]), device("GPU-b", [4.0])], end=END, t=T
    )
    assert len(points) == 31
    assert points[0] == [END - 1800, 2.0]  # (0 + 4) / 2
    assert points[1] == [END - 1740, 7.0]  # (10 + 4) / 2
    assert points[-1] == [END, 2.0]


def test_sparkline_of_a_long_window_keeps_61_points_and_skips_gaps():
    # 24 h window: steps widened to 24 min (1440 s), each the mean of its samples
    day = Thresholds(window_s=86_400)
    stamps = [END - 86_400 + 60 * i for i in range(1441) if i < 100 or i > 200]
    util = tuple(Sample(t, 6.0) for t in stamps)
    card = dataclasses.replace(device(), util_pct=util)
    points = utilisation_sparkline([card], end=END, t=day)
    assert len(points) <= 61
    assert all(value == 6.0 for _, value in points)
    # no sample between minutes 101 and 200: the steps at 2880 s .. 11520 s are missing (not 0)
    assert END - 86_400 + 5 * 1440 not in [ts for ts, _ in points]
