"""Reclamation: per-pool idle policies with their bounds, exemptions, idle findings and scan
runs."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from pools.capacity.models import Allocation
from pools.common.choices import (
    IdleFindingState,
)
from pools.inventory.models import Pool
from pools.jobs.models import QueuedRun
from pools.reclamation.evaluate import IDLE_BELOW_PCT
from pools.tenancy.models import Team, team_owned

# Bounds of a reclamation policy. The window is read from Prometheus at 60 s steps in one range
# query, so a day (1,441 steps) is well inside its 11,000-point limit; a month of grace and a week
# of cooldown are longer than any use; 256 GiB is more memory than any GPU has.
MIN_WINDOW_MINUTES = 5


MAX_WINDOW_MINUTES = 1440


MAX_GRACE_HOURS = 720


MAX_COOLDOWN_MINUTES = 10080


MAX_PROCESS_MEMORY_MIB = 262144


# The policy's settings, in the order pages show them: the one list the form, the API, the
# audit snapshot and the service's validation read.
POLICY_FIELDS = (
    "idle_below_pct",
    "certainly_idle_below_pct",
    "process_memory_max_mib",
    "window_minutes",
    "min_coverage",
    "grace_hours",
    "cooldown_minutes",
    "dry_run",
)
# What a what-if may override: the idle thresholds, not the cooldown or dry-run.
WHATIF_FIELDS = tuple(f for f in POLICY_FIELDS if f not in ("cooldown_minutes", "dry_run"))


class ReclamationPolicy(models.Model):
    """When a pool's allocated cards count as idle and what happens then (issue 7).

    Idle: mean utilisation below ``idle_below_pct`` (%) over ``window_minutes``; reclaimed only
    when *certainly* idle: peak below ``certainly_idle_below_pct`` (%) and ``DCGM_FI_DEV_FB_USED``
    at most ``process_memory_max_mib`` (MiB). Utilisation is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
    x 100, else ``DCGM_FI_DEV_GPU_UTIL``. ``min_coverage`` (0-1) of the window must carry samples.
    A warned allocation is reclaimed ``grace_hours`` later, not within ``cooldown_minutes`` of
    any change to it; ``dry_run`` (the default) records what would happen and changes nothing.
    """

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, related_name="reclamation_policy")
    idle_below_pct = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal(IDLE_BELOW_PCT),
        validators=[MinValueValidator(Decimal("0.01")), MaxValueValidator(Decimal("100"))],
    )
    certainly_idle_below_pct = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("5"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
    )
    process_memory_max_mib = models.PositiveIntegerField(
        default=64, validators=[MaxValueValidator(MAX_PROCESS_MEMORY_MIB)]
    )
    window_minutes = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(MIN_WINDOW_MINUTES), MaxValueValidator(MAX_WINDOW_MINUTES)],
    )
    min_coverage = models.DecimalField(
        max_digits=3,
        decimal_places=2,
        default=Decimal("0.90"),
        validators=[MinValueValidator(Decimal("0.01")), MaxValueValidator(Decimal("1"))],
    )
    grace_hours = models.PositiveIntegerField(
        default=24, validators=[MaxValueValidator(MAX_GRACE_HOURS)]
    )
    cooldown_minutes = models.PositiveIntegerField(
        default=15, validators=[MaxValueValidator(MAX_COOLDOWN_MINUTES)]
    )
    dry_run = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "reclamation policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(idle_below_pct__gt=0) & Q(idle_below_pct__lte=100),
                name="reclamation_policy_idle_pct_range",
                violation_error_message="The idle threshold must be above 0 % and at most 100 %.",
            ),
            models.CheckConstraint(
                condition=Q(certainly_idle_below_pct__gte=0)
                & Q(certainly_idle_below_pct__lte=models.F("idle_below_pct")),
                name="reclamation_policy_certain_below_idle",
                violation_error_message=(
                    "The certainly-idle threshold must be at most the idle threshold."
                ),
            ),
            models.CheckConstraint(
                condition=Q(min_coverage__gt=0) & Q(min_coverage__lte=1),
                name="reclamation_policy_coverage_ratio",
                violation_error_message="Coverage is a share: above 0 and at most 1.",
            ),
            models.CheckConstraint(
                condition=Q(window_minutes__gte=MIN_WINDOW_MINUTES)
                & Q(window_minutes__lte=MAX_WINDOW_MINUTES),
                name="reclamation_policy_window_range",
                violation_error_message=(
                    f"The window is {MIN_WINDOW_MINUTES} to {MAX_WINDOW_MINUTES} minutes."
                ),
            ),
            models.CheckConstraint(
                condition=Q(grace_hours__lte=MAX_GRACE_HOURS)
                & Q(cooldown_minutes__lte=MAX_COOLDOWN_MINUTES)
                & Q(process_memory_max_mib__lte=MAX_PROCESS_MEMORY_MIB),
                name="reclamation_policy_upper_bounds",
                violation_error_message=(
                    f"Grace is at most {MAX_GRACE_HOURS} h, cooldown at most "
                    f"{MAX_COOLDOWN_MINUTES} min, process memory at most "
                    f"{MAX_PROCESS_MEMORY_MIB} MiB."
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"Reclamation policy of {self.pool}"


class Exemption(models.Model):
    """A team or one allocation that is never reclaimed until ``expires_at``, and why."""

    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="exemptions"
    )
    allocation = models.ForeignKey(
        Allocation, null=True, blank=True, on_delete=models.CASCADE, related_name="exemptions"
    )
    reason = models.TextField()
    expires_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = team_owned("team", "allocation__team").as_manager()

    class Meta:
        ordering = ["-expires_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(team__isnull=False) & Q(allocation__isnull=True))
                | (Q(team__isnull=True) & Q(allocation__isnull=False)),
                name="exemption_team_xor_allocation",
            ),
        ]

    def __str__(self) -> str:
        subject = f"team {self.team_id}" if self.team_id else f"allocation {self.allocation_id}"
        return f"Exemption of {subject} until {self.expires_at:%Y-%m-%d}"


class IdleFinding(models.Model):
    """An allocation seen idle by the scan, and what became of it.

    Numbers from the latest scan that saw it idle: ``mean_util_pct`` (%), ``peak_util_pct`` (%),
    ``cards_in_use`` of ``card_count``; ``cards_reclaimed`` once reclaimed (``card_count`` before
    minus after). ``would_reclaim_at`` is set instead of reclaiming under a dry-run policy.
    ``detail`` is the per-card evaluation of the latest scan that saw it idle, kept once per
    group on :class:`IdleGroupEvaluation` (``evaluation``) and shared by the group's findings.
    At most one open finding per allocation.
    ``card_count``, ``status_before``, ``ends_at_before`` and ``placement_before`` are what a
    reclamation changed, for its undo.
    """

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="idle_findings"
    )
    state = models.CharField(
        max_length=10,
        choices=IdleFindingState.choices,
        default=IdleFindingState.OPEN,
        db_index=True,
    )
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    warned_at = models.DateTimeField(null=True, blank=True)
    reclaimed_at = models.DateTimeField(null=True, blank=True)
    would_reclaim_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    dry_run = models.BooleanField(default=True)
    certainly_idle = models.BooleanField(default=False)
    mean_util_pct = models.DecimalField(max_digits=6, decimal_places=2, null=True, blank=True)
    peak_util_pct = models.DecimalField(max_digits=6, decimal_places=2, null=True, blank=True)
    card_count = models.PositiveIntegerField()
    cards_in_use = models.PositiveIntegerField()
    cards_reclaimed = models.PositiveIntegerField(default=0)
    ends_at_before = models.DateTimeField(null=True, blank=True)
    status_before = models.CharField(max_length=12, blank=True)
    # The allocation's placement when it was reclaimed (a shrink keeps part of it; an undo
    # gives it back); empty for an unplaced allocation or a reclamation before it was kept.
    placement_before = models.JSONField(default=list, blank=True)
    note = models.TextField(blank=True)
    evaluation = models.ForeignKey(
        "IdleGroupEvaluation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="findings",
    )

    objects = team_owned("allocation__team").as_manager()

    class Meta:
        ordering = ["-last_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation"],
                condition=Q(state="open"),
                name="idle_finding_one_open_per_allocation",
            ),
            models.CheckConstraint(
                condition=Q(cards_in_use__lte=models.F("card_count")),
                name="idle_finding_in_use_within_count",
            ),
        ]

    def __str__(self) -> str:
        return f"Idle finding #{self.pk} allocation {self.allocation_id} ({self.state})"

    @property
    def detail(self) -> dict:
        """The group's evaluation when this finding was last seen idle
        (:func:`pools.reclamation.services.scan.finding_detail`: ``reason``, ``sparkline``
        ``[unix_ts, %]`` pairs, ``cards``); ``{}`` before any."""
        return self.evaluation.detail if self.evaluation_id else {}


class IdleGroupEvaluation(models.Model):
    """One scan's evaluation of one idle group (a team's allocations in a pool; per GPU model
    in a Slurm pool), stored once for all the group's findings rather than on each (issue #29
    item 7: 126 findings of a team each held the same ~1,000 cards' numbers). ``detail``: see
    :attr:`IdleFinding.detail`. The scan deletes the ones no finding points to any more."""

    evaluated_at = models.DateTimeField()
    detail = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"Idle group evaluation #{self.pk} at {self.evaluated_at:%Y-%m-%d %H:%M}"


class IdleScanRun(models.Model):
    """One run of the idle scan (:func:`pools.reclamation.services.scan.idle_scan`): what it saw and
    did, so that admins can tell a quiet fleet from a scan that could not read Prometheus.
    Counts are allocations; ``devices`` dcgm-exporter series; ``seconds`` wall time;
    ``no_data`` the allocations left unknown for want of series, one line each (pool admins
    only: it names teams). ``cluster``: the cluster whose pools it scanned (empty: the pools
    without a cluster — the environment's — or, with no policy anywhere, the whole fleet)."""

    cluster = models.ForeignKey(
        "pools.Cluster",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="idle_scan_runs",
    )
    started_at = models.DateTimeField(db_index=True)
    seconds = models.FloatField(default=0.0)
    allocations = models.PositiveIntegerField(default=0)
    busy = models.PositiveIntegerField(default=0)
    idle = models.PositiveIntegerField(default=0)
    unknown = models.PositiveIntegerField(default=0)
    warned = models.PositiveIntegerField(default=0)
    reclaimed = models.PositiveIntegerField(default=0)
    would_reclaim = models.PositiveIntegerField(default=0)
    resolved = models.PositiveIntegerField(default=0)
    exempt = models.PositiveIntegerField(default=0)
    dismissed = models.PositiveIntegerField(default=0)
    devices = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    notes = models.JSONField(default=list, blank=True)
    no_data = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"Idle scan at {self.started_at:%Y-%m-%d %H:%M}"


class ReclamationWhatIf(QueuedRun):
    """One reclamation what-if (:func:`pools.reclamation.services.whatif.reclamation_what_if`,
    a :class:`~pools.jobs.models.QueuedRun`): ``progress`` is the per cent of the replay's
    steps, ``result`` the report as JSON (:func:`pools.reclamation.services.whatif.report_json`);
    ``error_code`` ``unavailable`` (no Prometheus configured), ``prometheus_unavailable`` or
    ``internal``.

    ``params``: ``{"days": 1-30, "overrides": {field: value}}``, the trial thresholds of
    :data:`WHATIF_FIELDS` (JSON: decimals as strings). Pool admins see them.
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="reclamation_whatifs")

    class Meta(QueuedRun.Meta):
        verbose_name = "reclamation what-if"

    def __str__(self) -> str:
        return f"Reclamation what-if #{self.pk} of pool {self.pool_id}"
