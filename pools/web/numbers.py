"""Numbers as pages show them: thousands grouped with a narrow no-break space, the one grouping
of money (``billing.pricing.format_money``), statement quantities, the advisor and the sizing
pages. CSVs keep plain numbers (:mod:`pools.web.csv_numbers`)."""

from __future__ import annotations

from decimal import Decimal

CARD_HOUR_PLACES = 3
"""Decimals every page shows card-hours with, as statements show their quantities (3.6 s of one
card): an allocation's held card-hours read as its statement line does."""


def grouped(value: object, places: int = 0) -> str:
    """``value`` to ``places`` decimals, thousands grouped with a narrow no-break space
    (ISO 31-0 / SI grouping, the same in every locale): ``3456.0`` -> ``3 456``,
    ``1343.26, 1`` -> ``1 343.3``."""
    return f"{value:,.{places}f}".replace(",", "\u202f")


def card_hours_text(value: object) -> str:
    """Card-hours as every page shows them: :data:`CARD_HOUR_PLACES` decimals, grouped
    (``2976`` -> ``2 976.000``, ``1.25`` -> ``1.250``, the text ``"4.00"`` of a stored JSON
    result -> ``4.000``); ``None`` (unknown) -> ``—``."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        value = Decimal(value)
    return grouped(value, CARD_HOUR_PLACES)
