"""Budgets: card-hours and/or money a team may spend per month, quarter or year.

Consumption is what the team's statements charge for the period's months
(:mod:`billing.budgets.selectors`), kept per team, month and pool scope only as a figure the
statements' lines give again on demand (:class:`BudgetConsumption`, current while no write
changed its month). Money is ``Decimal`` in the rate card's currency.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import Q

from billing.budgets.choices import BudgetPeriod, Enforcement, Rollover
from billing.validators import currency_validator
from pools.inventory.models import GpuModel, Pool
from pools.tenancy.models import Team, TeamOwnedQuerySet

#: The largest rollover cap the column holds (``max_digits=6``, 2 decimals): 9999.99 %.
ROLLOVER_CAP_MAX_PERCENT = Decimal("9999.99")
#: What the budget form and the API say of a cap the column cannot hold, by the code of Django's
#: ``DecimalValidator`` / DRF's ``DecimalField`` (their own words, "no more than 4 digits before
#: the decimal point", name the storage, not the rule).
ROLLOVER_CAP_ERRORS = {
    "max_whole_digits": f"A cap of at most {ROLLOVER_CAP_MAX_PERCENT} % of the limit.",
    "max_digits": f"A cap of at most {ROLLOVER_CAP_MAX_PERCENT} % of the limit, with at most 2 "
    "decimals.",
    "max_decimal_places": "At most 2 decimals (e.g. 12.25 %).",
}
#: The largest limits the columns hold: ``card_hours_limit`` (``max_digits=16``, 3 decimals)
#: and ``money_limit`` (``max_digits=16``, 4 decimals).
CARD_HOURS_LIMIT_MAX = Decimal("9999999999999.999")
MONEY_LIMIT_MAX = Decimal("999999999999.9999")
#: As :data:`ROLLOVER_CAP_ERRORS`, for a limit the column cannot hold: in card-hours, and in the
#: budget's currency (not "no more than 13 digits before the decimal point").
CARD_HOURS_LIMIT_ERRORS = {
    "max_whole_digits": f"A limit of at most {CARD_HOURS_LIMIT_MAX} card-hours.",
    "max_digits": f"A limit of at most {CARD_HOURS_LIMIT_MAX} card-hours, with at most 3 decimals.",
    "max_decimal_places": "At most 3 decimals (e.g. 1500.125 card-hours).",
}
MONEY_LIMIT_ERRORS = {
    "max_whole_digits": f"A limit of at most {MONEY_LIMIT_MAX} in the budget's currency.",
    "max_digits": f"A limit of at most {MONEY_LIMIT_MAX} in the budget's currency, with at "
    "most 4 decimals.",
    "max_decimal_places": "At most 4 decimals (e.g. 2500.1250).",
}
#: The error messages of each budget field whose Django/DRF wording names the storage.
STORAGE_ERRORS = {
    "card_hours_limit": CARD_HOURS_LIMIT_ERRORS,
    "money_limit": MONEY_LIMIT_ERRORS,
    "rollover_cap_percent": ROLLOVER_CAP_ERRORS,
}


class BudgetQuerySet(TeamOwnedQuerySet):
    """A team's budget is seen by the team (:class:`TeamOwnedQuerySet`); a cost centre's by
    every team whose cost centre it is, as a subquery on the teams the user is in."""

    def member_q(self, user) -> Q:
        centres = Team.objects.visible_to(user).exclude(cost_centre="").values("cost_centre")
        return super().member_q(user) | Q(team__isnull=True, cost_centre__in=centres)


class Budget(models.Model):
    """A team's limit per period — or a cost centre's (``cost_centre`` instead of ``team``: every
    team whose ``Team.cost_centre`` it is, summed) — optionally only for one pool and/or one
    GPU model.

    ``card_hours_limit`` and/or ``money_limit`` (with ``currency``); the first period starts
    ``starts_on`` (the first day of a period of ``period``). ``rollover_cap_percent`` caps what
    ``carry`` hands over, in % of the base limit (empty: no cap). ``last_alert_*`` remember the
    highest alert threshold already sent and for which period, so managers hear it once.
    ``slurm_*`` is what :mod:`billing.budgets.slurm` last wrote to the team's Slurm account
    (``slurm_tres`` the GrpTRESMins entry, ``slurm_clusters`` its card-minutes in each Slurm
    cluster by slug — a team-wide budget is split across clusters — and ``slurm_minutes`` their
    sum) or, in ``slurm_note``, why Slurm does not enforce it (refused, no Slurm pool, a pool
    sharing its cluster with the team's other pools).
    """

    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    cost_centre = models.CharField(max_length=40, blank=True)
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="budgets"
    )
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="budgets"
    )
    period = models.CharField(max_length=10, choices=BudgetPeriod.choices)
    starts_on = models.DateField()
    card_hours_limit = models.DecimalField(max_digits=16, decimal_places=3, null=True, blank=True)
    money_limit = models.DecimalField(max_digits=16, decimal_places=4, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True, validators=[currency_validator])
    rollover = models.CharField(max_length=10, choices=Rollover.choices, default=Rollover.NONE)
    rollover_cap_percent = models.DecimalField(
        max_digits=6, decimal_places=2, null=True, blank=True
    )
    enforcement = models.CharField(
        max_length=12, choices=Enforcement.choices, default=Enforcement.WARN
    )
    last_alert_period = models.DateField(null=True, blank=True)
    last_alert_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    slurm_tres = models.CharField(max_length=64, blank=True)
    slurm_minutes = models.PositiveBigIntegerField(null=True, blank=True)
    slurm_synced_at = models.DateTimeField(null=True, blank=True)
    slurm_note = models.CharField(max_length=500, blank=True)
    slurm_clusters = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = BudgetQuerySet.as_manager()

    class Meta:
        ordering = ["team__name", "cost_centre", "period", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(team__isnull=False, cost_centre="")
                | Q(team__isnull=True) & ~Q(cost_centre=""),
                name="budget_team_or_cost_centre",
            ),
            models.CheckConstraint(
                condition=Q(card_hours_limit__isnull=False) | Q(money_limit__isnull=False),
                name="budget_has_a_limit",
            ),
            models.CheckConstraint(
                condition=Q(card_hours_limit__isnull=True) | Q(card_hours_limit__gt=0),
                name="budget_card_hours_positive",
            ),
            models.CheckConstraint(
                condition=Q(money_limit__isnull=True, currency="")
                | Q(money_limit__gt=0) & ~Q(currency=""),
                name="budget_money_has_currency",
            ),
            models.CheckConstraint(
                condition=Q(rollover_cap_percent__isnull=True) | Q(rollover_cap_percent__gte=0),
                name="budget_cap_not_negative",
            ),
            models.UniqueConstraint(
                fields=["team", "cost_centre", "pool", "gpu_model", "period"],
                nulls_distinct=False,
                name="budget_unique_scope",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner_label} {self.get_period_display().lower()} budget ({self.scope_label})"

    @property
    def owner_label(self) -> str:
        """The team's name, or ``cost centre <code>``."""
        return self.team.name if self.team_id else f"cost centre {self.cost_centre}"

    @property
    def scope_label(self) -> str:
        parts = [
            self.pool.name if self.pool_id else "",
            self.gpu_model.name if self.gpu_model_id else "",
        ]
        return " · ".join(p for p in parts if p) or "all pools and models"


class BudgetConsumption(models.Model):
    """What a team's statement for ``month`` charges, kept so a budget check reads one row per
    team, month and scope instead of pricing the month again (:mod:`billing.budgets.consumption`).

    ``pool_scope`` 0: the usage of every pool; otherwise a pool's id: the usage of that pool's
    allocations only (what a pool-scoped budget counts; a plain integer, not a key, so the
    unique key has no NULL in it and one upsert keeps one row on PostgreSQL and SQLite alike).
    ``per_model``: ``[[gpu_model_id or null, card_seconds, amount], ...]`` — per GPU model
    (``null``: lines without one, tokens), the raw card-seconds of the card-hour lines and the
    sum of every line's rounded amount in ``currency``, as exact decimal strings (prorated
    seconds carry up to 28 significant digits, more than a fixed-point column keeps).
    Current while ``usage_version`` and ``price_version`` equal the team's month's
    :class:`~billing.models.UsageMonthVersion` and the :class:`~billing.models.PriceListVersion`.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    month = models.DateField()
    pool_scope = models.PositiveIntegerField(default=0)
    currency = models.CharField(max_length=3, validators=[currency_validator])
    per_model = models.JSONField(default=list, blank=True)
    usage_version = models.PositiveBigIntegerField()
    price_version = models.PositiveBigIntegerField()
    computed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "month", "pool_scope"], name="budget_consumption_unique"
            )
        ]

    def __str__(self) -> str:
        scope = f"pool {self.pool_scope}" if self.pool_scope else "every pool"
        return f"{self.team} {self.month:%Y-%m} ({scope})"
