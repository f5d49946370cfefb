"""Apply allocations in the scheduler that runs the work, and take them away again.

Slurm: each team is an account (its slug) with an association per member on the pool's
partition, and one ``GrpTRES=gres/gpu:<type>=N`` cap per GPU type, where N is the sum of the
team's allocations of that type whose window is open — 0 once none is (an association
without a ``GrpTRES`` entry is unlimited, so the cap is never removed). Slurm keeps the cap on
the account, not per partition (see :class:`scheduler_adapters.records.GpuLimit`), so the
portal always writes the team's *total* for the type — which makes every call idempotent and
lets release, end, reclaim and reconcile share one function: :func:`slurm_limit_sync`.

MIG slices (issue 38) are capped apart, per profile: ``GrpTRES=gres/gpu:<profile type>=N``
with N the team's open-window slices of that profile and model (:func:`slurm_mig_gres_type`
names the type the cluster reports), never added to the cards' cap.

Kubernetes: each team is a namespace whose ResourceQuota on ``requests.nvidia.com/gpu`` is the
team's open-window cards in the Kubernetes pools of that cluster (:func:`kubernetes_quota_sync`).

Recurring reservations (issue 32) count like allocations while an occurrence is open (or
opens within the provisioning lead): the cap and the quota go up for it and down after it,
applied by the beat loop (:mod:`pools.recurring.services.binding`).

Temporary overrides (issue 32) raise a team's cap, Kueue borrowing limit or class while they
last; each figure below reads them in one place (:mod:`pools.overrides.selectors`).

Every figure is per cluster (:func:`cluster_pools`): a namespace or an account lives in one
cluster, so its cap counts the team's allocations in that cluster's pools only (issue 35).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import (
    Case,
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    Q,
    QuerySet,
    Sum,
    When,
)
from django.db.models.expressions import RawSQL
from django.utils import timezone

from pools.capacity.availability import pool_free_cards
from pools.capacity.lifecycle import APPLIED_STATUSES
from pools.capacity.models import Allocation, SchedulerDrift
from pools.capacity.services.class_qos import (
    kubernetes_priority_sync,
    slurm_account_qos_set,
    slurm_qos_prepare,
)
from pools.classes.slurm_qos import class_qos_name
from pools.clusters.adapters import pool_adapter
from pools.clusters.models import Cluster
from pools.common.choices import AliasKind, CredentialKind, QuotaBackend, Scheduler
from pools.inventory.models import (
    Gpu,
    GpuModel,
    GpuModelAlias,
    MigDevice,
    Node,
    Pool,
    node_cluster_id,
)
from pools.overrides.selectors import borrowing_raises, ceiling_models, ceiling_raise
from pools.recurring.models import RecurringReservation, ReservationStatus
from pools.recurring.recurrence import occurrences
from pools.tenancy.models import Team
from pools.tenancy.selectors import team_usernames
from scheduler_adapters.base import SchedulerAdapter
from scheduler_adapters.errors import (
    CredentialsUnreadable,
    NotFound,
    ReservationQosUnsupported,
    SchedulerError,
    SchedulerRejected,
)
from scheduler_adapters.kubernetes import KubernetesAdapter
from scheduler_adapters.kubernetes_elastic import ElasticQuotaWriter, lender_name
from scheduler_adapters.kubernetes_taints import ensure_card_class_taints
from scheduler_adapters.records import GpuLimit, ReservationSpec
from scheduler_adapters.types import KueueCohort

# How long before its window an allocation is applied in the scheduler.
PROVISION_LEAD = timedelta(minutes=15)
# Elastic burst is lent only from cards that stay free this long (a guaranteed allocation
# starting within it is not lent to; pools/elastic/services.py).
LEND_HORIZON = timedelta(hours=1)


def slurm_gres_type(gpu_model: GpuModel) -> str:
    """The GRES type Slurm uses for ``gpu_model``: an admin-mapped or catalogue Slurm alias,
    else the model's slug (which the catalogue makes a valid GRES name)."""
    aliases = GpuModelAlias.objects.filter(
        gpu_model=gpu_model, kind__in=[AliasKind.ADMIN, AliasKind.SLURM_GRES]
    )
    for alias in sorted(aliases, key=lambda a: a.kind != AliasKind.ADMIN):
        if alias.value and " " not in alias.value:
            return alias.value
    return gpu_model.slug


def slurm_mig_gres_type(*, pool: Pool, gpu_model: GpuModel, profile: str) -> str:
    """The GRES type Slurm counts slices of MIG ``profile`` of ``gpu_model`` under in ``pool``:
    the type the cluster reported for them at the last inventory import
    (:attr:`pools.inventory.models.MigDevice.gres_type`, e.g. AutoDetect's
    ``nvidia_a100_80gb_pcie_1g.10gb``), else the profile itself (``gres.conf``
    ``Name=gpu Type=1g.10gb``, the form of Slurm's gres.conf MIG examples)."""
    reported = (
        MigDevice.objects.filter(gpu__node__pool=pool, gpu__gpu_model=gpu_model, profile=profile)
        .exclude(gres_type="")
        .values_list("gres_type", flat=True)
        .order_by("gres_type")
        .first()
    )
    return reported or profile


