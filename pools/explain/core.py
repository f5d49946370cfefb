"""Why a request for cards cannot be approved now, when it could be, where instead, and who
holds the cards: pure functions over plain data (no Django, no ORM, no I/O; an import-linter
contract keeps it so). :mod:`pools.explain.selectors` reads the facts; pages and the API show
the answer (:meth:`Explanation.as_dict`).

**Options.** Every (pool, GPU model) the portal could hand cards out of is an
:class:`OptionFacts`: its cards by state, the holding allocations overlapping the horizon, its
nodes (for shapes) and its reserved price. The *targets* are the options the ask names (its
pool, or every pool of the workload's scheduler; its model, or every model with at least the
memory asked).

**Why not now** (:func:`explain`), every reason that applies, in this order (the order a pool
admin checks them in): eligibility (``kind``: the named pool runs the other scheduler;
``class``: the request's workload class may not run on the model, or on any model asked for,
:class:`pools.classes.rules.ClassRule`, with the fleet's models it may use; ``model``: no
pool of the workload's scheduler has a whole card of the model; ``pool_model``: the named pool
has none; ``driver``: no driver group supports the CUDA version), the team's
budget (``budget``: the verdict of :mod:`pools.capacity.budget_gate`), the free cards in the
window (``free_cards``: usable − the most held at once, with the cards down or drained and under
maintenance named apart, as they are not counted), the shape (``shape``: cards per node and
NVLink domain, :func:`pools.capacity.placement.fit_groups`), and the team's ceiling
(``ceiling``: the most cards the team may hold at once, when one is set). Reasons of the card
count and the shape are those of the target with most free cards. ``approvable_now`` is true
when one target passes all of them (a budget that only warns or leaves it to a pool admin does
not block; one that refuses does).

**When** (:func:`earliest_start`): the earliest start from the asked one of a window as long as
the asked one where the exact count is free *and* the shape fits, per eligible target. Free
cards over a window only grow when a holding allocation ends inside it, so the candidates are
the asked start and the ends of holding allocations after it (the sweep of
:func:`pools.capacity.availability.earliest_free_start`); the count for every candidate comes
from one sweep over the held step function with a sliding-window maximum (``O(n log n)`` for
``n`` allocations), the shape is fitted only where the count passes, at most
:data:`SHAPE_CANDIDATES` times per option.

**Where instead** (:func:`where_instead`): other GPU models of the same capability class
(``card_class``: data-centre or consumer) with at least the memory per card, in any pool of the
workload's scheduler, asking for the sizing estimate's card count on that model for inference
(when an estimate is given; models it has no row for are left out) and the same count
otherwise; the same model in another pool; for a shape that does not fit, the same cards split
over more nodes, and the largest shape that fits; fewer cards (those free now); and, when no
pool has the model at all, capacity to add. Each with its free cards, earliest start, price
(the rate card's reserved card-hour price × cards × hours of the window) and the request
fields that make the change (``prefill``). An option with fewer usable cards than it would
ask for is left out: no end of a holding allocation ever frees them, so it is no alternative
(the *when* of a target says "never" for it instead).

**Who holds it** (:func:`holders`): the holding allocations of the target in the window, and
from when more cards are free. A pool admin sees teams, allocations and their ends; anyone
else sees their own team's allocations and the most of them held at once (``own_held_peak``,
by the peak rule of ``held_peak``, not their sum over the window) and, for other teams, only
how many teams, how many cards and when those end: never another team's name, slug,
allocation id or cost.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from typing import Any, NamedTuple

from pools.capacity.arithmetic import card_hours, peak_cards, usable_cards
from pools.capacity.placement import (
    AwayNode,
    FitResult,
    NodeGroup,
    Shape,
    away_reason,
    fit_groups,
    take_cards,
    with_away,
)
from pools.classes.rules import ClassRule
from pools.web.numbers import grouped

HORIZON = timedelta(days=366)  # how far "when" looks: a request lasts at most a year
SHAPE_CANDIDATES = 64  # shape fits tried per option before "when" gives up (None)
FREES_SHOWN = 5  # "from when more cards are free" entries in "who holds it"
ALTERNATIVES_SHOWN = 8

WHY_ORDER = (
    "kind",
    "class",
    "model",
    "pool_model",
    "driver",
    "budget",
    "free_cards",
    "shape",
    "ceiling",
)
BLOCKING_BUDGET = "refuse"


# -- the facts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFacts:
    """A catalogue GPU model: ``memory_gib`` per card, ``card_class`` its capability class
    (``datacentre`` / ``consumer``)."""

    slug: str
    name: str
    memory_gib: Decimal
    card_class: str


MAINTENANCE_HOLD = "Maintenance: "  # how a maintenance window's hold is named, then its title


class HoldFacts(NamedTuple):
    """A holding allocation: ``cards`` over ``[starts_at, ends_at)`` (aware), of team
    ``team_slug``; ``placed`` its cards as ``(hostname, GPU index bit mask)`` pairs (empty:
    granted without a shape, laid as "any N cards"). A tuple: fleets read thousands. An
    occurrence of a recurring reservation (issue 32) is a hold too, unplaced, with
    ``allocation_id`` 0 and ``recurring_id`` the reservation's id; so are the cards a planned
    maintenance window takes away, with ``maintenance_id`` the window's id, no team,
    ``team_name`` :data:`MAINTENANCE_HOLD` + the window's title and ``placed`` its nodes with
    cards of the model, each holding every card (a window names its nodes)."""

    allocation_id: int
    team_slug: str
    team_name: str
    cards: int
    starts_at: datetime
    ends_at: datetime
    placed: tuple[tuple[str, int], ...] = ()
    recurring_id: int | None = None
    maintenance_id: int | None = None


@dataclass(frozen=True)
class CardCounts:
    """A pool × model's cards by state: ``schedulable`` (node up, card whole and not in error,
    any driver), ``on_driver`` (of those, on a driver supporting the CUDA version asked),
    ``down`` / ``drained`` / ``maintenance`` (cards on nodes in those states), ``error`` and
    ``mig`` (on up nodes, cards in error or cut into MIG slices)."""

    schedulable: int
    on_driver: int
    down: int = 0
    drained: int = 0
    maintenance: int = 0
    error: int = 0
    mig: int = 0


@dataclass(frozen=True)
class OptionFacts:
    """One pool × GPU model: its scheduler and over-commit ratio, cards, the holding
    allocations overlapping ``[ask start, ask start + horizon + length)``, its schedulable nodes
    on a usable driver as groups (every card free; ``None`` when not read: no shape asked) and
    the reserved price per card-hour (``None``: the rate card has none). ``burst``: a burst pool,
    which an ask lands on or is pointed to only when it names it (as
    :func:`pools.capacity.availability.request_options`: rented capacity is for the elastic
    scale-up of teams that opted in, issue 35)."""

    pool_slug: str
    pool_name: str
    scheduler: str
    overcommit_ratio: Decimal
    model: ModelFacts
    cards: CardCounts
    holds: tuple[HoldFacts, ...] = ()
    groups: tuple[NodeGroup, ...] | None = None
    price_per_card_hour: Decimal | None = None
    currency: str | None = None
    burst: bool = False

    @property
    def usable(self) -> int:
        """Cards that may be promised: ⌊cards on a usable driver × over-commit⌋."""
        return usable_cards(self.cards.on_driver, self.overcommit_ratio)

    @property
    def key(self) -> tuple[str, str]:
        return (self.pool_slug, self.model.slug)

    @cached_property
    def timeline(self) -> tuple[list[datetime], list[int]]:
        """The cards held as a step function: ``levels[i]`` held from ``times[i]`` until
        ``times[i + 1]`` (0 before the first), all changes at one instant summed (so an end
        and a start at one instant never count both: half-open windows). Built once."""
        deltas: dict[datetime, int] = {}
        for hold in self.holds:
            deltas[hold.starts_at] = deltas.get(hold.starts_at, 0) + hold.cards
            deltas[hold.ends_at] = deltas.get(hold.ends_at, 0) - hold.cards
        times = sorted(deltas)
        levels, running = [], 0
        for t in times:
            running += deltas[t]
            levels.append(running)
        return times, levels

    def peak(self, start: datetime, end: datetime) -> int:
        """The most cards held at once in ``[start, end)``: the highest level of the segments
        that meet it (:attr:`timeline`; the sweep of
        :func:`pools.capacity.arithmetic.peak_cards` in ``O(log n + k)``)."""
        times, levels = self.timeline
        first = bisect.bisect_right(times, start) - 1
        stop = bisect.bisect_left(times, end)
        if stop <= max(first, 0):
            return max(levels[first], 0) if first >= 0 else 0
        return max(0, *levels[max(first, 0) : stop])


@dataclass(frozen=True)
class Ask:
    """What is asked: ``cards`` (and ``shape``, or ``None`` for any cards) of ``model_slug``
    (or any model with ``min_memory_gib``) in ``pool_slug`` (or any pool running
    ``scheduler``) over ``[start, end)`` (aware), for team ``team_slug``. ``sizing_cards``:
    an inference sizing estimate's card count per model slug (``None``: no estimate).
    ``model_memory_gib`` / ``model_card_class``: the named model's, which alternatives must
    match (also when no pool has a card of it). ``workload_class``: the rule of the request's
    class (``None``: unclassed), which only options of models it permits may take;
    ``class_may_use``: the names of the fleet's models it permits, for the ``class`` reason."""

    team_slug: str
    workload_kind: str
    scheduler: str
    cards: int
    start: datetime
    end: datetime
    pool_slug: str | None = None
    pool_name: str | None = None
    pool_scheduler: str | None = None
    model_slug: str | None = None
    model_name: str | None = None
    model_memory_gib: Decimal | None = None
    model_card_class: str | None = None
    min_memory_gib: Decimal | None = None
    cuda: str | None = None
    shape: Shape | None = None
    sizing_cards: Mapping[str, int] | None = None
    workload_class: ClassRule | None = None
    class_may_use: tuple[str, ...] = ()

    def permits(self, model: ModelFacts) -> bool:
        """Whether the ask's class may run on ``model`` (always, unclassed)."""
        rule = self.workload_class
        return rule is None or rule.permits(model_slug=model.slug, card_class=model.card_class)

    @property
    def length(self) -> timedelta:
        return self.end - self.start


