"""Fit a placement shape onto the free cards of a pool's nodes, and measure stranded capacity.

Pure functions: no Django, no ORM, no I/O. The caller says, per node, which cards (GPU indices)
are free for the *whole* window asked and, where known, the node's NVLink domains
(:mod:`pools.inventory.topology`); this module decides where a shape fits.

**Shape** (:class:`Shape`): ``nodes`` nodes with ``cards_per_node`` cards on each (one group per
node, as Slurm's ``--nodes=N --gpus-per-node=C`` asks), optionally with each node's cards inside
one NVLink domain (``one_nvlink_domain``: a tensor-parallel group must not cross PCIe); or
``Shape.any(n)``: n cards wherever they are. Written ``nodes × cards`` in messages, always with
the words ("1 node × 8 cards"), because both orders are in use.

**Fit** (:func:`fit_shape`): a node can hold a group of C cards when it has C free cards (and, with
``one_nvlink_domain``, C free cards in one domain; unknown domains hold none). Of the nodes that
can, the fitter takes the **best fit**: the one whose group leaves the fewest free cards behind
(in the chosen domain when the domain matters, then on the node), ties broken by node name. Best
fit is the classic bin-packing rule for keeping large holes whole: a 2-card group goes to the
node that has exactly 2 free rather than cutting into an empty 8-card node, so the next 1 × 8
still fits. Inside a node it takes the lowest free indices of the best-fitting domain. Every
choice is ordered, so the same input gives the same placement. The fitter works on groups of
alike nodes (:class:`NodeGroup`: same free cards, same domains), which gives the answer node by
node would at a cost that grows with the kinds of node and the cards asked (issue #20: 2,000
nodes are a few dozen kinds).

**Largest shape that fits** (when the asked one does not): *largest* means the most cards per
node first (what bounds a tensor-parallel degree), then the most nodes, never more cards than
asked in total: C' = the most cards any single node can give (≤ the asked C, in one domain when
asked), N' = how many nodes can each give C' (≤ ⌊asked total / C'⌋, so N' × C' ≤ asked).
:attr:`FitResult.largest` is that N' × C'; :attr:`FitResult.largest_single_node` is 1 × C'.
Worked example (the issue's): 8 free A100 spread 2 per node over 4 nodes, 1 node × 8 cards asked
→ refused; largest 4 nodes × 2 cards, largest on one node 1 × 2.

**Stranded capacity** (:func:`stranded_cards`): common shapes are 1, 2, 4 and 8 cards on one
node in one NVLink domain (:data:`COMMON_CARDS_PER_NODE`). For a shape of C cards a domain with F
free cards serves ⌊F / C⌋ groups; the other F mod C free cards are stranded *for C*. A domain's
own target is the largest common C its size allows (8 on an NVSwitch board, 2 on a bridged pair,
1 on a card alone); the headline ``stranded`` counts, per domain, the free cards outside whole
target groups: an 8-card NVSwitch node with 6 free cards has 6 stranded (no 1 × 8 fits there;
moving the 2 allocated cards would free the node). Cards whose domains are unknown are reported
apart (``unknown_topology``), never counted as usable for a multi-card shape.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from itertools import repeat

COMMON_CARDS_PER_NODE: tuple[int, ...] = (1, 2, 4, 8)


class ShapeError(ValueError):
    """A shape or node description that cannot be used (with the reason)."""


@dataclass(frozen=True)
class Shape:
    """``nodes`` × ``cards_per_node`` (both ≥ 1), or "any" with ``any_cards`` cards anywhere.

    ``shared_nodes``: the ``nodes`` groups are independent (inference replicas, each a TP group)
    and may share a node, as long as each group is on one node (in one domain when asked);
    without it every group needs a node of its own (a multi-node job: one task per node).
    """

    cards_per_node: int | None
    nodes: int | None
    one_nvlink_domain: bool = False
    any_cards: int | None = None
    shared_nodes: bool = False

    def __post_init__(self) -> None:
        if self.any_cards is not None:
            if self.cards_per_node is not None or self.nodes is not None or self.shared_nodes:
                raise ShapeError("an 'any' shape has a card count only")
            _positive("cards", self.any_cards)
            if self.one_nvlink_domain:
                raise ShapeError("'one NVLink domain' needs cards per node, not 'any'")
            return
        if self.cards_per_node is None or self.nodes is None:
            raise ShapeError("a shape needs cards per node and nodes, or 'any' with a card count")
        _positive("cards per node", self.cards_per_node)
        _positive("nodes", self.nodes)

    @classmethod
    def any(cls, cards: int) -> Shape:
        return cls(cards_per_node=None, nodes=None, any_cards=cards)

    @property
    def is_any(self) -> bool:
        return self.any_cards is not None

    @property
    def total_cards(self) -> int:
        if self.any_cards is not None:
            return self.any_cards
        return self.cards_per_node * self.nodes  # type: ignore[operator]

    def describe(self) -> str:
        """``"1 node × 8 cards, one NVLink domain"``, ``"any 8 cards"``."""
        if self.any_cards is not None:
            return f"any {_plural(self.any_cards, 'card')}"
        unit = "group" if self.shared_nodes else "node"
        text = f"{_plural(self.nodes, unit)} × {_plural(self.cards_per_node, 'card')}"  # type: ignore[arg-type]
        if self.nodes != 1:
            text += " each"
        if self.shared_nodes:
            text += " (groups may share a node)"
        return text + (", one NVLink domain" if self.one_nvlink_domain else "")


def shape_from_sizing(*, tensor_parallel: int, replicas: int, training: bool = False) -> Shape:
    """The shape a sizing estimate implies: ``replicas`` groups of ``tensor_parallel`` cards.

    A TP group all-reduces every layer, which DESIGN.md's sizing notes (after seed 004) call
    cheap over NVLink and expensive over PCIe, so TP > 1 asks for one NVLink domain per group.
    Inference replicas are independent and may share a node; a training job's groups are one
    task per node (``training``). TP = 1 inference is ``any`` ``replicas`` cards.
    """
    _positive("tensor parallel degree", tensor_parallel)
    _positive("replicas", replicas)
    if tensor_parallel == 1 and not training:
        return Shape.any(replicas)
    return Shape(
        cards_per_node=tensor_parallel,
        nodes=replicas,
        one_nvlink_domain=tensor_parallel > 1,
        shared_nodes=not training,
    )


@dataclass(frozen=True)
class NodeFree:
    """One node: ``free`` the GPU indices free for the whole window; ``domains`` its NVLink
    domains (every card of the node in one; ``None`` = unknown)."""

    name: str
    free: frozenset[int]
    domains: tuple[frozenset[int], ...] | None = None

    def __post_init__(self) -> None:
        _check_cards(self.name, self.free, self.domains)

    @classmethod
    def _trusted(
        cls, name: str, free: frozenset[int], domains: tuple[frozenset[int], ...] | None
    ) -> NodeFree:
        """Built from a checked :class:`NodeCards` (``free`` a subset of its cards): skips
        the checks, which would otherwise dominate a 2,000-node shape check."""
        node = object.__new__(cls)
        node.__dict__.update(name=name, free=free, domains=domains)
        return node


@dataclass(frozen=True)
class Placement:
    """Cards chosen on one node."""

    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class FitResult:
    """``fits``; ``placements`` (one per node used, in choice order) when it does; else
    ``largest`` / ``largest_single_node`` (``None`` when not a card fits) and ``reason``."""

    shape: Shape
    fits: bool
    placements: tuple[Placement, ...] = ()
    largest: Shape | None = None
    largest_single_node: Shape | None = None
    reason: str = ""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(p.node for p in self.placements)

    def message(self) -> str:
        """One sentence for a person: what fits, or why not and the largest that does."""
        if self.fits:
            where = ", ".join(
                f"{p.node} (GPU {', '.join(map(str, p.gpus))})" for p in self.placements
            )
            return f"{self.shape.describe()} fits: {where}."
        text = f"{self.shape.describe()} does not fit: {self.reason}."
        if self.largest is None:
            return text + " No shape fits."
        text += f" The largest shape that does is {self.largest.describe()}"
        if self.largest_single_node and self.largest_single_node != self.largest:
            text += f" (on one node: {self.largest_single_node.describe()})"
        return text + "."


@dataclass(frozen=True)
class AwayNode:
    """A node a maintenance window takes out of a window asked for: ``node`` its host name,
    ``window_id`` / ``title`` the maintenance window's, ``until`` when that window ends
    (aware). A node away any part of the window asked has no card free for the whole of it."""

    node: str
    window_id: int
    title: str
    until: datetime


AWAY_NAMED = 5  # host names written out per maintenance window in a refusal; the rest counted


def away_reason(away: Iterable[AwayNode]) -> str:
    """The nodes ``away`` in words, one clause per maintenance window (by end, then id):
    ``"node b away for maintenance R570 upgrade (#7) until 5 Dec 2026 14:00 UTC"``; at most
    :data:`AWAY_NAMED` names per window, then ``"and 12 more"``; ``""`` when none."""
    by_window: dict[tuple[datetime, int, str], set[str]] = defaultdict(set)
    for spot in away:
        by_window[(spot.until, spot.window_id, spot.title)].add(spot.node)
    clauses = []
    for (until, window_id, title), names in sorted(by_window.items()):
        shown = sorted(names)[:AWAY_NAMED]
        listed = ", ".join(shown)
        if len(names) > len(shown):
            listed += f" and {len(names) - len(shown)} more"
        utc = until.astimezone(UTC)
        clauses.append(
            f"{'node' if len(names) == 1 else 'nodes'} {listed} away for maintenance {title} "
            f"(#{window_id}) until {utc.day} {utc:%b %Y %H:%M} UTC"
        )
    return "; ".join(clauses)


def with_away(fit: FitResult, away: Iterable[AwayNode]) -> FitResult:
    """``fit`` with the nodes ``away`` (:func:`away_reason`) added to its reason when the
    shape does not fit: the fitter never counted their cards, and a person must be told why
    cards the pool has are not offered. ``fit`` unchanged when it fits or none is away."""
    if fit.fits:
        return fit
    said = away_reason(away)
    return replace(fit, reason=f"{fit.reason}; {said}") if said else fit


@dataclass(frozen=True)
class NodeGroup:
    """Nodes alike in free cards and NVLink domains (``names`` sorted, unique): the fitter's
    unit, so a pool of 2,000 look-alike nodes costs a handful of groups, not 2,000 nodes."""

    names: tuple[str, ...]
    free: frozenset[int]
    domains: tuple[frozenset[int], ...] | None = None


def group_nodes(nodes: Iterable[NodeFree]) -> list[NodeGroup]:
    """``nodes`` as groups of alike ones (each group's names sorted); two nodes may not share a
    name."""
    alike: dict[tuple, list[str]] = defaultdict(list)
    for node in nodes:
        alike[(node.free, node.domains)].append(node.name)
    groups = [
        NodeGroup(tuple(sorted(names)), free, domains) for (free, domains), names in alike.items()
    ]
    _check_names(groups)
    return groups


def take_cards(groups: Iterable[NodeGroup], taken: Mapping[str, Iterable[int]]) -> list[NodeGroup]:
    """``groups`` after ``taken`` (cards by node name) are no longer free: the nodes touched
    leave their group for one of their own."""
    result: list[NodeGroup] = []
    for group in groups:
        if taken.keys().isdisjoint(group.names):  # in C: most groups are untouched
            result.append(group)
            continue
        touched = [name for name in group.names if name in taken]
        kept = tuple(name for name in group.names if name not in taken)
        if kept:
            result.append(NodeGroup(kept, group.free, group.domains))
        result.extend(
            NodeGroup((name,), group.free - frozenset(taken[name]), group.domains)
            for name in touched
        )
    return result


def fit_shape(nodes: Iterable[NodeFree], shape: Shape) -> FitResult:
    """Where ``shape`` fits on ``nodes`` (see the module docstring for the rule)."""
    return fit_groups(group_nodes(nodes), shape)


def fit_groups(groups: Iterable[NodeGroup], shape: Shape) -> FitResult:
    """:func:`fit_shape` over groups of alike nodes (:func:`group_nodes`): the same answer as
    node by node, at a cost that grows with the groups and the cards asked, not the nodes."""
    pool = [g for g in groups if g.names]
    _check_names(pool)
    if shape.is_any:
        return _fit_any(pool, shape)
    per_node, wanted = shape.cards_per_node, shape.nodes
    assert per_node is not None and wanted is not None
    one_domain = shape.one_nvlink_domain
    if shape.shared_nodes:
        placed = _pack_groups(pool, per_node, one_domain, wanted)
        if len(placed) == wanted:
            return FitResult(shape, True, tuple(placed))
        where = " in one NVLink domain" if one_domain else ""
        reason = (
            f"only {_plural(len(placed), 'group')} of {per_node} cards{where} fit of the "
            f"{wanted} asked"
        )
        return _refusal(pool, shape, 0, reason)
    # best fit node by node: every node of a group offers the same group of cards, so only
    # the first ``wanted`` names of each group can be among the ``wanted`` best
    options: list[tuple[int, int, str, frozenset[int]]] = []
    capable = 0
    for group in pool:
        option = _group_on(group.free, group.domains, per_node, one_domain)
        if option is None:
            continue
        capable += len(group.names)
        left_in_domain, left_on_node, source = option
        options.extend(
            (left_in_domain, left_on_node, name, source) for name in group.names[:wanted]
        )
    if capable >= wanted:
        return FitResult(shape, True, _placements(heapq.nsmallest(wanted, options), per_node))
    return _refusal(pool, shape, capable)


def _check_names(groups: Sequence[NodeGroup]) -> None:
    count = sum(len(g.names) for g in groups)
    if count != len({name for g in groups for name in g.names}):
        raise ShapeError("two nodes share a name")


def _refusal(
    pool: Sequence[NodeGroup], shape: Shape, capable: int, reason: str | None = None
) -> FitResult:
    reason = reason or _why_not(pool, shape, capable)
    best = _largest(pool, shape)
    single = (
        Shape(
            cards_per_node=best.cards_per_node,
            nodes=1,
            one_nvlink_domain=best.one_nvlink_domain,
            shared_nodes=best.shared_nodes,
        )
        if best is not None
        else None
    )
    return FitResult(shape, False, (), best, single, reason)


def _group_on(
    free: frozenset[int], domains: tuple[frozenset[int], ...] | None, cards: int, one_domain: bool
) -> tuple[int, int, frozenset[int]] | None:
    """The best group of ``cards`` of a node's ``free`` cards as (free cards left in the domain
    it comes from, free cards left on the node, the cards to take from), or ``None`` when the
    node cannot hold one. With the node's name after the two counts, tuples compare in the
    best-fit order."""
    total = len(free)
    if total < cards:
        return None
    if domains is not None:
        best: frozenset[int] | None = None
        best_key = (0, 0)
        for domain in domains:
            if len(domain) < cards:
                continue
            in_domain = free & domain
            if len(in_domain) >= cards:
                key = (len(in_domain), min(in_domain))
                if best is None or key < best_key:
                    best, best_key = in_domain, key
        if best is not None:
            return best_key[0] - cards, total - cards, best
    if one_domain and cards > 1:
        return None  # no domain holds them, or domains are unknown
    return 0, total - cards, free


def _placements(
    chosen: Iterable[tuple[int, int, str, frozenset[int]]], cards: int
) -> tuple[Placement, ...]:
    return tuple(Placement(name, tuple(sorted(source)[:cards])) for _, _, name, source in chosen)


def _why_not(pool: Sequence[NodeGroup], shape: Shape, capable: int) -> str:
    per_node, wanted = shape.cards_per_node, shape.nodes
    assert per_node is not None
    if not pool:
        return "the pool has no nodes"
    most = max(len(g.free) for g in pool)
    roomy = [g for g in pool if len(g.free) >= per_node]
    if shape.one_nvlink_domain and roomy and all(g.domains is None for g in roomy):
        return (
            f"nodes with {per_node} free cards have unknown NVLink domains "
            "(import their nvidia-smi topo -m)"
        )
    free_total = sum(len(g.free) * len(g.names) for g in pool)
    if capable == 0:
        where = " in one NVLink domain" if shape.one_nvlink_domain else ""
        return (
            f"no node has {_plural(per_node, 'free card')}{where} for the whole window "
            f"(most free on one node: {most}; {free_total} free in all)"
        )
    return f"only {_plural(capable, 'node')} of the {wanted} asked can each hold {per_node}"


def _largest(pool: Sequence[NodeGroup], shape: Shape) -> Shape | None:
    per_node = shape.cards_per_node
    assert per_node is not None
    for cards in range(per_node, 0, -1):
        cap = shape.total_cards // cards  # never more cards than asked; cards <= asked per node
        if shape.shared_nodes:
            able = len(_pack_groups(pool, cards, shape.one_nvlink_domain, cap))
        else:
            able = sum(
                len(g.names)
                for g in pool
                if _group_on(g.free, g.domains, cards, shape.one_nvlink_domain) is not None
            )
        if able:
            return Shape(
                cards_per_node=cards,
                nodes=min(able, cap),
                one_nvlink_domain=shape.one_nvlink_domain,
                shared_nodes=shape.shared_nodes,
            )
    return None


def _pack_groups(
    pool: Sequence[NodeGroup], cards: int, one_domain: bool, groups: int
) -> list[Placement]:
    """Up to ``groups`` groups of ``cards``, each on one node, nodes reused: group by group the
    best fit over what is left. A node used leaves its look-alikes for a group of its own; the
    others of a group offer the same cards, so its first name not yet used stands for them."""
    # per group of nodes: [names, how many of them are used, free, domains, best option]
    left = [
        [g.names, 0, g.free, g.domains, _group_on(g.free, g.domains, cards, one_domain)]
        for g in pool
    ]
    placed: list[Placement] = []
    for _ in range(groups):
        best: tuple[int, int, str] | None = None
        best_at = -1
        for at, (names, used, _, _, option) in enumerate(left):
            if option is None or used == len(names):
                continue
            key = (option[0], option[1], names[used])
            if best is None or key < best:
                best, best_at = key, at
        if best is None:
            break
        entry = left[best_at]
        taken = tuple(sorted(entry[4][2])[:cards])
        entry[1] += 1
        rest = entry[2] - frozenset(taken)
        left.append([(best[2],), 0, rest, entry[3], _group_on(rest, entry[3], cards, one_domain)])
        placed.append(Placement(best[2], taken))
    return placed


def _fit_any(pool: Sequence[NodeGroup], shape: Shape) -> FitResult:
    wanted = shape.total_cards
    single = [(len(g.free) - wanted, g.names[0], g) for g in pool if len(g.free) >= wanted]
    if single:
        _, name, group = min(single, key=lambda s: s[:2])
        return FitResult(shape, True, (Placement(name, tuple(sorted(group.free)[:wanted])),))
    free_total = sum(len(g.free) * len(g.names) for g in pool)
    if free_total < wanted:
        best = Shape.any(free_total) if free_total else None
        return FitResult(
            shape, False, (), best, None, f"{free_total} cards are free for the whole window"
        )
    # fewest nodes: the nodes with most free cards first, in name order among equals
    by_size: dict[int, list[NodeGroup]] = defaultdict(list)
    for group in pool:
        if group.free:
            by_size[len(group.free)].append(group)
    placements = []
    left = wanted
    for size in sorted(by_size, reverse=True):
        named = heapq.merge(*(zip(g.names, repeat(g)) for g in by_size[size]), key=_first)
        for name, group in named:
            take = min(left, size)
            placements.append(Placement(name, tuple(sorted(group.free)[:take])))
            left -= take
            if left == 0:
                return FitResult(shape, True, tuple(placements))
    raise AssertionError("free cards counted but not found")  # pragma: no cover


def _first(pair: tuple[str, NodeGroup]) -> str:
    return pair[0]


@dataclass(frozen=True)
class NodeStranding:
    """One node: ``free`` cards, ``stranded`` ones (outside whole target groups),
    ``target_cards`` the largest common shape its largest domain allows, ``cards_to_free``: how
    many allocated cards of that domain would have to move for one whole target group more."""

    node: str
    free: int
    stranded: int
    target_cards: int | None
    cards_to_free: int | None


@dataclass(frozen=True)
class StrandedReport:
    """Totals over the nodes given (one pool × GPU model).

    ``stranded``: free cards outside whole target-shape groups (see the module docstring);
    ``stranded_for``: per common shape C, free cards that no C-card one-domain group can use;
    ``unknown_topology``: free cards on nodes whose domains are unknown (not in ``stranded``);
    ``nodes``: per node, sorted by fewest ``cards_to_free`` first (the cheapest whole node to
    win back by moving allocations or draining).
    """

    free: int
    stranded: int
    stranded_for: Mapping[int, int]
    unknown_topology: int
    nodes: tuple[NodeStranding, ...] = field(default=())


def stranded_cards(
    nodes: Iterable[NodeFree], shapes: Sequence[int] = COMMON_CARDS_PER_NODE
) -> StrandedReport:
    """Stranded free cards of one pool × GPU model at one moment (module docstring)."""
    sizes = sorted({_positive("cards per node", s) for s in shapes})
    free = stranded = unknown = 0
    per_shape = dict.fromkeys(sizes, 0)
    rows: list[NodeStranding] = []
    for node in sorted(nodes, key=lambda n: n.name):
        free += len(node.free)
        if node.domains is None:
            unknown += len(node.free)
            rows.append(NodeStranding(node.name, len(node.free), 0, None, None))
            continue
        node_stranded = 0
        best_target: int | None = None
        to_free: int | None = None
        for domain in node.domains:
            in_domain = len(node.free & domain)
            for size in sizes:
                per_shape[size] += in_domain if size > len(domain) else in_domain % size
            target = max((s for s in sizes if s <= len(domain)), default=None)
            if target is None:
                node_stranded += in_domain
                continue
            node_stranded += in_domain % target
            if best_target is None or target > best_target:
                best_target = target
                to_free = None
            if target == best_target and in_domain % target:
                need = target - in_domain % target
                to_free = need if to_free is None else min(to_free, need)
        stranded += node_stranded
        rows.append(NodeStranding(node.name, len(node.free), node_stranded, best_target, to_free))
    rows.sort(key=lambda r: (r.cards_to_free is None, r.cards_to_free or 0, r.node))
    return StrandedReport(free, stranded, per_shape, unknown, tuple(rows))


@dataclass(frozen=True)
class NodeCards:
    """A node's cards of one GPU model (GPU indices) and its NVLink domains (``None``:
    unknown), before anything is held."""

    name: str
    gpus: frozenset[int]
    domains: tuple[frozenset[int], ...] | None = None

    @classmethod
    def trusted(
        cls, name: str, gpus: frozenset[int], domains: tuple[frozenset[int], ...] | None
    ) -> NodeCards:
        """A node whose cards and domains were checked already (another node with the same
        ones): skips the checks, as :meth:`NodeFree._trusted` does."""
        node = object.__new__(cls)
        node.__dict__.update(
            name=name, gpus=gpus, domains=domains, _all_free=NodeFree._trusted(name, gpus, domains)
        )
        return node

    def __post_init__(self) -> None:
        _check_cards(self.name, self.gpus, self.domains)
        # the node with nothing held, handed out as is by free_for_window (most nodes, most
        # windows): one object less per node and check
        object.__setattr__(self, "_all_free", NodeFree._trusted(self.name, self.gpus, self.domains))


@dataclass(frozen=True, slots=True)
class Hold:
    """Cards of a node held over ``[starts_at, ends_at)`` (an allocation's placement, a running
    job); times aware."""

    node: str
    gpus: frozenset[int]
    starts_at: datetime
    ends_at: datetime


def free_for_window(
    nodes: Iterable[NodeCards], holds: Iterable[Hold], starts_at: datetime, ends_at: datetime
) -> list[NodeFree]:
    """Per node, the cards no hold touches anywhere in the half-open window: what
    :func:`fit_shape` may use for a request over that window. One pass over ``holds``."""
    if ends_at <= starts_at:
        raise ShapeError("the window must end after it starts")
    taken: dict[str, frozenset[int]] = {}
    for hold in holds:
        if hold.starts_at < ends_at and starts_at < hold.ends_at:
            node = hold.node
            taken[node] = taken[node] | hold.gpus if node in taken else hold.gpus
    trusted = NodeFree._trusted
    return [
        trusted(node.name, node.gpus - taken[node.name], node.domains)
        if node.name in taken
        else node._all_free  # type: ignore[attr-defined]
        for node in nodes
    ]


@dataclass(frozen=True)
class StrandedHours:
    """Stranded capacity integrated over a horizon, in card-hours (``Decimal``, exact: seconds
    / 3600): ``card_hours`` for each domain's target shape, ``card_hours_for`` per common shape,
    ``unknown_topology_card_hours`` free on nodes of unknown domains, ``free_card_hours`` all
    free; ``by_node`` the stranded card-hours of each node, largest first."""

    free_card_hours: Decimal
    card_hours: Decimal
    card_hours_for: Mapping[int, Decimal]
    unknown_topology_card_hours: Decimal
    by_node: tuple[tuple[str, Decimal], ...]


def stranded_card_hours(
    nodes: Iterable[NodeCards],
    holds: Iterable[Hold],
    starts_at: datetime,
    ends_at: datetime,
    shapes: Sequence[int] = COMMON_CARDS_PER_NODE,
) -> StrandedHours:
    """:func:`stranded_cards` at every moment of ``[starts_at, ends_at)``, summed as card-hours.

    Each node is cut at its own holds' start and end times; between two cuts its free cards are
    constant, so the stranding of that stretch × its length in hours is exact. Cost: the
    holds' boundaries per node, O(holds × holds-per-node) in all.
    """
    if ends_at <= starts_at:
        raise ShapeError("the horizon must end after it starts")
    sizes = tuple(sorted(set(shapes)))
    by_node: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        if hold.starts_at < ends_at and starts_at < hold.ends_at:
            by_node[hold.node].append(hold)
    free_total = stranded = unknown = Decimal(0)
    per_shape = dict.fromkeys(sizes, Decimal(0))
    rows: list[tuple[str, Decimal]] = []
    # stretches of most nodes look alike: judge each (free cards, domains) once
    judged: dict[tuple, tuple[int, int, int, tuple[int, ...]]] = {}
    for node in nodes:
        mine = by_node.get(node.name, [])
        cuts = sorted(
            {starts_at, ends_at}
            | {max(h.starts_at, starts_at) for h in mine}
            | {min(h.ends_at, ends_at) for h in mine}
        )
        node_stranded = Decimal(0)
        for left, right in zip(cuts, cuts[1:], strict=False):
            hours = Decimal((right - left).total_seconds()) / Decimal(3600)
            held: set[int] = set()
            for hold in mine:
                if hold.starts_at < right and left < hold.ends_at:
                    held |= hold.gpus
            free = node.gpus - held
            key = (free, node.domains)
            if key not in judged:
                report = stranded_cards([NodeFree._trusted(node.name, free, node.domains)], sizes)
                judged[key] = (
                    report.free,
                    report.stranded,
                    report.unknown_topology,
                    tuple(report.stranded_for[size] for size in sizes),
                )
            free_cards, stranded_here, unknown_here, for_sizes = judged[key]
            free_total += free_cards * hours
            node_stranded += stranded_here * hours
            unknown += unknown_here * hours
            for size, cards in zip(sizes, for_sizes, strict=True):
                per_shape[size] += cards * hours
        stranded += node_stranded
        if node_stranded:
            rows.append((node.name, node_stranded))
    rows.sort(key=lambda row: (-row[1], row[0]))
    return StrandedHours(free_total, stranded, per_shape, unknown, tuple(rows))


def _check_cards(
    name: str, cards: frozenset[int], domains: tuple[frozenset[int], ...] | None
) -> None:
    if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in cards):
        raise ShapeError(f"{name}: GPU indices are non-negative integers")
    if domains is not None:
        seen: set[int] = set()
        for domain in domains:
            if seen & domain:
                raise ShapeError(f"{name}: a card is in two NVLink domains")
            seen |= domain
        if not cards <= seen:
            raise ShapeError(f"{name}: cards {sorted(cards - seen)} are in no domain")


def _positive(what: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ShapeError(f"{what} must be a whole number of at least 1, not {value!r}")
    return value


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")
