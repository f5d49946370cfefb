"""Busy / idle / unknown from dcgm-exporter samples: pure functions, no ORM, no clock.

Units: utilisation in % (0-100; ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` ratios are already x100 by
:func:`scheduler_adapters.prometheus.device_usage_from_series`), framebuffer in MiB
(``DCGM_FI_DEV_FB_USED``, DCGM field 252), times in Unix seconds, windows in seconds.

The rule that matters: **missing data is never idle** (tricky input C23). A card whose series is
absent, covers less than ``min_coverage`` of the window's steps, or stopped before the window's
end (stale) is ``unknown``; an allocation with any unknown card is ``unknown``, because then
nobody can say how many of its cards are in use. "Absent" is counted against the cards held:
a group holding 8 cards with series for 4 has 4 unknown cards, whatever those 4 say
(issue 27 item 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from scheduler_adapters.prometheus import (
    DeviceSummary,
    DeviceUsage,
    Sample,
    WindowStats,
    window_stats,
)

# Mean utilisation (%) under which a card is idle, unless its pool's policy says otherwise:
# the seeds' scale-down rule (seed 004 §3.3: down when utilisation < 30 % for 30 min). The
# policy's default, the evaluator's and the dashboard's "in use" threshold are this one number.
IDLE_BELOW_PCT = 30


class Verdict(StrEnum):
    BUSY = "busy"
    IDLE = "idle"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Thresholds:
    """A reclamation policy's numbers.

    ``idle_below_pct``: mean utilisation (%) under which a card is idle over ``window_s``
    (default 30 % over 1800 s, from the seeds). ``certainly_idle_below_pct``: the peak (%)
    under which an idle card is *certainly* idle, with ``FB_USED`` at most
    ``process_memory_max_mib`` (MiB) throughout: a CUDA context alone takes a few hundred MiB,
    so 64 MiB means no process holds the card. ``min_coverage``: share (0-1) of the window's
    ``step_s`` steps that must carry a sample. ``max_staleness_s``: the newest sample must be
    at most this old at the window's end.
    """

    idle_below_pct: float = float(IDLE_BELOW_PCT)
    certainly_idle_below_pct: float = 5.0
    process_memory_max_mib: float = 64.0
    window_s: int = 1800
    step_s: int = 60
    min_coverage: float = 0.9
    max_staleness_s: int = 300


@dataclass(frozen=True)
class CardEvaluation:
    """One card (a UUID; all its MIG instances together) over the window.

    ``mean_util_pct``/``peak_util_pct`` in %, ``coverage`` 0-1 (the worst instance's),
    ``peak_fb_used_mib`` in MiB (``None``: no framebuffer samples). ``low_confidence`` when
    the reading came from ``DCGM_FI_DEV_GPU_UTIL`` (no profiling metrics: consumer cards).
    """

    uuid: str
    hostname: str | None
    verdict: Verdict
    certainly_idle: bool
    mean_util_pct: float | None
    peak_util_pct: float | None
    coverage: float
    peak_fb_used_mib: float | None
    low_confidence: bool
    reason: str


@dataclass(frozen=True)
class GroupEvaluation:
    """The cards one team holds in one pool, evaluated together.

    ``cards_busy`` is the number of cards in use: an idle group is shrunk to it (0: ended).
    ``cards_known`` is how many of the cards held have a known verdict (busy or idle; 0 for an
    unknown group): :func:`split_group` shares out nothing it does not cover.
    """

    verdict: Verdict
    cards: tuple[CardEvaluation, ...]
    cards_busy: int
    certainly_idle: bool
    mean_util_pct: float | None
    reason: str
    cards_known: int = 0


def _in_window(samples: Iterable[Sample], start: float, end: float) -> list[Sample]:
    return [s for s in samples if s.value is not None and start <= s.timestamp <= end]


def coverage(samples: Sequence[Sample], *, end: float, t: Thresholds) -> float:
    """Share (0-1) of the window's steps that hold a sample: a range query from
    ``end - window_s`` to ``end`` every ``step_s`` has ``window_s // step_s + 1`` steps."""
    stats = window_stats(samples, (), end=end, window_s=t.window_s, step_s=t.step_s)
    return _share(stats.util_steps, t)


def _share(steps: int, t: Thresholds) -> float:
    return min(1.0, steps / (t.window_s // t.step_s + 1))


def device_stats(device: DeviceUsage | DeviceSummary, *, end: float, t: Thresholds) -> WindowStats:
    """A device's window ``[end - window_s, end]``: reduced by Prometheus already (a
    :class:`DeviceSummary`), or reduced here from its samples (:func:`window_stats`)."""
    if isinstance(device, DeviceSummary):
        return device.stats(end=end, window_s=t.window_s, step_s=t.step_s)
    return window_stats(
        device.util_pct, device.fb_used_mib, end=end, window_s=t.window_s, step_s=t.step_s
    )


def evaluate_instance(
    util_pct: Sequence[Sample],
    fb_used_mib: Sequence[Sample],
    *,
    end: float,
    t: Thresholds,
) -> tuple[Verdict, bool, float | None, float | None, float, float | None, str]:
    """One device or MIG instance from its samples: see :func:`instance_verdict`."""
    stats = window_stats(util_pct, fb_used_mib, end=end, window_s=t.window_s, step_s=t.step_s)
    return instance_verdict(stats, end=end, t=t)


def instance_verdict(
    stats: WindowStats, *, end: float, t: Thresholds
) -> tuple[Verdict, bool, float | None, float | None, float, float | None, str]:
    """One device or MIG instance from its window's :class:`WindowStats`: (verdict, certainly
    idle, mean %, peak %, coverage, peak MiB, reason).

    Unknown without samples, with coverage under ``min_coverage`` or with the newest sample
    more than ``max_staleness_s`` before ``end``; else busy when the mean is at least
    ``idle_below_pct``; else idle, *certainly* when the peak is under
    ``certainly_idle_below_pct`` and the framebuffer, sampled over ``min_coverage`` of the
    steps, never went over ``process_memory_max_mib``."""
    if not stats.util_points:
        return Verdict.UNKNOWN, False, None, None, 0.0, None, "no utilisation samples"
    cover = _share(stats.util_steps, t)
    mean, peak = stats.util_sum / stats.util_points, stats.util_peak
    if cover < t.min_coverage:
        reason = f"samples cover {cover:.0%} of the window (< {t.min_coverage:.0%})"
        return Verdict.UNKNOWN, False, mean, peak, cover, None, reason
    newest = stats.util_newest if stats.util_newest is not None else -math.inf
    if end - newest > t.max_staleness_s:
        reason = f"newest sample is {end - newest:.0f} s old (> {t.max_staleness_s} s)"
        return Verdict.UNKNOWN, False, mean, peak, cover, None, reason
    peak_fb = stats.fb_peak
    if mean >= t.idle_below_pct:
        return Verdict.BUSY, False, mean, peak, cover, peak_fb, f"mean {mean:.1f} %"
    certain = (
        peak is not None
        and peak < t.certainly_idle_below_pct
        and peak_fb is not None
        and peak_fb <= t.process_memory_max_mib
        and _share(stats.fb_steps, t) >= t.min_coverage
    )
    return Verdict.IDLE, certain, mean, peak, cover, peak_fb, f"mean {mean:.1f} %"


def evaluate_card(
    instances: Sequence[DeviceUsage | DeviceSummary], *, end: float, t: Thresholds
) -> CardEvaluation:
    """A card from its series (one, or one per MIG instance): busy when any instance is busy,
    else unknown when any is unknown, else idle."""
    results = [instance_verdict(device_stats(d, end=end, t=t), end=end, t=t) for d in instances]
    verdicts = [r[0] for r in results]
    if Verdict.BUSY in verdicts:
        verdict = Verdict.BUSY
    elif Verdict.UNKNOWN in verdicts or not verdicts:
        verdict = Verdict.UNKNOWN
    else:
        verdict = Verdict.IDLE
    means = [r[2] for r in results if r[2] is not None]
    peaks = [r[3] for r in results if r[3] is not None]
    fbs = [r[5] for r in results if r[5] is not None]
    reasons = [
        (f"instance {d.gpu_instance_id} ({d.mig_profile}): " if d.gpu_instance_id else "") + r[6]
        for d, r in zip(instances, results, strict=True)
    ]
    return CardEvaluation(
        uuid=instances[0].uuid if instances else "",
        hostname=instances[0].hostname if instances else None,
        verdict=verdict,
        certainly_idle=verdict == Verdict.IDLE and all(r[1] for r in results),
        mean_util_pct=max(means) if means else None,
        peak_util_pct=max(peaks) if peaks else None,
        coverage=min((r[4] for r in results), default=0.0),
        peak_fb_used_mib=max(fbs) if fbs else None,
        low_confidence=any(d.util_source == "dev" for d in instances),
        reason="; ".join(reasons),
    )


def evaluate_group(
    devices: Sequence[DeviceUsage | DeviceSummary], *, held: int, end: float, t: Thresholds
) -> GroupEvaluation:
    """The cards of one team in one pool (the devices the scan attributed to it), ``held``
    cards in all.

    Each card held needs its own series (one UUID: the card, all its MIG instances together):
    fewer UUIDs than ``held`` leaves the rest *unknown* (the exporter reports nothing for them;
    C23, issue 27 item 1), as does no device at all, and a group with any unknown card is
    ``unknown``. Otherwise busy when every card seen is busy, else idle with ``cards_busy``
    cards in use.
    """
    by_uuid: dict[str, list[DeviceUsage]] = {}
    for device in devices:
        by_uuid.setdefault(device.uuid, []).append(device)
    cards = tuple(evaluate_card(by_uuid[u], end=end, t=t) for u in sorted(by_uuid))
    busy = sum(1 for c in cards if c.verdict == Verdict.BUSY)
    unknown = [c for c in cards if c.verdict == Verdict.UNKNOWN]
    means = [c.mean_util_pct for c in cards if c.mean_util_pct is not None]
    mean = sum(means) / len(means) if means else None
    if not cards:
        return GroupEvaluation(Verdict.UNKNOWN, (), 0, False, None, "no metrics for these cards")
    if len(cards) < held:
        reason = (
            f"series for {len(cards)} of the {held} cards held; "
            f"{held - len(cards)} without any, so unknown"
        )
        return GroupEvaluation(Verdict.UNKNOWN, cards, busy, False, mean, reason)
    if unknown:
        reason = (
            f"{len(unknown)} of {len(cards)} cards without usable metrics: " + unknown[0].reason
        )
        return GroupEvaluation(Verdict.UNKNOWN, cards, busy, False, mean, reason)
    if busy == len(cards):
        return GroupEvaluation(
            Verdict.BUSY, cards, busy, False, mean, f"{busy} cards busy", len(cards)
        )
    certain = all(c.certainly_idle for c in cards if c.verdict == Verdict.IDLE)
    reason = f"{len(cards) - busy} of {len(cards)} cards idle over the window"
    return GroupEvaluation(Verdict.IDLE, cards, busy, certain, mean, reason, len(cards))


def utilisation_sparkline(
    devices: Iterable[DeviceUsage], *, end: float, t: Thresholds, points: int = 60
) -> list[list[float]]:
    """The group's mean utilisation (%) over the window, as ``[unix_ts, pct]`` pairs for a
    sparkline: at each step, the mean over the cards that reported of each card's mean (its
    MIG instances together). Steps are ``step_s`` apart, widened (and averaged) so that at
    most ``points + 1`` remain; a step with no sample is left out, never drawn as 0 %."""
    start = end - t.window_s
    width = t.step_s * max(1, -(-t.window_s // (t.step_s * points)))
    by_step: dict[int, dict[str, list[float]]] = {}
    for device in devices:
        for sample in _in_window(device.util_pct, start, end):
            step = round((sample.timestamp - start) / width)
            by_step.setdefault(step, {}).setdefault(device.uuid, []).append(sample.value)
    series = []
    for step in sorted(by_step):
        per_card = [sum(values) / len(values) for values in by_step[step].values()]
        series.append([start + step * width, round(sum(per_card) / len(per_card), 1)])
    return series


def evaluate_job_cards(
    cards: Sequence[tuple[str, Sequence[DeviceUsage | DeviceSummary]]],
    *,
    held: int,
    recent_cards: int,
    end: float,
    t: Thresholds,
) -> GroupEvaluation:
    """A Slurm team's cards of one GPU model in one pool, from where its jobs run.

    ``cards``: ``(label, series)`` per card that the team's running jobs hold and have held
    for the whole window (label ``"<node>:<index>"``; no series at all makes that card
    unknown). ``recent_cards``: cards of its jobs that started or ended within the window —
    counted in use, never judged on a window they did not fill. ``held``: the cards its
    allocations hold. Cards held but in no job are idle, and *certainly* idle: without a job no
    process can use them.

    Unknown when any judged card is unknown; busy when busy cards plus ``recent_cards`` reach
    ``held``; otherwise idle with ``cards_busy`` that many. The mean is over the judged cards
    and the jobless ones (0 %).
    """
    evaluated = []
    for label, series in cards:
        if series:
            evaluated.append(evaluate_card(series, end=end, t=t))
        else:
            evaluated.append(
                CardEvaluation(
                    uuid=label,
                    hostname=label.rsplit(":", 1)[0],
                    verdict=Verdict.UNKNOWN,
                    certainly_idle=False,
                    mean_util_pct=None,
                    peak_util_pct=None,
                    coverage=0.0,
                    peak_fb_used_mib=None,
                    low_confidence=False,
                    reason=f"a job holds {label} but the exporter reports nothing for it",
                )
            )
    judged = tuple(evaluated)
    busy = sum(1 for c in judged if c.verdict == Verdict.BUSY) + recent_cards
    jobless = max(0, held - len(judged) - recent_cards)
    means = [c.mean_util_pct for c in judged if c.mean_util_pct is not None] + [0.0] * jobless
    mean = sum(means) / len(means) if means else None
    unknown = [c for c in judged if c.verdict == Verdict.UNKNOWN]
    if unknown:
        reason = f"{len(unknown)} of {len(judged)} job cards without usable metrics: "
        return GroupEvaluation(
            Verdict.UNKNOWN, judged, busy, False, mean, reason + unknown[0].reason
        )
    if busy >= held:
        reason = f"{busy} of {held} cards in use"
        if recent_cards:
            reason += f" ({recent_cards} by jobs that started or ended within the window)"
        return GroupEvaluation(Verdict.BUSY, judged, busy, False, mean, reason, held)
    idle_in_jobs = sum(1 for c in judged if c.verdict == Verdict.IDLE)
    certain = all(c.certainly_idle for c in judged if c.verdict == Verdict.IDLE)
    reason = (
        f"{held - busy} of {held} cards idle over the window: {jobless} in no job, "
        f"{idle_in_jobs} in jobs below the threshold"
    )
    # every card held is judged, recent (in use) or in no job: all known
    return GroupEvaluation(Verdict.IDLE, judged, busy, certain, mean, reason, held)


@dataclass(frozen=True)
class AllocationShare:
    """One allocation's part of a group verdict: ``cards_in_use`` of its ``card_count``."""

    allocation_id: int
    verdict: Verdict
    card_count: int
    cards_in_use: int


def split_group(
    group: GroupEvaluation, allocations: Sequence[tuple[int, int]]
) -> tuple[AllocationShare, ...]:
    """Share a group's busy cards among its allocations ``(id, card_count)``, in the order
    given (the scan passes oldest first, so the oldest allocation keeps its cards first).
    An allocation that keeps all its cards is busy; one keeping fewer is idle.

    Every allocation is ``unknown`` when the group is, or when its known cards
    (``cards_known``) are fewer than the allocations hold: busy cards shared out of partial data
    would call the unseen cards idle (issue 27 item 1). A busy group makes every allocation
    busy."""
    held = sum(card_count for _id, card_count in allocations)
    if group.verdict == Verdict.UNKNOWN or group.cards_known < held:
        return tuple(AllocationShare(i, Verdict.UNKNOWN, n, 0) for i, n in allocations)
    if group.verdict == Verdict.BUSY:
        return tuple(AllocationShare(i, Verdict.BUSY, n, n) for i, n in allocations)
    remaining = group.cards_busy
    shares = []
    for allocation_id, card_count in allocations:
        keep = min(card_count, remaining)
        remaining -= keep
        verdict = Verdict.BUSY if keep == card_count else Verdict.IDLE
        shares.append(AllocationShare(allocation_id, verdict, card_count, keep))
    return tuple(shares)