@dataclass(frozen=True)
class BudgetFacts:
    """The team's budget verdict on the ask: ``warn``, ``needs_admin`` or ``refuse``."""

    enforcement: str
    reason: str


@dataclass(frozen=True)
class Viewer:
    """Who reads the answer: ``pool_admin`` sees every team; others their own team's
    allocations (when ``member_of_team``) and, for other teams, counts and ends only."""

    pool_admin: bool
    member_of_team: bool = True


@dataclass(frozen=True)
class TeamCeiling:
    """The most cards the team may hold at once (``cards``) and the most it holds at once in
    the window (``held_peak``)."""

    cards: int
    held_peak: int


# -- the answer --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reason:
    code: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Explanation:
    approvable_now: bool
    summary: str
    why_not: list[Reason]
    when: list[dict[str, Any]]
    where_instead: list[dict[str, Any]]
    holders: dict[str, Any] | None
    overrides: list[str] = field(default_factory=list)  # the team's in force there, in words

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: datetimes as ISO 8601 (UTC), Decimals as strings."""
        return _plain(
            {
                "approvable_now": self.approvable_now,
                "summary": self.summary,
                "why_not": [{"code": r.code, "text": r.text, "data": r.data} for r in self.why_not],
                "when": self.when,
                "where_instead": self.where_instead,
                "holders": self.holders,
                "overrides": self.overrides,
            }
        )


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, Decimal):
        return str(value)
    return value


# -- arithmetic over one option ----------------------------------------------------------------


def free_in(option: OptionFacts, start: datetime, end: datetime) -> int:
    """Cards of ``option`` free for the whole window ``[start, end)``: usable − peak held."""
    return max(0, option.usable - option.peak(start, end))


def fit_in(option: OptionFacts, shape: Shape, start: datetime, end: datetime) -> FitResult:
    """Whether ``shape`` fits on the option's nodes free for the whole window: the cards that
    placed holding allocations hold in it taken off node by node (a maintenance window's nodes
    whole), then the most that unplaced ones hold at once laid as "any N cards" by best fit
    (the rule of :func:`pools.capacity.shapes.pool_free_groups`); a refusal names the nodes
    away (:func:`pools.capacity.placement.with_away`)."""
    assert option.groups is not None, "nodes not read for this option"
    held: dict[str, int] = {}
    unplaced: list[tuple[datetime, datetime, int]] = []
    inside = [h for h in option.holds if h.starts_at < end and h.ends_at > start]
    for hold in inside:
        if not hold.placed:
            unplaced.append((hold.starts_at, hold.ends_at, hold.cards))
        for host, mask in hold.placed:
            held[host] = held.get(host, 0) | mask
    names = {name for g in option.groups for name in g.names}
    taken = {host: _indices(mask) for host, mask in held.items() if host in names}
    groups = take_cards(option.groups, taken) if taken else list(option.groups)
    fit = fit_groups(_lay_unplaced(groups, peak_cards(unplaced, start, end)), shape)
    return with_away(fit, (a for a in _away_nodes(inside) if a.node in names))


def _away_nodes(holds: Iterable[HoldFacts]) -> Iterator[AwayNode]:
    """The nodes the maintenance windows among ``holds`` take out (their placed hosts)."""
    for hold in holds:
        if hold.maintenance_id is not None:
            title = hold.team_name.removeprefix(MAINTENANCE_HOLD)
            for host, _ in hold.placed:
                yield AwayNode(host, hold.maintenance_id, title, hold.ends_at)


def _indices(mask: int) -> frozenset[int]:
    return frozenset(i for i in range(mask.bit_length()) if mask >> i & 1)


def _lay_unplaced(groups: list[NodeGroup], cards: int) -> list[NodeGroup]:
    """``groups`` less ``cards`` cards laid by best fit ("any N"); none left if they do not fit
    (as :func:`pools.capacity.shapes.lay_unplaced`)."""
    if cards <= 0:
        return groups
    laid = fit_groups(groups, Shape.any(cards))
    if not laid.fits:
        return [NodeGroup(g.names, frozenset(), g.domains) for g in groups]
    return take_cards(groups, {spot.node: spot.gpus for spot in laid.placements})


def earliest_start(
    option: OptionFacts,
    *,
    cards: int,
    shape: Shape | None,
    start: datetime,
    length: timedelta,
    horizon: timedelta = HORIZON,
) -> datetime | None:
    """The earliest start from ``start`` (within ``horizon``) of a window of ``length`` in
    which ``cards`` cards are free and ``shape`` fits (module docstring); ``None`` when none
    does, or the option could never hold them."""
    if cards > option.usable or cards <= 0:
        return None
    last = start + horizon
    candidates = sorted({start, *(h.ends_at for h in option.holds if start < h.ends_at <= last)})
    tried = 0
    peaks = _window_peaks(option, candidates, length)
    for candidate, peak in zip(candidates, peaks, strict=True):
        if option.usable - peak < cards:
            continue
        if shape is None or shape.is_any and option.groups is None:
            return candidate
        tried += 1
        if fit_in(option, shape, candidate, candidate + length).fits:
            return candidate
        if tried >= SHAPE_CANDIDATES:
            return None
    return None


def _window_peaks(
    option: OptionFacts, candidates: Sequence[datetime], length: timedelta
) -> Iterator[int]:
    """For each candidate start ``c`` (ascending), the most cards held at once in
    ``[c, c + length)``, over :attr:`OptionFacts.timeline`: both window ends move forward, so a
    monotonic deque gives each window's maximum in amortised O(1). Lazy: the caller stops at
    the first window that fits."""
    times, levels = option.timeline
    if not times:
        yield from (0 for _ in candidates)
        return
    window: deque[int] = deque()  # indices of segments, levels decreasing
    added = 0
    for c in candidates:
        first = bisect.bisect_right(times, c) - 1  # the segment holding c (-1: before all)
        stop = bisect.bisect_left(times, c + length)  # segments starting before the end
        while added < stop:
            while window and levels[window[-1]] <= levels[added]:
                window.pop()
            window.append(added)
            added += 1
        while window and window[0] < first:
            window.popleft()
        peak = levels[window[0]] if window else 0
        yield max(peak, 0)


# -- the explanation ----------------------------------------------------------------------------


def relevant_model(ask: Ask, model: ModelFacts) -> bool:
    """Whether an option of ``model`` can be part of the answer to ``ask``: a target's model,
    or one an alternative may use (at least the memory asked or the named model's; for a
    named model, of its capability class). The selector reads holdings for these only."""
    if ask.model_slug is not None:
        if model.slug == ask.model_slug:
            return True
        if ask.model_memory_gib is None:
            return False
        return model.memory_gib >= ask.model_memory_gib and model.card_class == ask.model_card_class
    return ask.min_memory_gib is not None and model.memory_gib >= ask.min_memory_gib


def targets(ask: Ask, options: Iterable[OptionFacts]) -> list[OptionFacts]:
    """The options the ask names: its pool (or every pool of its scheduler but a burst pool) ×
    its model (or every model with at least its memory)."""
    return [o for o in options if _is_target(ask, o)]


def _is_target(ask: Ask, option: OptionFacts) -> bool:
    if ask.pool_slug is not None:
        if option.pool_slug != ask.pool_slug:
            return False
    elif option.scheduler != ask.scheduler or option.burst:
        return False
    if ask.model_slug is not None:
        return option.model.slug == ask.model_slug
    return ask.min_memory_gib is not None and option.model.memory_gib >= ask.min_memory_gib


def _eligible(ask: Ask, option: OptionFacts) -> bool:
    return (
        option.scheduler == ask.scheduler
        and option.cards.on_driver > 0
        and ask.permits(option.model)
        and (not option.burst or option.pool_slug == ask.pool_slug)
    )


@dataclass
class _Check:
    """One target checked against the ask in its window."""

    option: OptionFacts
    free: int
    fit: FitResult | None

    @property
    def fits(self) -> bool:
        return self.fit is None or self.fit.fits


def _check(ask: Ask, option: OptionFacts) -> _Check:
    free = free_in(option, ask.start, ask.end)
    fit = None
    if ask.shape is not None and option.groups is not None and free >= ask.cards:
        fit = fit_in(option, ask.shape, ask.start, ask.end)
    return _Check(option, free, fit)


def explain(
    ask: Ask,
    options: Sequence[OptionFacts],
    *,
    viewer: Viewer,
    budget: BudgetFacts | None = None,
    ceiling: TeamCeiling | None = None,
    now: datetime | None = None,
) -> Explanation:
    """The whole answer for ``ask`` over ``options`` (every pool × model the portal has)."""
    aimed = targets(ask, options)
    eligible = [o for o in aimed if _eligible(ask, o)]
    checks = sorted(
        (_check(ask, o) for o in eligible),
        key=lambda c: (not (c.free >= ask.cards and c.fits), -c.free, c.option.key),
    )
    best = checks[0] if checks else None
    reasons = _eligibility(ask, aimed, options)
    budget_blocks = budget is not None and budget.enforcement == BLOCKING_BUDGET
    if budget is not None:
        reasons.append(Reason("budget", budget.reason, {"enforcement": budget.enforcement}))
    if best is not None:
        reasons.extend(_capacity_reasons(ask, best))
    over_ceiling = ceiling is not None and ceiling.held_peak + ask.cards > ceiling.cards
    if over_ceiling:
        assert ceiling is not None
        reasons.append(
            Reason(
                "ceiling",
                f"the team may hold {ceiling.cards} cards at once and already holds "
                f"{ceiling.held_peak} in that window",
                {"ceiling": ceiling.cards, "held": ceiling.held_peak, "asked": ask.cards},
            )
        )
    placeable = best is not None and best.free >= ask.cards and best.fits
    approvable = placeable and not budget_blocks and not over_ceiling
    when = [_when_row(ask, c.option, c.free) for c in checks]
    instead = where_instead(ask, options, checks, aimed)
    holding = holders(ask, best.option, viewer=viewer) if best is not None else None
    return Explanation(
        approvable_now=approvable,
        summary=_summary(ask, approvable, reasons, when, instead),
        why_not=sorted(reasons, key=lambda r: WHY_ORDER.index(r.code)),
        when=when,
        where_instead=instead,
        holders=holding,
    )


def _eligibility(
    ask: Ask, aimed: Sequence[OptionFacts], options: Sequence[OptionFacts]
) -> list[Reason]:
    reasons = []
    if ask.pool_slug is not None and ask.pool_scheduler not in (None, ask.scheduler):
        reasons.append(
            Reason(
                "kind",
                f"{ask.pool_name} runs {ask.pool_scheduler}, not {ask.workload_kind} work "
                f"({ask.scheduler})",
                {"pool": ask.pool_slug, "scheduler": ask.pool_scheduler},
            )
        )
    refused = _class_refusal(ask, aimed)
    if refused is not None:
        return [*reasons, refused]
    if ask.model_slug is not None:
        anywhere = [
            o
            for o in options
            if o.model.slug == ask.model_slug and o.scheduler == ask.scheduler
            and o.cards.schedulable
        ]  # fmt: skip
        if not anywhere:
            reasons.append(
                Reason(
                    "model",
                    f"no {ask.scheduler} pool has a schedulable {ask.model_name} card",
                    {"gpu_model": ask.model_slug},
                )
            )
        elif ask.pool_slug is not None and not any(o.cards.schedulable for o in aimed):
            reasons.append(_no_cards_in_pool(ask, aimed))
    elif not aimed:
        reasons.append(
            Reason(
                "model",
                f"no GPU model with at least {ask.min_memory_gib} GiB in the {ask.scheduler} pools",
                {"min_memory_gib": ask.min_memory_gib},
            )
        )
    if ask.cuda and any(o.cards.schedulable for o in aimed):
        if not any(o.cards.on_driver for o in aimed):
            reasons.append(
                Reason(
                    "driver",
                    f"no driver group of {_where(ask)} supports CUDA {ask.cuda}",
                    {"cuda_version": ask.cuda},
                )
            )
    if not reasons and not any(_eligible(ask, o) for o in aimed):
        # e.g. every card of the models with enough memory on a node that is down
        reasons.append(
            Reason(
                "model",
                f"{_where(ask)} {'has' if ask.pool_name else 'have'} no schedulable card of "
                f"{ask.model_name or f'a model with at least {ask.min_memory_gib} GiB'}",
                {"gpu_model": ask.model_slug, "min_memory_gib": ask.min_memory_gib},
            )
        )
    return reasons


def _class_refusal(ask: Ask, aimed: Sequence[OptionFacts]) -> Reason | None:
    """The ``class`` reason: the ask's class may not run on the named model, or on any model
    of the targets; it names the models of the workload's scheduler's pools the class may use
    (:attr:`Ask.class_may_use`). ``None`` when the class permits the ask's model(s)."""
    rule = ask.workload_class
    if rule is None:
        return None
    if ask.model_slug is not None:
        if ask.model_name is None or ask.model_card_class is None:
            return None
        named = ModelFacts(ask.model_slug, ask.model_name, Decimal(0), ask.model_card_class)
        if ask.permits(named):
            return None
        model_name, card_class = ask.model_name, ask.model_card_class
    else:
        if not aimed or any(ask.permits(o.model) for o in aimed):
            return None
        model_name, card_class = aimed[0].model.name, aimed[0].model.card_class
    allowed = list(ask.class_may_use)
    text = rule.refusal(model_name=model_name, card_class=card_class, allowed=allowed)
    return Reason("class", text, {"workload_class": rule.slug, "may_use": allowed})


