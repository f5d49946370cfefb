"""Number formats of the sizing pages: bytes as GB, quantities with a fixed number of decimals."""

from decimal import Decimal

from django import template

register = template.Library()


def _number(value):
    if value is None or value == "":
        return None
    try:
        return float(Decimal(str(value)))
    except ArithmeticError:
        return None


@register.filter
def gb(value, decimals: int = 1):
    """Bytes as GB (10**9 B) with ``decimals`` places and thousands separators; ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return f"{number / 1e9:,.{int(decimals)}f}"


@register.filter
def qty(value, decimals: int = 0):
    """A number with ``decimals`` places and thousands separators; ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return f"{number:,.{int(decimals)}f}"


@register.filter
def pct(value, decimals: int = 0):
    """A share (0.25) as a percentage ("25 %"); ``—`` if unknown."""
    number = _number(value)
    if number is None:
        return "—"
    return f"{number * 100:,.{int(decimals)}f} %"
