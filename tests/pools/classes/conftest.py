"""The hand-built fleet of the workload-class tests (issue 36): Kubernetes pool ``mixed`` with
node ``dc-01`` (4 L40S, data-centre class) and nodes ``gc-01``, ``gc-02`` (4 GeForce RTX 4090
each, consumer class). Team ``svc`` defaults to production, ``etl`` to batch, ``lab`` to none;
``member`` is in all three."""

from __future__ import annotations

import pytest
from factories import MembershipFactory, PoolFactory, TeamFactory, node_with_gpus

from pools.classes.models import WorkloadClass
from pools.common.choices import Scheduler


@pytest.fixture
def fleet():
    pool = PoolFactory(
        slug="mixed", name="Mixed", scheduler=Scheduler.KUBERNETES, slurm_partition=""
    )
    k8s = {"pool": pool, "scheduler": Scheduler.KUBERNETES}
    node_with_gpus(4, gpu_model="l40s", hostname="dc-01", **k8s)
    for host in ("gc-01", "gc-02"):
        node_with_gpus(4, gpu_model="rtx4090", hostname=host, **k8s)
    return pool


@pytest.fixture
def classes():
    return {c.slug: c for c in WorkloadClass.objects.all()}


@pytest.fixture
def teams(classes, member):
    made = {
        "svc": TeamFactory(slug="svc", default_class=classes["production"]),
        "etl": TeamFactory(slug="etl", default_class=classes["batch"]),
        "lab": TeamFactory(slug="lab"),
    }
    for team in made.values():
        MembershipFactory(team=team, user=member)
    return made
