"""NVLink domains reach the inventory through the same nvidia-smi import path and report:
a capture with ``topo -m`` / ``nvlink -s`` sections stores its node's domains; what the capture
leaves unknown stays unknown (NULL), and importing it again changes nothing."""

from __future__ import annotations

import pytest

from pools.inventory.models import Node
from pools.inventory.services.importer import inventory_import_file

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
