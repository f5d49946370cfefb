from django import template

from billing.pricing import round_money

register = template.Library()


@register.filter
def money(amount, currency="EUR"):
    """``{{ amount|money:currency }}``: rounded to the currency's minor unit, thousands spaced."""
    if amount is None:
        return ""
    value = round_money(amount, currency or "EUR")
    return f"{value:,}".replace(",", "\u202f")