def _no_cards_in_pool(ask: Ask, aimed: Sequence[OptionFacts]) -> Reason:
    counts = aimed[0].cards if aimed else CardCounts(0, 0)
    parts = []
    for n, what in (
        (counts.down + counts.drained, "down or drained"),
        (counts.maintenance, "under maintenance"),
        (counts.mig, "cut into MIG slices"),
        (counts.error, "in error"),
    ):
        if n:
            parts.append(f"{n} {what}")
    text = f"{ask.pool_name} has no schedulable {ask.model_name} card"
    if parts:
        text += f" ({', '.join(parts)})"
    return Reason(
        "pool_model",
        text,
        {"pool": ask.pool_slug, "gpu_model": ask.model_slug, **_state_data(counts)},
    )


def _state_data(counts: CardCounts) -> dict[str, int]:
    return {
        "down_or_drained": counts.down + counts.drained,
        "maintenance": counts.maintenance,
        "mig": counts.mig,
        "error": counts.error,
    }


def _where(ask: Ask) -> str:
    return ask.pool_name or f"the {ask.scheduler} pools"


def _capacity_reasons(ask: Ask, check: _Check) -> list[Reason]:
    option = check.option
    reasons = []
    counts = option.cards
    if check.free < ask.cards:
        held = option.peak(ask.start, ask.end)
        inside = [h for h in option.holds if h.starts_at < ask.end and h.ends_at > ask.start]
        teams = {h.team_slug for h in inside if h.maintenance_id is None}
        away = peak_cards(
            [(h.starts_at, h.ends_at, h.cards) for h in inside if h.maintenance_id is not None],
            ask.start,
            ask.end,
        )
        text = (
            f"only {check.free} of {option.usable} {option.model.name} cards in "
            f"{option.pool_name} are free for the whole window: {held} held at the peak "
            f"by {len(teams)} team{'s' if len(teams) != 1 else ''}"
            if held
            else f"all {option.usable} {option.model.name} cards in {option.pool_name} are "
            f"free for the whole window, fewer than the {ask.cards} asked"
        )
        if away:
            text += f" and maintenance windows ({away} cards away for maintenance"
            said = away_reason(_away_nodes(inside))
            text += f": {said})" if said else ")"
        out = counts.down + counts.drained
        uncounted = [
            f"{n} {what}"
            for n, what in ((out, "down or drained"), (counts.maintenance, "under maintenance"))
            if n
        ]
        if uncounted:
            text += f"; not counted: {', '.join(uncounted)}"
        reasons.append(
            Reason(
                "free_cards",
                text,
                {
                    "pool": option.pool_slug,
                    "gpu_model": option.model.slug,
                    "free": check.free,
                    "usable": option.usable,
                    "held_peak": held,
                    "away_for_maintenance": away,
                    "requested": ask.cards,
                    **_state_data(counts),
                },
            )
        )
    if check.fit is not None and not check.fit.fits:
        fit = check.fit
        reasons.append(
            Reason(
                "shape",
                f"in {option.pool_name}: {fit.message()}",
                {
                    "pool": option.pool_slug,
                    "gpu_model": option.model.slug,
                    "shape": ask.shape.describe() if ask.shape else None,
                    "largest_shape": fit.largest.describe() if fit.largest else None,
                },
            )
        )
    return reasons


