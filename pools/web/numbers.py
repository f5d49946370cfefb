"""Numbers as pages show them: thousands grouped with a narrow no-break space, the one grouping
of money (``billing.pricing.format_money``), statement quantities, the advisor and the sizing
pages. CSVs keep plain numbers (:mod:`pools.web.csv_numbers`)."""

from __future__ import annotations


def grouped(value: object, places: int = 0) -> str:
    """``value`` to ``places`` decimals, thousands grouped with a narrow no-break space
    (ISO 31-0 / SI grouping, the same in every locale): ``3456.0`` -> ``3 456``,
    ``1343.26, 1`` -> ``1 343.3``."""
    return f"{value:,.{places}f}".replace(",", "\u202f")
