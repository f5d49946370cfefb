"""Elastic inference allocations: the policy that scales one allocation, and its scale events.

An elastic allocation is an :class:`~pools.models.Allocation` on a Kubernetes pool with an
:class:`ElasticPolicy`. Its ``card_count`` is the **floor** (approved and counted in the capacity
invariant like any allocation); ``ceiling_cards`` the most it may hold with burst cards borrowed
from the pool's free capacity; ``cards_held`` what the loop last applied. Every decision that
changed something, and every hold the loop reports, is a :class:`ScaleEvent` with its numbers.
"""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from pools.common.validators import dns_subdomain_validator
from pools.elastic.choices import ScaleAction, ScaleSource
from pools.jobs.models import QueuedRun
from pools.tenancy.models import team_owned

MIN_COOLDOWN_MINUTES = 10  # seed 004 §3.3: "at least 10 to 15 minutes"
MAX_COOLDOWN_MINUTES = 30  # an autoscaling/v2 HPA policy period is at most 1800 s
READING_RETENTION_DAYS = 31  # the what-if replays at most 30 days


class ElasticPolicy(models.Model):
    """How one elastic allocation scales (defaults from seed 004 §3.3).

    Up when utilisation (%) stays above ``up_util_pct`` for ``up_window_minutes`` *and* mean
    latency (ms) above ``up_latency_ms``; down when utilisation stays below ``down_util_pct`` for
    ``down_window_minutes``; ``cooldown_minutes`` after any change; ``step_cards`` per event;
    never below max(floor, ``min_replicas`` x ``cards_per_replica``). ``per_card_tok_s``: the
    sizing engine's output-equivalent tok/s per card for pre-scaling (``None``: no pre-scale);
    ``deployment``: the serving Deployment an HPA is generated for.
    """

    allocation = models.OneToOneField(
        "pools.Allocation", on_delete=models.CASCADE, related_name="elastic_policy"
    )
    # 0 to 2**31 - 1 on every database ("safe in all databases supported by Django", the
    # PositiveIntegerField reference): SQLite alone would store far more.
    ceiling_cards = models.PositiveIntegerField(validators=[MaxValueValidator(2**31 - 1)])
    cards_held = models.PositiveIntegerField()
    step_cards = models.PositiveIntegerField(default=1)
    cards_per_replica = models.PositiveIntegerField(default=1)
    min_replicas = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    up_util_pct = models.DecimalField(
        max_digits=5, decimal_places=2, default=Decimal("75"),
        validators=[MinValueValidator(Decimal("1")), MaxValueValidator(Decimal("100"))],
    )  # fmt: skip
    up_latency_ms = models.PositiveIntegerField(default=800, validators=[MinValueValidator(1)])
    up_window_minutes = models.PositiveIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(60)]
    )
    down_util_pct = models.DecimalField(
        max_digits=5, decimal_places=2, default=Decimal("30"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("99"))],
    )  # fmt: skip
    down_window_minutes = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1), MaxValueValidator(60)]
    )
    cooldown_minutes = models.PositiveIntegerField(
        default=15,
        validators=[
            MinValueValidator(MIN_COOLDOWN_MINUTES), MaxValueValidator(MAX_COOLDOWN_MINUTES)
        ],
    )  # fmt: skip
    prescale_lead_minutes = models.PositiveIntegerField(
        default=30, validators=[MaxValueValidator(180)]
    )
    per_card_tok_s = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True,
        validators=[MinValueValidator(Decimal("0.01"))],
    )  # fmt: skip
    deployment = models.CharField(max_length=253, blank=True, validators=[dns_subdomain_validator])
    enabled = models.BooleanField(default=True)
    # Of ``cards_held``, the cards placed in ``burst_pool`` (a pool marked burst, issue 35):
    # always above the floor, handed back before home cards.
    burst_pool = models.ForeignKey(
        "pools.Pool", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    burst_cards = models.PositiveIntegerField(default=0)
    last_scaled_at = models.DateTimeField(null=True, blank=True)
    borrowed_since = models.DateTimeField(null=True, blank=True)
    last_decision = models.JSONField(default=dict, blank=True)
    # [[slot start (Unix s), expected tok/s or null], ...] for the next ~2 h, from the hourly
    # forecast (pools.elastic.forecast.plan_ahead); the minute loop pre-scales from it.
    prescale_plan = models.JSONField(default=list, blank=True)
    prescale_updated_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = team_owned("allocation__team").as_manager()

    class Meta:
        verbose_name_plural = "elastic policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(step_cards__gte=1)
                & Q(cards_per_replica__gte=1)
                & Q(min_replicas__gte=1),
                name="elastic_policy_positive_steps",
                violation_error_message="Step, cards per replica and minimum replicas are >= 1.",
            ),
            models.CheckConstraint(
                condition=Q(down_util_pct__lt=models.F("up_util_pct")),
                name="elastic_policy_down_below_up",
                violation_error_message="The scale-down threshold must be below the scale-up one.",
            ),
            models.CheckConstraint(
                condition=Q(cooldown_minutes__gte=MIN_COOLDOWN_MINUTES)
                & Q(cooldown_minutes__lte=MAX_COOLDOWN_MINUTES),
                name="elastic_policy_cooldown_range",
                violation_error_message=(
                    f"The cooldown is {MIN_COOLDOWN_MINUTES} to {MAX_COOLDOWN_MINUTES} minutes."
                ),
            ),
            models.CheckConstraint(
                condition=Q(cards_held__lte=models.F("ceiling_cards")),
                name="elastic_policy_held_within_ceiling",
                violation_error_message="Cards held cannot exceed the ceiling.",
            ),
            models.CheckConstraint(
                condition=Q(burst_cards=0) | Q(burst_pool__isnull=False),
                name="elastic_policy_burst_cards_have_a_pool",
                violation_error_message="Burst-pool cards need their burst pool.",
            ),
        ]

    def __str__(self) -> str:
        return f"Elastic policy of allocation #{self.allocation_id}"