def slurm_cap_gres_type(*, pool: Pool, gpu_model: GpuModel, mig_profile: str) -> str:
    """The GRES type a team's cap on ``gpu_model`` cards in ``pool`` is set on: the slice type
    of ``mig_profile`` (:func:`slurm_mig_gres_type`), or with ``""`` the whole cards'
    (:func:`slurm_gres_type`)."""
    if mig_profile:
        return slurm_mig_gres_type(pool=pool, gpu_model=gpu_model, profile=mig_profile)
    return slurm_gres_type(gpu_model)


def cluster_pools(*, scheduler: str, cluster: Cluster | None) -> QuerySet[Pool]:
    """The pools of ``scheduler`` in ``cluster``. ``None`` and the environment's cluster
    (``credential_kind`` environment) are one cluster, the one the environment variables
    define: a pool without a cluster is in it (:func:`pools.clusters.adapters.pool_adapter` builds
    both the same adapter)."""
    pools = Pool.objects.filter(scheduler=scheduler)
    if cluster is None or cluster.from_environment:
        return pools.filter(
            Q(cluster__isnull=True) | Q(cluster__credential_kind=CredentialKind.ENVIRONMENT)
        )
    return pools.filter(cluster=cluster)


def quota_drift_subject(namespace: str, cluster: Cluster | None) -> str:
    """The :class:`~pools.capacity.models.SchedulerDrift` subject of a namespace's GPU quota;
    outside the environment's cluster it names the cluster (a team has a namespace in each)."""
    return f"namespace {namespace}{_in_cluster(cluster)} ResourceQuota requests.nvidia.com/gpu"


def cap_drift_subject(account: str, gres: str, cluster: Cluster | None) -> str:
    """The :class:`~pools.capacity.models.SchedulerDrift` subject of a Slurm account's cap on
    ``gres``; outside the environment's cluster it names the cluster (an account in each)."""
    return f"account {account}{_in_cluster(cluster)} GrpTRES gres/gpu:{gres}"


def _in_cluster(cluster: Cluster | None) -> str:
    return "" if cluster is None or cluster.from_environment else f" in {cluster.slug}"


def team_cards_applied(
    *,
    team: Team,
    gpu_model: GpuModel,
    scheduler: str,
    cluster: Cluster | None,
    now: datetime | None = None,
    mig_profile: str = "",
) -> int:
    """Cards of ``gpu_model`` the team holds at ``now`` (default: the clock) in pools of
    ``scheduler`` in ``cluster`` (:func:`cluster_pools`), counting windows that open within
    the provisioning lead; with ``mig_profile``, slices of that profile instead (never both:
    issue 38). Open occurrences of the team's recurring reservations count as whole cards
    (:func:`recurring_cards_open`), and so do the cards the team's elastic allocations placed
    in burst pools of that cluster (issue 35: :func:`burst_cards_placed`). A ceiling override
    in force lifts the whole-card figure to at least its cards
    (:func:`pools.overrides.selectors.ceiling_raise`)."""
    now = now or timezone.now()
    pools = cluster_pools(scheduler=scheduler, cluster=cluster)
    recurring = 0 if mig_profile else recurring_cards_open(team=team, pools=pools, now=now)
    total = (
        Allocation.objects.filter(mig_profile=mig_profile)
        .filter(
            pool__in=pools,
            team=team,
            gpu_model=gpu_model,
            status__in=APPLIED_STATUSES,
            starts_at__lte=now + PROVISION_LEAD,
            ends_at__gt=now,
        )
        .aggregate(cards=Sum(applied_cards_expression()))["cards"]
    )
    cards = int(total or 0) + (recurring.get(gpu_model.pk, 0) if recurring else 0)
    if mig_profile:
        return cards
    # burst cards are whole cards: none count toward a slice profile
    cards += burst_cards_placed(team=team, pools=pools, now=now).get(gpu_model.pk, 0)
    raised = ceiling_raise(team=team, gpu_model=gpu_model, pools=pools, now=now)
    return cards if raised is None else max(cards, raised)


def burst_cards_placed(*, team: Team, pools: QuerySet[Pool], now: datetime) -> dict[int, int]:
    """Cards per GPU model id that ``team``'s open elastic allocations placed in burst pools
    among ``pools`` (issue 35: ``ElasticPolicy.burst_cards``; their home pool's quota counts
    the rest). One query."""
    rows = (
        Allocation.objects.filter(
            elastic_policy__burst_pool__in=pools,
            elastic_policy__burst_cards__gt=0,
            team=team,
            status__in=APPLIED_STATUSES,
            starts_at__lte=now + PROVISION_LEAD,
            ends_at__gt=now,
        )
        .values_list("gpu_model_id")
        .annotate(cards=Sum("elastic_policy__burst_cards"))
        .order_by()
    )
    return {model_id: int(cards) for model_id, cards in rows}


