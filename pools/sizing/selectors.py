"""Read-side queries of saved sizing estimates: a member sees their own and their teams'."""

from __future__ import annotations

from django.db.models import QuerySet

from pools.sizing.models import SizingEstimate


def sizing_estimate_list(*, user) -> QuerySet[SizingEstimate]:
    """Sizing estimates the user may see: all for pool admins; for others, those they created and
    those shared with one of their teams. Creator and team joined."""
    return SizingEstimate.objects.select_related("created_by", "team").visible_to(user)
