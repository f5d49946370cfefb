"""Filters of the reclamation API's idle findings: ``state`` (any of), ``team`` and ``pool``
(slugs), ``dry_run``, and ``ordering`` by last or first seen, mean use or cards."""

from __future__ import annotations

import django_filters as filters
from django_filters import fields as filter_fields

from pools.common.choices import IdleFindingState
from pools.reclamation.models import IdleFinding
from pools.web.team_picker import VisibleTeamFilter


class _StatesOrAny(filter_fields.MultipleChoiceField):
    """Any of the states sent; an empty value (the page's *Any*, ``?state=``) is no state, not
    "Select a valid choice." (the page's own select and *Filter* button answered 400)."""

    def clean(self, value):
        return super().clean([v for v in (value or []) if v != ""])


class _StatesFilter(filters.MultipleChoiceFilter):
    field_class = _StatesOrAny


class IdleFindingFilterSet(filters.FilterSet):
    state = _StatesFilter(choices=IdleFindingState.choices, distinct=False)
    team = VisibleTeamFilter(field_name="allocation__team")
    pool = filters.CharFilter(field_name="allocation__pool__slug")
    dry_run = filters.BooleanFilter()
    ordering = filters.OrderingFilter(
        fields=(
            ("last_seen_at", "last_seen"),
            ("first_seen_at", "first_seen"),
            ("mean_util_pct", "mean_util"),
            ("card_count", "cards"),
        )
    )

    class Meta:
        model = IdleFinding
        fields = ["state", "team", "pool", "dry_run"]
