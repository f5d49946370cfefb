"""Efficiency of held cards in tokens (pure): tokens per card-hour and the busy share.

``held_card_hours`` is Σ cards held x bucket hours over the rollups; ``busy_card_hours`` Σ cards
at or above the busy threshold x bucket hours, over the buckets where dcgm-exporter reported
(``reporting_card_hours``). Tokens are the engines' counter increases. Anything not measured is
``None`` (unknown), never 0: a bucket without token series adds nothing and the coverage says
how much of the held time the figure stands on.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Usage:
    """Sums over a set of rollups (one allocation, team, pool or GPU model; a day or month)."""

    held_card_hours: Decimal
    reporting_card_hours: Decimal
    busy_card_hours: Decimal | None
    token_card_hours: Decimal
    input_tokens: int | None
    output_tokens: int | None

    def _per_card_hour(self, tokens: int | None) -> Decimal | None:
        if tokens is None or not self.token_card_hours:
            return None
        return (Decimal(tokens) / self.token_card_hours).quantize(Decimal("0.1"))

    @property
    def output_tokens_per_card_hour(self) -> Decimal | None:
        """Output tokens ÷ the card-hours of the buckets where the engine reported tokens."""
        return self._per_card_hour(self.output_tokens)

    @property
    def input_tokens_per_card_hour(self) -> Decimal | None:
        return self._per_card_hour(self.input_tokens)

    @property
    def busy_share(self) -> Decimal | None:
        """Busy card-hours ÷ held card-hours, 0-1 (``None`` without GPU series)."""
        if self.busy_card_hours is None or not self.held_card_hours:
            return None
        return (self.busy_card_hours / self.held_card_hours).quantize(Decimal("0.001"))

    @property
    def gpu_coverage(self) -> Decimal | None:
        """Share of held card-hours that dcgm-exporter reported on, 0-1."""
        if not self.held_card_hours:
            return None
        return (self.reporting_card_hours / self.held_card_hours).quantize(Decimal("0.001"))


def cost_per_million(cost: Decimal | None, tokens: int | None) -> Decimal | None:
    """``cost`` (the held card-hours' price) per million ``tokens``; ``None`` when either is
    unknown or no token was served. Unrounded: the caller rounds to its currency."""
    if cost is None or not tokens:
        return None
    return cost * Decimal(1_000_000) / Decimal(tokens)
