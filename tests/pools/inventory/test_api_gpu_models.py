"""/api/v1/gpu-models/: the catalogue with specs, aliases and the fleet's card counts."""

from __future__ import annotations

import pytest
from factories import node_with_gpus

pytestmark = pytest.mark.django_db

URL = "/api/v1/gpu-models/"


def test_the_list_holds_the_whole_catalogue_sorted_by_name(member_api):
    response = member_api.get(URL, {"page_size": 500})

    assert response.status_code == 200
    body = response.json()
    # pools/inventory/catalogue/gpu_models.json ships 29 models (21 + H800 NVL, RTX 2080 Ti,
    # RTX 3090, GTX 1080 Ti and four V100).
    assert body["count"] == 41
    names = [m["name"] for m in body["results"]]
    assert names == sorted(names)
    assert names[:3] == ["A10", "A100 PCIe 40GB", "A100 PCIe 80GB"]


def test_detail_by_slug_carries_the_published_specs(member_api):
    response = member_api.get(f"{URL}h100_sxm/")

    assert response.status_code == 200
    body = response.json()
    # Values of the h100_sxm entry of pools/inventory/catalogue/gpu_models.json.
    assert {
        k: body[k]
        for k in (
            "slug",
            "name",
            "vendor_name",
            "architecture",
            "card_class",
            "form_factor",
            "memory_gib",
            "memory_bandwidth_gbps",
            "bf16_dense_tflops",
            "fp8_dense_tflops",
            "nvlink_gbps",
            "tdp_w",
            "cuda_cores",
            "gpu_count",
        )
    } == {
        "slug": "h100_sxm",
        "name": "H100 SXM5 80GB",
        "vendor_name": "NVIDIA H100 80GB HBM3",
        "architecture": "Hopper",
        "card_class": "datacentre",
        "form_factor": "sxm",
        "memory_gib": "79.65",
        "memory_bandwidth_gbps": "3350.0",
        "bf16_dense_tflops": "989.00",
        "fp8_dense_tflops": "1979.00",
        "nvlink_gbps": "900.0",
        "tdp_w": 700,
        "cuda_cores": 16896,
        "gpu_count": 0,
    }
    # The nvidia-smi name and its Kubernetes-label spelling share one key, so one alias.
    assert body["aliases"] == [
        {"value": "NVIDIA H100 80GB HBM3", "kind": "nvidia-smi"},
        {"value": "h100_sxm", "kind": "slurm-gres"},
    ]
    assert "memory_bandwidth_gbps" in body["sources"]
    assert body["pci_device_ids"] == ["0x2330"]


def test_an_unknown_slug_is_404_json(member_api):
    response = member_api.get(f"{URL}v100/")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_filters(member_api):
    def slugs(**params):
        response = member_api.get(URL, {"page_size": 500, **params})
        assert response.status_code == 200
        return {m["slug"] for m in response.json()["results"]}

    assert slugs(q="4090") == {"rtx4090", "rtx4090d"}
    assert slugs(card_class="consumer") == {
        "rtx4090", "rtx4090d", "rtx4080s", "rtx2080s", "rtx2080ti", "rtx3090", "gtx1080ti",
        "rtx5090",
    }  # fmt: skip
    # More than 100 GiB: the H200s (141 GB) and the Blackwell data-centre GPUs (180-288 GB).
    assert slugs(min_memory_gib=100) == {
        "h200_sxm", "h200_nvl", "b200", "b300", "gb200", "gb300",
    }  # fmt: skip


def test_card_counts_are_not_multiplied_by_a_search_over_aliases(member_api):
    # h200_sxm owns two alias rows ("NVIDIA H200" and "h200_sxm"; "NVIDIA-H200" and "h200"
    # share the first one's key), and both match "h200".
    node_with_gpus(2, gpu_model="h200_sxm", hostname="big-01")

    response = member_api.get(URL, {"q": "h200"})

    counts = {m["slug"]: m["gpu_count"] for m in response.json()["results"]}
    assert counts == {"h200_sxm": 2, "h200_nvl": 0}
