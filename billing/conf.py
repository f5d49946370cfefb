"""Billing settings with their defaults: ``BILLING_TIME_ZONE`` (UTC), ``BILLING_CURRENCY`` (EUR),
and the zone accounting times are read in: the Slurm connection's ``TIME_ZONE`` (UTC)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from django.conf import settings


def billing_zone() -> ZoneInfo:
    """The zone whose local midnights start billing months and rate periods."""
    return ZoneInfo(settings.BILLING_TIME_ZONE or "UTC")


def default_currency() -> str:
    """Currency of a statement built while no rate card covers its month."""
    return settings.BILLING_CURRENCY or "EUR"


def slurm_time_zone_name() -> str:
    """The zone of the Slurm connection (``SCHEDULERS["slurm"]["TIME_ZONE"]``, env
    ``SLURM_TIME_ZONE``), whose wall-clock times sacct prints; ``UTC`` when none is configured.
    A name, not a ``ZoneInfo``: callers report a bad one as their own usage error."""
    config = settings.SCHEDULERS.get("slurm") or {}
    return config.get("TIME_ZONE") or "UTC"
