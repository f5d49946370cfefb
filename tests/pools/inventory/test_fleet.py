"""fleet_summary, fleet_totals and pools_supporting_cuda on a small, hand-counted fleet."""

from __future__ import annotations

import pytest
from factories import GpuFactory, NodeFactory, PoolFactory, node_with_gpus

from pools.inventory import selectors
from pools.inventory.models import Gpu, GpuModel, Pool
from pools.inventory.selectors import FleetRow

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    """
    node         pool   state  driver      cards
    train-01     Train  up     550.54.15   4 A100 SXM4 80GB, one of them in error, one named
                                           by its Slurm GRES type instead of nvidia-smi's name
    train-02     Train  drain  535.129.03  2 A100 SXM4 80GB
    dev-01       Dev    up     550.54.15   2 RTX 4090 + 1 unrecognised 'v100'
    spare-01     -      down   (unknown)   1 H100 SXM5 80GB
    """
    train = PoolFactory(slug="train", name="Train")
    dev = PoolFactory(slug="dev", name="Dev")
    n1 = node_with_gpus(4, hostname="train-01", pool=train, driver_version="550.54.15")
    n1.gpus.filter(index=0).update(health="error")
    n1.gpus.filter(index=1).update(raw_model_name="a100_80g_sxm")
    node_with_gpus(2, hostname="train-02", pool=train, state="drain", driver_version="535.129.03")
    n3 = node_with_gpus(
        2, hostname="dev-01", pool=dev, gpu_model="rtx4090", driver_version="550.54.15"
    )
    GpuFactory(node=n3, index=2, gpu_model=None, raw_model_name="v100", memory_total_mib=None)
    node_with_gpus(
        1, hostname="spare-01", pool=None, state="down", driver_version="", gpu_model="h100_sxm"
    )


def test_fleet_summary_groups_cards_by_pool_model_driver_group_and_state(fleet):
    rows = selectors.fleet_summary()

    assert sorted(rows, key=lambda r: (r.pool, r.gpu_model, r.driver_group)) == [
        FleetRow("(no pool)", "H100 SXM5 80GB", "(unknown driver)", "down", cards=1, healthy=0),
        FleetRow("Dev", "? v100", "R550", "up", cards=1, healthy=1),
        FleetRow("Dev", "GeForce RTX 4090", "R550", "up", cards=2, healthy=2),
        FleetRow("Train", "A100 SXM4 80GB", "R535", "drain", cards=2, healthy=0),
        FleetRow("Train", "A100 SXM4 80GB", "R550", "up", cards=4, healthy=3),
    ]


def test_fleet_totals(fleet):
    # cards 4 + 2 + 3 + 1; healthy: up nodes only, minus the card in error: 3 + 3.
    assert selectors.fleet_totals() == {
        "nodes": 4,
        "pools": 2,
        "cards": 10,
        "healthy": 6,
        "unrecognised": 1,
    }


def test_fleet_totals_of_an_empty_fleet_are_zero():
    assert selectors.fleet_totals() == {
        "nodes": 0,
        "pools": 0,
        "cards": 0,
        "healthy": 0,
        "unrecognised": 0,
    }


def by_branch(rows):
    for row in rows:
        row["driver_groups"] = sorted(row["driver_groups"], key=lambda g: g["branch"])
    return rows


def test_pools_supporting_cuda_12_4_counts_cards_on_capable_drivers(fleet):
    # 550.54.15 >= 550.54.14 (CUDA 12.4 GA) -> capable; 535.129.03 tops out at 12.2.
    assert by_branch(selectors.pools_supporting_cuda(cuda="12.4")) == [
        {
            "pool": "(no pool)",
            "slug": None,
            "capable_cards": 0,
            "other_cards": 1,
            "driver_groups": [],
        },
        {
            "pool": "Dev",
            "slug": "dev",
            "capable_cards": 3,
            "other_cards": 0,
            "driver_groups": [{"branch": 550, "max_cuda": "12.4", "supports": True}],
        },
        {
            "pool": "Train",
            "slug": "train",
            "capable_cards": 4,
            "other_cards": 2,
            "driver_groups": [
                {"branch": 535, "max_cuda": "12.2", "supports": False},
                {"branch": 550, "max_cuda": "12.4", "supports": True},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("cuda", "train_capable"), [("12.2", 6), ("12.3", 4), ("12.10", 0), ("11.8", 6), ("12.4.1", 4)]
)
def test_cuda_versions_compare_as_numbers_not_text(fleet, cuda, train_capable):
    train = next(r for r in selectors.pools_supporting_cuda(cuda=cuda) if r["slug"] == "train")
    assert (train["capable_cards"], train["other_cards"]) == (train_capable, 6 - train_capable)


@pytest.mark.parametrize("cuda", ["abc", "", "12", "N/A", "12.x", "twelve.four"])
def test_an_invalid_cuda_version_raises_value_error(cuda):
    with pytest.raises(ValueError):
        selectors.pools_supporting_cuda(cuda=cuda)


def test_node_list_counts_cards_and_unrecognised_cards(fleet):
    counts = {n.hostname: (n.gpu_count, n.unrecognised_count) for n in selectors.node_list()}
    assert counts == {"train-01": (4, 0), "train-02": (2, 0), "dev-01": (3, 1), "spare-01": (1, 0)}


def test_pool_and_driver_group_lists_count_nodes_and_cards(fleet):
    NodeFactory(hostname="cpu-01", pool=Pool.objects.get(slug="dev"))
    pools = {p.slug: (p.node_count, p.gpu_count) for p in selectors.pool_list()}
    groups = {g.branch: (g.node_count, g.gpu_count) for g in selectors.driver_group_list()}
    assert pools == {"train": (2, 6), "dev": (2, 3)}
    # cpu-01 has the factory's 550.54.15 driver.
    assert groups == {535: (1, 2), 550: (3, 7)}


def test_gpu_model_list_counts_the_fleets_cards(fleet):
    counts = {m.slug: m.gpu_count for m in selectors.gpu_model_list()}
    assert counts["a100_80g_sxm"] == 6
    assert counts["rtx4090"] == 2
    assert counts["h100_sxm"] == 1
    assert counts["rtx4090d"] == 0
    assert len(counts) == GpuModel.objects.count()


def test_the_driver_group_list_counts_the_cards_in_mig_mode(fleet):
    """The pools page's driver-group "In MIG mode" column: 2 cards of the 535 group's node
    switched to MIG mode -> 2 there, 0 in the 550 group (7 whole cards); gpu_count unchanged."""
    group_535 = Gpu.objects.filter(node__driver_group__branch=535)
    Gpu.objects.filter(pk__in=list(group_535.values_list("pk", flat=True)[:2])).update(
        mig_mode=True
    )

    groups = {g.branch: (g.gpu_count, g.mig_gpu_count) for g in selectors.driver_group_list()}

    assert groups == {535: (2, 2), 550: (7, 0)}
