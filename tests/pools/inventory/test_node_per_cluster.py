"""Node identity per cluster (issue 35): a host name is unique within a cluster, not across
clusters (both test Slurms name their nodes alike). Imports find and create nodes in their own
cluster; a file imported without a pool updates the one node of a name, and refuses a name
two clusters share; the node page names the cluster and links the namesake."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from factories import ClusterFactory, NodeFactory, PoolFactory

from pools.common.choices import Scheduler
from pools.inventory.models import Node, node_cluster_id
from pools.inventory.services.importer import inventory_import
from scheduler_adapters.types import (
    GpuSnapshot,
    InventorySource,
    NodeSnapshot,
    NodeState,
    ParseResult,
)

pytestmark = pytest.mark.django_db


def nodes(*hostnames: str, cards: int = 2, driver: str = "550.54.15") -> ParseResult:
    return ParseResult(
        nodes=tuple(
            NodeSnapshot(
                hostname=name,
                source=InventorySource.NVIDIA_SMI,
                gpus=tuple(
                    GpuSnapshot(index=i, model_name="NVIDIA A100-SXM4-80GB") for i in range(cards)
                ),  # fmt: skip
                driver_version=driver,
                state=NodeState.UP,
            )
            for name in hostnames
        )
    )


@pytest.fixture
def two():
    train, old = ClusterFactory(slug="train", name="Train"), ClusterFactory(slug="old", name="Old")
    return {
        "train": PoolFactory(slug="train-gpu", cluster=train),
        "old": PoolFactory(slug="old-gpu", cluster=old),
    }


def test_one_name_in_two_clusters_is_two_nodes_and_the_database_holds_it(two):
    train = inventory_import(result=nodes("gpu-01"), source="nvidia-smi", pool=two["train"])
    old = inventory_import(result=nodes("gpu-01", cards=4), source="nvidia-smi", pool=two["old"])
    assert (train.created, old.created) == (["gpu-01"], ["gpu-01"])
    rows = sorted(Node.objects.values_list("cluster__slug", "pool__slug"))
    assert rows == [("old", "old-gpu"), ("train", "train-gpu")]
    cards = dict((n.cluster.slug, n.gpus.count()) for n in Node.objects.select_related("cluster"))
    assert cards == {"train": 2, "old": 4}

    # re-importing old's updates old's node only
    again = inventory_import(
        result=nodes("gpu-01", cards=4, driver="570.86.10"), source="nvidia-smi", pool=two["old"]
    )
    assert again.updated == ["gpu-01"]
    drivers = dict(Node.objects.values_list("cluster__slug", "driver_version"))
    assert drivers == {"train": "550.54.15", "old": "570.86.10"}

    # and the database refuses a second node of one name in one cluster
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.create(hostname="gpu-01", cluster=two["old"].cluster)
    with pytest.raises(IntegrityError), transaction.atomic():  # "no cluster" is one cluster
        Node.objects.create(hostname="gpu-02")
        Node.objects.create(hostname="gpu-02")


def test_a_file_without_a_pool_updates_the_one_node_of_a_name_and_refuses_a_shared_one(two):
    NodeFactory(hostname="gpu-01", pool=two["train"])
    NodeFactory(hostname="gpu-01", pool=two["old"])
    NodeFactory(hostname="gpu-09", pool=two["old"])

    report = inventory_import(result=nodes("gpu-01", "gpu-09", "gpu-10"), source="nvidia-smi")

    assert report.rejected == ["gpu-01"]
    (issue,) = report.issues
    assert issue.message == (
        "clusters old, train each have a node named gpu-01: import it with its pool, which "
        "names the cluster"
    )
    assert (report.updated, report.created) == (["gpu-09"], ["gpu-10"])
    assert Node.objects.get(hostname="gpu-09").cluster.slug == "old"
    assert Node.objects.get(hostname="gpu-10").cluster is None  # a file names no cluster
    assert Node.objects.filter(hostname="gpu-01").count() == 2


def test_the_environments_cluster_row_and_no_cluster_are_one():
    env = ClusterFactory(slug="env-slurm", credential_kind="environment", kind=Scheduler.SLURM)
    assert node_cluster_id(env) is None and node_cluster_id(None) is None
    pool = PoolFactory(slug="env-gpu", cluster=env)
    inventory_import(result=nodes("gpu-01"), source="nvidia-smi", pool=pool)
    inventory_import(result=nodes("gpu-01"), source="nvidia-smi", pool=PoolFactory(slug="p2"))
    assert list(Node.objects.values_list("cluster", "pool__slug")) == [(None, "p2")]


def test_the_node_page_names_the_cluster_and_links_the_namesake(two, pool_admin, client):
    NodeFactory(hostname="gpu-01", pool=two["train"])
    NodeFactory(hostname="gpu-01", pool=two["old"])
    client.force_login(pool_admin)

    first = client.get("/nodes/gpu-01/").content.decode()  # by cluster name: Old first
    assert '<small class="muted">in Old</small>' in first
    assert '<a href="/nodes/gpu-01/?cluster=train">gpu-01 in Train</a>' in first

    train = client.get("/nodes/gpu-01/?cluster=train").content.decode()
    assert '<small class="muted">in Train</small>' in train
    assert '<a href="/nodes/gpu-01/?cluster=old">gpu-01 in Old</a>' in train
    assert client.get("/nodes/gpu-01/?cluster=nowhere").status_code == 404


def test_the_api_names_the_cluster_and_refuses_a_shared_name_until_one_is_named(two, member_api):
    NodeFactory(hostname="gpu-01", pool=two["train"])
    NodeFactory(hostname="gpu-01", pool=two["old"])
    NodeFactory(hostname="gpu-02", pool=two["old"])

    listed = member_api.get("/api/v1/nodes/", {"cluster": "old"}).json()["results"]
    assert sorted((n["hostname"], n["cluster"]) for n in listed) == [
        ("gpu-01", "old"),
        ("gpu-02", "old"),
    ]
    assert member_api.get("/api/v1/nodes/gpu-02/").json()["cluster"] == "old"

    shared = member_api.get("/api/v1/nodes/gpu-01/")
    assert shared.status_code == 409
    body = shared.json()
    assert body["code"] == "node_name_shared"
    assert body["data"] == {"hostname": "gpu-01", "clusters": ["old", "train"]}
    named = member_api.get("/api/v1/nodes/gpu-01/", {"cluster": "train"})
    assert (named.status_code, named.json()["cluster"]) == (200, "train")
    assert member_api.get("/api/v1/nodes/gpu-03/").status_code == 404


def test_every_link_to_a_node_page_names_its_cluster(two, pool_admin, client):
    """gpu-01 in Train and in Old: the GPU list, the dashboard's heatmap and an import's report
    link each to its own cluster's page (``/nodes/gpu-01/`` alone answers Old's, first by
    name, for both)."""
    from factories import GpuFactory

    for pool in two.values():
        GpuFactory(node=NodeFactory(hostname="gpu-01", pool=pool), index=0)
    client.force_login(pool_admin)
    links = {'<a href="/nodes/gpu-01/?cluster=train">', '<a href="/nodes/gpu-01/?cluster=old">'}

    gpus = client.get("/gpus/").content.decode()
    assert all(link in gpus for link in links)

    heat = client.get("/dashboard/?part=heatmap", headers={"HX-Request": "true"}).content.decode()
    # the heatmap's host link also carries the full name as its title (cut names read whole)
    assert all(f'{link[:2]} class="hm-host" {link[3:-1]} title="gpu-01">' in heat for link in links)

    report = inventory_import(result=nodes("gpu-01"), source="nvidia-smi", pool=two["train"])
    assert report.node_clusters == {"gpu-01": "train"}
    from django.template.loader import render_to_string

    html = render_to_string("pools/_import_report.html", {"report": report})
    assert '<a href="/nodes/gpu-01/?cluster=train">gpu-01</a>' in html


def test_a_node_of_no_cluster_links_its_page_without_one():
    from pools.web.pages import node_url

    assert node_url("gpu-01", None) == "/nodes/gpu-01/"
    assert node_url("gpu-01", "a b") == "/nodes/gpu-01/?cluster=a+b"
