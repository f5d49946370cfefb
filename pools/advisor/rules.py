"""The advisor's rules: one small function per symptom of the seeds' troubleshooting tables,
each over a plain dataclass of stored signals; pure, no ORM, no clock.

Sources (``/work/shared/seeds/``): ``004…`` §5.1 (the table of six symptoms: what to check,
what to change), §5.2 (habits: "before adding cards, check the queue is really GPU-bound"),
§2.3 (utilisation above 90 % for long: plan ahead, keep a 30 % buffer), §4.1/§4.3 (agent
token flow: 12 calls per task, 7 wasted on tool retries); ``000…`` §5.1-§5.4 (cold start,
queue avalanche, framebuffer decay, noisy neighbours).

Every rule returns a :class:`Finding` (something to fix, with the numbers that triggered it
and the fix in plain words), an :class:`Undecided` (a signal it needs is missing: shown as
such, never counted healthy) or ``None`` (healthy for this rule).

Units: times are aware datetimes (bucket starts), durations seconds, utilisation and KV cache
in % (0-100), latencies seconds, framebuffer MiB, token counts per bucket (increases over the
bucket, as :class:`pools.serving.models.ServingRollup` stores them).

Conditions are three-valued (``True`` / ``False`` / ``None`` = unknown) in Kleene's logic: an
AND with a known false is false even when another part is unknown, so a missing KV-cache gauge
does not stop a busy GPU from clearing the batching rule; what stays unknown makes the rule
undecided.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import NamedTuple

from pools.advisor.evidence import TRIGGERS, grouped
from pools.advisor.sources import Passage, citation, troubleshooting_row

BUCKET_S = 300  # the rollups' 5-minute buckets (pools.serving.choices.Resolution)


class Severity(StrEnum):
    INFO = "info"  # plan for it
    WARNING = "warning"  # hurts performance or money now
    CRITICAL = "critical"  # users see errors or timeouts


class Rule(StrEnum):
    BATCHING = "batching"
    NOISY_NEIGHBOUR = "noisy_neighbour"
    MEMORY_PRESSURE = "memory_pressure"
    INTERCONNECT = "interconnect"
    PROMPT_BLOAT = "prompt_bloat"
    SCALING_CHURN = "scaling_churn"
    COLD_START = "cold_start"
    QUEUE_AVALANCHE = "queue_avalanche"
    MEMORY_DECAY = "memory_decay"
    OUTSIDE_GPU = "outside_gpu"
    SATURATION = "saturation"


@dataclass(frozen=True)
class RuleInfo:
    """A rule as pages list it: its code, title and the seeds' passages it comes from
    (:mod:`pools.advisor.sources`)."""

    rule: Rule
    title: str
    sources: tuple[Passage, ...]

    @property
    def source(self) -> str:
        """The short citation: ``004 §5.1 row 5, §4.1, §4.3``."""
        return citation(self.sources)

    @property
    def source_in_words(self) -> str:
        """Each passage as :attr:`Passage.words` says it, separated by "; "."""
        return "; ".join(passage.words for passage in self.sources)


RULES: tuple[RuleInfo, ...] = (
    RuleInfo(
        Rule.BATCHING,
        "GPU idle while requests queue",
        (troubleshooting_row(1, "GPU utilisation is low but requests queue badly"),),
    ),
    RuleInfo(
        Rule.NOISY_NEIGHBOUR,
        "Latency spikes with a neighbour's load",
        (troubleshooting_row(2, "inference latency spikes now and then"), Passage("000", "5.4")),
    ),
    RuleInfo(
        Rule.MEMORY_PRESSURE,
        "Preemptions, KV cache or framebuffer full",
        (troubleshooting_row(3, "GPU memory runs out (OOM) often"),),
    ),
    RuleInfo(
        Rule.INTERCONNECT,
        "Multi-node job without fast interconnect",
        (troubleshooting_row(4, "a job across several GPU servers does not converge"),),
    ),
    RuleInfo(
        Rule.PROMPT_BLOAT,
        "Prompt and tool-return bloat",
        (
            troubleshooting_row(5, "token billing does not match what was used"),
            Passage("004", "4.1", says="a long system prompt is paid again on every call"),
            Passage("004", "4.3", says="12 model calls a task, 7 of them retries of a tool call"),
        ),
    ),
    RuleInfo(
        Rule.SCALING_CHURN,
        "Scaling that reverses or changes nothing",
        (troubleshooting_row(6, "scaling out or in changes little"),),
    ),
    RuleInfo(Rule.COLD_START, "Slow and failing right after a scale-up", (Passage("000", "5.1"),)),
    RuleInfo(Rule.QUEUE_AVALANCHE, "Queue avalanche", (Passage("000", "5.2"),)),
    RuleInfo(Rule.MEMORY_DECAY, "Free framebuffer decaying over days", (Passage("000", "5.3"),)),
    RuleInfo(
        Rule.OUTSIDE_GPU,
        "Slow while the GPU idles",
        (
            Passage(
                "004",
                "5.2",
                "habit 1",
                "before adding cards, check that the queue really comes from too little compute",
            ),
        ),
    ),
    RuleInfo(
        Rule.SATURATION,
        "Sustained utilisation above 90 %",
        (
            Passage(
                "004",
                "2.3",
                says="GPU utilisation above 90 % for long: plan ahead, keep a 30 % buffer",
            ),
        ),
    ),
)
RULE_TITLES = {info.rule.value: info.title for info in RULES}


@dataclass(frozen=True)
class Finding:
    """Something to fix: ``since`` (when the signal began, as far as the window shows),
    ``numbers`` (the values that triggered it: JSON numbers and strings), ``summary`` (what
    was seen, one sentence) and ``fix`` (what to change, plain words)."""

    rule: Rule
    severity: Severity
    since: datetime
    numbers: dict
    summary: str
    fix: str


@dataclass(frozen=True)
class Undecided:
    """The rule could not judge: ``reason`` names what was missing."""

    rule: Rule
    reason: str


Outcome = Finding | Undecided | None


@dataclass(frozen=True)
class Thresholds:
    """Every number the rules compare against. The portal passes
    ``Thresholds(**settings.ADVISOR_THRESHOLDS)``: a setting overrides a default by name.

    Where a seed gives no number the default is the portal's, said so below.
    """

    # Shared. A condition "holds" when it holds in this many consecutive 5-minute buckets
    # (15 min: the seeds' 10-15 min cooldown, 004 §3.3, so one bad bucket is no finding).
    sustain_buckets: int = 3
    # "Frequent" (rules 3 and 8): this many qualifying buckets within the window.
    frequent_buckets: int = 3
    # 1 - batching (004 §5.1 row 1, "GPU 利用率低，但请求排队严重"): utilisation below this
    # (the portal's; half of the seeds' 75 % scale-up level, 004 §3.3), at least this many
    # requests waiting, and the KV cache with room (below this %).
    batching_util_below_pct: float = 40.0
    batching_waiting_min: float = 5.0
    batching_kv_below_pct: float = 80.0
    # 2 - noisy neighbour (004 §5.1 row 2, 000 §5.4): a spike is a bucket whose ITL p95 is at
    # least this many times the window's median; a neighbour is busy when its busy cards are
    # at least this many times their median; fire when at least ``neighbour_min_spikes``
    # spikes and this share of them coincide with a busy neighbour while the allocation's own
    # running requests stay within ``neighbour_own_load_factor`` of their median.
    neighbour_spike_factor: float = 2.0
    neighbour_busy_factor: float = 1.5
    neighbour_min_spikes: int = 2
    neighbour_coincide_share: float = 0.75
    neighbour_own_load_factor: float = 1.2
    # 3 - memory pressure (004 §5.1 row 3): preemptions per bucket, KV cache %, framebuffer
    # used share (%) at which a bucket counts as under pressure.
    memory_preemptions_min: float = 1.0
    memory_kv_full_pct: float = 98.0
    memory_fb_full_pct: float = 95.0
    # 4 - interconnect (004 §5.1 row 4): NVLink traffic below this (bytes/s, all cards) while
    # the cards are busier than ``interconnect_busy_pct`` is "no traffic".
    interconnect_idle_bytes_s: float = 1e6
    interconnect_busy_pct: float = 50.0
    # 5 - prompt bloat (004 §5.1 row 5, §4.1, §4.2, §4.3): input tokens of a task's last call
    # at least this many times its first; tool returns longer than this (tokens); a prompt-
    # cache hit share below this (§4.2: a prompt cache saves "60 % or more" of repeated
    # prefixes); a retry share above this (§4.3: 7 of 12 calls were retries); fewer tasks
    # than ``bloat_min_tasks`` are too few to judge.
    bloat_growth_factor: float = 3.0
    bloat_tool_return_tokens: float = 2000.0
    bloat_cached_share_below: float = 0.3
    bloat_retry_share_above: float = 0.25
    bloat_min_tasks: int = 10
    # 6 - scaling churn (004 §5.1 row 6): a scale event reversed within twice the cooldown;
    # this many reversals, or this many scale-ups none of which lowered latency by
    # ``churn_latency_gain`` (share).
    churn_reversals_min: int = 2
    churn_ups_min: int = 2
    churn_latency_gain: float = 0.1
    # 7 - cold start (000 §5.1: a 10-minute weight load behind a "ready" probe): TTFT p95 in
    # the ``cold_window_s`` after a scale-up at least ``cold_ttft_factor`` times the median
    # before and above ``cold_ttft_min_s``, or failed requests above ``cold_error_share``.
    cold_window_s: int = 900
    cold_ttft_factor: float = 3.0
    cold_ttft_min_s: float = 2.0
    cold_error_share: float = 0.05
    # 8 - queue avalanche (000 §5.2: "TTFT 飙到几十秒"): TTFT p95 at least this (tens of
    # seconds: 10 s), waiting at least this and more than are running.
    avalanche_ttft_s: float = 10.0
    avalanche_waiting_min: float = 20.0
    # 9 - framebuffer decay (000 §5.3: free memory from 3 GB to a few hundred MB over two
    # weeks, the service nearly twice as slow): free framebuffer per card fallen by this
    # share and throughput per busy card by this share, over at least ``decay_min_days``.
    decay_fb_drop_share: float = 0.5
    decay_throughput_drop_share: float = 0.1
    decay_min_days: int = 3
    # 10 - outside the GPU (004 §5.2 habit 1): end-to-end p95 at least this (s) while the
    # GPU is below ``outside_idle_pct`` and fewer than ``outside_waiting_below`` wait.
    outside_e2e_s: float = 10.0
    outside_idle_pct: float = 20.0
    outside_waiting_below: float = 1.0
    # 11 - saturation (004 §2.3: "线上 GPU 利用率长时间超过 90 %"; keep a 30 % buffer):
    # utilisation above this for at least ``saturation_buckets`` in a row (1 hour).
    saturation_util_pct: float = 90.0
    saturation_buckets: int = 12

    @classmethod
    def names(cls) -> set[str]:
        return {f.name for f in fields(cls)}


class Bucket(NamedTuple):
    """One 5-minute rollup of an allocation (``None``: unknown). A named tuple: a pass builds
    half a million of them (2,000 allocations x a day), and a tuple is the cheapest to make."""

    at: datetime
    cards_held: int
    gpu_util_pct: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage_pct: float | None = None
    ttft_p95_s: float | None = None
    itl_p95_s: float | None = None
    e2e_p95_s: float | None = None
    requests_finished: float | None = None
    requests_failed: float | None = None
    preemptions: float | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    nvlink_bytes_s: float | None = None


BUCKET_FIELDS = Bucket._fields[1:]


@dataclass(frozen=True)
class WindowSignals:
    """An allocation's buckets over the advisor's window, oldest first; ``fresh`` is False
    when its newest bucket is older than the rollups' staleness limit (then rules about the
    present are undecided)."""

    buckets: tuple[Bucket, ...]
    fresh: bool = True


@dataclass(frozen=True)
class NeighbourSignals:
    """Rule 2: the allocation's buckets, and its neighbours' busy cards in the same buckets
    (``neighbour_busy_cards[i]`` for ``buckets[i]``; ``None`` unknown). ``neighbours``: how
    many allocations share ``shared`` ("card", "node") on ``hosts`` (``None``: the
    allocation's placement is not known)."""

    buckets: tuple[Bucket, ...]
    neighbour_busy_cards: tuple[float | None, ...]
    neighbours: int | None
    shared: str
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class FabricSignals:
    """Rule 4: the nodes the allocation's cards are on (0: placement unknown), whether they
    have a fast fabric
    (RDMA / InfiniBand; ``None`` unknown), and its buckets (NVLink traffic, utilisation)."""

    nodes: int
    hosts: tuple[str, ...]
    fast_fabric: bool | None
    buckets: tuple[Bucket, ...]


@dataclass(frozen=True)
class PromptBloatSignals:
    """Rule 5: per-task token flow of a team's model over a period (pools.tokenflow).
    Tokens are means per task's call; shares 0-1; ``None`` unknown."""

    tasks: int
    calls_per_task_mean: float
    input_tokens_first_call_mean: float
    input_tokens_last_call_mean: float
    tool_return_tokens_mean: float | None
    cached_share: float | None
    retry_share: float | None


@dataclass(frozen=True)
class ScaleChange:
    """A scale event that took effect: when, and the cards before and after."""

    at: datetime
    cards_from: int
    cards_to: int

    @property
    def up(self) -> bool:
        return self.cards_to > self.cards_from


@dataclass(frozen=True)
class ScalingSignals:
    """Rules 6 and 7: the elastic policy's cooldown (s, ``None`` not elastic), the scale
    events of the window oldest first, deploys (allocation start, redeploys) inside it, and
    the buckets."""

    cooldown_s: int | None
    events: tuple[ScaleChange, ...]
    buckets: tuple[Bucket, ...]
    deploys: tuple[datetime, ...] = ()


@dataclass(frozen=True)
class DaySummary:
    """Rule 9: one UTC day of an allocation: mean free framebuffer per card (MiB) and output
    tokens per busy card-second (``None`` unknown)."""

    day: date
    fb_free_mib_per_card: float | None
    tok_s_per_busy_card: float | None


@dataclass(frozen=True)
class DecaySignals:
    days: tuple[DaySummary, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- three-valued logic

Tri = bool | None


def _ge(value: float | None, threshold: float) -> Tri:
    return None if value is None else value >= threshold


def _lt(value: float | None, threshold: float) -> Tri:
    return None if value is None else value < threshold


def _and(*values: Tri) -> Tri:
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def _fb_used_pct(b: Bucket) -> float | None:
    if b.fb_used_mib is None or b.fb_free_mib is None or b.fb_used_mib + b.fb_free_mib <= 0:
        return None
    return 100.0 * b.fb_used_mib / (b.fb_used_mib + b.fb_free_mib)


def _trailing(
    buckets: Sequence[Bucket], test: Callable[[Bucket], Tri], need: int
) -> tuple[int, Bucket | None, bool]:
    """The run of buckets, newest backwards, where ``test`` holds: ``(length, its oldest
    bucket, undecided)``. A bucket missing from the 5-minute sequence (a gap) is unknown;
    ``undecided`` when an unknown ends the run before it is ``need`` long."""
    run, first, newer = 0, None, None
    for b in reversed(buckets):
        gap = newer is not None and (newer.at - b.at).total_seconds() > BUCKET_S * 1.5
        value = None if gap else test(b)
        if value is True:
            run, first, newer = run + 1, b, b
            continue
        return run, first, value is None and run < need
    return run, first, run < need


def _longest(
    buckets: Sequence[Bucket], test: Callable[[Bucket], Tri]
) -> tuple[int, Bucket | None, int]:
    """The longest run of consecutive buckets where ``test`` holds: ``(length, its first
    bucket, unknown buckets)``."""
    best, best_first, run, first, unknown, prev = 0, None, 0, None, 0, None
    for b in buckets:
        value = test(b)
        unknown += value is None
        contiguous = prev is not None and (b.at - prev.at).total_seconds() <= BUCKET_S * 1.5
        if value is True:
            run, first = (run + 1, first) if contiguous and run else (1, b)
            if run > best:
                best, best_first = run, first
        else:
            run = 0
        prev = b
    return best, best_first, unknown


def _count(buckets: Sequence[Bucket], test: Callable[[Bucket], Tri]) -> tuple[list[Bucket], int]:
    """The buckets where ``test`` holds, and how many were unknown."""
    hits, unknown = [], 0
    for b in buckets:
        value = test(b)
        if value is True:
            hits.append(b)
        unknown += value is None
    return hits, unknown


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _median(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _no_rollups(rule: Rule, s: WindowSignals) -> Undecided | None:
    if not s.buckets:
        return Undecided(rule, "no serving rollups in the window")
    if not s.fresh:
        return Undecided(rule, "serving rollups are stale")
    return None


def _sustained(
    rule: Rule,
    buckets: Sequence[Bucket],
    test: Callable[[Bucket], Tri],
    t: Thresholds,
    numbers: Callable[[Sequence[Bucket]], dict[str, object]],
    texts: tuple[str, str],
    *,
    unknown: str,
    lead: dict[str, object] | None = None,
) -> Outcome:
    """The rules that fire when ``test`` held for ``sustain_buckets`` in a row up to now
    (:func:`_trailing`): a warning :class:`Finding` from the run's first bucket with ``lead``,
    the run's ``minutes`` and ``numbers(run buckets)``, and ``texts`` (what is wrong, the
    fix); :class:`Undecided` (``unknown``) when an unknown bucket cut the run short; else
    ``None`` (healthy)."""
    run, first, undecided = _trailing(buckets, test, t.sustain_buckets)
    if run >= t.sustain_buckets:
        found = {**(lead or {}), "minutes": run * BUCKET_S // 60, **numbers(buckets[-run:])}
        return Finding(rule, Severity.WARNING, first.at, found, *texts)
    if undecided:
        return Undecided(rule, unknown)
    return None


# ------------------------------------------------------------------------------------- rules


def rule_batching(s: WindowSignals, t: Thresholds) -> Outcome:
    """1 - utilisation below ``batching_util_below_pct`` while at least
    ``batching_waiting_min`` requests wait and the KV cache is below
    ``batching_kv_below_pct``, for ``sustain_buckets`` in a row up to now: the engine takes
    too few sequences per batch (004 §5.1 row 1)."""
    if (early := _no_rollups(Rule.BATCHING, s)) is not None:
        return early

    def test(b: Bucket) -> Tri:
        return _and(
            _lt(b.gpu_util_pct, t.batching_util_below_pct),
            _ge(b.requests_waiting, t.batching_waiting_min),
            _lt(b.kv_cache_usage_pct, t.batching_kv_below_pct),
        )

    def numbers(tail: Sequence[Bucket]) -> dict[str, object]:
        return {
            "gpu_util_pct_mean": _r(statistics.fmean(b.gpu_util_pct for b in tail), 1),
            "requests_waiting_mean": _r(statistics.fmean(b.requests_waiting for b in tail), 1),
            "kv_cache_usage_pct_max": _r(max(b.kv_cache_usage_pct for b in tail), 1),
        }

    return _sustained(
        Rule.BATCHING,
        s.buckets,
        test,
        t,
        numbers,
        (
            "The GPU is mostly idle while requests queue and the KV cache has room.",
            "Raise the engine's batch limits (vLLM --max-num-seqs / --max-num-batched-tokens, "
            "SGLang --max-running-requests) and keep continuous batching on.",
        ),
        unknown="utilisation, queue or KV cache unknown",
    )


def rule_noisy_neighbour(s: NeighbourSignals, t: Thresholds) -> Outcome:
    """2 - inter-token latency p95 spikes (at least ``neighbour_spike_factor`` x the window's
    median) that coincide with a neighbour's load (its busy cards at least
    ``neighbour_busy_factor`` x their median) while the allocation's own running requests
    stay near their median: another workload on the same card or node takes the bandwidth
    (004 §5.1 row 2, 000 §5.4). No neighbours: healthy; placement unknown: undecided."""
    if s.neighbours is None:
        return Undecided(Rule.NOISY_NEIGHBOUR, "the allocation's placement is not known")
    if s.neighbours == 0:
        return None
    if not s.buckets:
        return Undecided(Rule.NOISY_NEIGHBOUR, "no serving rollups in the window")
    latency_median = _median(b.itl_p95_s for b in s.buckets)
    neighbour_median = _median(s.neighbour_busy_cards)
    own_median = _median(b.requests_running for b in s.buckets)
    if latency_median is None or neighbour_median is None:
        return Undecided(Rule.NOISY_NEIGHBOUR, "latency or the neighbours' load unknown")
    spikes, coinciding = [], []
    for b, load in zip(s.buckets, s.neighbour_busy_cards, strict=True):
        if b.itl_p95_s is None or b.itl_p95_s < t.neighbour_spike_factor * latency_median:
            continue
        self_inflicted = (
            own_median is not None
            and b.requests_running is not None
            and b.requests_running > t.neighbour_own_load_factor * own_median
        )
        if self_inflicted:
            continue
        spikes.append(b)
        if load is not None and load >= t.neighbour_busy_factor * max(neighbour_median, 0.5):
            coinciding.append(b)
    if len(spikes) < t.neighbour_min_spikes:
        return None
    share = len(coinciding) / len(spikes)
    if share < t.neighbour_coincide_share:
        return None
    return Finding(
        Rule.NOISY_NEIGHBOUR,
        Severity.WARNING,
        coinciding[0].at,
        {
            "spikes": len(spikes),
            "coinciding": len(coinciding),
            "itl_p95_s_median": _r(latency_median, 3),
            "itl_p95_s_max": _r(max(b.itl_p95_s for b in spikes), 3),
            "neighbours": s.neighbours,
            "shared": s.shared,
            "hosts": list(s.hosts),
        },
        f"Latency spikes {grouped(len(coinciding))} of {grouped(len(spikes))} times when a "
        f"workload sharing its {s.shared} is busy.",
        "Isolate it: exclusive cards or nodes for latency-sensitive serving (node affinity, a "
        "shape on its own nodes); if cards must be shared, lower the neighbour's concurrency "
        "and give each tenant memory and bandwidth quotas.",
    )


def rule_memory_pressure(s: WindowSignals, t: Thresholds) -> Outcome:
    """3 - at least ``frequent_buckets`` buckets in the window with preemptions (at least
    ``memory_preemptions_min``), the KV cache at ``memory_kv_full_pct`` or the framebuffer
    ``memory_fb_full_pct`` used (004 §5.1 row 3). Critical when preemptions and a full KV
    cache come together."""
    if not s.buckets:
        return Undecided(Rule.MEMORY_PRESSURE, "no serving rollups in the window")

    preempt_min, kv_full, fb_full = (
        t.memory_preemptions_min,
        t.memory_kv_full_pct,
        t.memory_fb_full_pct,
    )

    def test(b: Bucket) -> Tri:
        # three-valued OR of preemptions, KV cache and fb used % written out: it runs for every
        # bucket of the window (half a million a pass)
        pre, kv, used, free = b.preemptions, b.kv_cache_usage_pct, b.fb_used_mib, b.fb_free_mib
        fb = None
        if used is not None and free is not None and used + free > 0:
            fb = used / (used + free) * 100
        if (
            (pre is not None and pre >= preempt_min)
            or (kv is not None and kv >= kv_full)
            or (fb is not None and fb >= fb_full)
        ):
            return True
        return None if pre is None or kv is None or fb is None else False

    hits, unknown = _count(s.buckets, test)
    if len(hits) >= t.frequent_buckets:
        preempted = sum(b.preemptions or 0 for b in hits)
        kv_full = sum(1 for b in hits if _ge(b.kv_cache_usage_pct, t.memory_kv_full_pct))
        fb = [p for b in hits if (p := _fb_used_pct(b)) is not None]
        both = preempted > 0 and kv_full > 0
        return Finding(
            Rule.MEMORY_PRESSURE,
            Severity.CRITICAL if both else Severity.WARNING,
            hits[0].at,
            {
                "buckets": len(hits),
                "preemptions": _r(preempted, 0),
                "kv_full_buckets": kv_full,
                "fb_used_pct_max": _r(max(fb), 1) if fb else None,
            },
            f"Memory ran out in {grouped(len(hits))} five-minute buckets: {grouped(preempted)} "
            f"preemptions, KV cache full in {grouped(kv_full)}.",
            "Lower the concurrency per replica (max running requests), revisit the KV cache "
            "reservation (gpu-memory-utilization, FP8 KV cache), or move to a card with more "
            "memory.",
        )
    if len(hits) + unknown >= t.frequent_buckets and unknown:
        return Undecided(Rule.MEMORY_PRESSURE, "preemptions, KV cache or framebuffer unknown")
    return None


def rule_interconnect(s: FabricSignals, t: Thresholds) -> Outcome:
    """4 - cards on more than one node with no fast fabric between them (node labels), or a
    multi-node allocation whose busy cards (above ``interconnect_busy_pct``) show NVLink
    traffic below ``interconnect_idle_bytes_s`` for ``sustain_buckets`` in a row
    (004 §5.1 row 4). One node: healthy; placement unknown (no nodes): undecided."""
    if s.nodes == 0:
        return Undecided(Rule.INTERCONNECT, "the allocation's placement is not known")
    if s.nodes == 1:
        return None
    numbers = {"nodes": s.nodes, "hosts": list(s.hosts), "fast_fabric": s.fast_fabric}
    fix = (
        "Run multi-node jobs only over NVLink plus RDMA (InfiniBand / RoCE, NCCL over it); "
        "keep small jobs on one node with several cards (a one-node shape)."
    )
    if s.fast_fabric is False:
        since = s.buckets[0].at if s.buckets else None
        if since is not None:
            return Finding(
                Rule.INTERCONNECT,
                Severity.WARNING,
                since,
                numbers,
                f"Spread over {grouped(s.nodes)} nodes that have no fast fabric between them.",
                fix,
            )

    def test(b: Bucket) -> Tri:
        return _and(
            _ge(b.gpu_util_pct, t.interconnect_busy_pct),
            _lt(b.nvlink_bytes_s, t.interconnect_idle_bytes_s),
        )

    def run_numbers(tail: Sequence[Bucket]) -> dict[str, object]:
        return {
            "nvlink_bytes_s_max": _r(max(b.nvlink_bytes_s for b in tail), 0),
            "gpu_util_pct_mean": _r(statistics.fmean(b.gpu_util_pct for b in tail), 1),
        }

    unknown = "NVLink traffic or utilisation unknown"
    if not s.buckets:
        return Undecided(Rule.INTERCONNECT, unknown)
    return _sustained(
        Rule.INTERCONNECT,
        s.buckets,
        test,
        t,
        run_numbers,
        (
            f"Busy on {grouped(s.nodes)} nodes with no NVLink traffic: the cards talk over a "
            "slow path.",
            fix,
        ),
        unknown=unknown,
        lead=numbers,
    )


def rule_prompt_bloat(s: PromptBloatSignals, t: Thresholds, *, since: datetime) -> Outcome:
    """5 - within agent tasks, input tokens per call growing to ``bloat_growth_factor`` x the
    first call's, tool returns above ``bloat_tool_return_tokens``, a prompt-cache hit share
    below ``bloat_cached_share_below`` or retries above ``bloat_retry_share_above``
    (004 §5.1 row 5, §4.1, §4.3). ``since``: the start of the period the figures cover."""
    if s.tasks < t.bloat_min_tasks:
        return Undecided(
            Rule.PROMPT_BLOAT, f"only {grouped(s.tasks)} tasks with per-call token data"
        )
    growth = (
        s.input_tokens_last_call_mean / s.input_tokens_first_call_mean
        if s.input_tokens_first_call_mean > 0
        else None
    )
    triggers = {
        "growth": _ge(growth, t.bloat_growth_factor),
        "tool_returns": _ge(s.tool_return_tokens_mean, t.bloat_tool_return_tokens),
        "low_cache": _lt(s.cached_share, t.bloat_cached_share_below),
        "retries": None if s.retry_share is None else s.retry_share > t.bloat_retry_share_above,
    }
    fired = [name for name, value in triggers.items() if value is True]
    if not fired:
        if any(value is None for value in triggers.values()):
            missing = ", ".join(TRIGGERS[n] for n, v in triggers.items() if v is None)
            return Undecided(Rule.PROMPT_BLOAT, f"unknown: {missing}")
        return None
    return Finding(
        Rule.PROMPT_BLOAT,
        Severity.WARNING,
        since,
        {
            "tasks": s.tasks,
            "calls_per_task_mean": _r(s.calls_per_task_mean, 1),
            "input_growth": _r(growth, 2),
            "tool_return_tokens_mean": _r(s.tool_return_tokens_mean, 0),
            "cached_share": _r(s.cached_share, 3),
            "retry_share": _r(s.retry_share, 3),
            "triggers": fired,
        },
        f"Agent tasks make {grouped(s.calls_per_task_mean, 1)} calls each; "
        + ", ".join(TRIGGERS[name] for name in fired)
        + ".",
        "Trim the system prompt and tool descriptions, cap tool-return length, keep fixed "
        "prefixes first so the prompt cache hits, and fix tool arguments (schema, input "
        "checks) instead of retrying the whole generation.",
    )


def _reversals(
    events: Sequence[ScaleChange], cooldown_s: int
) -> list[tuple[ScaleChange, ScaleChange]]:
    return [
        (a, b)
        for a, b in zip(events, events[1:], strict=False)
        if a.up != b.up and (b.at - a.at).total_seconds() <= 2 * cooldown_s
    ]


def _latency_around(buckets: Sequence[Bucket], at: datetime, after: bool) -> float | None:
    """Median e2e p95 of the three buckets before ``at`` or the three after it."""
    if after:
        near = [b for b in buckets if at <= b.at < at + timedelta(seconds=3 * BUCKET_S)]
    else:
        near = [b for b in buckets if at - timedelta(seconds=3 * BUCKET_S) <= b.at < at]
    return _median(b.e2e_p95_s for b in near)


def _churn_summary(reversals: int, events: int, ups: int, useless: bool, gain: float) -> str:
    parts = []
    if reversals:
        parts.append(
            f"{grouped(reversals)} of {grouped(events)} scale events reversed within twice the "
            "cooldown"
        )
    if useless:
        # by the threshold: one that lowered it by 3 % did lower it (the evidence says so)
        parts.append(
            f"none of {grouped(ups)} scale-ups lowered latency by {gain * 100:g} % or more"
        )
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def rule_scaling_churn(s: ScalingSignals, t: Thresholds) -> Outcome:
    """6 - at least ``churn_reversals_min`` scale events reversed within twice the cooldown,
    or at least ``churn_ups_min`` scale-ups none of which lowered e2e p95 by
    ``churn_latency_gain`` (three buckets after against three before): the cooldown is too
    short or the signal too sensitive (004 §5.1 row 6). Not elastic: healthy."""
    if s.cooldown_s is None:
        return None
    reversals = _reversals(s.events, s.cooldown_s)
    ups = [e for e in s.events if e.up]
    gains = []
    for e in ups:
        before = _latency_around(s.buckets, e.at, after=False)
        after = _latency_around(s.buckets, e.at, after=True)
        gains.append(None if before is None or after is None or before <= 0 else 1 - after / before)
    useless = len(ups) >= t.churn_ups_min and all(
        g is not None and g < t.churn_latency_gain for g in gains
    )
    if len(reversals) >= t.churn_reversals_min or useless:
        first = reversals[0][0].at if reversals else ups[0].at
        return Finding(
            Rule.SCALING_CHURN,
            Severity.WARNING,
            first,
            {
                "events": len(s.events),
                "reversals": len(reversals),
                "cooldown_s": s.cooldown_s,
                "scale_ups": len(ups),
                "latency_gain_per_up": [_r(g, 2) for g in gains],
            },
            _churn_summary(len(reversals), len(s.events), len(ups), useless, t.churn_latency_gain),
            "Lengthen the cooldown, require the signal over a longer window, or pre-scale from "
            "the traffic forecast instead of chasing spikes.",
        )
    if len(ups) >= t.churn_ups_min and any(g is None for g in gains):
        return Undecided(Rule.SCALING_CHURN, "latency around the scale-ups unknown")
    return None


def rule_cold_start(s: ScalingSignals, t: Thresholds) -> Outcome:
    """7 - in the ``cold_window_s`` after a scale-up or a deploy, TTFT p95 at least
    ``cold_ttft_factor`` x the median outside those windows and above ``cold_ttft_min_s``,
    or failed requests above ``cold_error_share`` of those finished or failed, while the
    endpoint took requests: it was reported ready before the weights were loaded and warm
    (000 §5.1). No scale-up or deploy in the window: healthy."""
    starts = sorted({*(e.at for e in s.events if e.up), *s.deploys})
    if not starts:
        return None
    window = timedelta(seconds=t.cold_window_s)

    def in_warmup(b: Bucket) -> bool:
        return any(at <= b.at < at + window for at in starts)

    baseline = _median(b.ttft_p95_s for b in s.buckets if not in_warmup(b))
    unknown = baseline is None
    for at in starts:
        warm = [b for b in s.buckets if at <= b.at < at + window]
        ttft = [b.ttft_p95_s for b in warm if b.ttft_p95_s is not None]
        finished = sum(b.requests_finished or 0 for b in warm)
        failed = sum(b.requests_failed or 0 for b in warm)
        if not ttft and not (finished + failed):
            unknown = True
            continue
        slow = (
            bool(ttft)
            and baseline is not None
            and (max(ttft) >= t.cold_ttft_factor * baseline and max(ttft) >= t.cold_ttft_min_s)
        )
        error_share = failed / (finished + failed) if finished + failed else None
        failing = error_share is not None and error_share > t.cold_error_share
        if slow or failing:
            return Finding(
                Rule.COLD_START,
                Severity.CRITICAL if failing else Severity.WARNING,
                at,
                {
                    "ttft_p95_s_after": _r(max(ttft), 2) if ttft else None,
                    "ttft_p95_s_baseline": _r(baseline, 2),
                    "error_share_after": _r(error_share, 3),
                    "window_s": t.cold_window_s,
                },
                "Right after the scale-up, first tokens were slow"
                + (" and requests failed" if failing else "")
                + ": traffic reached replicas still loading.",
                "Make readiness probe a real inference request, warm up (a short request) "
                "before joining the load balancer, and keep weights in a local cache; keep a "
                "minimum of warm replicas.",
            )
    return Undecided(Rule.COLD_START, "TTFT around the scale-ups unknown") if unknown else None


def rule_queue_avalanche(s: WindowSignals, t: Thresholds) -> Outcome:
    """8 - at least ``frequent_buckets`` buckets in the window with TTFT p95 at least
    ``avalanche_ttft_s`` and at least ``avalanche_waiting_min`` requests waiting, more than
    are running: the queue outgrows what the engine serves (000 §5.2)."""
    if not s.buckets:
        return Undecided(Rule.QUEUE_AVALANCHE, "no serving rollups in the window")

    ttft_min, waiting_min = t.avalanche_ttft_s, t.avalanche_waiting_min

    def test(b: Bucket) -> Tri:
        # _and(_ge(ttft), _ge(waiting), waiting > running) written out (every bucket)
        ttft, waiting, running = b.ttft_p95_s, b.requests_waiting, b.requests_running
        if (
            (ttft is not None and ttft < ttft_min)
            or (waiting is not None and waiting < waiting_min)
            or (waiting is not None and running is not None and waiting <= running)
        ):
            return False
        return None if ttft is None or waiting is None or running is None else True

    hits, unknown = _count(s.buckets, test)
    if len(hits) >= t.frequent_buckets:
        return Finding(
            Rule.QUEUE_AVALANCHE,
            Severity.CRITICAL,
            hits[0].at,
            {
                "buckets": len(hits),
                "requests_waiting_max": _r(max(b.requests_waiting for b in hits), 0),
                "ttft_p95_s_max": _r(max(b.ttft_p95_s for b in hits), 1),
            },
            f"The queue grew past what runs and first tokens took "
            f"{grouped(max(b.ttft_p95_s for b in hits))} s (p95) in {grouped(len(hits))} buckets.",
            "Cap each instance's queue and answer 503 at once when it is full so the load "
            "balancer tries another; make clients back off exponentially instead of retrying "
            "at once.",
        )
    if len(hits) + unknown >= t.frequent_buckets and unknown:
        return Undecided(Rule.QUEUE_AVALANCHE, "TTFT or queue unknown")
    return None


def rule_memory_decay(s: DecaySignals, t: Thresholds) -> Outcome:
    """9 - over at least ``decay_min_days`` days, free framebuffer per card falling day by
    day (no day more than 10 % above the one before) to at most ``1 - decay_fb_drop_share``
    of the first day's, while output tokens per busy card-second fell by at least
    ``decay_throughput_drop_share`` (000 §5.3)."""
    known = [d for d in s.days if d.fb_free_mib_per_card is not None]
    if len(known) < t.decay_min_days:
        return Undecided(Rule.MEMORY_DECAY, f"free framebuffer known on {grouped(len(known))} days")
    first, last = known[0], known[-1]
    falling = all(
        b.fb_free_mib_per_card <= a.fb_free_mib_per_card * 1.1
        for a, b in zip(known, known[1:], strict=False)
    )
    dropped = last.fb_free_mib_per_card <= first.fb_free_mib_per_card * (1 - t.decay_fb_drop_share)
    if not (falling and dropped):
        return None
    speeds = [d.tok_s_per_busy_card for d in known if d.tok_s_per_busy_card is not None]
    if len(speeds) < 2:
        return Undecided(Rule.MEMORY_DECAY, "throughput per busy card unknown")
    slower = speeds[-1] <= speeds[0] * (1 - t.decay_throughput_drop_share)
    if not slower:
        return None
    return Finding(
        Rule.MEMORY_DECAY,
        Severity.WARNING,
        datetime.combine(first.day, time.min, tzinfo=UTC),
        {
            "days": len(known),
            "fb_free_mib_per_card_first": _r(first.fb_free_mib_per_card, 0),
            "fb_free_mib_per_card_last": _r(last.fb_free_mib_per_card, 0),
            "tok_s_per_busy_card_first": _r(speeds[0], 1),
            "tok_s_per_busy_card_last": _r(speeds[-1], 1),
        },
        f"Free framebuffer per card fell from {grouped(first.fb_free_mib_per_card)} to "
        f"{grouped(last.fb_free_mib_per_card)} MiB in {grouped(len(known))} days and "
        "throughput with it.",
        "Restart replicas one by one when free memory falls below a threshold, and upgrade "
        "the engine (newer allocators fragment less).",
    )


def rule_outside_gpu(s: WindowSignals, t: Thresholds) -> Outcome:
    """10 - end-to-end p95 at least ``outside_e2e_s`` while utilisation is below
    ``outside_idle_pct`` and fewer than ``outside_waiting_below`` requests wait, for
    ``sustain_buckets`` in a row up to now: the time goes outside the GPU (004 §5.2
    habit 1: databases, external calls, locks) - more cards would not help."""
    if (early := _no_rollups(Rule.OUTSIDE_GPU, s)) is not None:
        return early

    def test(b: Bucket) -> Tri:
        return _and(
            _ge(b.e2e_p95_s, t.outside_e2e_s),
            _lt(b.gpu_util_pct, t.outside_idle_pct),
            _lt(b.requests_waiting, t.outside_waiting_below),
        )

    def numbers(tail: Sequence[Bucket]) -> dict[str, object]:
        return {
            "e2e_p95_s_mean": _r(statistics.fmean(b.e2e_p95_s for b in tail), 1),
            "gpu_util_pct_mean": _r(statistics.fmean(b.gpu_util_pct for b in tail), 1),
            "requests_waiting_mean": _r(statistics.fmean(b.requests_waiting for b in tail), 2),
        }

    return _sustained(
        Rule.OUTSIDE_GPU,
        s.buckets,
        test,
        t,
        numbers,
        (
            "Requests are slow while the GPU idles and nothing waits.",
            "Do not add cards: trace the request path end to end (client, gateway, tools, "
            "database, tokenizer) and fix the slow step first.",
        ),
        unknown="latency, utilisation or queue unknown",
    )


def rule_saturation(s: WindowSignals, t: Thresholds) -> Outcome:
    """11 - utilisation above ``saturation_util_pct`` for ``saturation_buckets`` in a row at
    some point in the window (004 §2.3): plan capacity before it hurts; keep a 30 % buffer."""
    if not s.buckets:
        return Undecided(Rule.SATURATION, "no serving rollups in the window")

    def test(b: Bucket) -> Tri:
        return None if b.gpu_util_pct is None else b.gpu_util_pct > t.saturation_util_pct

    run, first, unknown = _longest(s.buckets, test)
    if run >= t.saturation_buckets:
        return Finding(
            Rule.SATURATION,
            Severity.INFO,
            first.at,
            {"minutes": run * BUCKET_S // 60, "util_above_pct": t.saturation_util_pct},
            f"Utilisation stayed above {t.saturation_util_pct:g} % for "
            f"{grouped(run * BUCKET_S // 60)} minutes.",
            "Plan more capacity now (a sizing estimate for the peak, a growth request, or an "
            "elastic ceiling) and keep a 30 % buffer for bursts.",
        )
    if unknown and unknown + run >= t.saturation_buckets:
        return Undecided(Rule.SATURATION, "utilisation unknown")
    return None