def recurring_cards_open(*, team: Team, pools: QuerySet[Pool], now: datetime) -> dict[int, int]:
    """Cards per GPU model id of ``team``'s active recurring reservations in ``pools`` with an
    occurrence open at ``now`` or opening within :data:`PROVISION_LEAD` (an allocation's
    window counts from the same lead, so a beat every few minutes raises the quota before the
    occurrence starts, and lowers it at the first beat after it ends)."""
    # One microsecond past the lead: an occurrence starting exactly then counts, as
    # ``starts_at__lte`` does for allocations.
    horizon = now + PROVISION_LEAD + timedelta(microseconds=1)
    cards: dict[int, int] = {}
    candidates = RecurringReservation.objects.filter(
        team=team,
        pool__in=pools,
        status=ReservationStatus.ACTIVE,
        first_date__lte=horizon.astimezone(UTC).date() + timedelta(days=1),
        last_date__gte=now.astimezone(UTC).date() - timedelta(days=1),
    )
    for reservation in candidates:
        if occurrences(reservation.rule, now, horizon):
            model = reservation.gpu_model_id
            cards[model] = cards.get(model, 0) + reservation.card_count
    return cards


def applied_cards_expression() -> Case:
    """The cards an allocation holds in its home pool's scheduler: ``card_count``, except for
    an elastic allocation (pools/elastic/): the cards its loop applied when the pool's quota
    backend is the ResourceQuota, else its ceiling (Kueue, Volcano, Koordinator enforce the
    floor and the burst themselves, so the namespace quota must not stop them). Either way less
    the cards it placed in a burst pool (issue 35): those are the burst pool's cluster's
    (:func:`burst_cards_placed`), so a ceiling of 6 with 2 placed there is 4 at home."""
    home_share = {
        "held": F("elastic_policy__cards_held") - F("elastic_policy__burst_cards"),
        "ceiling": F("elastic_policy__ceiling_cards") - F("elastic_policy__burst_cards"),
    }
    return Case(
        When(
            elastic_policy__isnull=False,
            pool__quota_backend=QuotaBackend.RESOURCE_QUOTA,
            then=ExpressionWrapper(home_share["held"], output_field=IntegerField()),
        ),
        When(
            elastic_policy__isnull=False,
            then=ExpressionWrapper(home_share["ceiling"], output_field=IntegerField()),
        ),
        default=F("card_count"),
        output_field=IntegerField(),
    )


def slurm_account_name(team: Team) -> str:
    """The Slurm account the portal keeps for ``team``: its slug (sacctmgr account names are
    case-insensitive and the slug is already lower-case letters, digits and ``-``/``_``)."""
    return team.slug


def slurm_account_ensure(*, adapter: SchedulerAdapter, team: Team) -> str:
    """Create or update the team's account (:func:`slurm_account_name`), its description the
    team's name and its organisation the cost centre; returns its name. Idempotent."""
    account = slurm_account_name(team)
    adapter.ensure_account(
        account,
        description=team.name[:100],
        organization=(team.cost_centre or team.slug).lower()[:64],
    )
    return account


def _associate_members(
    adapter: SchedulerAdapter, team: Team, account: str, partition: str | None
) -> list[str]:
    """Ensure an association of each of ``team``'s members with its Slurm ``account`` on
    ``partition`` (``None``: any); returns the usernames Slurm does not know or refused (they
    get access once they have a unix account)."""
    missing = []
    for username in team_usernames(team_id=team.pk):
        try:
            adapter.ensure_user_association(account, username, partition or "")
        except (NotFound, SchedulerRejected, ValueError):
            missing.append(username)
    return missing


def slurm_limit_sync(
    *,
    adapter: SchedulerAdapter,
    team: Team,
    pool: Pool,
    gpu_model: GpuModel,
    now: datetime | None = None,
    mig_profile: str = "",
) -> dict:
    """Make the team's Slurm cap for the model's GRES type equal its applied cards; with
    ``mig_profile``, the cap on that profile's slice type (:func:`slurm_mig_gres_type`) equal
    its applied slices.

    Ensures the account and the members' associations on the pool's partition first (members
    unknown to Slurm are listed in ``missing_users``, not fatal: they get access once they have
    a unix account). Returns the binding to store on the allocation. Raises the adapter's
    :class:`~scheduler_adapters.errors.SchedulerError` subclasses (``transient`` says whether
    a retry can help).
    """
    gres = slurm_cap_gres_type(pool=pool, gpu_model=gpu_model, mig_profile=mig_profile)
    cards = team_cards_applied(
        team=team,
        gpu_model=gpu_model,
        scheduler=Scheduler.SLURM,
        cluster=pool.cluster,
        now=now,
        mig_profile=mig_profile,
    )
    partition = pool.slurm_partition or None
    # workload classes (issue 36): refused here, before the account or its cap is touched,
    # when this Slurm cannot take the account's class QOS; the class QOS written first
    slurm_pools = cluster_pools(scheduler=Scheduler.SLURM, cluster=pool.cluster)
    classes_held = slurm_qos_prepare(adapter=adapter, team=team, pools=slurm_pools, now=now)
    account = slurm_account_ensure(adapter=adapter, team=team)
    missing = _associate_members(adapter, team, account, partition)
    # 0 is a limit (no cards); removing the limit would leave the account unlimited
    adapter.set_gpu_limit(
        GpuLimit(account=account, partition=partition, gres_type=gres, cards=cards)
    )
    binding = {
        "scheduler": "slurm",
        "applied": True,
        "account": account,
        "partition": partition,
        "grp_tres": f"gres/gpu:{gres}={cards}",
        "missing_users": missing,
    }
    if classes_held is not None:
        binding |= slurm_account_qos_set(adapter=adapter, account=account, held=classes_held)
    return binding


