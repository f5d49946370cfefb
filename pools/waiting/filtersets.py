"""The one FilterSet of waiting work: the page, its CSV and the API filter through it."""

from __future__ import annotations

import django_filters as filters
from django.db.models import Q

from pools.clusters.models import Cluster
from pools.common.choices import Scheduler
from pools.inventory.filtersets import yes_no
from pools.tenancy.selectors import UNSEEN_TEAM
from pools.waiting.choices import WaitKind
from pools.waiting.models import PendingWork
from pools.web.api import visible_teams
from pools.web.pages import SlugNameChoiceFilter

SCHEDULERS = [(s.value, s.label) for s in (Scheduler.SLURM, Scheduler.KUBERNETES)]


class TeamPendingWorkFilterSet(filters.FilterSet):
    """One team's page: scheduler, cluster (slug; an unknown one is a field error), kind,
    whether the reason was translated, and ``q`` over job id / name / user / reason code."""

    scheduler = filters.ChoiceFilter(choices=SCHEDULERS, empty_label="Any")
    cluster = filters.ModelChoiceFilter(
        queryset=Cluster.objects.order_by("name"), to_field_name="slug", empty_label="Any"
    )
    kind = filters.ChoiceFilter(choices=WaitKind.choices, empty_label="Any", label="Waits for")
    translated = yes_no(label="Translated")
    q = filters.CharFilter(method="search", label="Search")
    ordering = filters.OrderingFilter(
        fields=(
            ("submitted_at", "submitted"),
            ("cards_requested", "cards"),
            ("expected_start_at", "expected_start"),
        )
    )

    class Meta:
        model = PendingWork
        fields = ["scheduler", "cluster", "kind", "translated"]

    def search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(ref__icontains=value)
            | Q(name__icontains=value)
            | Q(user__icontains=value)
            | Q(reason_code__icontains=value)
        )


class PendingWorkFilterSet(TeamPendingWorkFilterSet):
    """The API's: also ``team`` (slug; an unknown or invisible one is a field error, 400)."""

    team = SlugNameChoiceFilter(
        queryset=visible_teams,
        to_field_name="slug",
        empty_label="Any",
        error_messages={"invalid_choice": UNSEEN_TEAM},
    )

    class Meta:
        model = PendingWork
        fields = ["team", "scheduler", "cluster", "kind", "translated"]
