"""Two real Slurm clusters at once (issue #35): 24.11 (``SLURM_MODERN_ENV``) and 26.05
(``SLURM_2605_ENV``), each registered as a cluster and checked over its own slurmrestd; one taken
down (a URL nobody answers) makes its pool read-only with the reason, then back.

Both test clusters are named ``portal`` in slurm.conf: registering the second under the same
ClusterName is refused (the rule of the issue), which this test shows on the real pair; the pool
of the second cluster is therefore checked through the same cluster row re-pointed at it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from factories import next_week_9am

from pools import adapters
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.choices import ClusterStatus, Scheduler
from pools.clusters.services import cluster_create, cluster_update
from pools.errors import ClusterTaken, ClusterUnreachable
from scheduler_adapters.registry import read_env_file

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

MODERN = Path("/opt/portal-slurm-modern/var/lib/slurm-test/slurm-test.env")
FORKY = Path("/opt/portal-slurm-forky/var/lib/slurm-test/slurm-test.env")


def fields(env_file: Path, slug: str) -> dict:
    if not env_file.is_file():
        pytest.fail(f"{env_file} is missing: start the Slurm it describes (make services)")
    env = read_env_file(env_file)
    return {
        "slug": slug,
        "name": f"hclu {slug}",
        "kind": Scheduler.SLURM,
        "api_url": env["SLURMRESTD_URL"],
        "slurm_cluster_name": env["SLURM_CLUSTER"],
        "slurm_user": env["SLURM_ADMIN_USER"],
        "credential_kind": "jwt-key",
        "credential_path": env["SLURM_JWT_KEY"],
    }


def render(cluster) -> dict:
    return {"slug": cluster.slug}


@pytest.fixture(autouse=True)
def _fresh_adapters():
    adapters.reset()
    yield
    adapters.reset()


def test_two_real_slurm_clusters_one_down_then_back(team, team_member, pool_admin, train_pool):
    modern = cluster_create(fields=fields(MODERN, "hclu-modern"), actor=None, render=render)
    assert (modern.status, modern.status_reason) == (ClusterStatus.REACHABLE, "")
    assert modern.api_version_served == "v0.0.42"  # 24.11 serves v0.0.40-42; the newest

    with pytest.raises(ClusterTaken) as taken:
        cluster_create(fields=fields(FORKY, "hclu-forky"), actor=None, render=render)
    assert taken.value.data == {"field": "slurm_cluster_name", "cluster": "hclu-modern"}

    forky_url = read_env_file(FORKY)["SLURMRESTD_URL"]
    forky_key = read_env_file(FORKY)["SLURM_JWT_KEY"]
    moved = cluster_update(
        cluster=modern,
        changes={"api_url": forky_url, "credential_path": forky_key},
        actor=None,
        before={},
        render=render,
    )
    assert moved.status == ClusterStatus.REACHABLE, moved.status_reason
    assert moved.api_version_served.startswith("v0.0.4")

    pool = train_pool
    pool.cluster = moved
    pool.save(update_fields=["cluster"])
    down = cluster_update(
        cluster=moved,
        changes={"api_url": "http://127.0.0.1:9"},  # discard port: nothing listens
        actor=None,
        before={},
        render=render,
    )
    assert down.status == ClusterStatus.UNREACHABLE
    assert down.status_reason.startswith("scheduler_unavailable: ")

    start = next_week_9am()
    request = capacity_request_create(
        actor=team_member,
        team=team,
        workload_kind="training",
        pool=pool,
        gpu_model=pool.nodes.first().gpus.first().gpu_model,
        card_count=1,
        starts_at=start,
        ends_at=start + timedelta(days=1),
        justification="hclu",
    )
    with pytest.raises(ClusterUnreachable) as refused:
        capacity_request_approve(request=request, actor=pool_admin)
    assert refused.value.data["reason"] == down.status_reason

    back = cluster_update(
        cluster=down, changes={"api_url": forky_url}, actor=None, before={}, render=render
    )
    assert back.status == ClusterStatus.REACHABLE, back.status_reason
