"""factory_boy factories, one per model."""

from __future__ import annotations

import factory

from pools import models
from pools.choices import NodeState, Scheduler


class PoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Pool
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"pool-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())
    scheduler = Scheduler.SLURM
    slurm_partition = factory.LazyAttribute(lambda o: o.slug)


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Node

    hostname = factory.Sequence(lambda n: f"gpu-node-{n:04d}")
    pool = factory.SubFactory(PoolFactory)
    scheduler = Scheduler.SLURM
    state = NodeState.UP
    driver_version = "550.54.15"


class GpuFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Gpu

    node = factory.SubFactory(NodeFactory)
    index = factory.Sequence(lambda n: n % 8)
    uuid = factory.Sequence(lambda n: f"GPU-{n:08x}-1111-2222-3333-444444444444")
    gpu_model = factory.LazyFunction(lambda: models.GpuModel.objects.get(slug="a100_80g_sxm"))
    raw_model_name = "NVIDIA A100-SXM4-80GB"
    memory_total_mib = 81920


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    cost_centre = factory.Sequence(lambda n: f"CC-{1000 + n}")
