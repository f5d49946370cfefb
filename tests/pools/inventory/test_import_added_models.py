"""Issue 38, item 2: cards fleets report that the catalogue lacked now resolve on import.

Names and device ids: github:NVIDIA/open-gpu-kernel-modules src/nvidia/generated/
g_nv_name_released.h (``NVIDIA H800 NVL`` 0x233A, ``NVIDIA GeForce RTX 2080 Ti`` 0x1E04/0x1E07,
``NVIDIA GeForce RTX 3090`` 0x2204) and pci.ids for Pascal/Volta (0x1B06 GTX 1080 Ti, 0x1DB1 /
0x1DB5 V100 SXM2 16/32 GB, 0x1DB4 / 0x1DB6 V100 PCIe 16/32 GB). nvidia-smi reports the device id
as device << 16 | vendor 0x10DE. Slurm's AutoDetect=nvml names a GRES type after the NVML name in
lower case with ``_`` for spaces (``gpu:nvidia_geforce_rtx_2080_ti``).
"""

from __future__ import annotations

import pytest
from factories import slurm_node, slurm_nodes_json

from pools.inventory.models import Gpu
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

HEADER = "index, name, uuid, pci.device_id, memory.total [MiB], driver_version\n"


def smi(*rows: tuple[str, str, int]) -> bytes:
    lines = [
        f"{n}, {name}, GPU-5d2c1e7a-0000-4000-8000-{n:012d}, {device}, {mib} MiB, 535.183.01"
        for n, (name, device, mib) in enumerate(rows)
    ]
    return (HEADER + "\n".join(lines) + "\n").encode()


def models_of(host: str) -> list[str | None]:
    return list(
        Gpu.objects.filter(node__hostname=host)
        .order_by("index")
        .values_list("gpu_model__slug", flat=True)
    )


def test_nvidia_smi_names_of_the_added_cards_resolve():
    report = inventory_import_file(
        data=smi(
            ("NVIDIA H800 NVL", "0x233A10DE", 95830),
            ("NVIDIA GeForce RTX 2080 Ti", "0x1E0410DE", 11264),
            ("NVIDIA GeForce RTX 2080 Ti", "0x1E0710DE", 11264),
            ("NVIDIA GeForce RTX 3090", "0x220410DE", 24576),
            ("NVIDIA GeForce GTX 1080 Ti", "0x1B0610DE", 11264),
            ("Tesla V100-SXM2-16GB", "0x1DB110DE", 16160),
            ("Tesla V100-SXM2-32GB", "0x1DB510DE", 32510),
            ("Tesla V100-PCIE-16GB", "0x1DB410DE", 16160),
            ("Tesla V100-PCIE-32GB", "0x1DB610DE", 32510),
        ),
        source="nvidia-smi",
        node="legacy-01",
    )

    assert report.ok, report.as_dict()
    assert models_of("legacy-01") == [
        "h800_nvl",
        "rtx2080ti",
        "rtx2080ti",
        "rtx3090",
        "gtx1080ti",
        "v100_16g_sxm2",
        "v100_32g_sxm2",
        "v100_16g_pcie",
        "v100_32g_pcie",
    ]


def test_a_pre_r470_driver_name_without_the_nvidia_prefix_resolves_too():
    inventory_import_file(
        data=smi(("GeForce GTX 1080 Ti", "0x1B0610DE", 11178)), source="nvidia-smi", node="old-01"
    )

    assert models_of("old-01") == ["gtx1080ti"]


def test_slurm_autodetect_gres_types_resolve():
    report = inventory_import_file(
        data=slurm_nodes_json(
            slurm_node("tu-01", "gpu:nvidia_geforce_rtx_2080_ti:4(S:0-1)"),
            slurm_node("ga-01", "gpu:nvidia_geforce_rtx_3090:2(S:0)"),
            slurm_node("gv-01", "gpu:tesla_v100-sxm2-32gb:8(S:0-1)"),
            slurm_node("gh-01", "gpu:nvidia_h800_nvl:2(S:0)"),
        ),
        source="slurm",
    )

    assert report.ok, report.as_dict()
    assert models_of("tu-01") == ["rtx2080ti"] * 4
    assert models_of("ga-01") == ["rtx3090"] * 2
    assert models_of("gv-01") == ["v100_32g_sxm2"] * 8
    assert models_of("gh-01") == ["h800_nvl"] * 2


def test_a_bare_v100_gres_type_is_ambiguous_not_guessed():
    inventory_import_file(
        data=slurm_nodes_json(slurm_node("gv-02", "gpu:v100:2(S:0)")), source="slurm"
    )

    assert models_of("gv-02") == [None, None]
    assert set(Gpu.objects.filter(node__hostname="gv-02").first().model_candidates) == {
        "v100_16g_sxm2",
        "v100_32g_sxm2",
        "v100_16g_pcie",
        "v100_32g_pcie",
    }
