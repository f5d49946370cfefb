"""Issue 38, item 3: Slurm GRES of MIG slices imports as slices of cards in MIG mode, not as
cards of an unknown model.

The nodes file is the recorded 24.11 ``GET /slurm/v0.0.42/nodes`` answer
(``tests/fixtures/slurm/rest_v0.0.42/nodes.json``) with its nodes' ``gres`` set as a MIG
cluster reports them (Slurm gres.conf(5): a typed ``Name=gpu Type=1g.10gb`` entry, or
``AutoDetect=nvml``'s ``<card>_<profile>`` names):
* ``gpu-a100-01``: ``gpu:a100_80g_pcie:4,gpu:1g.10gb:7`` — 4 whole cards and 7 × 1g.10gb;
  7 slices × 1 compute slice = 7 = one card's 7, so 1 card in MIG mode, of the node's one
  whole-card type: 5 A100 80GB PCIe, 4 whole;
* ``gpu-4090-01``: ``gpu:nvidia_a100_80gb_pcie_1g.10gb:9,gpu:nvidia_a100_80gb_pcie_2g.20gb:2``
  — 9 × 1 + 2 × 2 = 13 compute slices: the fewest cards holding them is 2 (13 > 7), dealt
  largest first: card 0 = 2g + 2g + 1g + 1g + 1g (7), card 1 = 6 × 1g (6); model from the
  AutoDetect name (``nvidia_a100_80gb_pcie`` = A100 80GB PCIe by the name key).
Before: 7 (and 11) "cards" of unrecognised types ``1g.10gb`` / ``nvidia_..._1g.10gb``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import PoolFactory

from pools.capacity.availability import pool_slices, schedulable_cards
from pools.inventory.models import Gpu, GpuModel, MigDevice
from pools.inventory.services.import_files import inventory_import_file
from scheduler_adapters.slurm.nodes import mig_gres_type

pytestmark = pytest.mark.django_db

NODES = Path(__file__).resolve().parents[2] / "fixtures" / "slurm" / "rest_v0.0.42" / "nodes.json"
GRES = {
    "gpu-a100-01": ("gpu:a100_80g_pcie:4,gpu:1g.10gb:7", "gpu:a100_80g_pcie:1(IDX:0)"),
    "gpu-4090-01": (
        "gpu:nvidia_a100_80gb_pcie_1g.10gb:9,gpu:nvidia_a100_80gb_pcie_2g.20gb:2",
        "gpu:nvidia_a100_80gb_pcie_1g.10gb:3",
    ),
}


def nodes_file() -> bytes:
    body = json.loads(NODES.read_text(encoding="utf-8"))["body"]
    for node in body["nodes"]:
        node["gres"], node["gres_used"] = GRES[node["name"]]
    return json.dumps(body).encode()


@pytest.fixture
def imported():
    pool = PoolFactory(slug="train", slurm_partition="gpu")
    report = inventory_import_file(data=nodes_file(), source="slurm", pool=pool)
    assert report.issues == []
    return pool


def test_mig_gres_is_read_as_slices_of_cards_in_mig_mode(imported):
    model = GpuModel.objects.get(slug="a100_80g_pcie")
    plain = Gpu.objects.filter(node__hostname="gpu-a100-01").order_by("index")
    assert [(g.gpu_model_id, g.mig_mode) for g in plain] == [(model.pk, None)] * 4 + [
        (model.pk, True)
    ]
    assert (
        list(plain[4].mig_devices.values_list("profile", "gres_type"))
        == [("1g.10gb", "1g.10gb")] * 7
    )
    auto = Gpu.objects.filter(node__hostname="gpu-4090-01").order_by("index")
    layout = [sorted(g.mig_devices.values_list("profile", flat=True)) for g in auto]
    assert layout == [["1g.10gb"] * 3 + ["2g.20gb"] * 2, ["1g.10gb"] * 6]
    assert {g.gpu_model_id for g in auto} == {model.pk}
    assert set(MigDevice.objects.filter(gpu__in=auto).values_list("gres_type", flat=True)) == {
        "nvidia_a100_80gb_pcie_1g.10gb",
        "nvidia_a100_80gb_pcie_2g.20gb",
    }


def test_capacity_counts_whole_cards_and_slices_apart(imported):
    """4 whole A100 80GB PCIe (the 3 MIG cards are none); 7 + 9 = 16 × 1g.10gb, 2 × 2g.20gb —
    if the nodes are up (the recording's are idle)."""
    model = GpuModel.objects.get(slug="a100_80g_pcie")
    assert schedulable_cards(pool=imported, gpu_model=model) == 4
    assert pool_slices(pool=imported, gpu_model=model) == {"1g.10gb": 16, "2g.20gb": 2}


def test_gres_used_counts_whole_cards_only(imported):
    """``gpu:a100_80g_pcie:1`` used is 1 card; ``..._1g.10gb:3`` used counts slices, no card."""
    from pools.inventory.models import Node

    used = dict(Node.objects.values_list("hostname", "gpus_allocated"))
    assert used == {"gpu-a100-01": 1, "gpu-4090-01": 0}


@pytest.mark.parametrize(
    ("gres_type", "read"),
    [
        ("1g.10gb", (None, "1g.10gb")),
        ("nvidia_a100_80gb_pcie_3g.40gb", ("nvidia_a100_80gb_pcie", "3g.40gb")),
        ("nvidia_h100_80gb_hbm3_1g.10gb+me", ("nvidia_h100_80gb_hbm3", "1g.10gb+me")),
        ("a100", None),
        ("5g.40gb", None),
        (None, None),
    ],
)
def test_mig_gres_types(gres_type, read):
    assert mig_gres_type(gres_type) == read
