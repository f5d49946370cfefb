"""NVLink domains reach the inventory through the same nvidia-smi import path and report:
a capture with ``topo -m`` / ``nvlink -s`` sections stores its node's domains; what the capture
leaves unknown stays unknown (NULL), and importing it again changes nothing. Slurm's and
Kubernetes' listings tell nothing per card about NVLink (recorded and sourced below), so they
never set or clear the domains."""

from __future__ import annotations

import json

import pytest
from factories import NodeFactory

from pools.inventory.models import Node
from pools.inventory.services.import_files import inventory_import_file
from pools.inventory.services.importer import inventory_import
from scheduler_adapters.kubernetes_nodes import parse_kubernetes_nodes
from scheduler_adapters.slurm.nodes import parse_slurm_nodes
from scheduler_adapters.types import InventorySource

pytestmark = pytest.mark.django_db


def _capture(fixtures_dir, topo_file: str, listing: str) -> bytes:
    topo = (fixtures_dir / "nvidia-smi" / "topo" / topo_file).read_text(encoding="utf-8")
    return (f"# $ nvidia-smi -L\n{listing}\n" + topo).encode()


A6000_LIST = "\n".join(
    f"GPU {i}: NVIDIA RTX A6000 (UUID: GPU-{uuid})"
    for i, uuid in enumerate(
        [
            "5baec991-de63-c196-1766-04c38407e133",
            "39fc2446-cb50-2067-2867-d95efd470a2c",
            "02c05ee3-bdb5-aac7-f9e8-a4c8f3f725b3",
        ]
    )
)
DGX_LIST = "\n".join(
    f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-{i:08d}-1111-2222-3333-444444444444)"
    for i in range(8)
)


def test_a_capture_with_topology_stores_the_domains_once(fixtures_dir):
    data = _capture(fixtures_dir, "rtx-a6000-x3__nvlink-bridge-pair.txt", A6000_LIST)
    report = inventory_import_file(data=data, source="nvidia-smi", node="ws-01")
    assert report.created == ["ws-01"] and report.ok
    node = Node.objects.get(hostname="ws-01")
    assert node.nvlink_domains == [[0, 1], [2]]
    read_at = node.nvlink_read_at
    assert read_at is not None
    again = inventory_import_file(data=data, source="nvidia-smi", node="ws-01")
    assert again.unchanged == ["ws-01"]
    node.refresh_from_db()
    assert node.nvlink_read_at == read_at


def test_dgx_capture_is_one_domain_and_a_plain_listing_keeps_what_was_read(fixtures_dir):
    data = _capture(fixtures_dir, "dgx-a100__nvswitch-nv12.txt", DGX_LIST)
    inventory_import_file(data=data, source="nvidia-smi", node="dgx-01")
    assert Node.objects.get(hostname="dgx-01").nvlink_domains == [list(range(8))]
    # a later import without topology sections says nothing about NVLink: kept, not cleared
    inventory_import_file(
        data=f"# $ nvidia-smi -L\n{DGX_LIST}\n".encode(), source="nvidia-smi", node="dgx-01"
    )
    assert Node.objects.get(hostname="dgx-01").nvlink_domains == [list(range(8))]


def test_a_matrix_for_other_cards_is_reported_not_stored(fixtures_dir):
    data = _capture(fixtures_dir, "dgx-a100__nvswitch-nv12.txt", A6000_LIST)  # 8 vs 3 cards
    report = inventory_import_file(data=data, source="nvidia-smi", node="mixed-01")
    assert Node.objects.get(hostname="mixed-01").nvlink_domains is None
    assert any("NVLink domains not stored" in issue.message for issue in report.issues)


def test_exporter_capture_without_links_is_a_domain_of_one(fixtures_dir):
    data = (fixtures_dir / "nvidia-smi" / "linux-x86_64__nvidia-l40s__595.80.txt").read_bytes()
    inventory_import_file(data=data, source="nvidia-smi", node="l40s-01")
    assert Node.objects.get(hostname="l40s-01").nvlink_domains == [[0]]


