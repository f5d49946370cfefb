"""Billing settings with their defaults: ``BILLING_TIME_ZONE`` (UTC), ``BILLING_CURRENCY`` (EUR)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from django.conf import settings


def billing_zone() -> ZoneInfo:
    """The zone whose local midnights start billing months and rate periods."""
    return ZoneInfo(getattr(settings, "BILLING_TIME_ZONE", "UTC") or "UTC")


def default_currency() -> str:
    """Currency of a statement built while no rate card covers its month."""
    return getattr(settings, "BILLING_CURRENCY", "EUR") or "EUR"
