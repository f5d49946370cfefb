"""Reads of budgets: who may see which, and what each has consumed.

Consumption is what the team's statements charge for the period's months — the usage lines of
:func:`billing.charges.usage_lines_by_team` (reserved card-hours as the reservation
import accrues them, used card-hours outside reservations, elastic burst card-hours, tokens in
money), one ``GROUP BY`` per month (and per pool, for pool-scoped budgets) for every budget at
once, kept per team, month and scope while no write changed them
(:mod:`billing.budgets.consumption`). Card-hours count every card-hour line; money every line's
rounded amount, as the statement adds it; tokens add money only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Q, QuerySet
from django.utils import timezone

from billing.budgets import periods as p
from billing.budgets.consumption import scoped_usage
from billing.budgets.models import Budget
from billing.charges import CARD_HOURS
from billing.conf import billing_zone
from billing.pricing import month_of
from pools.capacity.arithmetic import card_seconds_hours
from pools.tenancy.models import Team


def budget_list(*, user) -> QuerySet[Budget]:
    """The budgets the user may see (``Budget.objects.visible_to``,
    :class:`~billing.budgets.models.BudgetQuerySet`): pool admins every one, others their
    teams' and their teams' cost centres'."""
    return Budget.objects.visible_to(user).select_related("team", "pool", "gpu_model")


@dataclass(frozen=True)
class Dimension:
    """One limit of a budget over one period: card-hours, or money in ``unit`` (a currency).

    ``used`` ``None``: unknown (the month's rate card is in another currency)."""

    unit: str
    base_limit: Decimal
    rollover: Decimal
    used: Decimal | None

    @property
    def limit(self) -> Decimal:
        return self.base_limit + self.rollover

    @property
    def remaining(self) -> Decimal | None:
        return None if self.used is None else self.limit - self.used

    @property
    def percent(self) -> Decimal | None:
        return None if self.used is None else p.percent_used(self.used, self.limit)

    @property
    def exhausted(self) -> bool:
        return self.used is not None and self.used >= self.limit


@dataclass(frozen=True)
class BudgetStatus:
    """A budget in the period containing ``at``: bounds, each limit, the alert level and the
    forecast run-out (the earlier of the two limits')."""

    budget: Budget
    period: date
    starts_at: datetime
    ends_at: datetime
    card_hours: Dimension | None
    money: Dimension | None
    run_out_at: datetime | None
    months: tuple = ()  # ((month, card-hours, money or None), ...) of this period so far

    @property
    def dimensions(self) -> list[Dimension]:
        return [d for d in (self.card_hours, self.money) if d is not None]

    @property
    def percent(self) -> Decimal | None:
        known = [d.percent for d in self.dimensions if d.percent is not None]
        return max(known) if known else None

    @property
    def exhausted(self) -> bool:
        return any(d.exhausted for d in self.dimensions)

    @property
    def alert(self) -> int | None:
        return p.alert_level(self.percent, exhausted=self.exhausted)


def centre_teams(budgets: Iterable[Budget]) -> dict[str, set[int]]:
    """Cost centre -> the ids of its teams, for the cost-centre budgets given (one query)."""
    centres = {b.cost_centre for b in budgets if b.team_id is None and b.cost_centre}
    members: dict[str, set[int]] = {c: set() for c in centres}
    if centres:
        for centre, team_id in Team.objects.filter(cost_centre__in=centres).values_list(
            "cost_centre", "pk"
        ):
            members[centre].add(team_id)
    return members


def _team_ids(budget: Budget, members: dict[str, set[int]]) -> set[int]:
    """The teams whose usage a budget counts: its team, or every team of its cost centre."""
    return {budget.team_id} if budget.team_id else members.get(budget.cost_centre, set())


def _by_month(
    budget: Budget, months: list[date], usage, currencies, now_month: date, team_ids=None
):
    """``[(month, card-hours, money or None)]`` the budget's scope consumed, month by month,
    up to the current month (money ``None`` where that month's rate card is in another
    currency than the budget's); ``team_ids`` (default: the budget's team) are summed."""
    result = []
    for month in months:
        if month > now_month:
            break
        seconds, money = Decimal(0), Decimal(0)
        for team_id in team_ids if team_ids is not None else {budget.team_id}:
            per_model = usage.get((team_id, budget.pool_id, month), {})
            for model_id, (card_seconds, amount) in per_model.items():
                if budget.gpu_model_id is not None and model_id != budget.gpu_model_id:
                    continue
                seconds += card_seconds
                money += amount
        known = budget.money_limit is None or currencies.get(month) in (None, budget.currency)
        result.append((month, card_seconds_hours(seconds), money if known else None))
    return result


def _totals(rows) -> tuple[Decimal, Decimal | None]:
    """(card-hours, money or None) of :func:`_by_month` rows."""
    hours = sum((h for _, h, _ in rows), Decimal(0))
    moneys = [m for _, _, m in rows]
    return hours, None if None in moneys else sum(moneys, Decimal(0))


