"""The GPU model catalogue data: shape, citations, and agreement with the sizing dataset."""

import json
import re
from pathlib import Path

import pytest

from pools.inventory.catalogue import load_gpu_models

MODELS = load_gpu_models()
BY_SLUG = {m["slug"]: m for m in MODELS}
SIZING = json.loads((Path(__file__).parents[2] / "fixtures" / "sizing_dataset.json").read_text())

NUMERIC_FIELDS = [
    "memory_gib",
    "nvidia_smi_memory_mib",
    "memory_bandwidth_gbps",
    "fp16_dense_tflops",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "int8_dense_tops",
    "nvlink_gbps",
    "tdp_w",
    "cuda_cores",
]
# Our field -> the sizing dataset's field for the same fact.
SIZING_FIELDS = {
    "memory_bandwidth_gbps": "mem_bw_gbs",
    "fp16_dense_tflops": "fp16_dense_tflops",
    "bf16_dense_tflops": "bf16_dense_tflops",
    "fp8_dense_tflops": "fp8_dense_tflops",
    "int8_dense_tops": "int8_dense_tops",
    "nvlink_gbps": "nvlink_gbs",
    "tdp_w": "tdp_w",
}
REQUIRED_SLUGS = {
    # ids of shared/sizing/sizing_dataset.json
    "rtx4090", "l40s", "a100_40g_sxm", "a100_80g_sxm", "a100_80g_pcie", "h800_sxm", "h100_sxm",
    "h100_pcie", "h200_sxm", "h20", "l20", "l4", "a10",
    # the rest of the portal's card list and the cards of the real nvidia-smi captures
    "rtx4090d", "a100_40g_pcie", "a800_80g_sxm", "h800_pcie", "h100_nvl", "rtx4080s", "rtx2080s",
    # what fleets report that was missing (issue 38)
    "h800_nvl", "rtx2080ti", "rtx3090", "gtx1080ti",
    "v100_16g_sxm2", "v100_32g_sxm2", "v100_16g_pcie", "v100_32g_pcie",
}  # fmt: skip


def gfd_product_label(nvml_name):
    """GPU Feature Discovery's sanitising of the NVML name (research/k8s_gpu_anchors.md §2.1)."""
    kept = "".join(c for c in nvml_name if c.isascii() and (c.isalnum() or c in "-_. "))
    return "-".join(kept.split())


def test_every_required_model_is_present_once():
    slugs = [m["slug"] for m in MODELS]
    assert len(slugs) == len(set(slugs))
    assert REQUIRED_SLUGS <= set(slugs)
    assert all(re.fullmatch(r"[a-z0-9_]+", s) for s in slugs)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m["slug"])
def test_entry_shape(model):
    assert model["name"] and model["vendor_name"] and model["architecture"]
    assert model["card_class"] in {"consumer", "datacentre"}
    assert model["form_factor"] in {"sxm", "pcie", "nvl"}
    for field in NUMERIC_FIELDS:
        value = model[field]
        assert value is None or (type(value) in (int, float) and value > 0), field
    kinds = {alias["kind"] for alias in model["aliases"]}
    assert kinds <= {"nvidia-smi", "slurm-gres", "k8s-label"}
    assert {"nvidia-smi", "k8s-label"} <= kinds


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m["slug"])
def test_every_value_has_a_source_and_every_null_says_why(model):
    sources = model["sources"]
    for field in NUMERIC_FIELDS:
        citation = sources.get(field, "")
        assert isinstance(citation, str) and citation.strip(), field
        if model[field] is None:
            assert citation.startswith(("none:", "unknown:")), field
        else:
            assert not citation.startswith(("none:", "unknown:")), field
    assert sources.get("vendor_name")


@pytest.mark.parametrize("gpu", SIZING["gpus"], ids=lambda g: g["id"])
def test_sizing_dataset_values_are_carried_over_unchanged(gpu):
    model = BY_SLUG[gpu["id"]]
    for ours, theirs in SIZING_FIELDS.items():
        assert model[ours] == gpu[theirs], ours


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m["slug"])
def test_memory_gib_comes_from_the_nvidia_smi_mib_when_known(model):
    mib = model["nvidia_smi_memory_mib"]
    if mib is not None:
        assert model["memory_gib"] == round(mib / 1024, 2)


def test_memory_values_worked_out_by_hand():
    # C20: 24564 MiB = 23.99 GiB; 81559 MiB = 79.65 GiB. Captures: 46068, 143771, 16376, 8192 MiB.
    expected = {
        "rtx4090": 23.99,
        "rtx4090d": 23.99,
        "h100_sxm": 79.65,
        "l40s": 44.99,
        "h200_sxm": 140.40,
        "rtx4080s": 15.99,
        "rtx2080s": 8.0,
    }
    assert {slug: BY_SLUG[slug]["memory_gib"] for slug in expected} == expected


def test_c05_rtx_4090_d_differs_only_where_memory_cannot_tell():
    plain, d = BY_SLUG["rtx4090"], BY_SLUG["rtx4090d"]
    assert plain["nvidia_smi_memory_mib"] == d["nvidia_smi_memory_mib"] == 24564
    assert (plain["cuda_cores"], d["cuda_cores"]) == (16384, 14592)
    assert d["cuda_cores"] / plain["cuda_cores"] == 0.890625


