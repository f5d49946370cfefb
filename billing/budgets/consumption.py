"""What budgets count of a team's month, kept so a budget check reads a few rows.

A budget counts, per team, month and GPU model, the raw card-seconds of the card-hour lines and
the sum of every line's rounded amount that the team's statement for the month charges
(:func:`billing.charges.usage_lines_by_team`: reserved card-hours as the
reservation import accrues them, used card-hours outside reservations, elastic burst
card-hours, tokens in money) — of every pool, or of one pool's allocations for a pool-scoped
budget. Pricing a month takes about five queries and every usage row of it; an approval's
budget check reads up to six months (a quarter and the one before it, for rollover), which made
it 5.8× the bare approval (issue #32 wants at most 2×).

So the figures are kept, one :class:`~billing.budgets.models.BudgetConsumption` row per team,
month and pool scope, computed by the same function the statements use (one pricing path) the
first time they are asked for and kept while current: a row names the
:class:`~billing.models.UsageMonthVersion` of its team's month and the
:class:`~billing.models.PriceListVersion` it was computed at, and every write of usage records,
shared-card uses or rate cards raises those (:mod:`billing.services.versions`). The versions are
read before the usage is priced, so a write committing in between leaves the row labelled with
the older version: stale, priced again next time, never kept as current. A read of current rows
is one query; an hourly import re-prices only the current month of the teams it wrote.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from decimal import Decimal

from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from billing.budgets.models import BudgetConsumption
from billing.charges import CARD_HOURS, usage_lines_by_team
from billing.models import PriceListVersion, UsageMonthVersion

FILTER_TEAMS_UP_TO = 200
"""Up to this many teams a month is read for those teams only; beyond, for every team
(benchmarks/budgets.py: 1,600 ids in the IN list cost more than the rows they skip)."""

Key = tuple[int, int | None, date]  # (team id, pool id or None: every pool, month)
PerModel = dict[int | None, list[Decimal]]  # GPU model id -> [card-seconds, money]


def scoped_usage(needs: dict[tuple[int | None, date], set[int]]) -> tuple[dict, dict[date, str]]:
    """Priced usage of the teams each ``(pool id or None, month)`` of ``needs`` names:
    ``{(team, pool, month): {gpu_model_id: [card_seconds, money]}}`` (keys without usage
    absent) and each month's currency. Current kept rows are read (one query); the rest is
    priced month by month through :func:`usage_lines_by_team` and kept."""
    keys = {(team, pool, month) for (pool, month), teams in needs.items() for team in teams}
    usage: dict[Key, PerModel] = {}
    currencies: dict[date, str] = {}
    if not keys:
        return usage, currencies
    missing = set(keys)
    for row in _current_rows(keys):
        key = (row.team_id, row.pool_scope or None, row.month)
        if key in missing:
            missing.discard(key)
            currencies[row.month] = row.currency
            if row.per_model:
                usage[key] = {
                    model: [Decimal(seconds), Decimal(money)]
                    for model, seconds, money in row.per_model
                }
    if missing:
        _price_and_keep(missing, usage, currencies)
    return usage, currencies


def _current_rows(keys: set[Key]):
    """Kept rows of the keys' teams, scopes and months whose versions are current (one query;
    a superset of ``keys``, which the caller picks from)."""
    teams = {team for team, _, _ in keys}
    rows = BudgetConsumption.objects.filter(
        month__in={month for _, _, month in keys},
        pool_scope__in={pool or 0 for _, pool, _ in keys},
    )
    if len(teams) <= FILTER_TEAMS_UP_TO:
        rows = rows.filter(team_id__in=teams)
    usage_version = UsageMonthVersion.objects.filter(
        team_id=OuterRef("team_id"), month=OuterRef("month")
    ).values("version")[:1]
    price_version = PriceListVersion.objects.filter(pk=1).values("version")[:1]
    return (
        rows.annotate(
            current_usage=Coalesce(Subquery(usage_version), Value(0)),
            current_prices=Coalesce(Subquery(price_version), Value(0)),
        )
        .filter(usage_version=F("current_usage"), price_version=F("current_prices"))
        .only("team_id", "month", "pool_scope", "currency", "per_model")
    )


def _versions(keys: set[Key]) -> tuple[dict[tuple[int, date], int], int]:
    """The usage versions of the keys' team months (absent: 0) and the price list's version,
    read before the usage is (module docstring)."""
    teams = {team for team, _, _ in keys}
    rows = UsageMonthVersion.objects.filter(month__in={month for _, _, month in keys})
    if len(teams) <= FILTER_TEAMS_UP_TO:
        rows = rows.filter(team_id__in=teams)
    usage = {(t, m): v for t, m, v in rows.values_list("team_id", "month", "version")}
    prices = PriceListVersion.objects.filter(pk=1).values_list("version", flat=True).first()
    return usage, prices or 0


def _price_and_keep(missing: set[Key], usage: dict[Key, PerModel], currencies: dict) -> None:
    """Price the ``missing`` keys (one statement-path call per pool scope and month), add them
    to ``usage`` and ``currencies``, and keep them labelled with the versions read first."""
    versions, price_version = _versions(missing)
    by_scope: dict[tuple[int | None, date], set[int]] = defaultdict(set)
    for team, pool, month in missing:
        by_scope[(pool, month)].add(team)
    now = timezone.now()
    kept = []
    for (pool, month), team_ids in sorted(by_scope.items(), key=lambda i: (i[0][0] or 0, i[0][1])):
        # Many teams: read the month for every team (and drop the rest) rather than send an
        # IN list of thousands of ids, which costs more to build and parse than it saves.
        wanted = sorted(team_ids) if len(team_ids) <= FILTER_TEAMS_UP_TO else None
        lines, currencies[month] = usage_lines_by_team(month=month, team_ids=wanted, pool_id=pool)
        for team in team_ids:
            per_model: PerModel = defaultdict(lambda: [Decimal(0), Decimal(0)])
            for line in lines.get(team, ()):
                sums = per_model[line.gpu_model_id]
                if line.unit == CARD_HOURS:
                    sums[0] += line.raw_quantity
                sums[1] += line.amount
            if per_model:
                usage[(team, pool, month)] = dict(per_model)
            kept.append(
                BudgetConsumption(
                    team_id=team, month=month, pool_scope=pool or 0,
                    currency=currencies[month],
                    per_model=[[model, str(s), str(m)] for model, (s, m) in
                               sorted(per_model.items(), key=lambda i: i[0] or 0)],
                    usage_version=versions.get((team, month), 0),
                    price_version=price_version, computed_at=now,
                )
            )  # fmt: skip
    kept.sort(key=lambda r: (r.team_id, r.month, r.pool_scope))  # one lock order
    BudgetConsumption.objects.bulk_create(
        kept,
        batch_size=2000,
        update_conflicts=True,
        unique_fields=["team", "month", "pool_scope"],
        update_fields=["currency", "per_model", "usage_version", "price_version", "computed_at"],
    )
