"""A reclamation scenario shared by the reclamation service and API tests: a Kubernetes pool
``infer`` with 4 L40S on one node, team ``nlp`` (manager alice) holding an active allocation of
2 cards since two days ago, bound through the fake Kubernetes adapter (quota 2), a live policy
(dry_run False), and an open finding that saw ``in_use`` of the 2 cards in use."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.capacity.services import scheduler_binding
from pools.clusters import adapters
from pools.common.choices import AllocationStatus, GpuHealth, Scheduler, TeamRole
from pools.inventory.models import GpuModel
from pools.reclamation.models import IdleFinding, ReclamationPolicy
from pools.tenancy.models import Membership


@pytest.fixture
def fake_k8s():
    adapters.reset()
    with override_settings(SCHEDULERS={"kubernetes": {"BACKEND": "kubernetes-fake"}}):
        yield adapters.scheduler_adapter("kubernetes")
    adapters.reset()


def reclamation_world(fake_k8s, django_user_model, capture, *, in_use: int = 0) -> dict:
    now = timezone.now().replace(microsecond=0)
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node = NodeFactory(hostname="k8s-n1", pool=pool, scheduler=Scheduler.KUBERNETES)
    for index in range(4):
        GpuFactory(
            node=node, index=index, gpu_model=l40s, raw_model_name="NVIDIA L40S",
            health=GpuHealth.OK,
        )  # fmt: skip
    team = TeamFactory(slug="nlp")
    alice = django_user_model.objects.create_user("alice", email="alice@example.com")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)
    allocation = AllocationFactory(
        team=team,
        pool=pool,
        gpu_model=l40s,
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=2),
        ends_at=now + timedelta(days=5),
    )
    with capture(execute=True):
        scheduler_binding.binding_apply(allocation)
    policy = ReclamationPolicy.objects.create(pool=pool, dry_run=False)
    finding = IdleFinding.objects.create(
        allocation=allocation,
        first_seen_at=now - timedelta(hours=1),
        last_seen_at=now - timedelta(minutes=5),
        warned_at=now - timedelta(hours=1),  # grace (24 h) far from over
        dry_run=False,
        certainly_idle=True,
        mean_util_pct=Decimal("1.50"),
        card_count=2,
        cards_in_use=in_use,
    )
    return {
        "now": now,
        "pool": pool,
        "team": team,
        "alice": alice,
        "allocation": allocation,
        "policy": policy,
        "finding": finding,
        "k8s": fake_k8s,
        "l40s": l40s,
    }
