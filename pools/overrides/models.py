"""Temporary overrides (issue 32 item 2, kueue #8654): a pool admin raises one of a team's figures
in one pool until a date."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from pools.classes.models import WorkloadClass
from pools.inventory.models import GpuModel, Pool
from pools.tenancy.models import Team, TeamOwnedQuerySet

# Temporary overrides (issue 32 item 2, kueue #8654): a pool admin raises one of a team's
# figures in one pool until a date; while active (status active and ``until`` after now) the
# functions that compute what the schedulers should hold read it (pools/overrides/selectors.py).


class OverrideKind(models.TextChoices):
    """What an override raises. ``ceiling``: the team's cap on cards of a GPU model — Slurm
    ``GrpTRES=gres/gpu:<type>=N`` on its account, the namespace's ResourceQuota (and Kueue
    ClusterQueue ``nominalQuota``). ``borrowing_limit``: the Kueue ClusterQueue's
    ``borrowingLimit`` of the model's product in the pool's cohort (the elastic burst).
    ``priority``: the team's workload class — its Slurm account's default QOS, the
    PriorityClass its pods may name."""

    CEILING = "ceiling", "Ceiling (card cap)"
    BORROWING_LIMIT = "borrowing_limit", "Borrowing limit (Kueue)"
    PRIORITY = "priority", "Priority (workload class)"


class OverrideStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"


OVERRIDE_REASON_MAX_LENGTH = 500


class TemporaryOverrideQuerySet(TeamOwnedQuerySet):
    def in_force(self, now) -> TemporaryOverrideQuerySet:
        """Overrides that raise their figure at ``now`` (aware): active, ``until`` after it.
        The beat marks the others expired; until it does they already count for nothing."""
        return self.filter(status=OverrideStatus.ACTIVE, until__gt=now)


class TemporaryOverride(models.Model):
    """A raise of one of the team's figures in ``pool`` from ``created_at`` to ``until``.

    ``cards``: what a ceiling or borrowing limit is raised to (whole cards of ``gpu_model``);
    ``workload_class``: the class a priority is raised to. ``cards_before`` / ``class_before``:
    the figure when the override was made (shown as "from"; the figure in force afterwards is
    whatever the team's allocations then give). ``ended_at``: when it stopped counting (expiry
    or cancel); ``restored_at``: when the schedulers were last put back after it ended (the
    beat retries until set)."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="overrides")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="overrides")
    kind = models.CharField(max_length=16, choices=OverrideKind.choices)
    gpu_model = models.ForeignKey(
        GpuModel, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    cards = models.PositiveIntegerField(null=True, blank=True)
    cards_before = models.PositiveIntegerField(null=True, blank=True)
    workload_class = models.ForeignKey(
        WorkloadClass, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    class_before = models.ForeignKey(
        WorkloadClass, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.CharField(max_length=OVERRIDE_REASON_MAX_LENGTH)
    until = models.DateTimeField()
    status = models.CharField(
        max_length=10, choices=OverrideStatus.choices, default=OverrideStatus.ACTIVE
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    restored_at = models.DateTimeField(null=True, blank=True)
    # What the last scheduler write after a change said ({"scheduler": ..., "applied": ...} or
    # {"error": ...}); empty until the first.
    scheduler_binding = models.JSONField(default=dict, blank=True)

    objects = TemporaryOverrideQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "until"])]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(
                        kind__in=["ceiling", "borrowing_limit"],
                        gpu_model__isnull=False,
                        cards__gt=0,
                        workload_class__isnull=True,
                    )
                    | Q(
                        kind="priority",
                        gpu_model__isnull=True,
                        cards__isnull=True,
                        workload_class__isnull=False,
                    )
                ),
                name="override_kind_fields",
            ),
            models.CheckConstraint(
                condition=Q(until__gt=F("created_at")), name="override_until_after_start"
            ),
            # one raise of a figure at a time: a second would leave "from what" ambiguous
            models.UniqueConstraint(
                fields=["team", "pool", "kind", "gpu_model"],
                condition=Q(status="active", gpu_model__isnull=False),
                name="override_one_active_per_cap",
            ),
            models.UniqueConstraint(
                fields=["team", "pool", "kind"],
                condition=Q(status="active", gpu_model__isnull=True),
                name="override_one_active_priority",
            ),
        ]

    def __str__(self) -> str:
        """What audit rows and the admin show: ``"Ceiling (card cap) of NLP in Training → 8 ×
        A100 SXM4 80GB"`` — the team's, pool's and model's names, as the pages say them."""
        kind, team, pool = self.get_kind_display(), self.team.name, self.pool.name
        return f"{kind} of {team} in {pool} → {self.raised_to}"

    @property
    def raised_to(self) -> str:
        """``"12 × A100 SXM4 80GB"`` (the model's name) or the class name."""
        if self.kind == OverrideKind.PRIORITY:
            return self.workload_class.name if self.workload_class_id else "?"
        return f"{self.cards} × {self.gpu_model.name if self.gpu_model_id else '?'}"