def _when_row(ask: Ask, option: OptionFacts, free: int) -> dict[str, Any]:
    at = earliest_start(
        option, cards=ask.cards, shape=ask.shape, start=ask.start, length=ask.length
    )
    return {
        "pool": option.pool_slug,
        "pool_name": option.pool_name,
        "gpu_model": option.model.slug,
        "gpu_model_name": option.model.name,
        "free": free,
        "usable": option.usable,
        "earliest_start": at,
        "text": _when_text(ask.cards, option, at, ask.start),
    }


def _when_text(cards: int, option: OptionFacts, at: datetime | None, start: datetime) -> str:
    what = f"{cards} {option.model.name} in {option.pool_name}"
    if at is None:
        if cards > option.usable:
            return f"{what}: never (the pool has {option.usable} usable)"
        return f"{what}: not within a year"
    if at == start:
        return f"{what}: free from the asked start"
    return f"{what}: from {stamp(at)}"


def stamp(at: datetime) -> str:
    """``"9 Dec 14:00 UTC"``: the one way the explanation writes an instant."""
    utc = at.astimezone(UTC)
    return f"{utc.day} {utc:%b %Y %H:%M} UTC"


# -- where instead ------------------------------------------------------------------------------


def where_instead(
    ask: Ask,
    options: Sequence[OptionFacts],
    checks: Sequence[_Check],
    aimed: Sequence[OptionFacts],
) -> list[dict[str, Any]]:
    """Alternatives (module docstring), those that fit now first, then by earliest start and
    price; at most :data:`ALTERNATIVES_SHOWN`."""
    rows: list[dict[str, Any]] = []
    rows.extend(_other_options(ask, options, aimed))
    best = checks[0] if checks else None
    if best is not None:
        rows.extend(_reshaped(ask, best))
    if not any(o.cards.schedulable for o in aimed) and ask.model_slug is not None:
        rows.append(
            {
                "kind": "growth",
                "pool": ask.pool_slug,
                "gpu_model": ask.model_slug,
                "card_count": ask.cards,
                "text": f"ask for {ask.cards} {ask.model_name} as capacity to add: a pool "
                "admin plans it (procurement or a pool's expansion)",
                "prefill": {"kind": "growth"},
            }
        )
    rows.sort(key=_rank)
    return rows[:ALTERNATIVES_SHOWN]


