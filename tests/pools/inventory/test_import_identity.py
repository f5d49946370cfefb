"""Issue 18, kind 1, through the import: device id tie-breaker, ambiguous names for an admin.

Names and device ids from NVIDIA's table (github:NVIDIA/open-gpu-kernel-modules README.md,
"Compatible GPUs"): ``NVIDIA H100 | 2339`` has no form factor; ``NVIDIA H100 80GB HBM3 | 2330``
is the SXM5 part, ``NVIDIA H100 PCIe | 2331`` the PCIe one.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from factories import UserFactory, slurm_node, slurm_nodes_json

from pools.inventory import selectors
from pools.inventory.models import Gpu, GpuModel
from pools.inventory.services.gpu_models import gpu_model_alias_map
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

HEADER = "index, name, uuid, pci.device_id, memory.total [MiB], driver_version\n"


def smi(host: str, *rows: tuple[str, str]) -> bytes:
    lines = [
        f"{n}, {name}, GPU-0a0b0c0d-0000-4000-8000-{int(host[-1]):06d}{n:06d}, {device}, "
        "81559 MiB, 590.48.01"
        for n, (name, device) in enumerate(rows)
    ]
    return (HEADER + "\n".join(lines) + "\n").encode()


def cards():
    return list(
        Gpu.objects.order_by("node__hostname", "index").values_list(
            "node__hostname", "index", "gpu_model__slug", "pci_device_id", "model_candidates"
        )
    )


def test_the_device_id_settles_a_name_without_form_factor_and_flags_what_it_cannot():
    report = inventory_import_file(
        data=smi(
            "h-1",
            ("NVIDIA H100", "0x233010DE"),
            ("NVIDIA H100", "0x233110DE"),
            ("NVIDIA H100", "0x233910DE"),
        ),
        source="nvidia-smi",
        node="h-1",
    )

    assert report.created == ["h-1"]
    assert cards() == [
        ("h-1", 0, "h100_sxm", "0x233010DE", []),
        ("h-1", 1, "h100_pcie", "0x233110DE", []),
        ("h-1", 2, None, "0x233910DE", ["h100_sxm", "h100_pcie", "h100_nvl"]),
    ]
    [warning] = report.warnings
    assert warning.field == "model" and "ambiguous, could be h100_sxm, h100_pcie, h100_nvl" in (
        warning.message
    )
    assert selectors.unrecognised_model_list() == [
        {
            "raw_model_name": "NVIDIA H100",
            "model_candidates": ["h100_sxm", "h100_pcie", "h100_nvl"],
            "gpu_count": 1,
            "node_count": 1,
        }
    ]


def test_a_truncated_name_is_refused_and_never_stored_as_the_raw_name():
    report = inventory_import_file(
        data=smi("t-1", ("NVIDIA H100 80GB ...", "0x233010DE")), source="nvidia-smi", node="t-1"
    )
    assert [i.field for i in report.issues] == ["name"]
    assert list(Gpu.objects.values_list("raw_model_name", "gpu_model", "model_candidates")) == [
        ("", None, [])
    ]


def test_a_slurm_gres_type_naming_several_skus_is_listed_with_its_candidates():
    inventory_import_file(data=slurm_nodes_json(slurm_node("s-1", "gpu:a100:2")), source="slurm")
    [row] = selectors.unrecognised_model_list()
    assert (row["raw_model_name"], row["gpu_count"]) == ("a100", 2)
    assert set(row["model_candidates"]) == {
        "a100_40g_pcie",
        "a100_40g_sxm",
        "a100_80g_pcie",
        "a100_80g_sxm",
    }


def test_an_admin_mapping_settles_the_ambiguous_name_for_later_imports(client):
    admin = UserFactory(is_staff=True)
    inventory_import_file(
        data=smi("h-2", ("NVIDIA H100", "0x233910DE")), source="nvidia-smi", node="h-2"
    )
    client.force_login(admin)
    page = client.get(reverse("pools:unrecognised-models")).content.decode()
    assert "Ambiguous: could be h100_sxm, h100_pcie, h100_nvl" in page

    pcie = GpuModel.objects.get(slug="h100_pcie")
    assert gpu_model_alias_map(raw_name="NVIDIA H100", gpu_model=pcie, actor=admin) == 1
    assert cards() == [("h-2", 0, "h100_pcie", "0x233910DE", [])]

    again = inventory_import_file(
        data=smi("h-3", ("NVIDIA H100", "0x233910DE")), source="nvidia-smi", node="h-3"
    )
    assert again.warnings == []
    assert cards()[-1] == ("h-3", 0, "h100_pcie", "0x233910DE", [])


def test_a_slurm_nodes_gres_used_is_stored_as_its_allocated_cards(admin_page):
    # skypilot-org/skypilot#10319: Gres gpu:h100:8, GresUsed gpu:h100:5(IDX:0-4)
    busy = {**slurm_node("h100-01", "gpu:h100:8"), "gres_used": "gpu:h100:5(IDX:0-4)"}
    quiet = slurm_node("h100-02", "gpu:h100:8")  # no gres_used: unknown, not 0
    inventory_import_file(data=slurm_nodes_json(busy, quiet), source="slurm")
    from pools.inventory.models import Node

    assert dict(Node.objects.values_list("hostname", "gpus_allocated")) == {
        "h100-01": 5,
        "h100-02": None,
    }
    page = admin_page.get(reverse("pools:node-detail", args=["h100-01"])).content.decode()
    assert "5 allocated to Slurm jobs (GRES used)" in page