# What the schedulers' own sources know about NVLink: nothing per card that the inventory can
# read, so a listing from them never sets or clears the domains a capture read.
CLIQUE = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1"  # GFD README's example of nvidia.com/gpu.clique


def test_a_slurm_listing_with_gres_links_configured_keeps_the_captured_domains(fixtures_dir):
    """Recorded on 26.05.5 (v0.0.45) with ``Links=`` on every h100 line of gres.conf (NVSwitch
    style, 18 links to each other card): ``slurmd -G`` printed them, but the REST node (and
    ``scontrol show node -d``) shows only ``gres: gpu:h100:8``."""
    recorded = json.loads(
        (fixtures_dir / "slurm" / "rest_v0.0.45" / "node_gres_links.json").read_text()
    )
    result = parse_slurm_nodes(recorded["body"])
    (snapshot,) = result.nodes
    assert (snapshot.hostname, len(snapshot.gpus)) == ("gpu-h100-01", 8)
    assert snapshot.nvlink_domains is None
    assert "links" not in json.dumps(recorded["body"]).lower()

    NodeFactory(hostname="gpu-h100-01", nvlink_domains=[list(range(8))])  # read from topo -m
    inventory_import(result=result, source=InventorySource.SLURM)
    assert Node.objects.get(hostname="gpu-h100-01").nvlink_domains == [list(range(8))]


def test_gfd_labels_with_a_clique_leave_the_node_domains_unknown(fixtures_dir):
    """GFD publishes ``nvidia.com/gpu.clique`` only when the node's fabric-attached GPUs share
    one ClusterUUID and CliqueID (``internal/lm/fabric.go``); GPUs not attached are skipped, so
    the label does not say which of the node's cards are in the NVLink fabric. It is kept with
    the node's labels; the domains stay unknown (the catalogue is the fallback at read time)."""
    listing = json.loads((fixtures_dir / "kubernetes" / "nodes.json").read_text())
    (item,) = [i for i in listing["items"] if i["metadata"]["name"] == "gpu-a100-k8s-01"]
    item["metadata"]["labels"]["nvidia.com/gpu.clique"] = CLIQUE
    result = parse_kubernetes_nodes({"items": [item]})
    (snapshot,) = result.nodes
    assert (len(snapshot.gpus), snapshot.nvlink_domains) == (8, None)

    inventory_import(result=result, source=InventorySource.KUBERNETES)
    node = Node.objects.get(hostname="gpu-a100-k8s-01")
    assert node.nvlink_domains is None
    assert node.labels["nvidia.com/gpu.clique"] == CLIQUE


def test_a_card_without_an_index_leaves_the_domains_unstored_and_the_rest_imported():
    """A CSV listing whose second card reports its index as ``[N/A]`` beside a ``topo -m``
    matrix of GPU0 and GPU1: which card is GPU1 is unknown, so no domain is stored and the
    report says why; both cards are still imported."""
    data = (
        b"# $ nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv\n"
        b"index, name, uuid, memory.total [MiB]\n"
        b"0, NVIDIA RTX A6000, GPU-5baec991-de63-c196-1766-04c38407e133, 49140 MiB\n"
        b"[N/A], NVIDIA RTX A6000, GPU-39fc2446-cb50-2067-2867-d95efd470a2c, 49140 MiB\n"
        b"# $ nvidia-smi topo -m\n"
        b"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        b"GPU0\t X \tNV4\t0-31\t0\n"
        b"GPU1\tNV4\t X \t0-31\t0\n"
    )
    report = inventory_import_file(data=data, source="nvidia-smi", node="ws-02")
    node = Node.objects.get(hostname="ws-02")
    assert report.created == ["ws-02"]
    assert node.nvlink_domains is None
    assert node.gpus.count() == 2
    (issue,) = [i for i in report.issues if "NVLink domains not stored" in i.message]
    assert issue.node == "ws-02"
    assert "1 card without an index" in issue.message
