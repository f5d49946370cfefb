"""Cards held per workload class per GPU model class (issue 36): what the classes page and the
admin dashboard show. Two queries whatever the number of allocations or classes: the classes
with their named models, and the held cards grouped in the database.

"Held now": allocations whose status holds cards (:meth:`AllocationQuerySet.holding`) and
whose window holds the instant (:meth:`AllocationQuerySet.at`), whole cards only (MIG slices
are not cards, issue 38), summed by the allocation's class (``None``: unclassed) and by its GPU
model's capability class (:class:`pools.common.choices.CardClass`: consumer, data-centre).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Sum

from pools.capacity.models import Allocation
from pools.classes.models import WorkloadClass
from pools.classes.rules import CARD_CLASS_LABELS
from pools.classes.selectors import class_list
from pools.classes.slurm_qos import class_qos_name
from pools.common.choices import CardClass


@dataclass
class ClassRow:
    """One workload class (``None``: the unclassed allocations) and its cards held now per card
    class (``cards[card_class]``, every :class:`CardClass` value present, 0 when none)."""

    workload_class: WorkloadClass | None
    cards: dict[str, int]
    models: list[str] = field(default_factory=list)
    preempts: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.cards.values())

    @property
    def cells(self) -> list[int]:
        """The cards per card class in :data:`CARD_CLASSES` order (for the table)."""
        return [self.cards[c] for c in CARD_CLASSES]

    @property
    def rule(self) -> str:
        """The class's placement rule in words: "data-centre cards; also GeForce RTX 4090"."""
        if self.workload_class is None:
            return "any card (no class rule)"
        kinds = [f"{CARD_CLASS_LABELS[c]} cards" for c in CARD_CLASSES if c in self.card_classes]
        if self.models:
            kinds.append(f"{'also ' if kinds else ''}{', '.join(self.models)}")
        return "; ".join(kinds) or "no card (no class or model permitted)"

    @property
    def card_classes(self) -> list[str]:
        return list(self.workload_class.card_classes) if self.workload_class else []

    @property
    def qos(self) -> str:
        """The Slurm QOS and Kubernetes PriorityClass name of the class."""
        return class_qos_name(self.workload_class.slug) if self.workload_class else ""


CARD_CLASSES = list(CardClass.values)


@dataclass
class ClassHoldings:
    """Every class (most protected first), then the unclassed row when it holds cards; and
    the totals per card class."""

    rows: list[ClassRow]
    at: datetime

    @property
    def totals(self) -> list[int]:
        return [sum(r.cards[c] for r in self.rows) for c in CARD_CLASSES]

    @property
    def total(self) -> int:
        return sum(self.totals)


def class_holdings(*, now: datetime) -> ClassHoldings:
    """Cards held at ``now`` per workload class per card class (module docstring). Two queries
    (three with the classes' named models prefetched)."""
    classes = class_list()
    held = (
        Allocation.objects.holding()
        .at(now)
        .whole_cards()
        .values_list("workload_class_id", "gpu_model__card_class")
        .annotate(cards=Sum("card_count"))
        .order_by()
    )
    by_class: dict[int | None, dict[str, int]] = {}
    for class_id, card_class, cards in held:
        counts = by_class.setdefault(class_id, dict.fromkeys(CARD_CLASSES, 0))
        counts[card_class] = counts.get(card_class, 0) + int(cards)
    order = {c.pk: c.preemption_order for c in classes}
    rows = [
        ClassRow(
            workload_class=c,
            cards=by_class.get(c.pk, dict.fromkeys(CARD_CLASSES, 0)),
            models=sorted(m.name for m in c.gpu_models.all()),
            preempts=[o.name for o in classes if order[o.pk] < c.preemption_order],
        )
        for c in classes
    ]
    if None in by_class:
        rows.append(ClassRow(workload_class=None, cards=by_class[None]))
    return ClassHoldings(rows=rows, at=now)
