"""What an import tells the person who ran it (issue #37, "Imports"): a driver newer than the
portal's CUDA table, MIG UUIDs that are placeholders or reported by two cards, what an update
changed, and the node name suggested from the file name."""

from __future__ import annotations

import pytest
from factories import nvidia_smi_csv

from pools.inventory.models import MigDevice
from pools.inventory.services.import_files import inventory_import_file
from pools.inventory.services.import_plan import is_placeholder_uuid
from pools.inventory.services.importer import inventory_import
from scheduler_adapters.types import (
    GpuSnapshot,
    InventorySource,
    MigDeviceSnapshot,
    NodeSnapshot,
    ParseResult,
)

pytestmark = pytest.mark.django_db

# Two real-looking (random) MIG UUIDs, the shape nvidia-smi -L prints.
SLICE_A = "MIG-5d1c9a3e-7f42-5b8e-9c0d-2a6f4e1b7c93"
SLICE_B = "MIG-b84e2f07-1c9d-5a36-8e4f-0d7a3c6b915e"


def node(host: str, *, driver="590.48.01", cuda="13.1", slices=()) -> NodeSnapshot:
    mig = tuple(
        MigDeviceSnapshot(index=i, uuid=u, profile="3g.40gb", memory_total_mib=40448)
        for i, u in enumerate(slices)
    )
    gpu = GpuSnapshot(index=0, model_name="NVIDIA H100 80GB HBM3", mig_mode=bool(mig),
                      mig_devices=mig)  # fmt: skip
    return NodeSnapshot(hostname=host, source=InventorySource.NVIDIA_SMI, gpus=(gpu,),
                        driver_version=driver, cuda_version=cuda)  # fmt: skip


def run(*snapshots: NodeSnapshot):
    return inventory_import(
        result=ParseResult(nodes=list(snapshots)), source=InventorySource.NVIDIA_SMI
    )


@pytest.mark.parametrize(
    ("uuid", "placeholder"),
    [
        ("MIG-00000001-0000-0000-0000-000000000001", True),  # 30 zero hex digits of 32
        ("MIG-00000000-0000-0000-0000-000000000000", True),
        ("GPU-00000000-0000-0000-0000-000000000000", True),  # masked GPU UUID
        (SLICE_A, False),  # 3 zeros
        ("MIG-1000000a-0000-00b0-00d0-e0f0a0b0c000", False),  # 23 zeros: below 24
        ("MIG-1000000a-0000-00b0-00d0-e0f0a0b00000", True),  # 24 zeros
        ("MIG-GPU-5d1c9a3e-7f42-5b8e-9c0d-2a6f4e1b7c93/1/0", False),  # the pre-R470 form
    ],
)
def test_placeholder_uuids(uuid, placeholder):
    assert is_placeholder_uuid(uuid) is placeholder


def test_a_driver_newer_than_the_cuda_table_is_reported():
    """The table (NVIDIA release notes) ends at CUDA 13.2 for drivers from 595.45.04; a node
    with driver 610.10 reporting CUDA 13.3 shows the table is behind. 590.48.01 with 13.1 (its
    table figure) and 595.80 with 13.2 say nothing."""
    report = run(node("new-01", driver="610.10", cuda="13.3"), node("ok-01"),
                 node("ok-02", driver="595.80", cuda="13.2"))  # fmt: skip
    behind = [w for w in report.warnings if w.field == "cuda_version"]
    assert [w.node for w in behind] == ["new-01"]
    assert "driver 610.10 reports CUDA 13.3" in behind[0].message
    assert "(CUDA 13.2)" in behind[0].message


def test_a_mig_uuid_reported_by_two_cards_is_stored_as_unknown_on_the_second():
    first = run(node("mig-01", slices=(SLICE_A, SLICE_B)))
    assert [w for w in first.warnings if w.field == "uuid"] == []
    second = run(node("mig-02", slices=(SLICE_A,)))
    (warning,) = [w for w in second.warnings if w.field == "uuid"]
    assert warning.node == "mig-02" and SLICE_A in warning.message
    stored = dict(MigDevice.objects.values_list("gpu__node__hostname", "uuid").order_by("uuid"))
    assert sorted(MigDevice.objects.filter(gpu__node__hostname="mig-01")
                  .values_list("uuid", flat=True)) == sorted([SLICE_A, SLICE_B])  # fmt: skip
    assert stored["mig-02"] == ""
    # within one import: both cards say SLICE_B → neither keeps it
    both = run(node("mig-03", slices=(SLICE_B,)), node("mig-04", slices=(SLICE_B,)))
    assert len([w for w in both.warnings if w.field == "uuid"]) == 2


def test_an_update_says_what_changed():
    inventory_import_file(data=nvidia_smi_csv(2, driver="535.129.03"), source="nvidia-smi",
                          node="trn-01")  # fmt: skip
    report = inventory_import_file(
        data=nvidia_smi_csv(3, driver="550.54.15"), source="nvidia-smi", node="trn-01"
    )
    assert report.updated == ["trn-01"]
    assert report.changes == {"trn-01": ["driver version 535.129.03 → 550.54.15",
                                         "1 GPU(s) added"]}  # fmt: skip
    assert report.as_dict()["changes"] == report.changes


def test_the_page_suggests_no_node_when_the_file_name_is_not_a_host_name(admin_page):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("my capture.txt", nvidia_smi_csv(1))
    response = admin_page.post("/inventory/import/", {"source": "nvidia-smi", "file": upload})
    assert response.context["form"].errors["node"] == [
        "nvidia-smi output needs the name of the node it came from."
    ]
    assert response.context["form"]["node"].value() is None  # no suggestion, not a blank one


def test_the_node_page_says_the_reported_cuda_is_beyond_the_table(admin_page):
    run(node("new-01", driver="610.10", cuda="13.3"), node("ok-01"))
    page = admin_page.get("/nodes/new-01/").content.decode()
    assert "data-cuda-table-behind" in page and "CUDA 13.3 is beyond the CUDA table" in page
    assert "data-cuda-table-behind" not in admin_page.get("/nodes/ok-01/").content.decode()
