"""The one FilterSet of budgets: the page, the API and the CSV export filter alike."""

from __future__ import annotations

import django_filters as filters
from django import forms
from django.utils.choices import BaseChoiceIterator

from billing.budgets.choices import BudgetPeriod, Enforcement
from billing.budgets.models import Budget
from pools.inventory.models import GpuModel, Pool
from pools.web.team_picker import VisibleTeamFilter


class _SlugNames(BaseChoiceIterator):
    """The options of a pool or GPU model picker: ``("", "Any")``, then ``(slug, name)`` of
    ``queryset`` by name, read each time the select is drawn (an API call never reads them).
    A ``BaseChoiceIterator``: Django keeps it as it is, where it lists any other iterable once,
    when the field is first built."""

    def __init__(self, queryset):
        self.queryset = queryset

    def __iter__(self):
        yield ("", "Any")
        yield from self.queryset.order_by("name").values_list("slug", "name")


class BudgetFilterSet(filters.FilterSet):
    """``pool`` and ``gpu_model`` are slugs, as the API has always read them (an unknown slug
    matches no budget); the page draws them as selects of the fleet's pools and models."""

    team = VisibleTeamFilter()
    pool = filters.CharFilter(
        field_name="pool__slug", label="Pool", widget=forms.Select(choices=_SlugNames(Pool.objects))
    )
    gpu_model = filters.CharFilter(
        field_name="gpu_model__slug",
        label="GPU model",
        widget=forms.Select(choices=_SlugNames(GpuModel.objects)),
    )
    period = filters.ChoiceFilter(choices=BudgetPeriod.choices)
    enforcement = filters.ChoiceFilter(choices=Enforcement.choices)
    ordering = filters.OrderingFilter(fields=(("team__name", "team"), ("period", "period")))

    class Meta:
        model = Budget
        fields = ["team", "cost_centre", "pool", "gpu_model", "period", "enforcement"]
