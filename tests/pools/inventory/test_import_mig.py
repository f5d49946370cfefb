"""Issue 18, kind 3, through the import: a MIG *single* node's physical cards and base model.

Label shapes from github:NVIDIA/gpu-feature-discovery internal/lm/mig-strategy.go and
NVIDIA/gpu-operator#981 (A100 40GB, all-1g.5gb, slice memory 4864 MiB); slices per card from the
A100 40GB all-<profile> configs in NVIDIA/gpu-operator#281.
"""

import json

import pytest
from factories import NodeFactory

from pools.inventory.models import Gpu, MigDevice
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db


def k8s(count, product="NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", name="mig-01"):
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.memory": "4864",
    }
    item = {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(count)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    return json.dumps({"kind": "NodeList", "items": [item]}).encode()


def test_fourteen_1g5gb_slices_are_two_a100_40gb_cards_of_seven():
    report = inventory_import_file(data=k8s(14), source="kubernetes")
    assert report.created == ["mig-01"]
    assert list(
        Gpu.objects.order_by("index").values_list("index", "gpu_model__slug", "mig_mode")
    ) == [
        (0, "a100_40g_sxm", True),
        (1, "a100_40g_sxm", True),
    ]
    assert MigDevice.objects.count() == 14
    assert set(MigDevice.objects.values_list("profile", "memory_total_mib")) == {("1g.5gb", 4864)}


def test_slices_that_do_not_fill_whole_cards_leave_the_nodes_cards_unchanged():
    node = NodeFactory(hostname="mig-01")
    Gpu.objects.create(node=node, index=0, raw_model_name="NVIDIA A100-SXM4-40GB")
    Gpu.objects.create(node=node, index=1, raw_model_name="NVIDIA A100-SXM4-40GB")
    # 3g.20gb fits 2 per A100 40GB card: 3 slices cannot be whole cards.
    report = inventory_import_file(
        data=k8s(3, product="NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"), source="kubernetes"
    )
    assert Gpu.objects.filter(node=node).count() == 2
    [issue] = [i for i in report.issues if i.node == "mig-01"]
    assert "3 slices of 3g.20gb do not fill cards of 2" in issue.message
