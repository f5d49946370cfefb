"""FilterSet of saved sizing estimates: the page, its CSV export and the API filter through it."""

from __future__ import annotations

import django_filters as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from pools.common.choices import EstimateStatus
from pools.sizing.models import SizingEstimate
from pools.sizing.presets import model_presets
from pools.web.team_picker import VisibleTeamFilter


def _model_choices():
    return [(p.id, p.name) for p in model_presets().values()] + [("custom", "Custom")]


@extend_schema_field(OpenApiTypes.STR)
class _PresetFilter(filters.ChoiceFilter):
    """A model preset id (or ``custom``), read from the estimate's JSON inputs."""


class SizingEstimateFilterSet(filters.FilterSet):
    """Filters for sizing estimates: status, team, model preset."""

    status = filters.ChoiceFilter(choices=EstimateStatus.choices, empty_label="Any")
    team = VisibleTeamFilter()
    model = _PresetFilter(
        field_name="inputs__model", choices=_model_choices, empty_label="Any", label="Model"
    )
    ordering = filters.OrderingFilter(fields=(("created_at", "created"),))

    class Meta:
        model = SizingEstimate
        fields = ["status", "team", "model"]
