"""One FilterSet for the findings: the Advisor page, its CSV and the API list."""

from __future__ import annotations

import django_filters as filters

from pools.advisor.choices import LIVE_STATUSES, FindingStatus, RuleChoice, SeverityChoice
from pools.advisor.models import AdvisorFinding
from pools.inventory.models import Pool
from pools.web.team_picker import VisibleTeamFilter

# "live" (the default of the page): open, acknowledged or muted; "all" includes closed.
STATUS_CHOICES = [("live", "Live"), *FindingStatus.choices, ("all", "All")]


class FindingOrderingFilter(filters.OrderingFilter):
    """``severity`` sorts by how severe (ascending: info, warning, critical; ``-severity`` the
    most severe first), not by the stored ``severity_rank``, which counts the other way (0
    critical, 1 warning, 2 info: the index of the lists' default, most urgent first)."""

    def get_ordering_value(self, param: str) -> str:
        if param == "severity":
            return "-severity_rank"
        if param == "-severity":
            return "severity_rank"
        return super().get_ordering_value(param)


class AdvisorFindingFilterSet(filters.FilterSet):
    """Filters: pool and team (slugs), severity, rule, status (``live`` by default on the
    page); ordering by severity, rule, team, since, last seen."""

    pool = filters.ModelChoiceFilter(
        queryset=Pool.objects.all(),
        to_field_name="slug",
        field_name="allocation__pool",
        label="Pool",
        empty_label="Any",
    )
    team = VisibleTeamFilter()  # typed: a fleet has too many teams for a <select>
    severity = filters.ChoiceFilter(choices=SeverityChoice.choices, empty_label="Any")
    rule = filters.ChoiceFilter(choices=RuleChoice.choices, empty_label="Any")
    status = filters.ChoiceFilter(
        choices=STATUS_CHOICES, method="filter_status", empty_label=None, label="Status"
    )
    ordering = FindingOrderingFilter(
        fields=(
            ("severity_rank", "severity"),
            ("rule", "rule"),
            ("team__name", "team"),
            ("allocation_id", "allocation"),
            ("since", "since"),
            ("last_seen_at", "last_seen"),
        )
    )

    class Meta:
        model = AdvisorFinding
        fields = ["pool", "team", "severity", "rule", "status"]

    def filter_status(self, queryset, name, value):
        if value == "live" or not value:
            return queryset.filter(status__in=LIVE_STATUSES)
        if value == "all":
            return queryset
        return queryset.filter(status=value)