def _rank(row: dict[str, Any]) -> tuple:
    at = row.get("earliest_start")
    return (
        row["kind"] == "growth",
        not row.get("fits_now", False),
        at is None,
        at or datetime.max.replace(tzinfo=UTC),
        row.get("price", {}).get("window_total") is None,
        Decimal(row.get("price", {}).get("window_total") or 0),
    )


def _reference(ask: Ask, aimed: Sequence[OptionFacts]) -> tuple[Decimal | None, set[str]]:
    """The memory per card and capability classes an alternative model must match."""
    if ask.model_slug is not None:
        if ask.model_memory_gib is None or ask.model_card_class is None:
            return None, set()
        return ask.model_memory_gib, {ask.model_card_class}
    return ask.min_memory_gib, {o.model.card_class for o in aimed}


def _other_options(
    ask: Ask, options: Sequence[OptionFacts], aimed: Sequence[OptionFacts]
) -> list[dict[str, Any]]:
    memory, classes = _reference(ask, aimed)
    aimed_keys = {o.key for o in aimed}
    rows = []
    for option in options:
        if option.key in aimed_keys or not _eligible(ask, option):
            continue
        same_model = ask.model_slug is not None and option.model.slug == ask.model_slug
        if not same_model:
            if memory is None or option.model.memory_gib < memory:
                continue
            if option.model.card_class not in classes:
                continue
        cards = ask.cards
        shape = ask.shape
        if ask.sizing_cards is not None and not same_model:
            if option.model.slug not in ask.sizing_cards:
                continue
            cards = ask.sizing_cards[option.model.slug]
            if shape is not None and shape.total_cards != cards:
                shape = None
        if cards > option.usable:  # never free, whatever ends: no alternative
            continue
        rows.append(
            _alternative(
                ask,
                option,
                kind="other_pool" if same_model else "other_model",
                cards=cards,
                shape=shape,
            )
        )
    return rows