def budget_statuses(
    budgets: Iterable[Budget], *, now: datetime | None = None, at: datetime | None = None
) -> dict[int, BudgetStatus]:
    """Budget id -> its :class:`BudgetStatus` in the period containing ``at`` (default now),
    counting usage up to ``now``. The previous period is read only for budgets that roll over,
    and only when it ended by ``now`` and began on or after ``starts_on``. A budget whose first
    period has not started yet is shown in its first period, nothing used."""
    budgets = list(budgets)
    found = budget_statuses_at([(b, at) for b in budgets], now=now)
    return {b.pk: status for b, status in zip(budgets, found, strict=True)}


def budget_statuses_at(
    pairs: list[tuple[Budget, datetime | None]], *, now: datetime | None = None
) -> list[BudgetStatus]:
    """:func:`budget_statuses` of ``(budget, at)`` pairs, in their order: a budget may appear
    with several instants (requests starting in different periods), all read at once."""
    now = now or timezone.now()
    zone = billing_zone()
    now_month = month_of(now, zone)
    members = centre_teams(b for b, _ in pairs)
    plan: list[tuple[date, date | None]] = []
    needs: dict[tuple[int | None, date], set[int]] = defaultdict(set)
    for budget, at in pairs:
        at_day = (at or now).astimezone(zone).date()
        first = max(p.period_start(budget.period, at_day), budget.starts_on)
        previous = p.period_before(budget.period, first)
        has_previous = (
            budget.rollover != "none"
            and previous >= budget.starts_on
            and p.period_bounds(budget.period, previous, zone)[1] <= now
        )
        plan.append((first, previous if has_previous else None))
        for start in (first, previous) if has_previous else (first,):
            for month in p.period_months(budget.period, start):
                if month <= now_month:
                    needs[(budget.pool_id, month)].update(_team_ids(budget, members))
    usage, currencies = scoped_usage(needs)
    result = []
    for (budget, _), (first, previous) in zip(pairs, plan, strict=True):
        start, end = p.period_bounds(budget.period, first, zone)
        teams = _team_ids(budget, members)
        months = _by_month(
            budget, p.period_months(budget.period, first), usage, currencies, now_month, teams
        )
        used_h, used_money = _totals(months)
        prev_h = prev_money = None
        if previous is not None:
            prev_h, prev_money = _totals(
                _by_month(
                    budget,
                    p.period_months(budget.period, previous),
                    usage,
                    currencies,
                    now_month,
                    teams,
                )
            )
        hours = money = None
        if budget.card_hours_limit is not None:
            hours = _dimension(budget, CARD_HOURS, budget.card_hours_limit, used_h, prev_h)
        if budget.money_limit is not None:
            money = _dimension(budget, budget.currency, budget.money_limit, used_money, prev_money)
        run_outs = [
            f.run_out_at
            for d in (hours, money)
            if d is not None and d.used is not None
            and (f := p.forecast(used=d.used, limit=d.limit, start=start, end=end, now=now))
            and f.run_out_at is not None
        ]  # fmt: skip
        result.append(
            BudgetStatus(
                budget,
                first,
                start,
                end,
                hours,
                money,
                min(run_outs) if run_outs else None,
                tuple(months),
            )
        )
    return result


def _dimension(budget: Budget, unit: str, limit, used, previous_used) -> Dimension:
    carried = p.rollover_amount(
        policy=budget.rollover,
        limit=limit,
        previous_used=previous_used,
        cap_percent=budget.rollover_cap_percent,
    )
    return Dimension(unit, limit, carried, used)


def team_budget_banner(
    *, team_id: int, now: datetime | None = None, at: datetime | None = None
) -> list[BudgetStatus]:
    """The team's budgets at or beyond :data:`~billing.budgets.periods.BANNER_PERCENT` used
    (what the banner on the team's pages lists), fullest first: each in its period containing
    ``at`` (aware; default ``now``), usage counted up to ``now``. With ``at`` a budget whose
    first period starts after ``at`` is left out (:func:`budget_statuses` would show it in that
    later period: a November page showed December's budget)."""
    centre = Team.objects.filter(pk=team_id).values_list("cost_centre", flat=True).first()
    owner = Q(team_id=team_id) | (Q(team__isnull=True, cost_centre=centre) if centre else Q())
    statuses = budget_statuses(
        Budget.objects.filter(owner).select_related("team", "pool", "gpu_model"), now=now, at=at
    ).values()
    if at is not None:
        statuses = [s for s in statuses if s.starts_at <= at < s.ends_at]
    shown = [s for s in statuses if s.exhausted or (s.percent or 0) >= p.BANNER_PERCENT]
    return sorted(shown, key=lambda s: -(s.percent or Decimal(10**6)))