class ScaleEvent(models.Model):
    """One decision of the loop (or a hand-back), with the numbers behind it.

    ``(policy, decided_at, source)`` is unique: a loop run repeated for the same instant (a
    retried task) records nothing twice. ``applied`` is set when the scheduler holds it;
    ``apply_note`` says what holding it meant for the pool's quota backend.
    """

    policy = models.ForeignKey(ElasticPolicy, on_delete=models.CASCADE, related_name="events")
    decided_at = models.DateTimeField(db_index=True)
    source = models.CharField(max_length=10, choices=ScaleSource.choices, default=ScaleSource.LOOP)
    action = models.CharField(max_length=4, choices=ScaleAction.choices)
    reason = models.CharField(max_length=20)
    cards_from = models.PositiveIntegerField()
    cards_to = models.PositiveIntegerField()
    effective_at = models.DateTimeField()
    message = models.TextField(blank=True)
    numbers = models.JSONField(default=dict, blank=True)
    # Of ``cards_to``, the cards in ``burst_pool`` from then on (0: all in the home pool).
    burst_pool = models.ForeignKey(
        "pools.Pool", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    burst_cards_to = models.PositiveIntegerField(default=0)
    applied = models.BooleanField(default=False)
    # What applying meant, in words: the object and value the cluster now holds, or why the
    # decision is held in the portal only (no Kubernetes connection). Empty while pending.
    apply_note = models.CharField(max_length=300, blank=True)

    objects = team_owned("policy__allocation__team").as_manager()

    class Meta:
        ordering = ["-decided_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["policy", "decided_at", "source"], name="scale_event_once_per_instant"
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.cards_from}->{self.cards_to} ({self.reason})"


class SignalReading(models.Model):
    """What one pass of the loop read for one elastic allocation: the namespace's newest
    utilisation (%), mean latency (ms) and request rate (requests finished per second), at the
    sample's own time (``read_at``, Prometheus' timestamp), and the cards held after the pass.

    The portal's own record of the signals: the what-if replays it when Prometheus is not
    configured (or has less history), and the live chart draws it. ``None`` is unknown (never
    0). ``(policy, read_at)`` is unique: a pass repeated for the same sample stores it once.
    Kept for :data:`READING_RETENTION_DAYS` days (the what-if's longest replay).
    """

    policy = models.ForeignKey(ElasticPolicy, on_delete=models.CASCADE, related_name="readings")
    read_at = models.DateTimeField()
    util_pct = models.FloatField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    request_s = models.FloatField(null=True, blank=True)
    cards_held = models.PositiveIntegerField()

    objects = team_owned("policy__allocation__team").as_manager()

    class Meta:
        ordering = ["read_at"]
        constraints = [
            models.UniqueConstraint(fields=["policy", "read_at"], name="signal_reading_once")
        ]

    def __str__(self) -> str:
        return f"#{self.policy_id} at {self.read_at:%Y-%m-%d %H:%M}"


class ElasticWhatIf(QueuedRun):
    """One what-if of an elastic policy (:class:`~pools.jobs.models.QueuedRun`): ``result`` is
    the what-if's totals, timeline and burst money, the JSON the API answers; ``error_code``
    ``unavailable`` (no history source), ``prometheus_unavailable`` or ``internal``.

    ``params``: ``{"days": 1-30, "source": "prometheus" | "recorded" | "", "fields": {name:
    value}}`` — the trial values replayed instead of the saved policy's (empty: the saved
    policy), JSON (decimals as strings). Seen by whoever sees the policy.
    """

    policy = models.ForeignKey(ElasticPolicy, on_delete=models.CASCADE, related_name="whatifs")

    objects = team_owned("policy__allocation__team").as_manager()

    class Meta(QueuedRun.Meta):
        verbose_name = "elastic what-if"

    def __str__(self) -> str:
        return f"What-if #{self.pk} of elastic allocation #{self.policy.allocation_id}"


class BurstOptIn(models.Model):
    """Team ``team`` lets its elastic allocations spill into burst pool ``pool`` (issue 35):
    per team and burst pool, at that pool's price; the budget check of every scale-up still
    applies. Written by pool admins and the team's managers
    (:func:`pools.elastic.services.burst_opt_in_set`)."""

    team = models.ForeignKey("pools.Team", on_delete=models.CASCADE, related_name="burst_opt_ins")
    pool = models.ForeignKey("pools.Pool", on_delete=models.CASCADE, related_name="burst_opt_ins")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = team_owned("team").as_manager()

    class Meta:
        ordering = ["team", "pool"]
        constraints = [
            models.UniqueConstraint(fields=["team", "pool"], name="burst_opt_in_once"),
        ]

    def __str__(self) -> str:
        return f"{self.team} may burst into {self.pool}"