def _alternative(
    ask: Ask, option: OptionFacts, *, kind: str, cards: int, shape: Shape | None
) -> dict[str, Any]:
    free = free_in(option, ask.start, ask.end)
    fits = free >= cards
    if fits and shape is not None and option.groups is not None:
        fits = fit_in(option, shape, ask.start, ask.end).fits
    at = earliest_start(option, cards=cards, shape=shape, start=ask.start, length=ask.length)
    price = _price(option, cards, ask)
    what = f"{cards} {option.model.name} in {option.pool_name}"
    if fits:
        when = "free now"
    elif at is not None:
        when = f"from {stamp(at)}"
    else:
        when = "not within a year"
    text = f"{what}: {free} free, {when}"
    if price["window_total"] is not None:
        text += f", {grouped(price['window_total'], 2)} {price['currency']} for the window"
    prefill: dict[str, Any] = {
        "pool": option.pool_slug,
        "gpu_model": option.model.slug,
        "card_count": cards,
        "cards_per_node": shape.cards_per_node if shape is not None else None,
        "node_count": shape.nodes if shape is not None else None,
    }
    if not fits and at is not None:
        prefill.update(starts_at=at, ends_at=at + ask.length)
    return {
        "kind": kind,
        "pool": option.pool_slug,
        "pool_name": option.pool_name,
        "gpu_model": option.model.slug,
        "gpu_model_name": option.model.name,
        "card_count": cards,
        "shape": shape.describe() if shape is not None else None,
        "free": free,
        "fits_now": fits,
        "earliest_start": at,
        "price": price,
        "text": text,
        "prefill": prefill,
    }


