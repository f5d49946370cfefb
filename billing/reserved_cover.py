"""Which of a team's card-seconds of one GPU model its allocations cover (pure).

Every card-hour is charged once, by the pricing method of the allocation it ran in. A
*reservation* below is any allocation whose own price pays for its cards whatever runs on
them: priced by reserved card-hours (the cards held) or by **tokens** (what its served models
process; :data:`billing.services.usage_import.COVERING`). Both cover the same way: the usage
within their cards is ``included``, so a token-priced allocation's pods and jobs are not
charged as used card-hours beside its tokens; beyond its cards they are, as beyond a
reservation's.

One rule for every usage import (Slurm jobs, :mod:`billing.services.usage_import`; Kubernetes
steps, :mod:`billing.services.prometheus_import`): a *use* (one job's cards of one GPU model
over ``[start, end)``, or one node's cards of a namespace over one step) is cut at the edges of
the team's allocations of that model **in the pool it ran in**, and at each moment:

- the reservations in force (each from its start taken to the whole second, as Slurm
  keeps whole seconds, until its end: the caller's :class:`Held`) cover at most their cards
  together (the cards each holds at that moment: an elastic one's burst cards, billed as
  held, cover too; those it placed in a burst pool cover usage in that pool's place): the
  uses in force are taken in order of precedence (``rank``: the job started first, then the
  smaller job id) and each is covered up to the cards its predecessors left,
  from the first reservation of its own place to start (then the next), then from those of a
  whole cluster; those card-seconds are ``included`` in that reservation (not charged again);
- what a reservation does not cover is ``used`` (charged), naming the first allocation priced on
  use in force then in its place, if any (its held time is already the pool's allocated time),
  else none. An elastic allocation priced on use covers nothing at home (it pays its usage,
  once), but the cards it placed in a burst pool are billed held at that pool's price, so the
  caller passes them with the reservations, in that pool's place: the usage on them is
  included, not charged again at the on-use price.

*Its place* (``where``): an allocation covers a use when the allocation's ``where`` is the
use's, or ``None`` (anywhere the caller passed it for). The imports pass only the allocations
of the pools of the scheduler and cluster they read, so a reservation never covers usage in
another cluster. A Slurm job's ``where`` is its partition, an allocation's its pool's
partition (``None`` for a pool without one: the whole cluster, as its account's cap), so a
Slurm reservation never covers usage in another pool. A Kubernetes use's is its namespace, an
allocation's the namespace of its scheduler binding (the team's quota there), so the
Kubernetes pools of one cluster are one place: the team's quota in its namespace is its cards
in all of them together and pods are not kept to a pool's nodes, so its reservations there
cover its usage on any of their nodes, never beyond their cards together
(``tests/billing/test_reserved_cover_pools.py``). Each pool's usage comes from one import at
any moment (a Slurm cluster's accounting; the one Prometheus that bills a Kubernetes cluster
then), so no two imports share the same reserved cards.

So a job that runs on past a reservation's end is charged for the time after it, one started
just before a reservation begins is included from its start, and a team of 4 reserved cards
running 10 cards' worth of jobs has 4 included and 6 charged: the 6 of the jobs started last.
The cover at a moment depends only on the uses in force at that moment, so a job's split is
known from the jobs that overlap it (an hourly import reads those; see
:func:`billing.services.usage_import.usage_import_slurm`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from fractions import Fraction

_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class Use:
    """``cards`` (a MIG slice: its share of a card) over ``[start, end)``; ``rank`` orders
    precedence (smaller first: covered first); ``where`` the place it ran in (a Slurm
    partition, a Kubernetes namespace: see the module's rule)."""

    key: Hashable
    rank: tuple
    start: datetime
    end: datetime
    cards: Fraction
    where: Hashable = None


@dataclass(frozen=True)
class Held:
    """An allocation in force over ``[start, end)`` holding ``cards`` (reserved; ``None``: no
    cap), or one priced on use (``cards`` unused: it covers nothing, usage in it is named by
    it); ``where``: the place of the uses it covers or names (``None``: any). The caller takes
    an allocation's start to the whole second."""

    allocation_id: int
    start: datetime
    end: datetime
    cards: Fraction | None = None
    where: Hashable = None

    def serves(self, use: Use) -> bool:
        """Whether this allocation covers (or names) ``use``: its place is the use's, or any."""
        return self.where is None or self.where == use.where


@dataclass
class Part:
    """Card-seconds of a use in one allocation (or none) and basis, and the stretch they lie
    in (the first moment's start to the last one's end; not contiguous when the cover came and
    went)."""

    card_seconds: Fraction
    start: datetime
    end: datetime


PartKey = tuple[int | None, bool]
"""``(allocation id or None, included)``: included in a reservation, or used (charged) in an
allocation priced on use or in none."""


def cover(
    uses: Iterable[Use], reserved: Sequence[Held], on_use: Sequence[Held]
) -> dict[Hashable, dict[PartKey, Part]]:
    """Each use's card-seconds by :data:`PartKey` (see the module's rule). ``reserved`` and
    ``on_use`` in precedence order (allocation start, then id; a reservation whose cards changed
    is several :class:`Held` of one id, consecutive). The parts of a use add up to its cards ×
    its seconds exactly (``Fraction``). One sweep over the edges: uses × edges at worst, in
    whole numbers (cards × their common denominator, microseconds; 4x faster than fractions)."""
    uses = list(uses)
    scale = math.lcm(*(u.cards.denominator for u in uses),
                     *(h.cards.denominator for h in reserved if h.cards is not None))  # fmt: skip
    uses = [replace(u, cards=int(u.cards * scale)) for u in uses if u.end > u.start]
    reserved = [h if h.cards is None else replace(h, cards=int(h.cards * scale)) for h in reserved]
    edges: dict[datetime, list[tuple[int, Use]]] = defaultdict(list)
    for use in uses:
        edges[use.start].append((1, use))
        edges[use.end].append((-1, use))
    lo_all = min((u.start for u in uses), default=None)
    hi_all = max((u.end for u in uses), default=None)
    for h in [*reserved, *on_use]:
        for at in (h.start, h.end):
            if lo_all is not None and lo_all < at < hi_all:
                edges.setdefault(at, [])
    sums: dict[Hashable, dict[PartKey, list]] = defaultdict(dict)
    active: dict[Hashable, Use] = {}
    points = sorted(edges)
    for lo, hi in zip(points, points[1:], strict=False):
        for sign, use in edges[lo]:
            if sign > 0:
                active[use.key] = use
            else:
                active.pop(use.key, None)
        if not active:
            continue
        microseconds = (hi - lo) // _MICROSECOND
        for key, part, cards in cover_at(active.values(), reserved, on_use, lo):
            found = sums[key].get(part)
            if found is None:
                sums[key][part] = [cards * microseconds, lo, hi]
            else:
                found[0] += cards * microseconds
                found[2] = hi
    unit = scale * 1_000_000
    return {
        key: {part: Part(Fraction(total, unit), lo, hi) for part, (total, lo, hi) in parts.items()}
        for key, parts in sums.items()
    }


def _in_force(held: Held, at: datetime) -> bool:
    return held.start <= at < held.end


def cover_at(
    active: Iterable[Use], reserved: Sequence[Held], on_use: Sequence[Held], at: datetime
) -> list[tuple[Hashable, PartKey, Fraction | int]]:
    """``(use key, part, cards)`` at the instant ``at`` of the ``active`` uses (those in force
    then): the reservations of ``reserved`` in force filled in order of the uses' precedence,
    each use from those of its own place first, then those of any place; the rest used in the
    first of ``on_use`` in force of its place (its own first), or in none. What :func:`cover`
    does at each moment; a Kubernetes import calls it per step."""
    free = [[h, h.cards] for h in reserved if _in_force(h, at)]
    free.sort(key=lambda slot: slot[0].where is None)  # stable: precedence kept within each
    charging = sorted((h for h in on_use if _in_force(h, at)), key=lambda h: h.where is None)
    parts = []
    for use in sorted(active, key=lambda u: u.rank):
        left = use.cards
        for slot in free:
            if not left:
                break
            if not slot[0].serves(use):
                continue
            take = left if slot[1] is None else min(left, slot[1])
            if take > 0:
                parts.append((use.key, (slot[0].allocation_id, True), take))
                left -= take
                if slot[1] is not None:
                    slot[1] -= take
        if left > 0:
            charged_in = next((h.allocation_id for h in charging if h.serves(use)), None)
            parts.append((use.key, (charged_in, False), left))
    return parts
