"""Two real Slurm clusters at once (issue #35's "Done when"): 24.11 (``SLURM_MODERN_ENV``,
ClusterName ``portal``) and 26.05 (``SLURM_2605_ENV``, ClusterName ``forky``), both started by
``make test``, each registered as a cluster and reached over its own slurmrestd.

One team has a pool in each cluster and an allocation in each: each account's GrpTRES, read back
from that cluster's slurmrestd and its own sacctmgr, holds the cards of that cluster's pool only,
and a team-wide card-hour budget is split across the two as GrpTRESMins by those caps. Reconcile
runs per cluster, imports each cluster's nodes into its own pools (the two clusters name their
nodes alike: host names are unique per cluster, so each keeps its own), and repairs a cap changed
by hand in one of them, keeping the drift against it. The 26.05 cluster is then taken down (its
URL pointed at a port nobody answers): its pool is read-only with the reason (approval API 409
``cluster_unreachable``, the clusters page says why), reconcile reports it without touching
anything, and 24.11 keeps provisioning; once it answers again, the refused approval goes through.

It uses both env files whatever ``SLURM_TEST_ENV`` says, so it runs in one of ``make test``'s
Slurm tier runs only: the one on 24.11's default env file (the others skip, saying so). An env
file that is missing skips it outside CI and fails it in CI (``CI=true``), where both exist.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from billing.budgets.models import Budget
from billing.budgets.slurm import budget_minutes_sync
from pools.capacity.models import Allocation, CapacityRequest, SchedulerDrift
from pools.capacity.services.reconcile import reconcile_cluster
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.clusters.models import Cluster
from pools.clusters.selectors import cluster_list
from pools.clusters.services import cluster_create, cluster_update
from pools.common.choices import (
    AliasKind,
    AllocationStatus,
    ClusterStatus,
    RequestStatus,
    Scheduler,
)
from pools.common.errors import ClusterTaken
from pools.inventory.models import GpuModel, GpuModelAlias, Node
from scheduler_adapters.records import GpuLimit
from scheduler_adapters.registry import read_env_file, slurm_command_prefix

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    pytest.mark.usefixtures("fresh_adapters"),
]

MODERN = Path("/opt/portal-slurm-modern/var/lib/slurm-test/slurm-test.env")  # 24.11
FORKY = Path("/opt/portal-slurm-forky/var/lib/slurm-test/slurm-test.env")  # 26.05
NOBODY = "http://127.0.0.1:9"  # the discard port: nothing listens


def run_once() -> None:
    """Skip unless this is the Slurm tier run on 24.11's default env file (or no env file is
    named): the test reads both env files itself, so the other runs would repeat it."""
    named = os.environ.get("SLURM_TEST_ENV")
    if named and Path(named).resolve() != MODERN.resolve():
        pytest.skip(f"uses both test Slurms itself: runs once, with SLURM_TEST_ENV={MODERN}")


def env_of(path: Path) -> dict[str, str]:
    if not path.is_file():
        message = (
            f"{path} is missing: start that Slurm (sudo make services, "
            "scripts/services/slurm-modern.sh)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"two-cluster test: {message}", pytrace=False)
        pytest.skip(message)
    return read_env_file(path)


def sacctmgr(env: dict[str, str], *arguments: str) -> str:
    """That cluster's own sacctmgr (through its chroot), not the adapter under test."""
    done = subprocess.run(
        [*slurm_command_prefix(env), "sacctmgr", "--noheader", "--parsable2", *arguments],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.strip()


def grp_tres(env: dict[str, str], account: str) -> str:
    """The account association's GrpTRES as that cluster's slurmdbd holds it ("" when none)."""
    return sacctmgr(env, "show", "assoc", f"account={account}", "user=", "format=grptres")


def grp_tres_mins(env: dict[str, str], account: str) -> str:
    """The account association's GrpTRESMins as that cluster's slurmdbd holds it."""
    return sacctmgr(env, "show", "assoc", f"account={account}", "user=", "format=grptresmins")


def gpu_partition_nodes(env: dict[str, str]) -> set[str]:
    """The nodes of partition ``gpu`` as that cluster's own scontrol lists them."""
    done = subprocess.run(
        [*slurm_command_prefix(env), "scontrol", "show", "nodes", "--oneliner"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    nodes = set()
    for line in done.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "gpu" in fields.get("Partitions", "").split(","):
            nodes.add(fields["NodeName"])
    return nodes


def delete_account(env: dict[str, str], account: str) -> None:
    for _ in range(20):  # slurmdbd refuses while a job is still completing
        if "Job(s) active" not in sacctmgr(env, "-i", "delete", "account", f"name={account}"):
            return
        time.sleep(0.5)


def slurm_fields(env: dict[str, str], slug: str) -> dict:
    return {
        "slug": slug,
        "name": f"h2s {slug}",
        "kind": Scheduler.SLURM,
        "api_url": env["SLURMRESTD_URL"],
        "slurm_cluster_name": env["SLURM_CLUSTER"],
        "slurm_user": env["SLURM_ADMIN_USER"],
        "credential_kind": "jwt-key",
        "credential_path": env["SLURM_JWT_KEY"],
    }


def render(cluster: Cluster) -> dict:
    return {"slug": cluster.slug}


@pytest.fixture
def envs() -> dict[str, dict[str, str]]:
    run_once()
    modern, forky = env_of(MODERN), env_of(FORKY)
    assert modern["SLURM_CLUSTER"] != forky["SLURM_CLUSTER"], (
        "both test Slurms are one ClusterName: rerun scripts/services/slurm-modern.sh for 26.05"
    )
    return {"modern": modern, "forky": forky}


@pytest.fixture
def account(envs):
    """A fresh team account name, deleted afterwards from both clusters."""
    name = f"h2s-{uuid.uuid4().hex[:8]}"
    yield name
    for env in envs.values():
        delete_account(env, name)


def a100_pool(slug: str, cluster: Cluster, a100: GpuModel):
    """A Slurm pool of ``cluster``'s partition ``gpu``: one node of 4 A100 (the test clusters'
    gpu-a100-01, gres ``gpu:a100:4``)."""
    from factories import GpuFactory, NodeFactory, PoolFactory

    pool = PoolFactory(slug=slug, scheduler=Scheduler.SLURM, slurm_partition="gpu", cluster=cluster)
    node = NodeFactory(pool=pool, hostname=f"{slug}-a100-01")
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    return pool


def test_two_real_slurm_clusters_provision_reconcile_one_down_then_back(
    envs,
    account,
    django_user_model,
    pool_admin,
    admin_api,
    client,
    django_capture_on_commit_callbacks,
):
    from factories import TeamFactory

    from pools.common.choices import TeamRole
    from pools.tenancy.models import Membership

    with django_capture_on_commit_callbacks(execute=True):  # the checks the creates queue
        modern = cluster_create(
            fields=slurm_fields(envs["modern"], "h2s-modern"), actor=None, render=render
        )
        forky = cluster_create(
            fields=slurm_fields(envs["forky"], "h2s-forky"), actor=None, render=render
        )
    modern.refresh_from_db()
    forky.refresh_from_db()
    assert (modern.status, modern.status_reason) == (ClusterStatus.REACHABLE, "")
    assert (forky.status, forky.status_reason) == (ClusterStatus.REACHABLE, "")
    assert modern.api_version_served == "v0.0.42"  # 24.11 serves v0.0.40-42: the newest
    assert forky.api_version_served == "v0.0.45"  # 26.05 serves v0.0.42-45
    # the rule of the issue still holds on the real pair: 26.05's ClusterName once more is refused
    with pytest.raises(ClusterTaken):
        cluster_create(
            fields=slurm_fields(envs["forky"], "h2s-again") | {"api_url": NOBODY},
            actor=None,
            render=render,
        )

    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    pool_m, pool_f = a100_pool("h2s-train-m", modern, a100), a100_pool("h2s-train-f", forky, a100)
    team = TeamFactory(slug=account)
    alice = django_user_model.objects.create_user("h2s-alice", password="x")
    Membership.objects.create(team=team, user=alice, role=TeamRole.MANAGER)

    def submit(pool, cards: int) -> CapacityRequest:
        now = timezone.now()
        return CapacityRequest.objects.create(
            team=team,
            requested_by=alice,
            workload_kind="training",
            pool=pool,
            gpu_model=a100,
            card_count=cards,
            starts_at=now,
            ends_at=now + timedelta(days=7),
            justification="h2s",
            status=RequestStatus.SUBMITTED,
        )

    def approve(request: CapacityRequest):
        with django_capture_on_commit_callbacks(execute=True):
            allocation = capacity_request_approve(request=request, actor=pool_admin)
        allocation.refresh_from_db()
        assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason
        return allocation

    def limits(cluster: Cluster) -> tuple[GpuLimit, ...]:  # read back over its slurmrestd
        return adapters.cluster_adapter(cluster).get_gpu_limits(account)

    # -- an allocation in each: 1 card in 24.11's pool, 2 in 26.05's; each cap counts its own
    approve(submit(pool_m, 1))
    approve(submit(pool_f, 2))
    assert limits(modern) == (GpuLimit(account, "gpu", "a100", 1),)
    assert limits(forky) == (GpuLimit(account, "gpu", "a100", 2),)
    assert grp_tres(envs["modern"], account) == "gres/gpu:a100=1"
    assert grp_tres(envs["forky"], account) == "gres/gpu:a100=2"

    # -- a team-wide budget split by the cap in each cluster, so the team cannot spend it twice:
    # 100 card-hours, none used = 6,000 card-minutes; caps 1 and 2 cards: 2,000 and 4,000
    # (fresh accounts: neither Slurm counts usage to add), read back from each slurmdbd
    Budget.objects.create(team=team, period="month", starts_on=date(2020, 1, 1),
                          card_hours_limit=Decimal(100))  # fmt: skip
    written = budget_minutes_sync(team=team)
    assert written == {"h2s-modern": {"gres/gpu": 2000}, "h2s-forky": {"gres/gpu": 4000}}
    assert grp_tres_mins(envs["modern"], account) == "gres/gpu=2000"
    assert grp_tres_mins(envs["forky"], account) == "gres/gpu=4000"

    # -- reconcile of both: an operator raises 26.05's cap by hand; only 26.05 drifts
    sacctmgr(
        envs["forky"],
        "-i",
        "modify",
        "account",
        f"name={account}",
        "set",
        "GrpTRES=gres/gpu:a100=4",
    )
    assert grp_tres(envs["forky"], account) == "gres/gpu:a100=4"
    report_m, report_f = reconcile_cluster(modern.pk), reconcile_cluster(forky.pk)
    assert (report_m.errors, report_m.drifts) == ([], [])
    # each reconcile imported its cluster's nodes into its own pools: 24.11's partition gpu into
    # pool_m, 26.05's into pool_f; both clusters name their nodes alike (built from one
    # script), and host names are unique per cluster, so each cluster's are its own nodes
    nodes_m, nodes_f = gpu_partition_nodes(envs["modern"]), gpu_partition_nodes(envs["forky"])
    assert nodes_m, "24.11 has no node in partition gpu"
    assert nodes_m & nodes_f, "the two test Slurms no longer share node names"
    assert report_f.errors == []
    in_pool_m = set(Node.objects.filter(pool=pool_m).values_list("hostname", flat=True))
    assert nodes_m <= in_pool_m
    assert set(Node.objects.filter(pool=pool_f).values_list("hostname", flat=True)) == (
        {"h2s-train-f-a100-01"} | nodes_f
    )
    for name in nodes_m & nodes_f:
        assert sorted(
            Node.objects.filter(hostname=name).values_list("cluster__slug", flat=True)
        ) == [
            "h2s-forky",
            "h2s-modern",
        ]
    health = {c.slug: c for c in cluster_list()}
    assert health["h2s-modern"].inventory_imported_at is not None
    assert health["h2s-forky"].inventory_imported_at is not None
    assert (health["h2s-modern"].errors_last_hour, health["h2s-forky"].errors_last_hour) == (0, 0)
    drift = SchedulerDrift.objects.get(team=team)
    assert (drift.expected, drift.found, drift.repaired) == ("2", "4", True)
    assert drift.cluster == forky
    assert (health["h2s-forky"].drift_count, health["h2s-modern"].drift_count) == (0, 0)
    assert grp_tres(envs["forky"], account) == "gres/gpu:a100=2"
    assert grp_tres(envs["modern"], account) == "gres/gpu:a100=1"

    # -- 26.05 taken down: its pool is read-only with the reason
    with django_capture_on_commit_callbacks(execute=True):
        down = cluster_update(
            cluster=forky, changes={"api_url": NOBODY}, actor=None, before={}, render=render
        )
    down.refresh_from_db()
    assert down.status == ClusterStatus.UNREACHABLE
    assert down.status_reason.startswith("scheduler_unavailable: ")
    refused = submit(pool_f, 1)
    response = admin_api.post(f"/api/v1/requests/{refused.pk}/approve/", {}, format="json")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "cluster_unreachable"
    assert (body["data"]["cluster"], body["data"]["reason"]) == ("h2s-forky", down.status_reason)
    refused.refresh_from_db()
    assert refused.status == RequestStatus.SUBMITTED
    assert not Allocation.objects.filter(request=refused).exists()
    client.force_login(pool_admin)
    page = client.get("/clusters/").content.decode()
    assert "unreachable" in page and escape(down.status_reason) in page
    url = reverse("pools:request-action", args=[refused.pk, "approve"])
    said = client.post(url, {}, follow=True).content.decode()  # the web form says why, too
    assert "h2s-forky is unreachable" in said and escape(down.status_reason) in said
    report_down = reconcile_cluster(forky.pk)  # reported, not raised; nothing repaired
    assert report_down.errors and report_down.drifts == []

    # -- 24.11 keeps working: one more card there, 26.05's cap untouched
    approve(submit(pool_m, 1))
    assert limits(modern) == (GpuLimit(account, "gpu", "a100", 2),)
    assert grp_tres(envs["modern"], account) == "gres/gpu:a100=2"
    assert grp_tres(envs["forky"], account) == "gres/gpu:a100=2"

    # -- back: the refused approval goes through, 26.05's cap is 2 + 1
    with django_capture_on_commit_callbacks(execute=True):
        back = cluster_update(
            cluster=down,
            changes={"api_url": envs["forky"]["SLURMRESTD_URL"]},
            actor=None,
            before={},
            render=render,
        )
    back.refresh_from_db()
    assert (back.status, back.status_reason) == (ClusterStatus.REACHABLE, "")
    approve(refused)
    assert limits(back) == (GpuLimit(account, "gpu", "a100", 3),)
    assert grp_tres(envs["forky"], account) == "gres/gpu:a100=3"
    assert grp_tres(envs["modern"], account) == "gres/gpu:a100=2"


def test_a_missing_env_file_skips_outside_ci_and_fails_in_ci(monkeypatch, tmp_path):
    absent = tmp_path / "slurm-test.env"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="slurm-test.env is missing"):
        env_of(absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="two-cluster test: .*is missing"):
        env_of(absent)


def test_it_runs_in_the_default_tier_run_only(monkeypatch):
    monkeypatch.delenv("SLURM_TEST_ENV", raising=False)
    run_once()  # no env file named: runs
    monkeypatch.setenv("SLURM_TEST_ENV", str(MODERN))
    run_once()
    monkeypatch.setenv("SLURM_TEST_ENV", str(FORKY))
    with pytest.raises(pytest.skip.Exception, match="runs once"):
        run_once()
