"""Choices of the advisor's models: a finding's status and severity, and the rules by code
(the codes and titles are :mod:`pools.advisor.rules`')."""

from __future__ import annotations

from django.db import models

from pools.advisor.rules import RULES, Severity


class FindingStatus(models.TextChoices):
    """open -> acknowledged | muted -> closed (the signal cleared); acknowledged and muted
    findings stay tracked and close the same way. A muted one is left out of digests and the
    panels' counts."""

    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    MUTED = "muted", "Muted"
    CLOSED = "closed", "Closed"


LIVE_STATUSES = (FindingStatus.OPEN, FindingStatus.ACKNOWLEDGED, FindingStatus.MUTED)

SeverityChoice = models.TextChoices(
    "SeverityChoice", [(s.name, (s.value, s.value.capitalize())) for s in Severity]
)
RuleChoice = models.TextChoices(
    "RuleChoice", [(info.rule.name, (info.rule.value, info.title)) for info in RULES]
)
# Severities in order, most urgent first (sorting a list by urgency).
SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
