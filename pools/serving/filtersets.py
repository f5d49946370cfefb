"""One FilterSet for the serving list of the API (``/api/v1/serving/``)."""

from __future__ import annotations

import django_filters as filters

from pools.capacity.models import Allocation
from pools.web.team_picker import VisibleTeamFilter


class ServingAllocationFilterSet(filters.FilterSet):
    """``team``: a slug among the teams the caller may see (another team's, or an unknown
    slug, is a 400 naming ``team``, never the whole list)."""

    team = VisibleTeamFilter()

    class Meta:
        model = Allocation
        fields = ["team"]
