"""Versions of what the statements would charge: raised by every write that changes it.

Figures kept from a month's priced usage (:class:`billing.budgets.models.BudgetConsumption`)
name the versions they were computed at; a write raises them in its own transaction, after its
rows are written, so whoever read the old version before the write commits labels what it
computes with the old one, and what it keeps is stale, never wrong. Who calls what:

- :func:`usage_months_changed`: every write of usage records (the importers' upsert, token
  ingestion), with each record's team and month — before and after, when an update moves it;
- :func:`shared_card_months_changed`: every write of shared-card uses (a card's tenants split
  it, so a use moves its co-tenants' cents too);
- :func:`price_list_changed`: every write of rate cards and their entries.

A usage version is raised by one ``INSERT … ON CONFLICT DO UPDATE SET version = version + 1``
(PostgreSQL and SQLite 3.24+): an increment, never a read-then-write, so two writers never both
store the same version. The price list's version is a new random number at each change instead:
a change rolled back never leaves its number to a later change, so a process may keep what it
derived from the rate cards under that number (:func:`billing.rate_periods.rate_periods_kept`).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import date, datetime

from django.db import connection

from billing.charges import PERIOD
from billing.conf import billing_zone
from billing.models import PriceListVersion, SharedCardUse, UsageMonthVersion, UsageRecord
from billing.pricing import month_bounds, month_of, next_month
from pools.capacity.models import overlap_q

_BATCH = 500
_USAGE = UsageMonthVersion._meta.db_table
_PRICES = PriceListVersion._meta.db_table


def usage_months_changed(*, pairs: Iterable[tuple[int, date]]) -> None:
    """Raise the version of each ``(team id, month)`` by one (months as their first day), in
    one sorted order so two writers never wait for each other in a cycle."""
    ordered = sorted(set(pairs))
    for offset in range(0, len(ordered), _BATCH):
        chunk = ordered[offset : offset + _BATCH]
        values = ", ".join(["(%s, %s, 1)"] * len(chunk))
        params = [v for team_id, month in chunk for v in (team_id, month)]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {_USAGE} (team_id, month, version) VALUES {values} "
                f"ON CONFLICT (team_id, month) DO UPDATE SET version = {_USAGE}.version + 1",
                params,
            )


def usage_records_changed(*, records: Iterable[UsageRecord]) -> None:
    """:func:`usage_months_changed` for the teams and months of ``records``."""
    usage_months_changed(pairs={(r.team_id, r.month) for r in records})


def shared_card_months_changed(*, start: datetime, end: datetime) -> None:
    """Raise the version of every team with a shared-card use in a billing month that
    ``[start, end)`` touches, in that month. Call it after writing the uses, and before
    deleting any (a team whose last use goes has its month changed too)."""
    zone = billing_zone()
    first, last = month_of(start, zone), month_of(end, zone)
    months = [first]
    while months[-1] < last:
        months.append(next_month(months[-1]))
    pairs: set[tuple[int, date]] = set()
    for month in months:
        lower, upper = month_bounds(month, zone)
        teams = SharedCardUse.objects.filter(overlap_q(lower, upper, fields=PERIOD))
        pairs.update((t, month) for t in teams.values_list("team_id", flat=True).distinct())
    usage_months_changed(pairs=pairs)


def price_list_changed() -> None:
    """Give the price list a new version, a random number never 0 (every month's priced
    figures move with it; the module docstring says why random)."""
    version = secrets.randbits(62) + 1
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_PRICES} (id, version) VALUES (1, %s) "
            f"ON CONFLICT (id) DO UPDATE SET version = %s",
            [version, version],
        )