def k8s_product_label(gpu_model: GpuModel) -> str:
    """The ``nvidia.com/gpu.product`` label value of ``gpu_model`` (its Kubernetes alias, else
    the NVML name sanitised as GPU Feature Discovery does: blanks become ``-``)."""
    alias = GpuModelAlias.objects.filter(gpu_model=gpu_model, kind=AliasKind.K8S_LABEL).first()
    return alias.value if alias else "-".join(gpu_model.vendor_name.split())


def kueue_cohort_of(
    *, team: Team, cluster: Cluster | None, now: datetime | None = None
) -> KueueCohort | None:
    """The team's ClusterQueue cohort in ``cluster`` (:func:`cluster_pools`) when it holds
    elastic allocations in a Kueue pool of that cluster, or a borrowing override is in force
    there: the pool's cohort and per GPU product the cards it may borrow
    (:func:`kueue_borrowing`); ``None`` otherwise."""
    name, _normal, wanted = kueue_borrowing(team=team, cluster=cluster, now=now)
    return None if name is None else KueueCohort(name, wanted)


def _elastic_burst_rows(team: Team, pools: QuerySet[Pool], now: datetime) -> QuerySet:
    """``(pool slug, pool cohort, GPU model id, burst cards)`` rows, by pool slug and model, of
    ``team``'s elastic whole-card allocations in the Kueue pools of ``pools`` that are applied
    and open at ``now`` (like :func:`team_cards_applied`'s): burst = ceiling less floor, less
    the cards placed in a burst pool."""
    return (
        Allocation.objects.whole_cards()
        .filter(
            pool__in=pools,
            team=team,
            pool__quota_backend=QuotaBackend.KUEUE,
            elastic_policy__isnull=False,
            status__in=APPLIED_STATUSES,
            starts_at__lte=now + PROVISION_LEAD,
            ends_at__gt=now,
        )
        .values_list("pool__slug", "pool__quota_cohort", "gpu_model_id")
        # cards placed in a burst pool are borrowed there, not in this cohort (issue 35)
        .annotate(
            burst=Sum(
                F("elastic_policy__ceiling_cards")
                - F("elastic_policy__burst_cards")
                - F("card_count")
            )
        )
        .order_by("pool__slug", "gpu_model_id")
    )


def kueue_borrowing(
    *, team: Team, cluster: Cluster | None, now: datetime | None = None
) -> tuple[str | None, dict[str, int], dict[str, int]]:
    """``(cohort, normal, wanted)``: the team's Kueue cohort in ``cluster`` (``None``: none)
    and per GPU product the cards it may borrow — ``normal`` from its elastic allocations
    (ceilings less floors, less the cards placed in a burst pool, of those applied and open
    like :func:`team_cards_applied`'s),
    ``wanted`` the same raised by borrowing overrides in force
    (:func:`pools.overrides.selectors.borrowing_raises`; the highest per product wins). One
    namespace has one ClusterQueue, so one cohort: with elastic allocations in two Kueue pools
    of different cohorts, the first pool's by slug is used. Two queries (and one per model
    named)."""
    now = now or timezone.now()
    pools = cluster_pools(scheduler=Scheduler.KUBERNETES, cluster=cluster)
    rows = _elastic_burst_rows(team, pools, now)
    rows = [row for row in rows if row[1]]  # the pool constraint: Kueue pools have a cohort
    raises = borrowing_raises(
        team=team, pools=pools.filter(quota_backend=QuotaBackend.KUEUE), now=now
    )
    if not rows and not raises:
        return None, {}, {}
    model_ids = {row[2] for row in rows} | {model_id for _c, model_id, _n in raises}
    models = {m.pk: m for m in GpuModel.objects.filter(pk__in=model_ids)}
    normal: dict[str, int] = {}
    for _slug, _cohort, model_id, burst in rows:
        product = k8s_product_label(models[model_id])
        normal[product] = normal.get(product, 0) + int(burst or 0)
    wanted = dict(normal)
    for _cohort, model_id, cards in raises:
        product = k8s_product_label(models[model_id])
        wanted[product] = max(wanted.get(product, 0), cards)
    name = rows[0][1] if rows else raises[0][0]
    return name, normal, wanted


