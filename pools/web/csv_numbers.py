"""Numbers as CSV cells: plain fixed-point decimals, never scientific notation.

``str(Decimal("2880").normalize())`` is ``"2.88E+3"`` and ``str(1e-05)`` is ``"1e-05"``; a
spreadsheet reads those, a person or a ``cut``/``awk`` pipeline does not, and the same column
then mixes ``2.88E+3`` with ``3456``. Every CSV writes numbers in the form
``[-]digits[.digits]``, as the page shows them where the caller passes ``places``.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pools.web.numbers import CARD_HOUR_PLACES


def plain_number(value: Any, places: int | None = None) -> Any:
    """``value`` as a plain decimal string when it is a ``Decimal`` or ``float``: with its own
    digits (``Decimal("2.88E+3")`` -> ``"2880"``, ``1e-05`` -> ``"0.00001"``,
    ``Decimal("3.500000")`` -> ``"3.500000"``) or rounded half-up to ``places`` decimals
    (``Decimal("2976"), 3`` -> ``"2976.000"``). Anything else (int, text, ``None``) is returned
    as it is. A float goes through its shortest repr, so ``0.1`` is ``"0.1"``, not its binary
    expansion; ``nan`` and ``inf`` stay as Python writes them."""
    if isinstance(value, float):
        value = Decimal(repr(value))
    if not isinstance(value, Decimal) or not value.is_finite():
        return str(value) if isinstance(value, Decimal) else value
    if places is not None:
        value = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return format(value, "f")


def card_hours_csv(value: Any) -> Any:
    """Card-hours as a CSV cell: :func:`plain_number` to the places pages show them with
    (:data:`pools.web.numbers.CARD_HOUR_PLACES`, 3: ``2.025``, ``456.000``), so a page and its CSV
    read the same number; ``None`` (unknown) stays an empty cell."""
    return None if value is None else plain_number(value, CARD_HOUR_PLACES)