def _price(option: OptionFacts, cards: int, ask: Ask) -> dict[str, Any]:
    """The rate card's reserved price per card-hour and for ``cards`` over the window
    (cards × hours × price, to the cent); ``None`` without a price."""
    if option.price_per_card_hour is None:
        return {"per_card_hour": None, "currency": None, "window_total": None}
    total = (card_hours(cards, ask.start, ask.end) * option.price_per_card_hour).quantize(
        Decimal("0.01")
    )
    return {
        "per_card_hour": option.price_per_card_hour,
        "currency": option.currency,
        "window_total": total,
    }


def _reshaped(ask: Ask, check: _Check) -> list[dict[str, Any]]:
    """The asked option with a split shape (same cards over more nodes), its largest fitting
    shape, or (no shape) the cards free now."""
    option = check.option
    rows = []
    if ask.shape is not None and check.fit is not None and not check.fit.fits:
        shape = ask.shape
        per_node = shape.cards_per_node or 0
        for smaller in range(per_node - 1, 0, -1):
            if shape.total_cards % smaller:
                continue
            split = Shape(
                cards_per_node=smaller,
                nodes=shape.total_cards // smaller,
                one_nvlink_domain=shape.one_nvlink_domain and smaller > 1,
                shared_nodes=shape.shared_nodes,
            )
            if fit_in(option, split, ask.start, ask.end).fits:
                rows.append(_alternative(ask, option, kind="split_shape", cards=ask.cards,
                                         shape=split))  # fmt: skip
                break
        largest = check.fit.largest
        if largest is not None and largest.total_cards < ask.cards:
            rows.append(
                _alternative(
                    ask, option, kind="smaller_shape", cards=largest.total_cards, shape=largest
                )  # fmt: skip
            )
    elif ask.shape is None and 0 < check.free < ask.cards:
        rows.append(_alternative(ask, option, kind="fewer_cards", cards=check.free, shape=None))
    return rows


# -- who holds it --------------------------------------------------------------------------------