def _card_class_taints(adapter, quota: dict[str, int], extra: dict[str, Any]) -> dict | None:
    """With card-class taints on (a :class:`KubernetesAdapter` with ``card_class_taints``),
    taint the GPU nodes with their card class (not in a dry run: nodes are the cluster's, not a
    team's), put the sorted card classes of ``quota``'s products with cards in
    ``extra["card_classes"]`` and return the tainted nodes (``{}`` in a dry run); otherwise
    ``None`` and ``extra`` untouched."""
    if not (isinstance(adapter, KubernetesAdapter) and adapter.card_class_taints):
        return None
    # a dry run renders the team's objects only: nodes are the cluster's, not a team's
    tainted = {} if adapter.dry_run else ensure_card_class_taints(adapter).nodes
    classes = adapter.product_card_classes
    extra["card_classes"] = sorted(
        {classes[product] for product, cards in quota.items() if cards and product in classes}
    )
    return tainted


def kubernetes_quota_sync(
    *, adapter, team: Team, cluster: Cluster | None, now: datetime | None = None
) -> dict:
    """Make the team's namespace quota in ``cluster`` (``adapter`` is that cluster's,
    :func:`pools.clusters.adapters.pool_adapter`) equal its open-window cards in that cluster's
    Kubernetes pools (:func:`kubernetes_quota_wanted`).

    ``ensure_team`` is idempotent (server-side apply): it creates or updates the namespace,
    ``ResourceQuota`` on ``requests.nvidia.com/gpu`` (the total; per model through Kueue when
    enabled), ``LimitRange`` and the ``RoleBinding`` of the team's group ``team-<slug>``. With
    elastic allocations in a Kueue pool, the team's ClusterQueue joins the pool's cohort with
    their burst as its ``borrowingLimit`` (:func:`kueue_cohort_of`) in the same write.

    With card-class taints on (``CARD_CLASS_TAINTS``), the GPU nodes are tainted with their
    card class first (read back; a taint removed by hand is applied again) and the team may
    tolerate the classes of the models it holds (approval only lets a class hold models it may
    use): on its namespace without Kueue, through its flavors with Kueue
    (:mod:`scheduler_adapters.kubernetes_taints`).
    """
    quota, mig_quota = kubernetes_quota_wanted(team=team, cluster=cluster, now=now)
    cohort = kueue_cohort_of(team=team, cluster=cluster, now=now)
    extra: dict[str, Any] = {"cohort": cohort} if cohort is not None else {}
    if mig_quota:
        extra["mig_quota"] = mig_quota
    tainted = _card_class_taints(adapter, quota, extra)
    adapter.ensure_team(team.slug, group=f"team-{team.slug}", gpu_quota=quota, **extra)
    binding = {
        "scheduler": "kubernetes",
        "applied": True,
        "namespace": f"team-{team.slug}",
        "gpu_quota": quota,
        "total": sum(quota.values()),
    }
    if mig_quota:
        binding["mig_quota"] = mig_quota
    if cohort is not None:
        binding["kueue_cohort"] = cohort.name
        binding["kueue_borrowing"] = dict(cohort.borrowing)
    if tainted is not None:
        binding["card_classes"] = extra["card_classes"]
        binding["tainted_nodes"] = tainted
    priorities = kubernetes_priority_sync(
        adapter=adapter,
        team=team,
        pools=cluster_pools(scheduler=Scheduler.KUBERNETES, cluster=cluster),
        now=now,
    )
    if priorities is not None:
        binding["priority_classes"] = priorities
    return binding


