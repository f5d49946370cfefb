"""Fixtures of the scheduler-binding tests: a fake Slurm in settings and a small Slurm pool."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from factories import CapacityRequestFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.clusters import adapters
from pools.common.choices import AliasKind, Scheduler, TeamRole
from pools.inventory.models import GpuModel, GpuModelAlias
from pools.tenancy.models import Membership

FAKE = {"slurm": {"BACKEND": "fake", "PARTITIONS": {"gpu": {"a100": 4, "rtx4090": 2}}}}


@pytest.fixture
def fake_slurm():
    adapters.reset()
    with override_settings(SCHEDULERS=FAKE):
        yield adapters.scheduler_adapter("slurm")
    adapters.reset()


@pytest.fixture
def setup(django_user_model):
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    # The site's GRES type for this model, mapped by an admin as for an unrecognised name.
    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    pool = PoolFactory(slug="train", scheduler=Scheduler.SLURM, slurm_partition="gpu")
    node = NodeFactory(pool=pool)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    team = TeamFactory(slug="vision")
    bob = django_user_model.objects.create_user("bob", password="x")
    Membership.objects.create(team=team, user=bob, role=TeamRole.MANAGER)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    return pool, a100, team, bob, admin


@pytest.fixture
def submitted():
    """Build a submitted request: ``submitted(pool, model, team, user, cards, start, days=3)``."""
    return _submitted


def _submitted(pool, model, team, user, cards, start, days=3):
    return CapacityRequestFactory(
        team=team, requested_by=user, workload_kind="training", pool=pool, gpu_model=model,
        card_count=cards, starts_at=start, ends_at=start + timedelta(days=days), justification="x",
    )  # fmt: skip
