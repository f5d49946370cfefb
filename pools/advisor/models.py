"""The advisor's records: findings (one live per allocation and rule), the passes that opened
and closed them, and the team managers who asked for the weekly digest."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from pools.advisor.choices import LIVE_STATUSES, FindingStatus, RuleChoice, SeverityChoice
from pools.advisor.evidence import evidence_rows
from pools.advisor.rules import RULES
from pools.capacity.models import Allocation
from pools.tenancy.models import Team, team_owned


class AdvisorFinding(models.Model):
    """A rule's finding about one allocation (or, for team-wide rules, one team).

    ``since``: when the signal began as far as the rule's window showed on opening;
    ``opened_at`` / ``last_seen_at``: the passes that first and last saw it; ``closed_at``: the
    pass that saw it clear. ``evidence``: the triggering numbers of the last pass that saw it
    (JSON: names as :mod:`pools.advisor.rules` gives them). ``status`` moves by
    acknowledge / mute (with ``reason``, by ``status_by`` at ``status_at``, audited) and
    closes itself. At most one live (not closed) finding per (allocation, rule) and per
    (team, rule) without an allocation: a pass run twice updates, never duplicates.
    """

    allocation = models.ForeignKey(
        Allocation,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="advisor_findings",
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="advisor_findings")
    rule = models.CharField(max_length=20, choices=RuleChoice.choices)
    severity = models.CharField(max_length=10, choices=SeverityChoice.choices)
    severity_rank = models.PositiveSmallIntegerField(help_text="0 critical, 1 warning, 2 info.")
    since = models.DateTimeField()
    opened_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    summary = models.CharField(max_length=300)
    fix = models.TextField()
    evidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=12, choices=FindingStatus.choices, default=FindingStatus.OPEN
    )
    reason = models.TextField(blank=True)
    status_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status_at = models.DateTimeField(null=True, blank=True)

    objects = team_owned("team").as_manager()

    class Meta:
        ordering = ["severity_rank", "-last_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation", "rule"],
                condition=Q(status__in=LIVE_STATUSES) & Q(allocation__isnull=False),
                name="advisor_finding_one_live_per_allocation_rule",
            ),
            models.UniqueConstraint(
                fields=["team", "rule"],
                condition=Q(status__in=LIVE_STATUSES) & Q(allocation__isnull=True),
                name="advisor_finding_one_live_per_team_rule",
            ),
            models.CheckConstraint(
                condition=Q(closed_at__isnull=True) | Q(status=FindingStatus.CLOSED),
                name="advisor_finding_closed_at_only_closed",
            ),
        ]
        indexes = [
            # the lists' default order (most urgent, newest first) over live findings: a page
            # of 50 walks this index instead of sorting 10,000 rows
            models.Index(
                fields=["severity_rank", "-last_seen_at", "-id"],
                condition=Q(status__in=LIVE_STATUSES),
                name="advisor_finding_live_urgency",
            ),
            models.Index(fields=["team", "status"], name="advisor_finding_team_status"),
        ]

    def __str__(self) -> str:
        subject = f"allocation #{self.allocation_id}" if self.allocation_id else str(self.team)
        return f"{self.rule} on {subject} ({self.status})"

    def evidence_rows(self) -> list[tuple[str, str]]:
        """The evidence as pages show it, ``(label, value with unit)``
        (:func:`pools.advisor.evidence.evidence_rows`)."""
        return evidence_rows(self.evidence)


class AdvisorRun(models.Model):
    """One advisor pass: the allocations it judged and what it did. ``undecided``: rule code ->
    how many allocations it could not judge (signals missing)."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    evaluated_at = models.DateTimeField(help_text="The instant the rules judged.")
    allocations = models.PositiveIntegerField(default=0)
    opened = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    closed = models.PositiveIntegerField(default=0)
    undecided = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"advisor pass {self.started_at:%Y-%m-%d %H:%M}"

    def undecided_by_title(self) -> list[tuple[str, int]]:
        """``undecided`` as pages show it: ``(rule title, allocations)``, in the rules' order."""
        return [
            (i.title, self.undecided[i.rule.value]) for i in RULES if i.rule.value in self.undecided
        ]


class AdvisorDigestOptIn(models.Model):
    """A user who asked for the weekly advisor digest of the teams they manage."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="advisor_digest"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"advisor digest for {self.user}"