def kubernetes_quota_wanted(
    *, team: Team, cluster: Cluster | None, now: datetime | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """What the team's namespace quota in ``cluster`` should say now: ``nvidia.com/gpu`` per GPU
    product label (its open-window whole cards in that cluster's Kubernetes pools,
    :func:`team_cards_applied`) and MIG slices per profile (``{"1g.10gb": 9}``) under the
    device plugin's *mixed* strategy.

    A slice allocation's strategy is that of the nodes holding its slices (GFD's
    ``nvidia.com/mig.strategy`` label, kept on the node by the Kubernetes import): *single*
    when every such node says so. Under *single* a slice is one ``nvidia.com/gpu`` of the
    product ``<product>-MIG-<profile>`` (GFD overrides ``nvidia.com/gpu.product`` so), so it
    joins the ``nvidia.com/gpu`` quota under that product — and with Kueue its ResourceFlavor
    selects exactly those MIG nodes by that label (the node affinity that keeps the pods on
    them). Under *mixed* it is quota'd on ``requests.nvidia.com/mig-<profile>``, which only
    MIG nodes advertise. Source: the k8s-device-plugin GFD README at 0719b2a (see
    ``tests/mig_nodes.py``).

    A borrowing override in force adds what it raises the product's ``borrowingLimit`` by
    (:func:`kueue_borrowing`), so that ``nominalQuota`` — quota less borrowing — stays."""
    now = now or timezone.now()
    quota: dict[str, int] = {}
    pools = cluster_pools(scheduler=Scheduler.KUBERNETES, cluster=cluster)
    held = Allocation.objects.filter(pool__in=pools, team=team).values("gpu_model")
    recurring = RecurringReservation.objects.filter(pool__in=pools, team=team).values("gpu_model")
    raised = ceiling_models(team=team, pools=pools, now=now)
    placed = burst_cards_placed(team=team, pools=pools, now=now or timezone.now())
    for model in GpuModel.objects.filter(
        Q(pk__in=held) | Q(pk__in=recurring) | Q(pk__in=raised) | Q(pk__in=list(placed))
    ):
        cards = team_cards_applied(
            team=team, gpu_model=model, scheduler=Scheduler.KUBERNETES, cluster=cluster, now=now
        )
        if cards:
            quota[k8s_product_label(model)] = cards
    _cohort, normal, wanted = kueue_borrowing(team=team, cluster=cluster, now=now)
    for product, cards in wanted.items():
        extra = cards - normal.get(product, 0)
        if extra > 0:
            quota[product] = quota.get(product, 0) + extra
    mig_quota = _slice_quota(team, pools, now, quota)
    return quota, mig_quota


def _slice_quota(
    team: Team, pools: QuerySet[Pool], now: datetime, quota: dict[str, int]
) -> dict[str, int]:
    """MIG slices per profile (``{"1g.10gb": 9}``) of ``team``'s slice allocations in
    ``pools`` applied and open at ``now`` whose nodes use the *mixed* strategy; those under
    *single* are added to ``quota`` (``{GPU product label: cards}``, updated) as the product
    ``<product>-MIG-<profile>`` instead (:func:`kubernetes_quota_wanted`)."""
    slices = (
        Allocation.objects.slices()
        .filter(
            pool__in=pools,
            team=team,
            status__in=APPLIED_STATUSES,
            starts_at__lte=now + PROVISION_LEAD,
            ends_at__gt=now,
        )
        .values_list("pool", "gpu_model", "mig_profile")
        .annotate(n=Sum("card_count"))
        .order_by("pool", "gpu_model", "mig_profile")
    )
    mig_quota: dict[str, int] = {}
    slices = list(slices)
    held_models = GpuModel.objects.in_bulk({model_id for _p, model_id, _f, _n in slices})
    for pool_id, model_id, profile, n in slices:
        model = held_models[model_id]
        if mig_strategy(pool_id=pool_id, gpu_model=model, profile=profile) == "single":
            product = f"{k8s_product_label(model)}-MIG-{profile}"
            quota[product] = quota.get(product, 0) + n
        else:
            mig_quota[profile] = mig_quota.get(profile, 0) + n
    return mig_quota


MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"


def mig_strategy(*, pool_id: int, gpu_model: GpuModel, profile: str) -> str:
    """``"single"`` when every node of the pool holding slices of ``profile`` on
    ``gpu_model`` is labelled ``nvidia.com/mig.strategy=single``, else ``"mixed"``."""
    labels = (
        Node.objects.filter(
            pool_id=pool_id,
            gpus__gpu_model=gpu_model,
            gpus__mig_devices__profile=profile,
        )
        .distinct()
        .values_list("labels", flat=True)
    )
    found = {(label or {}).get(MIG_STRATEGY_LABEL) for label in labels}
    return "single" if found == {"single"} else "mixed"


def kueue_lender_sync(*, adapter, pool: Pool, now: datetime | None = None) -> dict | None:
    """Keep a Kueue pool's lender ClusterQueue (``<cohort>-free``) at the pool's free cards per
    GPU model over the next hour (what elastic teams in the cohort may borrow; the floors of
    every holding allocation are already taken out, and Kueue itself counts what is borrowed).
    ``None`` for a pool that is not a Kueue pool with a cohort. Idempotent: only what differs
    is written."""
    if pool.quota_backend != QuotaBackend.KUEUE or not pool.quota_cohort:
        return None
    now = now or timezone.now()
    models = GpuModel.objects.filter(gpus__node__pool=pool).distinct().order_by("slug")
    free = {
        k8s_product_label(model): pool_free_cards(
            pool=pool, gpu_model=model, start=now, end=now + LEND_HORIZON
        )
        for model in models
    }
    ElasticQuotaWriter(adapter).set_lender(pool.quota_cohort, free)
    return {"cohort": pool.quota_cohort, "lender": lender_name(pool.quota_cohort), "free": free}


def reservation_name(allocation: Allocation) -> str:
    """The Slurm reservation that holds an allocation's placement."""
    return f"portal-alloc-{allocation.pk}"


def _partly_placed_nodes(allocation: Allocation, nodes: list[str]) -> list[str]:
    """The ``nodes`` (hostnames of ``allocation``'s placement, in order) of which the placement
    takes fewer cards than the node has of the allocation's GPU model (nodes of its pool's
    cluster: hostnames are per cluster)."""
    placed: dict[str, set[int]] = {}  # groups may share a node: a node's cards are their union
    for spot in allocation.placement:
        placed.setdefault(spot["node"], set()).update(spot["gpus"])
    whole = dict(
        Gpu.objects.filter(
            node__hostname__in=nodes,
            node__cluster_id=node_cluster_id(allocation.pool.cluster),  # names are per cluster
            gpu_model=allocation.gpu_model,
        )
        .values_list("node__hostname")
        .annotate(n=Count("id"))
    )
    return [node for node in nodes if len(placed.get(node, ())) < whole.get(node, 0)]


def slurm_reservation_apply(*, adapter, allocation: Allocation) -> dict:
    """Make an allocation's placement real in Slurm: a reservation of its nodes for the team's
    account over its window (``scontrol create reservation``, see
    :mod:`scheduler_adapters.slurm.reservations`). Slurm reservations here hold whole nodes, so
    a placement that takes part of a node is not reserved, and the binding says so; so does
    one whose adapter cannot write reservations. Idempotent (the adapter's create is)."""
    nodes = sorted({spot["node"] for spot in allocation.placement})
    partial = _partly_placed_nodes(allocation, nodes)
    if partial:
        return {
            "reservation": None,
            "placement_note": "Not reserved in Slurm: the placement takes part of "
            f"{', '.join(partial)} and reservations hold whole nodes; the cap (GrpTRES) "
            "still applies.",
        }
    name = reservation_name(allocation)
    spec = ReservationSpec(
        name=name,
        account=allocation.team.slug,
        nodes=tuple(nodes),
        starts_at=allocation.starts_at,
        ends_at=allocation.ends_at,
        partition=allocation.pool.slurm_partition or None,
        qos=reservation_qos(allocation),
    )
    try:
        try:
            adapter.create_reservation(spec)
        except ReservationQosUnsupported:  # scontrol created nothing; the account's list rules
            adapter.create_reservation(replace(spec, qos=()))
    except (AttributeError, ValueError) as exc:
        return {"reservation": None, "placement_note": f"Not reserved in Slurm: {exc}"}
    except SchedulerError as exc:
        if exc.transient:
            raise
        return {"reservation": None, "placement_note": f"Not reserved in Slurm: {exc.message}"}
    return {"reservation": name, "reserved_nodes": nodes} | _reservation_qos_binding(
        adapter, name, spec.qos
    )


def reservation_qos(allocation: Allocation) -> tuple[str, ...]:
    """The QOS an allocation's reservation admits (issue 36): its workload class's QOS, so only
    that class's jobs of the team use the reserved cards (never two priorities on one card);
    ``()`` for unclassed work (any QOS of the account)."""
    if allocation.workload_class_id is None:
        return ()
    return (class_qos_name(allocation.workload_class.slug),)


def _reservation_qos_binding(adapter, name: str, wanted: tuple[str, ...]) -> dict:
    """What the allocation's binding says of the reservation's QOS, from the reservation read
    back: ``reservation_qos`` the QOS it admits, or ``None`` with why when this Slurm's
    reservations take none (22.05, 24.11: the account's QOS list still limits the team's jobs
    to its classes, the cards are not kept to this one)."""
    if not wanted:
        return {}
    record = adapter.get_reservation(name)
    if record is not None and record.qos is not None:
        return {"reservation_qos": list(record.qos)}
    return {
        "reservation_qos": None,
        "reservation_qos_note": "This Slurm's reservations take no QOS (Slurm 26.05 does): "
        f"any QOS of the account may use the reserved nodes, not only {', '.join(wanted)}.",
    }


def slurm_reservation_remove(*, adapter, allocation: Allocation) -> None:
    """Delete the allocation's reservation, if it has one (idempotent); while a job runs in it or
    waits for it the adapter ends it now instead (Slurm will not delete a reservation in use),
    within a second when it has not started or started this second. Once done the binding is
    stamped ``reservation_removed_at`` (:func:`reservation_removed_stamp`), so reconcile's
    leftover check skips it. Raises the adapter's errors (nothing stamped then)."""
    if not (allocation.scheduler_binding or {}).get("reservation"):
        return
    try:
        adapter.delete_reservation(reservation_name(allocation))
    except AttributeError:
        return
    reservation_removed_stamp(Allocation.objects.filter(pk=allocation.pk))


def binding_merge(allocations: QuerySet[Allocation], values: dict[str, str]) -> int:
    """Merge ``values`` into each allocation's stored binding in one UPDATE (PostgreSQL
    ``jsonb ||``), so a binding written meanwhile is not overwritten. Returns the rows merged."""
    return allocations.update(
        scheduler_binding=RawSQL(
            "COALESCE(scheduler_binding, '{}'::jsonb) || %s::jsonb", [json.dumps(values)]
        )
    )


def reservation_removed_stamp(allocations: QuerySet[Allocation]) -> int:
    """Mark on each allocation's binding that its reservation no longer holds nodes
    (``reservation_removed_at``, ISO 8601) (:func:`binding_merge`). Returns the rows stamped."""
    return binding_merge(allocations, {"reservation_removed_at": timezone.now().isoformat()})


def reservation_drift_subject(name: str, cluster: Cluster | None) -> str:
    """The :class:`~pools.capacity.models.SchedulerDrift` subject of an allocation's Slurm
    reservation; outside the environment's cluster it names the cluster."""
    return f"reservation {name}{_in_cluster(cluster)}"


def unbind_refusal_record(
    *,
    allocation: Allocation | RecurringReservation,
    subject: str,
    expected: str,
    found: str,
    error: SchedulerError,
) -> SchedulerDrift:
    """Record that the scheduler of ``allocation``'s pool refused to take back what it held
    (a step of :func:`pools.capacity.services.allocations.allocation_unbind`, or the removal of
    a recurring reservation's Slurm reservation): an unrepaired
    :class:`~pools.capacity.models.SchedulerDrift` of ``subject`` (the dashboard's scheduler
    alerts list those) with the scheduler's message as its ``detail``. Its cluster is the
    pool's, or the environment's cluster row of that scheduler for a pool without one."""
    pool = allocation.pool
    return SchedulerDrift.objects.create(
        scheduler=pool.scheduler,
        team=allocation.team,
        subject=subject[:200],
        expected=expected[:200],
        found=found[:200],
        detail=str(error),
        repaired=False,
        cluster=pool.cluster
        or Cluster.objects.filter(
            kind=pool.scheduler, credential_kind=CredentialKind.ENVIRONMENT
        ).first(),
    )


def reservation_refusal_record(*, allocation: Allocation, error: SchedulerError) -> SchedulerDrift:
    """Record that Slurm refused to remove the reservation of ``allocation``, which no longer
    holds cards (:func:`unbind_refusal_record`), naming the allocation, the reservation and
    Slurm's message. Its nodes stay held until the reservation's planned end unless someone
    acts; reconcile tries again (:func:`pools.capacity.services.reconcile.reconcile_slurm`)."""
    return unbind_refusal_record(
        allocation=allocation,
        subject=reservation_drift_subject(reservation_name(allocation), allocation.pool.cluster),
        expected=f"none: allocation #{allocation.pk} is {allocation.status}",
        found="kept: Slurm refused its removal",
        error=error,
    )


def quota_refusal_record(*, allocation: Allocation, error: SchedulerError) -> SchedulerDrift:
    """Record that Kubernetes refused to lower the namespace quota of ``allocation``'s team
    after the allocation stopped holding cards (:func:`unbind_refusal_record`): expected the
    ``nvidia.com/gpu`` total the team's other allocations still hold
    (:func:`kubernetes_quota_wanted`, what reconcile compares), found the quota as it was.
    The team may run on the cards until reconcile writes the quota
    (:func:`pools.capacity.services.reconcile.reconcile_kubernetes`)."""
    cluster = allocation.pool.cluster
    wanted, _mig = kubernetes_quota_wanted(team=allocation.team, cluster=cluster)
    return unbind_refusal_record(
        allocation=allocation,
        subject=quota_drift_subject(f"team-{allocation.team.slug}", cluster),
        expected=str(sum(wanted.values())),
        found=f"kept: Kubernetes refused the update after allocation #{allocation.pk} "
        f"{allocation.status}",
        error=error,
    )


def _kubernetes_binding_apply(adapter, allocation: Allocation, now: datetime | None) -> dict:
    """Apply ``allocation`` in its Kubernetes pool through ``adapter``: the team's namespace
    quota (:func:`kubernetes_quota_sync`) and the pool's Kueue lender queue
    (:func:`kueue_lender_sync`); returns the binding, with a note when the allocation was
    placed on nodes (Kubernetes places pods itself). Raises the adapter's errors."""
    pool = allocation.pool
    binding = kubernetes_quota_sync(
        adapter=adapter, team=allocation.team, cluster=pool.cluster, now=now
    )
    lender = kueue_lender_sync(adapter=adapter, pool=pool, now=now)
    if lender is not None:
        binding["kueue_lender"] = lender
    if allocation.placement:
        binding["placement_note"] = (
            "Kubernetes places pods itself: the nodes counted on are the portal's; pods are "
            "kept to the GPU model by its node label (Kueue flavours, node affinity), not "
            "pinned to those nodes."
        )
    return binding


def binding_apply(allocation: Allocation, *, now: datetime | None = None) -> dict:
    """Apply ``allocation`` in its pool's scheduler; return the binding to record.

    With no adapter configured for the scheduler the binding says the cards are reserved in the
    portal only. Raises the adapter's errors.
    """
    pool = allocation.pool
    try:
        adapter = pool_adapter(pool)
    except OSError as exc:  # nothing sent: a retry once the file is there applies it whole
        where = f"cluster {pool.cluster.slug}" if pool.cluster_id else "the environment's"
        raise CredentialsUnreadable(
            f"the credentials of {where} cannot be read ({exc})", operation="credentials"
        ) from exc
    if adapter is None:
        return {
            "scheduler": pool.scheduler,
            "applied": False,
            "note": f"Not applied in {pool.get_scheduler_display()}: no scheduler "
            "connection is configured for this pool (demo mode). The cards are "
            "reserved in the portal only.",
        }
    if pool.scheduler == Scheduler.KUBERNETES:
        return _kubernetes_binding_apply(adapter, allocation, now)
    if pool.scheduler == Scheduler.SLURM:
        binding = slurm_limit_sync(
            adapter=adapter,
            team=allocation.team,
            pool=pool,
            gpu_model=allocation.gpu_model,
            now=now,
            mig_profile=allocation.mig_profile,
        )
        if allocation.placement:
            binding.update(slurm_reservation_apply(adapter=adapter, allocation=allocation))
        return binding
    return {
        "scheduler": pool.scheduler,
        "applied": False,
        "note": "No adapter for this scheduler yet; reserved in the portal only.",
    }
