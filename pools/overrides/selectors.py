"""What the temporary overrides in force change (issue 32 item 2, kueue #8654).

The figures the schedulers hold are computed in one place each, and each reads its override
here, so the binding, the beat and reconcile's drift check all see the raised value while an
override lasts and the normal one after (:meth:`TemporaryOverrideQuerySet.in_force`):

- ceiling: :func:`pools.capacity.services.scheduler_binding.team_cards_applied` is at least the
  override's cards — the Slurm ``GrpTRES=gres/gpu:<type>=N`` cap and the namespace's
  ResourceQuota (with Kueue, ``nominalQuota`` + ``borrowingLimit``) of that GPU model;
- borrowing limit: :func:`~pools.capacity.services.scheduler_binding.kueue_borrowing` — the
  ClusterQueue's ``borrowingLimit`` of the product is at least the override's cards, and the
  quota grows by the difference so that ``nominalQuota`` (the guaranteed cards) stays;
- priority: :func:`pools.capacity.services.class_qos.team_classes_held` puts the override's
  class first, which makes it the account's ``DefaultQOS`` (and allowed), and its
  PriorityClass written and allowed.

When several overrides in force raise one figure (one per pool, several pools in a cluster),
the highest wins.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Max, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from pools.classes.models import WorkloadClass
from pools.inventory.models import GpuModel, Pool
from pools.overrides.models import OverrideKind, TemporaryOverride
from pools.tenancy.models import Team


def overrides_in_force(*, team: Team, pools: QuerySet[Pool], now: datetime, kind: str):
    """The team's overrides of ``kind`` in ``pools`` that count at ``now``."""
    return TemporaryOverride.objects.in_force(now).filter(team=team, pool__in=pools, kind=kind)


def ceiling_raise(
    *, team: Team, gpu_model: GpuModel, pools: QuerySet[Pool], now: datetime
) -> int | None:
    """The most cards of ``gpu_model`` a ceiling override in force gives the team in
    ``pools``, or ``None``. One query."""
    found = (
        overrides_in_force(team=team, pools=pools, now=now, kind=OverrideKind.CEILING)
        .filter(gpu_model=gpu_model)
        .aggregate(cards=Max("cards"))["cards"]
    )
    return found if found is None else int(found)


def ceiling_models(*, team: Team, pools: QuerySet[Pool], now: datetime) -> QuerySet:
    """Ids of the GPU models a ceiling or borrowing override in force names (a figure the
    team may hold no allocation of): a subquery."""
    return (
        TemporaryOverride.objects.in_force(now)
        .filter(
            team=team, pool__in=pools, kind__in=[OverrideKind.CEILING, OverrideKind.BORROWING_LIMIT]
        )
        .values("gpu_model")
    )


def borrowing_raises(
    *, team: Team, pools: QuerySet[Pool], now: datetime
) -> list[tuple[str, int, int]]:
    """``(cohort, gpu model id, cards)`` of the team's borrowing overrides in force in
    ``pools`` (Kueue pools with a cohort: the service refuses others), by pool slug. One
    query."""
    return list(
        overrides_in_force(team=team, pools=pools, now=now, kind=OverrideKind.BORROWING_LIMIT)
        .exclude(pool__quota_cohort="")
        .order_by("pool__slug", "gpu_model_id")
        .values_list("pool__quota_cohort", "gpu_model_id", "cards")
    )


def priority_raise(*, team: Team, pools: QuerySet[Pool], now: datetime) -> WorkloadClass | None:
    """The workload class of highest priority a priority override in force gives the team in
    ``pools``, or ``None``. One query."""
    ids = overrides_in_force(team=team, pools=pools, now=now, kind=OverrideKind.PRIORITY).values(
        "workload_class"
    )
    return (
        WorkloadClass.objects.filter(pk__in=ids).order_by("-priority", "-preemption_order").first()
    )


def override_summary(override: TemporaryOverride, *, team_name: str) -> str:
    """One override in words, as the calendars and the explainer show it: "Ceiling (card cap)
    of NLP raised 4 → 8 cards of A100 SXM4 80GB until Fri 12 Dec 18:00 UTC by admin";
    a priority: "Priority of NLP raised Standard → Urgent until …". ``team_name``: the
    team as the viewer may see it (another team's reads "other teams"). The time is in the
    current time zone, named; one ended before its ``until`` says when, "(ended early)"; a
    figure unknown when it was made reads "—". Reads ``gpu_model``,
    ``workload_class``, ``class_before`` and ``created_by`` (select them)."""
    if override.kind == OverrideKind.PRIORITY:
        before = override.class_before.name if override.class_before_id else "—"
        change = f"{before} → {override.workload_class.name}"
    else:
        before = "—" if override.cards_before is None else str(override.cards_before)
        change = f"{before} → {override.cards} cards of {override.gpu_model.name}"
    early = override.ended_at is not None and override.ended_at < override.until
    stop = timezone.localtime(override.ended_at if early else override.until)
    until = stop.strftime("%a %d %b %H:%M %Z") + (" (ended early)" if early else "")
    who = override.created_by.username if override.created_by_id else "a pool admin"
    return f"{override.get_kind_display()} of {team_name} raised {change} until {until} by {who}"


def override_list(*, user) -> QuerySet[TemporaryOverride]:
    """The temporary overrides ``user`` may see (their teams'; every one for a pool admin),
    with what they name joined, newest first."""
    return TemporaryOverride.objects.visible_to(user).select_related(
        "team", "pool", "gpu_model", "workload_class", "class_before", "created_by"
    )


def pool_overrides_over(*, pool_id: int, gpu_model_id: int, start, end) -> list[TemporaryOverride]:
    """The overrides of the pool that count at some instant of ``[start, end)`` (from their
    making to their ``until``, or to when they were ended early) and name ``gpu_model_id`` or no
    model (a priority): what a pool × GPU model calendar shows, by start. One query."""
    return list(
        TemporaryOverride.objects.filter(pool_id=pool_id, created_at__lt=end)
        .filter(Q(gpu_model_id=gpu_model_id) | Q(gpu_model__isnull=True))
        .annotate(stopped=Coalesce("ended_at", "until"))
        .filter(stopped__gt=start)
        .select_related("gpu_model", "workload_class", "class_before", "created_by")
        .order_by("created_at", "pk")
    )


def team_overrides_in_force(*, team_id: int, now) -> list[TemporaryOverride]:
    """The team's overrides in force at ``now``, soonest to end first: what its pages show."""
    return list(
        TemporaryOverride.objects.in_force(now)
        .filter(team_id=team_id)
        .select_related("pool", "gpu_model", "workload_class", "class_before", "created_by")
        .order_by("until", "pk")
    )
