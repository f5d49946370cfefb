"""Read-side queries of idle findings and exemptions: who may see which."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from pools.reclamation.models import Exemption, IdleFinding, ReclamationWhatIf


def idle_finding_list(*, user) -> QuerySet[IdleFinding]:
    """Idle findings the user may see (their teams', or all for pool admins), newest first,
    with the allocation's team, pool (and its reclamation policy, for the reclaim time) and
    model and the finding's group evaluation joined."""
    qs = IdleFinding.objects.select_related(
        "allocation__team",
        "allocation__pool__reclamation_policy",
        "allocation__gpu_model",
        "evaluation",
    ).order_by("-last_seen_at", "-id")
    return qs.visible_to(user)


def exemption_list(*, user, include_expired: bool = False) -> QuerySet[Exemption]:
    """Exemptions the user may see (of their teams or their teams' allocations; all for pool
    admins), in force only unless ``include_expired``; latest expiry first."""
    qs = Exemption.objects.select_related(
        "team", "allocation__team", "allocation__pool", "created_by"
    ).order_by("-expires_at", "-id")
    if not include_expired:
        qs = qs.filter(expires_at__gt=timezone.now())
    return qs.visible_to(user)


def reclamation_whatif_list() -> QuerySet[ReclamationWhatIf]:
    """Queued reclamation what-ifs (pool admins' pages only), newest first, pool joined."""
    return ReclamationWhatIf.objects.select_related("pool")
