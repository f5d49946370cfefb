"""Which GPU models a workload class may run on: a pure rule over plain data (no Django), used by
request validation, approval, the request options and the explainer alike.

A class permits a GPU model when the model's capability class (``card_class``: ``consumer`` or
``datacentre``, as the catalogue records it on :class:`pools.inventory.models.GpuModel`) is one
of the class's card classes, or when the class names the model itself. The rule is the
"mixed pool kept apart by labels" of the 004 seed article §3.2: production services on
data-centre cards (L40S, A100, H800), internal tools and non-core batch on consumer cards
(RTX 4090).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

CARD_CLASS_LABELS = {"consumer": "consumer", "datacentre": "data-centre"}


@dataclass(frozen=True)
class ClassRule:
    """A workload class's placement rule: ``card_classes`` it may use (``consumer`` /
    ``datacentre``) and ``model_slugs`` it may use whatever their class; ``exclusive``: its
    cards are never shared (no over-commit, time-slicing, MPS or MIG with another tenant)."""

    slug: str
    name: str
    card_classes: frozenset[str]
    model_slugs: frozenset[str]
    exclusive: bool = False

    def permits(self, *, model_slug: str, card_class: str) -> bool:
        """Whether a card of model ``model_slug`` (capability class ``card_class``) may run
        this class's work."""
        return card_class in self.card_classes or model_slug in self.model_slugs

    def refusal(
        self, *, model_name: str, card_class: str, allowed: Collection[str] | None = None
    ) -> str:
        """Why a model is refused: "Production may not run on GeForce RTX 4090: consumer
        class", then, when ``allowed`` (model names, in order) is given, " (it may use: A100,
        L40S)"."""
        label = CARD_CLASS_LABELS.get(card_class, card_class)
        text = f"{self.name} may not run on {model_name}: {label} class"
        if allowed is None:
            return text
        names = ", ".join(allowed) or "none of the fleet's models"
        return f"{text} (it may use: {names})"