def holders(ask: Ask, option: OptionFacts, *, viewer: Viewer) -> dict[str, Any]:
    """Who holds ``option``'s cards in the ask's window, and from when more are free
    (module docstring: a pool admin sees teams and allocations, others counts and ends)."""
    inside = sorted(
        (h for h in option.holds if h.starts_at < ask.end and h.ends_at > ask.start),
        key=lambda h: (h.ends_at, h.allocation_id),
    )
    frees = _frees(option, ask)
    own = [h for h in inside if h.team_slug == ask.team_slug]
    others = [h for h in inside if h.team_slug != ask.team_slug]
    answer: dict[str, Any] = {
        "pool": option.pool_slug,
        "pool_name": option.pool_name,
        "gpu_model": option.model.slug,
        "gpu_model_name": option.model.name,
        "held_peak": option.peak(ask.start, ask.end),
        "frees": frees,
    }
    if viewer.pool_admin:
        answer["allocations"] = [_hold_row(h) for h in inside]
    else:
        answer["own_allocations"] = [_hold_row(h) for h in own] if viewer.member_of_team else []
        answer["own_held_peak"] = _own_peak(own, ask) if viewer.member_of_team else 0
        answer["other_teams"] = len({h.team_slug for h in others if h.maintenance_id is None})
        answer["away_for_maintenance"] = sum(h.cards for h in others if h.maintenance_id)
        answer["other_ends"] = [{"cards": h.cards, "ends_at": h.ends_at} for h in others]
        answer["other_ends_text"] = "; ".join(f"{h.cards} at {stamp(h.ends_at)}" for h in others)
    answer["text"] = _holders_text(answer, others, frees, viewer)
    return answer


def _own_peak(own: Sequence[HoldFacts], ask: Ask) -> int:
    """The most cards the team holds at once in the ask's window (the rule of
    :func:`pools.capacity.arithmetic.peak_cards`, as ``held_peak``): five daily occurrences of 8
    cards in a week's window hold 8 at any instant, not 40."""
    return peak_cards([(h.starts_at, h.ends_at, h.cards) for h in own], ask.start, ask.end)


def _hold_row(hold: HoldFacts) -> dict[str, Any]:
    row = {
        "allocation": hold.allocation_id or None,
        "team": hold.team_slug,
        "team_name": hold.team_name,
        "cards": hold.cards,
        "starts_at": hold.starts_at,
        "ends_at": hold.ends_at,
        "ends_text": stamp(hold.ends_at),
    }
    if hold.recurring_id is not None:  # an occurrence of a recurring reservation
        row["recurring_reservation"] = hold.recurring_id
    if hold.maintenance_id is not None:  # cards away for a maintenance window
        row["maintenance_window"] = hold.maintenance_id
    return row


def _frees(option: OptionFacts, ask: Ask) -> list[dict[str, Any]]:
    """From each end of a holding allocation inside the window, the cards free from then to
    the window's end, where that count grows: at most :data:`FREES_SHOWN`."""
    ends = sorted({h.ends_at for h in option.holds if ask.start < h.ends_at < ask.end})
    rows = []
    last = free_in(option, ask.start, ask.end)
    for at in ends:
        free = free_in(option, at, ask.end)
        if free > last:
            rows.append({"at": at, "free": free})
            last = free
            if len(rows) == FREES_SHOWN:
                break
    return rows


def _holders_text(
    answer: dict[str, Any], others: Sequence[HoldFacts], frees: list[dict[str, Any]],
    viewer: Viewer,
) -> str:  # fmt: skip
    if viewer.pool_admin:
        teams = sorted({(a["team_name"]) for a in answer["allocations"]})
        text = (
            f"{answer['held_peak']} held at the peak by {', '.join(teams)}"
            if teams
            else "nothing held in that window"
        )
    else:
        n = answer["other_teams"]
        own = answer["own_held_peak"]
        text = f"held by {n} other team{'s' if n != 1 else ''}" if n else "no other team holds any"
        if own:
            text += f"; your team holds {own} at its peak"
    if frees:
        text += f"; {frees[0]['free']} free from {stamp(frees[0]['at'])}"
    return text


def _budget_allows(reason: Reason) -> bool:
    """Whether ``reason`` is a budget verdict that does not block (warn, needs an admin)."""
    return reason.code == "budget" and reason.data.get("enforcement") != BLOCKING_BUDGET


def _summary(
    ask: Ask,
    approvable: bool,
    reasons: Sequence[Reason],
    when: Sequence[dict[str, Any]],
    instead: Sequence[dict[str, Any]],
) -> str:
    if approvable:
        return f"{ask.cards} card{'s' if ask.cards != 1 else ''} can be approved as asked."
    # the first reason that blocks: a budget that warns or leaves it to a pool admin does not
    # (it stays first in ``why_not``), so it is named only when nothing else is
    blocking = [r for r in reasons if not _budget_allows(r)] or list(reasons)
    first = min(blocking, key=lambda r: WHY_ORDER.index(r.code)).text if blocking else ""
    # a reason may be a sentence with its own full stop (the budget check's): one stop only
    text = f"Cannot be approved as asked: {first.rstrip('.')}."
    dated = [w for w in when if w["earliest_start"] is not None]
    if dated:
        soonest = min(dated, key=lambda w: w["earliest_start"])
        text += f" Fits {soonest['text'].split(': ', 1)[1]} ({soonest['pool_name']})."
    now = [r for r in instead if r.get("fits_now")]
    if now:
        text += f" Instead: {now[0]['text']}."
    return text
