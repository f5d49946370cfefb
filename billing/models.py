"""Rate cards, metered usage and monthly statements.

Money is ``Decimal`` (prices to 6 places; statement amounts rounded once per line, half-up, to
the currency's minor unit, see :mod:`billing.pricing`). Datetimes are aware. Units are in the
names: ``quantity`` + ``unit`` on usage (card-seconds or tokens), card-hours or tokens on lines.
A month is stored as the date of its first day in the billing time zone
(``settings.BILLING_TIME_ZONE``).
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import F, Q

from billing.choices import (
    EXTRA_RATE_KINDS,
    GPU_RATE_KINDS,
    PART_SHARE_BASES,
    STATEMENT_STATUS_LABELS,
    TOKEN_RATE_KINDS,
    ChargeBasis,
    LineKind,
    RateKind,
    ShareBasis,
    StatementStatus,
    UsageFlag,
    UsageSource,
    UsageUnit,
)
from billing.validators import currency_validator
from pools.capacity.models import Allocation
from pools.clusters.models import Cluster
from pools.common.validators import single_line_text_validator
from pools.inventory.models import Gpu, GpuModel, Pool
from pools.tenancy.models import Team, team_owned


class RateCard(models.Model):
    """A price list valid from ``effective_from`` (inclusive) to ``effective_to`` (exclusive,
    empty: open-ended), dates in the billing time zone. Cards must not overlap (checked by
    :func:`billing.services.rates.rate_card_create`); a price change is a new card."""

    # shown on statements and their PDF: one line, read left to right
    name = models.CharField(max_length=100, validators=[single_line_text_validator])
    currency = models.CharField(max_length=3, validators=[currency_validator])
    effective_from = models.DateField()
    effective_to = models.DateField(null=True, blank=True)
    # Tokens a gateway replayed from its response cache (no GPU computed them): charged at the
    # card's token prices, or shown at 0; and whether they count toward token quotas.
    replayed_tokens_charged = models.BooleanField(default=False)
    replayed_tokens_count_to_quota = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["effective_from", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(effective_to__isnull=True) | Q(effective_to__gt=F("effective_from")),
                name="ratecard_window_positive",
            ),
            models.UniqueConstraint(fields=["effective_from"], name="ratecard_unique_start"),
        ]

    def __str__(self) -> str:
        end = self.effective_to or "…"
        return f"{self.name} ({self.currency}, {self.effective_from} → {end})"


class RateCardEntry(models.Model):
    """One price: per card-hour of a GPU model (reserved or on use), or per million tokens of a
    served model (input, cached input, output)."""

    rate_card = models.ForeignKey(RateCard, on_delete=models.CASCADE, related_name="entries")
    kind = models.CharField(max_length=20, choices=RateKind.choices)
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="rates"
    )
    served_model = models.CharField(
        max_length=120, blank=True, validators=[single_line_text_validator]
    )
    # Issue 35: the pool a burst-pool card-hour, storage or egress price is for (storage and
    # egress without one: the price of every pool that has none of its own).
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="rates"
    )
    price = models.DecimalField(max_digits=14, decimal_places=6)

    class Meta:
        ordering = ["rate_card", "kind", "gpu_model__name", "served_model"]
        verbose_name_plural = "rate card entries"
        constraints = [
            models.CheckConstraint(condition=Q(price__gte=0), name="rate_price_not_negative"),
            models.CheckConstraint(
                condition=(
                    Q(
                        kind__in=GPU_RATE_KINDS,
                        gpu_model__isnull=False,
                        served_model="",
                        pool__isnull=True,
                    )
                    | Q(kind__in=TOKEN_RATE_KINDS, gpu_model__isnull=True, pool__isnull=True)
                    & ~Q(served_model="")
                    | Q(
                        kind=RateKind.POOL_BURST,
                        gpu_model__isnull=False,
                        served_model="",
                        pool__isnull=False,
                    )
                    | Q(kind__in=EXTRA_RATE_KINDS, gpu_model__isnull=True, served_model="")
                ),  # fmt: skip
                name="rate_gpu_or_served_model",
            ),
            models.UniqueConstraint(
                fields=["rate_card", "kind", "gpu_model"],
                condition=Q(gpu_model__isnull=False, pool__isnull=True),
                name="rate_unique_gpu_per_card",
            ),
            models.UniqueConstraint(
                fields=["rate_card", "kind", "pool", "gpu_model"],
                condition=Q(pool__isnull=False, gpu_model__isnull=False),
                name="rate_unique_pool_gpu_per_card",
            ),
            models.UniqueConstraint(
                fields=["rate_card", "kind", "pool"],
                condition=Q(kind__in=EXTRA_RATE_KINDS, pool__isnull=False),
                name="rate_unique_pool_extra_per_card",
            ),
            models.UniqueConstraint(
                fields=["rate_card", "kind"],
                condition=Q(kind__in=EXTRA_RATE_KINDS, pool__isnull=True),
                name="rate_unique_extra_per_card",
            ),
            models.UniqueConstraint(
                fields=["rate_card", "kind", "served_model"],
                condition=~Q(served_model=""),
                name="rate_unique_served_per_card",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.gpu_model or self.served_model}: {self.price}"


class UsageRecord(models.Model):
    """Metered usage of one team, within one billing month, from one source.

    ``(source, source_id)`` is unique, so re-importing a window changes nothing and a running
    job's record is replaced in place when it is metered again. ``quantity`` is never negative;
    a record with an unusable interval (clock skew) is kept at 0 with ``flag`` set for review.
    ``basis`` is fixed at import: reserved (an allocation's wall time), used (GPU time outside
    what the team's allocations priced by reserved card-hours or tokens cover), tokens, or
    included (GPU time such an allocation covers: inside its window and place, within its
    cards; paid by its reserved card-hours or its tokens, not charged again).
    ``allocation`` names the allocation a record belongs to: a reserved or burst record's own,
    included usage's covering allocation, or used usage's allocation priced on use (charged, and
    inside that allocation's held time for the idle cost; both matched by
    :mod:`billing.reserved_cover`: Slurm jobs cut at the allocations' edges, Kubernetes usage
    per step); a used record without one ran in no allocation.
    """

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="usage_records")
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="usage_records"
    )
    served_model = models.CharField(max_length=120, blank=True)
    allocation = models.ForeignKey(
        Allocation, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records"
    )
    # Issue 35: the burst pool of burst-pool card-time, the pool of storage / egress (else empty).
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="usage_records"
    )
    quantity = models.DecimalField(max_digits=24, decimal_places=6)
    unit = models.CharField(max_length=20, choices=UsageUnit.choices)
    basis = models.CharField(max_length=10, choices=ChargeBasis.choices)
    month = models.DateField(help_text="First day of the billing month the period lies in.")
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    source = models.CharField(max_length=20, choices=UsageSource.choices)
    source_id = models.CharField(max_length=200)
    flag = models.CharField(max_length=20, choices=UsageFlag.choices, blank=True, default="")
    other_reading_start = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Flag ambiguous_time: the period's start under the other reading of the "
        "repeated wall-clock hour (period_start is the first reading, the one billed).",
    )
    other_reading_end = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    objects = team_owned("team").as_manager()

    class Meta:
        ordering = ["period_start", "id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "source_id"], name="usage_unique_source"),
            models.CheckConstraint(condition=Q(quantity__gte=0), name="usage_quantity_not_neg"),
            models.CheckConstraint(
                condition=Q(period_end__gte=F("period_start")), name="usage_period_ordered"
            ),
            models.CheckConstraint(
                condition=Q(gpu_model__isnull=True) | Q(served_model=""),
                name="usage_gpu_xor_served_model",
            ),
        ]
        indexes = [
            # updated_at too: the close's late-usage check (does a final month have a record
            # written after it was finalized?) is one index descent per final statement, not a
            # read of every record of every past month (migration 0015).
            models.Index(fields=["team", "month", "updated_at"], name="usage_team_month_updated"),
            models.Index(fields=["month"]),
            # The month close's ambiguous-time notes read these few rows; without it, a second
            # scan of the whole month (migration 0015).
            models.Index(
                fields=["month"],
                condition=Q(flag=UsageFlag.AMBIGUOUS_TIME),
                name="usage_ambiguous_month",
            ),
        ]
        # Migration 0015 also adds the extended statistics ``usage_statement_key_nd`` (PostgreSQL
        # only; Django has no Meta option for them): the number of distinct
        # (team, STATEMENT_KEY) groups, so the close's GROUP BY is planned as a hash aggregate.

    def __str__(self) -> str:
        what = self.gpu_model or self.served_model or "?"
        return f"{self.team} {what} {self.quantity} {self.unit} ({self.source})"

    @property
    def other_reading_quantity(self) -> Decimal | None:
        """``quantity`` had the other reading been billed (same rate per second), ``None``
        when the record has no other reading. Never negative."""
        if self.other_reading_start is None or self.other_reading_end is None:
            return None
        billed = int((self.period_end - self.period_start).total_seconds())
        other = max(0, int((self.other_reading_end - self.other_reading_start).total_seconds()))
        if billed <= 0:
            return None
        return (self.quantity * other / billed).quantize(Decimal("0.000001"))


class UsageImport(models.Model):
    """One importer run for a window, and what it found (``issues``: one dict per problem)."""

    source = models.CharField(max_length=20, choices=UsageSource.choices)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    records_created = models.PositiveIntegerField(default=0)
    records_updated = models.PositiveIntegerField(default=0)
    records_unchanged = models.PositiveIntegerField(default=0)
    jobs_seen = models.PositiveIntegerField(default=0)
    flagged = models.PositiveIntegerField(default=0)
    issues = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.source} usage {self.window_start:%Y-%m-%d} → {self.window_end:%Y-%m-%d}"


class MetricsUrlSpan(models.Model):
    """From ``since`` on, the usage of ``cluster`` (empty: the environment's — pools without a
    cluster and the environment's row) is read from the Prometheus at ``url`` (trailing ``/``
    dropped; ``""``: none configured). ``since`` empty: from the beginning.

    Written by the Prometheus usage imports (:func:`billing.services.prometheus_meters.
    metrics_spans_sync`) when they find a cluster's URL changed: each hour of a cluster's series
    is billed by the one Prometheus its span names, so a URL switch never bills an hour twice."""

    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="metrics_spans"
    )
    url = models.CharField(max_length=255, blank=True)
    since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster_id", F("since").asc(nulls_first=True), "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "since"],
                condition=Q(cluster__isnull=False, since__isnull=False),
                name="metrics_span_unique_cluster_since",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster or 'environment'} → {self.url or '(none)'} from {self.since}"


class Statement(models.Model):
    """A team's charges for one billing month. Drafts are rebuilt from usage any number of
    times with identical lines; a final statement never changes (late usage of its month
    becomes adjustment lines on a later statement)."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="statements")
    month = models.DateField()
    status = models.CharField(
        max_length=5, choices=StatementStatus.choices, default=StatementStatus.DRAFT
    )
    currency = models.CharField(max_length=3, validators=[currency_validator])
    cost_centre = models.CharField(max_length=40, blank=True)
    usage_amount = models.DecimalField(max_digits=18, decimal_places=4, default=0)
    adjustment_amount = models.DecimalField(max_digits=18, decimal_places=4, default=0)
    total_amount = models.DecimalField(max_digits=18, decimal_places=4, default=0)
    rounding = models.CharField(max_length=120, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    built_at = models.DateTimeField()
    finalized_at = models.DateTimeField(null=True, blank=True)

    objects = team_owned("team").as_manager()

    class Meta:
        ordering = ["-month", "team__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "month"], name="statement_unique_team_month"),
            models.CheckConstraint(
                condition=Q(status=StatementStatus.DRAFT, finalized_at__isnull=True)
                | Q(status=StatementStatus.FINAL, finalized_at__isnull=False),
                name="statement_final_has_time",
            ),
            models.CheckConstraint(
                condition=Q(total_amount=F("usage_amount") + F("adjustment_amount")),
                name="statement_total_adds_up",
            ),
        ]
        indexes = [
            models.Index(fields=["month", "status"]),
            # the month's dearest first (the finance month's and the admin dashboard's top
            # teams): 10 of 10,080 statements read in order, not all sorted -- 22 -> 4 ms
            models.Index(fields=["month", "-total_amount"], name="statement_month_total"),
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status == StatementStatus.FINAL

    @property
    def status_label(self) -> str:
        """The status in words (:data:`billing.choices.STATEMENT_STATUS_LABELS`): "Draft",
        "Final", or "not drafted yet" for the month in progress's preview."""
        return STATEMENT_STATUS_LABELS[self.status]


class StatementLine(models.Model):
    """One priced line: a GPU model or served model × basis × unit × rate period.

    ``quantity`` is in ``unit`` (card-hours, or tokens for token units); ``unit_price`` per
    card-hour or per million tokens; ``amount`` is rounded once, here. ``period`` is the month
    the usage belongs to (the statement's own month, or an earlier one for adjustments).
    """

    statement = models.ForeignKey(Statement, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=LineKind.choices, default=LineKind.USAGE)
    period = models.DateField()
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    served_model = models.CharField(max_length=120, blank=True)
    # Issue 35: the burst pool (burst-pool card-hours) or the pool of storage / egress.
    pool = models.ForeignKey(
        Pool, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    basis = models.CharField(max_length=10, choices=ChargeBasis.choices)
    unit = models.CharField(max_length=20)
    quantity = models.DecimalField(max_digits=24, decimal_places=6)
    unit_price = models.DecimalField(max_digits=14, decimal_places=6)
    amount = models.DecimalField(max_digits=18, decimal_places=4)
    rate_from = models.DateField()
    rate_to = models.DateField()
    rate_card = models.ForeignKey(
        RateCard, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # A shared card's line (basis ``shared``): the card, the tenant's share of its card-seconds
    # in the rate period and what that share is read from. ``amount`` is the share's cents of
    # the card's amount (largest remainder, billing/shared_cards.py), so it may differ from
    # ``quantity × unit_price`` by less than one minor unit.
    gpu = models.ForeignKey(Gpu, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    card_share = models.DecimalField(max_digits=9, decimal_places=6, null=True, blank=True)
    share_basis = models.CharField(max_length=12, choices=ShareBasis.choices, blank=True)

    objects = team_owned("statement__team").as_manager()

    class Meta:
        ordering = ["statement", "position"]
        constraints = [
            models.UniqueConstraint(fields=["statement", "position"], name="line_unique_position"),
            models.CheckConstraint(
                condition=Q(kind=LineKind.ADJUSTMENT) | Q(amount__gte=0, quantity__gte=0),
                name="line_usage_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(rate_to__gt=F("rate_from")), name="line_rate_period_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.statement} #{self.position} {self.label}: {self.amount}"

    @property
    def label(self) -> str:
        if self.basis in (ChargeBasis.STORAGE, ChargeBasis.EGRESS):
            what = self.get_basis_display()
            return f"{what} in {self.pool.name}" if self.pool_id else what
        if self.pool_id:
            return f"{self.gpu_model.name} in {self.pool.name}"
        return self.gpu_model.name if self.gpu_model_id else self.served_model

    @property
    def shared_card_text(self) -> str:
        """A shared-card line's card, share and basis in words, as the page, the PDF and the
        CSV's ``notes`` say it: "card gpu-07:0 · 33.333 % of its card-hours · Time-slicing: …";
        "" for other lines. Reads ``gpu.node`` (select it with the lines)."""
        if not self.gpu_id:
            return ""
        share = "—" if self.card_share is None else f"{self.card_share * 100:.3f} %"
        return f"card {self.gpu} · {share} of its card-hours · {self.get_share_basis_display()}"


class SharedCardUse(models.Model):
    """One team's use of one shared card (time-sliced, MPS, MIG-shared) over ``[period_start,
    period_end)``: ``parts_held`` of the card's ``parts_per_card`` (replicas of the device
    plugin's ``replicas``, or compute slices of the card's 7 — A30: 4), or a DCGM utilisation
    ``utilisation_pct`` (0-100 %) attributed to the team's pod. ``source_id`` is unique, so a
    re-import replaces, never adds. Read by :mod:`billing.shared_cards` through
    :func:`billing.charges.shared_card_splits`."""

    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="shared_uses")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="shared_card_uses")
    basis = models.CharField(max_length=12, choices=ShareBasis.choices)
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    parts_held = models.PositiveSmallIntegerField(null=True, blank=True)
    parts_per_card = models.PositiveSmallIntegerField(null=True, blank=True)
    utilisation_pct = models.DecimalField(max_digits=5, decimal_places=2, null=True, blank=True)
    source_id = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = team_owned("team").as_manager()

    class Meta:
        ordering = ["gpu", "period_start", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(period_end__gt=F("period_start")), name="shared_use_period_positive"
            ),
            models.CheckConstraint(
                # NOT NULL spelled out: a CHECK that reads NULL passes
                condition=(
                    Q(
                        basis__in=PART_SHARE_BASES,
                        utilisation_pct__isnull=True,
                        parts_held__isnull=False,
                        parts_per_card__isnull=False,
                        parts_held__gte=1,
                        parts_per_card__gte=F("parts_held"),
                    )
                    | Q(
                        basis=ShareBasis.DCGM_UTILISATION,
                        parts_held__isnull=True,
                        parts_per_card__isnull=True,
                        utilisation_pct__isnull=False,
                        utilisation_pct__gte=0,
                        utilisation_pct__lte=100,
                    )
                ),
                name="shared_use_parts_or_utilisation",
            ),
        ]
        indexes = [models.Index(fields=["period_start"])]

    def __str__(self) -> str:
        return f"{self.team} on {self.gpu} ({self.basis})"


class UsageMonthVersion(models.Model):
    """How many times what a team's statement for ``month`` would charge has changed: raised
    (:func:`billing.services.versions.usage_months_changed`) in the transaction of every write
    of the team's usage records of the month, and of every shared-card use of a card the team
    shares that month (a co-tenant's use moves the team's cents). Figures kept from the month
    (:class:`billing.budgets.models.BudgetConsumption`) carry the version they were computed
    at and are stale once it moved on. No row: version 0."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    month = models.DateField()
    version = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "month"], name="usage_month_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m} v{self.version}"


class PriceListVersion(models.Model):
    """One row (id 1): the rate cards' version, a new random number at every change (a card
    created, edited or deleted: :func:`billing.services.versions.price_list_changed`), so a
    number is never reused, even after a change rolled back. Every month's priced figures
    depend on it as on :class:`UsageMonthVersion`. No row: version 0 (never changed through
    the services)."""

    version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"price list v{self.version}"


# Sub-packages' models, registered under the billing app label (Django loads only this module).
from billing.budgets.models import Budget, BudgetConsumption  # noqa: E402, F401