@pytest.mark.parametrize(
    ("slug", "vendor_name"),
    [
        # Exactly as the captures in shared/fixtures/nvidia-smi/ print them.
        ("h100_sxm", "NVIDIA H100 80GB HBM3"),
        ("h200_sxm", "NVIDIA H200"),
        ("l40s", "NVIDIA L40S"),
        ("rtx4080s", "NVIDIA GeForce RTX 4080 SUPER"),
        ("rtx2080s", "NVIDIA GeForce RTX 2080 SUPER"),
        # C05 / C01.
        ("rtx4090", "NVIDIA GeForce RTX 4090"),
        ("rtx4090d", "NVIDIA GeForce RTX 4090 D"),
        ("a100_80g_sxm", "NVIDIA A100-SXM4-80GB"),
    ],
)
def test_vendor_names_are_what_nvidia_smi_prints(slug, vendor_name):
    model = BY_SLUG[slug]
    assert model["vendor_name"] == vendor_name
    assert {"value": vendor_name, "kind": "nvidia-smi"} in model["aliases"]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m["slug"])
def test_k8s_label_alias_is_the_sanitised_nvidia_smi_name(model):
    labels = [a["value"] for a in model["aliases"] if a["kind"] == "k8s-label"]
    assert labels == [gfd_product_label(model["vendor_name"])]


def test_k8s_labels_worked_out_by_hand():
    labels = {
        m["slug"]: a["value"] for m in MODELS for a in m["aliases"] if a["kind"] == "k8s-label"
    }
    assert labels["a100_80g_sxm"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["rtx4090"] == "NVIDIA-GeForce-RTX-4090"
    assert labels["h800_sxm"] == "NVIDIA-H800"
    assert labels["a100_80g_pcie"] == "NVIDIA-A100-80GB-PCIe"


def test_slurm_aliases_never_name_a_whole_family():
    gres = {a["value"].lower() for m in MODELS for a in m["aliases"] if a["kind"] == "slurm-gres"}
    assert not gres & {"a100", "h100", "a800", "h800", "4090"}


def test_ampere_has_no_fp8_and_geforce_40_has_no_nvlink():
    for model in MODELS:
        if model["architecture"] == "Ampere":
            assert model["fp8_dense_tflops"] is None
            assert model["sources"]["fp8_dense_tflops"].startswith("none:")
    for slug in ("rtx4090", "rtx4090d", "rtx4080s"):
        assert BY_SLUG[slug]["nvlink_gbps"] is None
        assert BY_SLUG[slug]["sources"]["nvlink_gbps"].startswith("none:")


def test_card_classes():
    consumer = {m["slug"] for m in MODELS if m["card_class"] == "consumer"}
    assert consumer == {
        "rtx4090", "rtx4090d", "rtx4080s", "rtx2080s", "rtx2080ti", "rtx3090", "gtx1080ti",
        "rtx5090",
    }  # fmt: skip


def test_h100_nvl_dense_rates_are_half_the_sparse_datasheet_rates():
    nvl = BY_SLUG["h100_nvl"]
    assert nvl["bf16_dense_tflops"] * 2 == 1671
    assert nvl["fp8_dense_tflops"] * 2 == 3341


@pytest.mark.parametrize(
    ("slug", "device_ids"),
    [
        # open-gpu-kernel-modules' name table (Turing and later) / pci.ids (Pascal, Volta).
        ("h800_nvl", ["0x233A"]),
        ("rtx2080ti", ["0x1E04", "0x1E07"]),
        ("rtx3090", ["0x2204"]),
        ("gtx1080ti", ["0x1B06"]),
        ("v100_16g_sxm2", ["0x1DB1"]),
        ("v100_32g_sxm2", ["0x1DB5"]),
        ("v100_16g_pcie", ["0x1DB4"]),
        ("v100_32g_pcie", ["0x1DB6"]),
    ],
)
def test_added_models_carry_their_published_device_ids(slug, device_ids):
    assert BY_SLUG[slug]["pci_device_ids"] == device_ids


def test_added_bandwidths_worked_out_by_hand():
    """GB/s = data rate (Gbps per pin) x bus width (bits) / 8.

    RTX 2080 Ti 14 x 352 / 8 = 616; RTX 3090 19.5 x 384 / 8 = 936; GTX 1080 Ti 11 x 352 / 8 = 484;
    V100 (HBM2, datasheet) 900 for all four.
    """
    got = {s: BY_SLUG[s]["memory_bandwidth_gbps"] for s in ("rtx2080ti", "rtx3090", "gtx1080ti")}
    assert got == {"rtx2080ti": 616, "rtx3090": 936, "gtx1080ti": 484}
    assert {BY_SLUG[f"v100_{m}_{f}"]["memory_bandwidth_gbps"] for m in ("16g", "32g")
            for f in ("sxm2", "pcie")} == {900}  # fmt: skip
