"""How many cards an allocation held when: its ``card_count`` is only the latest value.

Only reclamation changes the cards of a running allocation (issue 7): a shrink keeps
``cards_in_use`` of ``card_count`` from ``reclaimed_at``; ending it keeps 0; undoing puts
``card_count`` back at ``closed_at``. The idle findings in state ``reclaimed`` or ``undone``
hold exactly these facts, so the timeline is rebuilt from them (billing charges reserved
allocations on it: a shrink must not reprice the days before it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q, QuerySet

from pools.capacity.models import Allocation
from pools.common.choices import IdleFindingState
from pools.reclamation.models import IdleFinding


@dataclass(frozen=True)
class CardPiece:
    """``cards`` held over ``[start, end)`` (aware datetimes)."""

    start: datetime
    end: datetime
    cards: int


def card_pieces(
    allocation: Allocation, changes: Iterable[tuple[datetime, int, int]]
) -> list[CardPiece]:
    """The allocation's window cut where its card count changed.

    ``changes``: ``(at, cards_before, cards_after)``. Before the first change the allocation held
    the first change's ``cards_before``; with no change, its ``card_count`` throughout. Pieces of
    0 cards are kept (a reclaimed, later undone, allocation held nothing in between).
    """
    ordered = sorted(changes)
    cards = ordered[0][1] if ordered else allocation.card_count
    pieces, start = [], allocation.starts_at
    for at, _before, after in ordered:
        at = min(max(at, allocation.starts_at), allocation.ends_at)
        if at > start:
            pieces.append(CardPiece(start, at, cards))
        start, cards = max(start, at), after
    if allocation.ends_at > start:
        pieces.append(CardPiece(start, allocation.ends_at, cards))
    return pieces


def card_changes(allocation_ids: Iterable[int]) -> dict[int, list[tuple[datetime, int, int]]]:
    """``(at, before, after)`` card changes per allocation id, from its reclaimed and undone
    findings. One query."""
    return _changes_of(IdleFinding.objects.filter(allocation_id__in=list(allocation_ids)))


_CHANGED = [IdleFindingState.RECLAIMED, IdleFindingState.UNDONE]


def _changes_of(findings: QuerySet[IdleFinding]) -> dict[int, list[tuple[datetime, int, int]]]:
    """:func:`card_changes` of the reclaimed and undone ones of ``findings``. One query."""
    changes: dict[int, list[tuple[datetime, int, int]]] = defaultdict(list)
    rows = findings.filter(state__in=_CHANGED, reclaimed_at__isnull=False).values_list(
        "allocation_id", "reclaimed_at", "closed_at", "state", "card_count", "cards_in_use"
    )
    for allocation_id, reclaimed_at, closed_at, state, before, kept in rows:
        changes[allocation_id].append((reclaimed_at, before, kept))
        if state == IdleFindingState.UNDONE and closed_at is not None:
            changes[allocation_id].append((closed_at, kept, before))
    return changes


def card_pieces_changed_since(
    *, allocations: QuerySet[Allocation], since: datetime
) -> list[tuple[Allocation, list[CardPiece]]]:
    """The allocations of ``allocations`` whose cards a reclamation changed after ``since``
    (a shrink or end at a later instant, or the undo of one), each with its :func:`card_pieces`
    over its whole window (its earlier changes too), as the queryset reads them (its
    annotations and ``only`` kept). An allocation holds its ``card_count`` after its last change
    and changes are never in the future, so a reader of the time from ``since`` on that counts
    ``card_count`` corrects these alone (the timeline, the admin dashboard's plan and the
    capacity calendar, below this module: ``settings.ALLOCATION_CARD_PIECES_SINCE``). One
    query when none changed (the usual day), two when some did: their changes, and their
    rows."""
    recent = Q(reclaimed_at__gt=since) | Q(state=IdleFindingState.UNDONE, closed_at__gt=since)
    changed = IdleFinding.objects.filter(
        recent, state__in=_CHANGED, reclaimed_at__isnull=False,
        allocation__in=allocations.values("pk"),
    ).values("allocation_id")  # fmt: skip
    changes = _changes_of(IdleFinding.objects.filter(allocation_id__in=changed))
    if not changes:
        return []
    return [(a, card_pieces(a, changes[a.pk])) for a in allocations.filter(pk__in=list(changes))]


def allocations_card_pieces(*, allocations: Iterable[Allocation]) -> dict[int, list[CardPiece]]:
    """Allocation id -> its :func:`card_pieces` for every allocation of ``allocations`` (one
    piece of its ``card_count`` when reclamation never changed it). For pages and APIs below
    this module (``settings.ALLOCATION_CARD_PIECES``). One query; ``{}`` for none."""
    allocations = list(allocations)
    if not allocations:
        return {}
    changes = card_changes(a.pk for a in allocations)
    return {a.pk: card_pieces(a, changes.get(a.pk, ())) for a in allocations}
