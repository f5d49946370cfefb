from django import template
from django.utils.html import format_html

from billing.choices import UsageUnit
from billing.pricing import PRICE_UNITS, format_money, quantity_places, unit_price_places
from pools.web.numbers import grouped

register = template.Library()


@register.filter
def money(amount, currency="EUR"):
    """``{{ amount|money:currency }}`` -> ``9 166.27 EUR`` (:func:`billing.pricing.format_money`);
    ``None`` (unknown) -> ``—``, never 0."""
    if amount is None:
        return "—"
    return format_money(amount, currency or "EUR")


def _money_parts(amount, currency: str, sign: str = ""):
    """``amount`` as :func:`format_money` writes it, the number (with ``sign`` before it, joined
    by a no-break space) in one unbreakable span and the currency code in another after an
    ordinary space, so a narrow cell wraps between them and nowhere else."""
    number, code = format_money(amount, currency).rsplit("\u00a0", 1)
    return format_html(
        '<span class="money-parts"><span class="amount">{}{}</span> <span class="unit">{}</span>'
        "</span>",
        f"{sign}\u00a0" if sign else "",
        number,
        code,
    )


@register.filter
def money_wrap(amount, currency="EUR"):
    """``{{ amount|money_wrap:currency }}``: :func:`money` for a table's narrow money column,
    free to wrap the currency code below the number; ``None`` -> ``—``."""
    if amount is None:
        return "—"
    return _money_parts(amount, currency or "EUR")


@register.filter
def money_below(minor, currency="EUR"):
    """``{{ minor|money_below:currency }}`` -> ``< 0.01 EUR`` for an amount under the currency's
    minor unit: "<" kept with the number by a no-break space, the currency code free to wrap
    below them (at 390 px the token-flow table broke after the "<")."""
    return _money_parts(minor, currency or "EUR", sign="<")


@register.filter
def unit_price(line):
    """A statement line's price with its currency and unit: ``0.20 EUR / 1M input tokens``,
    ``1.9 -> 1.90 EUR / card-hour``; a price finer than the currency keeps its own decimals
    (``0.0125 EUR / card-hour``)."""
    currency = line.statement.currency
    per = PRICE_UNITS.get(line.unit, (line.unit, None))[0]
    places = unit_price_places(line.unit_price, currency)
    return f"{line.unit_price:.{places}f}\u00a0{currency} / {per}"


@register.filter
def line_unit(line):
    """A statement line's unit in words: ``gb-months`` -> ``GB-months``, ``gb`` -> ``GB``,
    ``input-tokens`` -> ``input tokens (uncached)`` (:class:`billing.choices.UsageUnit`'s
    labels); ``card-hours`` as it is. CSVs keep the code."""
    return UsageUnit(line.unit).label if line.unit in UsageUnit.values else line.unit


@register.filter
def quantity(value, places=3):
    """``{{ line.quantity|quantity }}`` -> ``3 456.000``: grouped like money (narrow no-break
    space), ``places`` decimals; ``None`` -> ``—``."""
    if value is None:
        return "—"
    return grouped(value, int(places))


@register.filter
def line_quantity(line):
    """A statement line's quantity in its unit: tokens whole (``529 094 559``), card-hours to
    3 decimals (``2 976.000``)."""
    return quantity(line.quantity, quantity_places(line.unit))


@register.filter
def share_percent(value):
    """A share of a card (a fraction, ``Decimal("0.012860")``) in per cent to 3 places:
    ``1.286 %``; ``None`` -> ``—``."""
    if value is None:
        return "—"
    return f"{value * 100:.3f}\u00a0%"
