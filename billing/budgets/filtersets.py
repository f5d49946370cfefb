"""The one FilterSet of budgets: the page, the API and the CSV export filter alike."""

from __future__ import annotations

import django_filters as filters

from billing.budgets.choices import BudgetPeriod, Enforcement
from billing.budgets.models import Budget
from pools.web.team_picker import VisibleTeamFilter


class BudgetFilterSet(filters.FilterSet):
    team = VisibleTeamFilter()
    pool = filters.CharFilter(field_name="pool__slug", label="Pool (slug)")
    gpu_model = filters.CharFilter(field_name="gpu_model__slug", label="GPU model (slug)")
    period = filters.ChoiceFilter(choices=BudgetPeriod.choices)
    enforcement = filters.ChoiceFilter(choices=Enforcement.choices)
    ordering = filters.OrderingFilter(fields=(("team__name", "team"), ("period", "period")))

    class Meta:
        model = Budget
        fields = ["team", "cost_centre", "pool", "gpu_model", "period", "enforcement"]
