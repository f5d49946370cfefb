"""Read-side queries of saved sizing estimates: a member sees their own and their teams'."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from pools.sizing.models import SizingEstimate
from pools.tenancy.models import Team


def sizing_estimate_list(*, user) -> QuerySet[SizingEstimate]:
    """Sizing estimates the user may see: all for pool admins; for others, those they created and
    those shared with one of their teams. Creator and team joined."""
    qs = SizingEstimate.objects.select_related("created_by", "team")
    if user.is_staff:
        return qs
    teams = Team.objects.filter(memberships__user=user).values("pk")
    return qs.filter(Q(created_by=user) | Q(team__in=teams))
