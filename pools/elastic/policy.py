"""One scaling decision for an elastic inference allocation: pure, no ORM, no clock.

Units: utilisation in % (0-100, dcgm-exporter ``DCGM_FI_DEV_GPU_UTIL`` averaged over the team's
cards), latency in milliseconds (vLLM's mean end-to-end request latency,
``rate(vllm:e2e_request_latency_seconds_sum) / rate(..._count)`` x 1000), times in Unix seconds,
durations in seconds, cards as whole numbers.

The rules are seed 004 §3.3's (``/work/shared/seeds/004_*.txt``, "弹性扩缩容"):

- **up** when utilisation has stayed **above 75 %** for **5 minutes** *and* mean latency has
  stayed **above 800 ms** over the same 5 minutes: one step of cards more, up to the ceiling;
- **down** when utilisation has stayed **below 30 %** for **30 minutes**: one step fewer, never
  below the floor (nor below ``min_replicas`` x ``cards_per_replica``);
- a **cooldown** of at least 10-15 minutes after any change (default 15 min = 900 s; the policy
  refuses less than 600 s, the seed's lower bound) during which nothing moves;
- **pre-scaling** (the forecast's level for the next 30 minutes, :mod:`pools.elastic.forecast`)
  raises the lower bound: the loop scales up to it ahead of the peak and never scales below it.

"Stayed above for W" is read strictly: every sample from ``now - W`` to ``now`` satisfies the
condition, consecutive samples are at most ``max_gap_s`` apart, and the run is counted only from
the last scale event (the condition must hold *with the current cards*: the minutes before a
scale-down say nothing about the smaller allocation). A sample with a missing value, a gap
wider than ``max_gap_s`` or a newest sample older than ``stale_after_s`` is **unknown**, and
unknown never scales anything: the decision is ``hold`` with reason ``unknown``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum

SEED_UP_UTIL_PCT = 75.0
SEED_UP_LATENCY_MS = 800.0
SEED_UP_WINDOW_S = 5 * 60
SEED_DOWN_UTIL_PCT = 30.0
SEED_DOWN_WINDOW_S = 30 * 60
SEED_COOLDOWN_S = 15 * 60  # seed: "at least 10 to 15 minutes"; the upper end by default
MIN_COOLDOWN_S = 10 * 60


class Action(StrEnum):
    UP = "up"
    DOWN = "down"
    HOLD = "hold"


class Reason(StrEnum):
    SCALE_UP = "scale_up"  # both signals high for the up window
    SCALE_DOWN = "scale_down"  # utilisation low for the down window
    PRESCALE = "prescale"  # the forecast needs more cards in the next lead window
    BELOW_FLOOR = "below_floor"  # the cards held are under the lower bound (policy changed)
    ABOVE_CEILING = "above_ceiling"  # the cards held are over the ceiling (policy changed)
    COOLDOWN = "cooldown"  # a rule fired inside the cooldown
    AT_CEILING = "at_ceiling"  # up rule met, but already at the ceiling
    AT_FLOOR = "at_floor"  # down rule met, but already at the lower bound
    STEADY = "steady"  # no rule met
    UNKNOWN = "unknown"  # missing or stale metrics


# What each reason means, in words, for the pages (the code stays in the API and audit trail).
REASON_LABELS: dict[str, str] = {
    Reason.SCALE_UP: "load high",
    Reason.SCALE_DOWN: "load low",
    Reason.PRESCALE: "pre-scaled for the forecast",
    Reason.BELOW_FLOOR: "raised to the lower bound",
    Reason.ABOVE_CEILING: "lowered to the ceiling",
    Reason.COOLDOWN: "in cooldown",
    Reason.AT_CEILING: "at the ceiling",
    Reason.AT_FLOOR: "at the lower bound",
    Reason.STEADY: "steady",
    Reason.UNKNOWN: "metrics unknown",
    # the services' own, past the loop's rule (pools.elastic.services): the pool had no card
    # to lend, the team's budget refused the scale-up, cards handed back to a guaranteed approval
    "no_free_cards": "no free cards to lend",
    "budget_exceeded": "over the budget",
    "hand_back": "handed back",
}


class PolicyError(ValueError):
    """A policy whose numbers contradict each other; ``field`` names the offending one."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ScalingPolicy:
    """The numbers of one elastic allocation's policy.

    ``floor_cards`` are guaranteed (counted in the capacity invariant), ``ceiling_cards`` the
    most the allocation may hold with burst cards borrowed from the pool's free capacity.
    ``step_cards`` is how many cards one scale event adds or removes (a multiple of
    ``cards_per_replica``, the cards one serving replica takes: its TP degree from the sizing
    estimate). ``min_replicas`` (>= 1) keeps replicas warm: the lower bound is
    ``max(floor_cards, min_replicas x cards_per_replica)``. ``max_gap_s``: samples further
    apart than this break a run; ``stale_after_s``: a newest sample older than this is unknown.
    """

    floor_cards: int
    ceiling_cards: int
    step_cards: int = 1
    cards_per_replica: int = 1
    min_replicas: int = 1
    up_util_pct: float = SEED_UP_UTIL_PCT
    up_latency_ms: float = SEED_UP_LATENCY_MS
    up_window_s: int = SEED_UP_WINDOW_S
    down_util_pct: float = SEED_DOWN_UTIL_PCT
    down_window_s: int = SEED_DOWN_WINDOW_S
    cooldown_s: int = SEED_COOLDOWN_S
    max_gap_s: int = 120
    stale_after_s: int = 180

    def __post_init__(self) -> None:
        """Types, then cards, then thresholds and windows; raises :class:`PolicyError` (field,
        message) at the first break."""
        self._check_types()
        self._check_cards()
        self._check_thresholds()

    def _check_types(self) -> None:
        """Card counts and seconds are whole numbers; percentages and latency numbers."""
        for name in (
            "floor_cards",
            "ceiling_cards",
            "step_cards",
            "cards_per_replica",
            "min_replicas",
            "up_window_s",
            "down_window_s",
            "cooldown_s",
            "max_gap_s",
            "stale_after_s",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise PolicyError(name, f"must be a whole number, got {value!r}")
        for name in ("up_util_pct", "up_latency_ms", "down_util_pct"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                raise PolicyError(name, f"must be a number, got {value!r}")

    def _check_cards(self) -> None:
        """0 <= floor <= ceiling; replicas of >= 1 card, at least one, within the ceiling;
        the step a positive multiple of a replica's cards."""
        if self.floor_cards < 0:
            raise PolicyError("floor_cards", "must be >= 0")
        if self.ceiling_cards < self.floor_cards:
            raise PolicyError(
                "ceiling_cards", f"must be at least the floor ({self.floor_cards} cards)"
            )
        if self.cards_per_replica < 1:
            raise PolicyError("cards_per_replica", "must be >= 1")
        if self.min_replicas < 1:
            raise PolicyError("min_replicas", "must be >= 1 (nothing may cold-start from zero)")
        if self.min_replicas * self.cards_per_replica > self.ceiling_cards:
            raise PolicyError(
                "min_replicas",
                f"{self.min_replicas} replicas x {self.cards_per_replica} cards exceed the "
                f"ceiling of {self.ceiling_cards} cards",
            )
        if self.step_cards < 1 or self.step_cards % self.cards_per_replica:
            raise PolicyError(
                "step_cards", f"must be a positive multiple of {self.cards_per_replica} cards"
            )

    def _check_thresholds(self) -> None:
        """0 <= down < up <= 100 %; latency > 0; windows >= 60 s; cool-down >= the minimum;
        gap and staleness >= 1 s."""
        if not 0 <= self.down_util_pct < self.up_util_pct <= 100:
            raise PolicyError(
                "down_util_pct", "must satisfy 0 <= down_util_pct < up_util_pct <= 100"
            )
        if self.up_latency_ms <= 0:
            raise PolicyError("up_latency_ms", "must be > 0")
        if self.up_window_s < 60 or self.down_window_s < 60:
            raise PolicyError("up_window_s", "windows must be at least 60 s")
        if self.cooldown_s < MIN_COOLDOWN_S:
            raise PolicyError(
                "cooldown_s", f"must be >= {MIN_COOLDOWN_S} s (seed 004 §3.3: 10-15 minutes)"
            )
        if self.max_gap_s < 1 or self.stale_after_s < 1:
            raise PolicyError("max_gap_s", "max_gap_s and stale_after_s must be >= 1 s")

    @property
    def lower_bound_cards(self) -> int:
        """The fewest cards the loop ever leaves: the floor, or enough for ``min_replicas``."""
        return max(self.floor_cards, self.min_replicas * self.cards_per_replica)


@dataclass(frozen=True)
class MetricSample:
    """The team's signals at ``at`` (Unix s): ``util_pct`` (0-100) and ``latency_ms``;
    ``None`` means not reported (unknown)."""

    at: float
    util_pct: float | None
    latency_ms: float | None


@dataclass(frozen=True)
class Signals:
    """What the rules see at one instant.

    ``up_held_s`` / ``down_held_s``: for how long (s) the up condition (util > up AND latency >
    up) / down condition (util < down) has held without a break, counted from the later of the
    run's first sample and the last scale event; ``0`` when it does not hold now. ``known`` is
    ``False`` when the newest sample is missing, stale or carries no value."""

    known: bool
    util_pct: float | None
    latency_ms: float | None
    sample_age_s: float | None
    up_held_s: float
    down_held_s: float


@dataclass(frozen=True)
class Decision:
    """The outcome: ``action`` moves the allocation from ``cards_from`` to ``cards_to``;
    ``reason`` is a :class:`Reason` code, ``message`` says it in words with the numbers, and
    :meth:`numbers` is what the audit event records."""

    action: Action
    reason: Reason
    cards_from: int
    cards_to: int
    message: str
    at: float
    util_pct: float | None
    latency_ms: float | None
    up_held_s: float
    down_held_s: float
    cooldown_left_s: float
    lower_bound_cards: int
    ceiling_cards: int
    prescale_cards: int | None

    def numbers(self) -> dict[str, object]:
        data = asdict(self)
        data["action"] = str(self.action)
        data["reason"] = str(self.reason)
        return data


def up_condition(policy: ScalingPolicy, sample: MetricSample) -> bool | None:
    if sample.util_pct is None or sample.latency_ms is None:
        return None
    return sample.util_pct > policy.up_util_pct and sample.latency_ms > policy.up_latency_ms


def down_condition(policy: ScalingPolicy, sample: MetricSample) -> bool | None:
    if sample.util_pct is None:
        return None
    return sample.util_pct < policy.down_util_pct


def signals_at(
    policy: ScalingPolicy,
    samples: Sequence[MetricSample],
    *,
    now: float,
    last_scaled_at: float | None = None,
) -> Signals:
    """The signals at ``now`` from ``samples`` (sorted by ``at``; later ones are ignored).

    Walks back from the newest sample at or before ``now`` while the condition holds and
    samples are at most ``max_gap_s`` apart: O(samples in the longest window)."""
    stamps = [sample.at for sample in samples]
    end = bisect.bisect_right(stamps, now)
    if end == 0:
        return Signals(False, None, None, None, 0.0, 0.0)
    newest = samples[end - 1]
    age = now - newest.at
    known = (
        age <= policy.stale_after_s and newest.util_pct is not None
    )  # latency may be missing: the down rule needs utilisation only

    def held(condition) -> float:
        if condition(policy, newest) is not True:
            return 0.0
        start = newest.at
        index = end - 2
        while index >= 0:
            earlier = samples[index]
            if start - earlier.at > policy.max_gap_s or condition(policy, earlier) is not True:
                break
            start = earlier.at
            index -= 1
        if last_scaled_at is not None:
            start = max(start, last_scaled_at)
        return max(0.0, newest.at - start)

    if not known:
        return Signals(False, newest.util_pct, newest.latency_ms, age, 0.0, 0.0)
    return Signals(
        True, newest.util_pct, newest.latency_ms, age, held(up_condition), held(down_condition)
    )


@dataclass(frozen=True)
class _Moment:
    """What :func:`decide` weighs, computed once: the policy's bounds (cards), the pre-scale
    target (cards, whole replicas, at most the ceiling, or None) and the cooldown left (s)."""

    policy: ScalingPolicy
    signals: Signals
    cards_now: int
    now: float
    lower: int
    ceiling: int
    target_prescale: int | None
    cooldown_left: float

    @property
    def up_met(self) -> bool:
        return self.signals.up_held_s >= self.policy.up_window_s

    @property
    def down_met(self) -> bool:
        return self.signals.down_held_s >= self.policy.down_window_s

    @property
    def wants_prescale(self) -> bool:
        return self.target_prescale is not None and self.cards_now < self.target_prescale

    @property
    def floor_now(self) -> int:
        """The lowest the down rule may go: the lower bound raised by the pre-scale target."""
        return max(self.lower, self.target_prescale or 0)

    def out(self, action: Action, reason: Reason, cards_to: int, message: str) -> Decision:
        signals = self.signals
        return Decision(
            action=action,
            reason=reason,
            cards_from=self.cards_now,
            cards_to=cards_to,
            message=message,
            at=self.now,
            util_pct=signals.util_pct,
            latency_ms=signals.latency_ms,
            up_held_s=signals.up_held_s,
            down_held_s=signals.down_held_s,
            cooldown_left_s=self.cooldown_left,
            lower_bound_cards=self.lower,
            ceiling_cards=self.ceiling,
            prescale_cards=self.target_prescale,
        )


def _moment(
    policy: ScalingPolicy,
    signals: Signals,
    cards_now: int,
    now: float,
    last_scaled_at: float | None,
    prescale_cards: int | None,
) -> _Moment:
    """The :class:`_Moment` of :func:`decide`'s arguments. Raises PolicyError on a
    ``cards_now`` that is not a whole number >= 0."""
    if isinstance(cards_now, bool) or not isinstance(cards_now, int) or cards_now < 0:
        raise PolicyError("cards_now", f"must be a whole number >= 0, got {cards_now!r}")
    ceiling = policy.ceiling_cards
    target_prescale: int | None = None
    if prescale_cards is not None:
        per = policy.cards_per_replica
        target_prescale = min(ceiling, -(-max(0, prescale_cards) // per) * per)
    cooldown_left = 0.0
    if last_scaled_at is not None:
        cooldown_left = max(0.0, last_scaled_at + policy.cooldown_s - now)
    return _Moment(
        policy, signals, cards_now, now, policy.lower_bound_cards, ceiling, target_prescale,
        cooldown_left,
    )  # fmt: skip


def _bounds_step(m: _Moment) -> Decision | None:
    """Cards outside the policy's bounds move to the nearest bound, cooldown or not."""
    if m.cards_now < m.lower:
        return m.out(
            Action.UP,
            Reason.BELOW_FLOOR,
            m.lower,
            f"{m.cards_now} cards are under the lower bound of {m.lower}: raised to it",
        )
    if m.cards_now > m.ceiling:
        return m.out(
            Action.DOWN,
            Reason.ABOVE_CEILING,
            m.ceiling,
            f"{m.cards_now} cards exceed the ceiling of {m.ceiling}: lowered to it",
        )
    return None


def _unknown_step(m: _Moment) -> Decision | None:
    """Unknown metrics hold."""
    signals = m.signals
    if signals.known:
        return None
    age = "no sample" if signals.sample_age_s is None else f"newest {signals.sample_age_s:g} s old"
    return m.out(
        Action.HOLD,
        Reason.UNKNOWN,
        m.cards_now,
        f"metrics unknown ({age}, utilisation {_pct(signals.util_pct)}): nothing moves",
    )


def _cooldown_step(m: _Moment) -> Decision | None:
    """A rule that fires inside the cooldown holds."""
    if m.cooldown_left > 0 and (m.up_met or m.down_met or m.wants_prescale):
        return m.out(
            Action.HOLD,
            Reason.COOLDOWN,
            m.cards_now,
            f"a rule fired but the cooldown has {m.cooldown_left:g} s left of "
            f"{m.policy.cooldown_s} s",
        )
    return None


def _up_step(m: _Moment) -> Decision | None:
    """The up rule adds ``step_cards`` (at least up to the floor, at most the ceiling)."""
    if not m.up_met:
        return None
    up_text = _up_text(m.policy, m.signals)
    if m.cards_now >= m.ceiling:
        return m.out(
            Action.HOLD,
            Reason.AT_CEILING,
            m.cards_now,
            up_text + f", but the allocation is at its ceiling of {m.ceiling} cards",
        )
    target = max(min(m.ceiling, m.cards_now + m.policy.step_cards), min(m.ceiling, m.floor_now))
    return m.out(Action.UP, Reason.SCALE_UP, target, up_text + f": {m.cards_now} -> {target} cards")


def _prescale_step(m: _Moment) -> Decision | None:
    """Fewer cards than the forecast needs rise to the pre-scale target."""
    if not m.wants_prescale:
        return None
    return m.out(
        Action.UP,
        Reason.PRESCALE,
        m.target_prescale,
        f"the forecast needs {m.target_prescale} cards within the lead window: "
        f"{m.cards_now} -> {m.target_prescale} cards",
    )


def _down_step(m: _Moment) -> Decision | None:
    """The down rule removes ``step_cards``, never below the floor."""
    if not m.down_met:
        return None
    down_text = _down_text(m.policy, m.signals)
    if m.cards_now <= m.floor_now:
        return m.out(
            Action.HOLD,
            Reason.AT_FLOOR,
            m.cards_now,
            down_text + f", but {m.cards_now} cards is the lower bound",
        )
    target = max(m.floor_now, m.cards_now - m.policy.step_cards)
    return m.out(
        Action.DOWN, Reason.SCALE_DOWN, target, down_text + f": {m.cards_now} -> {target} cards"
    )


_STEPS = (_bounds_step, _unknown_step, _cooldown_step, _up_step, _prescale_step, _down_step)
""":func:`decide`'s steps in order: the first that returns a Decision wins."""


def decide(
    policy: ScalingPolicy,
    *,
    signals: Signals,
    cards_now: int,
    now: float,
    last_scaled_at: float | None = None,
    prescale_cards: int | None = None,
) -> Decision:
    """The decision at ``now`` for an allocation holding ``cards_now`` cards.

    Order: bounds first (a policy edited under the cards held is obeyed at once, cooldown or
    not), then unknown -> hold, then the cooldown, then up / pre-scale, then down. Pre-scaling
    raises the lower bound to ``prescale_cards`` (rounded up to whole replicas, at most the
    ceiling); the down rule never goes below it. Raises PolicyError on a bad ``cards_now``."""
    m = _moment(policy, signals, cards_now, now, last_scaled_at, prescale_cards)
    for step in _STEPS:
        decision = step(m)
        if decision is not None:
            return decision
    return m.out(Action.HOLD, Reason.STEADY, cards_now, _steady_text(policy, signals))


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f} %"


def _ms(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f} ms"


def _up_text(policy: ScalingPolicy, signals: Signals) -> str:
    return (
        f"utilisation {_pct(signals.util_pct)} > {policy.up_util_pct:g} % and latency "
        f"{_ms(signals.latency_ms)} > {policy.up_latency_ms:g} ms for {signals.up_held_s:g} s "
        f"(>= {policy.up_window_s} s)"
    )


def _down_text(policy: ScalingPolicy, signals: Signals) -> str:
    return (
        f"utilisation {_pct(signals.util_pct)} < {policy.down_util_pct:g} % for "
        f"{signals.down_held_s:g} s (>= {policy.down_window_s} s)"
    )


def _steady_text(policy: ScalingPolicy, signals: Signals) -> str:
    util, latency = signals.util_pct, signals.latency_ms
    if (
        util is not None
        and util > policy.up_util_pct
        and (latency is None or latency <= policy.up_latency_ms)
    ):
        return (
            f"utilisation {_pct(util)} > {policy.up_util_pct:g} % but latency {_ms(latency)} is "
            f"not above {policy.up_latency_ms:g} ms: no scale-up (both must hold)"
        )
    if signals.up_held_s > 0:
        return f"{_up_text(policy, signals)}: not yet {policy.up_window_s} s"
    if signals.down_held_s > 0:
        return f"{_down_text(policy, signals)}: not yet {policy.down_window_s} s"
    return (
        f"utilisation {_pct(util)}, latency {_ms(latency)}: within thresholds "
        f"({policy.down_util_pct:g}-{policy.up_util_pct:g} %, {policy.up_latency_ms:g} ms)"
    )


def evaluate(
    policy: ScalingPolicy,
    samples: Sequence[MetricSample],
    *,
    cards_now: int,
    now: float,
    last_scaled_at: float | None = None,
    prescale_cards: int | None = None,
) -> Decision:
    """:func:`signals_at` then :func:`decide`: the loop's one call per allocation."""
    signals = signals_at(policy, samples, now=now, last_scaled_at=last_scaled_at)
    return decide(
        policy,
        signals=signals,
        cards_now=cards_now,
        now=now,
        last_scaled_at=last_scaled_at,
        prescale_cards=prescale_cards,
    )
