"""Issue 18, kind 1: GPU names that do not identify the SKU, and renamed version fields.

Sources (data facts only):

* NVIDIA's name / PCI device id table: github:NVIDIA/open-gpu-kernel-modules README.md,
  "Compatible GPUs" (commit 015742d32fa615353199b11589ecaba828040859). Rows used here:
  ``NVIDIA H100 80GB HBM3 | 2330``, ``NVIDIA H100 PCIe | 2331``, ``NVIDIA H100 NVL | 2321``,
  ``NVIDIA H100 | 2339`` (a shipped name with no form factor), ``NVIDIA A100-SXM4-80GB | 20B2``,
  ``NVIDIA A100 80GB PCIe | 20B5``, ``NVIDIA GeForce RTX 4090 | 2684``,
  ``NVIDIA GeForce RTX 4090 D | 2685``.
* The real H100 capture (tests/fixtures/nvidia-smi/,
  ``linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt``;
  ``-q``: ``Device Id : 0x233010DE``; ``--query-gpu``: ``pci.device_id`` ``0x233010DE``).
* Truncated table names: github:DeepifyAI/local-ai-infrastructure
  chapter-03-software-stack/examples/07_nvidia_smi.sh (``NVIDIA GeForce RTX 4090 ...``) and
  github:mxochicale/code gpu/nvidia/LOGS.md (``NVIDIA GeForce ...``), both from the table view.
* Renamed version fields: Jaded-Encoding-Thaumaturgy/vs-jetpack#295 (``nvidia-smi -q`` of driver
  610.47: ``Driver Version : 610.47 [Deprecated; ... Use KMD Version instead]``,
  ``KMD Version : 610.47``, ``CUDA UMD Version : 13.3``), PrismML-Eng/Bonsai-demo#122 (NVIDIA's
  nvidia-smi docs: Driver/CUDA Version deprecated for KMD Version / CUDA UMD Version), and the
  real 595.71.05 capture whose ``--help-query-gpu`` says ``driver_version`` is deprecated for
  ``kmd_version``.
"""

from pathlib import Path

import pytest

from pools.inventory.catalogue import load_ambiguous_names, load_gpu_models
from pools.inventory.gpu_names import (
    ambiguous_name_index,
    device_id_index,
    model_key_index,
    model_match,
    pci_device_id_key,
)
from pools.inventory.nvidia_smi import parse_nvidia_smi

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"
MODELS = load_gpu_models()
BY_KEY = model_key_index(MODELS)
BY_DEVICE = device_id_index(MODELS)
AMBIGUOUS = ambiguous_name_index(
    load_ambiguous_names(), slugs=[m["slug"] for m in MODELS], by_key=BY_KEY
)


def match(name, device=None):
    return model_match(
        name, pci_device_id=device, by_key=BY_KEY, by_device=BY_DEVICE, ambiguous=AMBIGUOUS
    )


# --- the catalogue's device ids ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("slug", "device"),
    [
        ("h100_sxm", "0x2330"),
        ("h100_pcie", "0x2331"),
        ("h100_nvl", "0x2321"),
        ("a100_80g_sxm", "0x20B2"),
        ("a100_80g_pcie", "0x20B5"),
        ("rtx4090", "0x2684"),
        ("rtx4090d", "0x2685"),
    ],
)
def test_catalogue_device_ids_are_nvidias_table(slug, device):
    assert BY_DEVICE[device] == slug


def test_every_catalogue_model_has_a_device_id_with_a_source():
    for model in MODELS:
        assert model["pci_device_ids"], model["slug"]
        assert model["sources"]["pci_device_ids"].strip(), model["slug"]


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("0x233010DE", "0x2330"),  # nvidia-smi pci.device_id: device << 16 | vendor 0x10DE
        ("0x1E8110DE", "0x1E81"),  # the RTX 2080 SUPER capture
        ("0x2330", "0x2330"),
        ("2330", "0x2330"),
        ("0x23301002", None),  # another vendor's id (0x1002)
        ("N/A", None),
        ("", None),
    ],
)
def test_pci_device_id_key(raw, key):
    assert pci_device_id_key(raw) == key


# --- the tie-breaker --------------------------------------------------------------------------


def test_a_name_without_form_factor_is_settled_by_its_device_id():
    assert match("NVIDIA H100", "0x233010DE").slug == "h100_sxm"
    assert match("NVIDIA H100", "0x233110DE").slug == "h100_pcie"
    assert match("NVIDIA H100", "0x232110DE").slug == "h100_nvl"


def test_a_name_without_form_factor_and_an_uncatalogued_device_id_is_flagged():
    # NVIDIA's table: "NVIDIA H100 | 2339 10DE 17FC" is none of SXM5, PCIe or NVL.
    found = match("NVIDIA H100", "0x233910DE")
    assert found.slug is None
    assert found.candidates == ("h100_sxm", "h100_pcie", "h100_nvl")
    assert "0x2339" in found.reason


def test_a_bare_gres_type_without_device_id_is_flagged_with_every_candidate():
    found = match("a100")
    assert found.slug is None
    assert set(found.candidates) == {
        "a100_40g_pcie",
        "a100_40g_sxm",
        "a100_80g_pcie",
        "a100_80g_sxm",
    }
    assert found.reason.endswith("no PCI device id")


def test_an_exact_name_agreeing_with_its_device_id_or_without_one_matches():
    assert match("NVIDIA H100 80GB HBM3", "0x233010DE").slug == "h100_sxm"
    assert match("NVIDIA H100 80GB HBM3").slug == "h100_sxm"
    assert match("NVIDIA GeForce RTX 4090 D", "0x268510DE").slug == "rtx4090d"


def test_an_exact_name_contradicted_by_the_device_id_is_not_guessed():
    found = match("NVIDIA GeForce RTX 4090", "0x268510DE")  # the 4090 D's device id
    assert found.slug is None
    assert found.candidates == ("rtx4090", "rtx4090d")


def test_an_unknown_name_is_not_named_by_its_device_id_alone():
    # 0x20B2 also carries "NVIDIA PG509-210" (subsystem 10DE 1625) in NVIDIA's table.
    found = match("NVIDIA PG509-210", "0x20B210DE")
    assert (found.slug, found.candidates) == (None, ())


@pytest.mark.parametrize(
    "name", ["NVIDIA GeForce RTX 4090 ...", "NVIDIA GeForce ...", "NVIDIA H1…"]
)
def test_a_truncated_table_name_never_matches(name):
    found = match(name, "0x268410DE")
    assert (found.slug, found.candidates) == (None, ())
    assert "truncated" in found.reason


# --- the parser -------------------------------------------------------------------------------


def test_the_device_id_is_read_from_csv_q_and_xml():
    capture = (CAPTURES / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt").read_text()
    [node] = parse_nvidia_smi(capture, hostname="h100-01").nodes
    assert {g.pci_device_id for g in node.gpus} == {"0x233010DE"}

    xml = (
        '<?xml version="1.0" ?><nvidia_smi_log><driver_version>590.48.01</driver_version>'
        '<attached_gpus>1</attached_gpus><gpu id="00000000:00:09.0">'
        "<product_name>NVIDIA H100 80GB HBM3</product_name>"
        "<uuid>GPU-5b1c7ef6-21c3-4a41-0c5e-3f7f1a2b3c4d</uuid>"
        "<pci><pci_bus_id>00000000:00:09.0</pci_bus_id><pci_device_id>0x233010DE</pci_device_id>"
        "</pci></gpu></nvidia_smi_log>"
    )
    [xml_node] = parse_nvidia_smi(xml, hostname="h100-02").nodes
    assert [g.pci_device_id for g in xml_node.gpus] == ["0x233010DE"]


def test_a_truncated_name_is_refused_with_its_line_and_the_rest_kept():
    text = (
        "index, name, uuid, pci.device_id, memory.total [MiB]\n"
        "0, NVIDIA GeForce RTX 4090 ..., GPU-11111111-2222-3333-4444-555555555555, "
        "0x268410DE, 24564 MiB\n"
        "1, NVIDIA GeForce RTX 4090, GPU-11111111-2222-3333-4444-666666666666, "
        "0x268410DE, 24564 MiB\n"
    )
    result = parse_nvidia_smi(text, hostname="ws-01")
    [node] = result.nodes
    assert [(g.index, g.model_name, g.memory_total_mib) for g in node.gpus] == [
        (0, None, 24564),
        (1, "NVIDIA GeForce RTX 4090", 24564),
    ]
    [issue] = result.issues
    assert (issue.line, issue.field) == (2, "name") and "truncated" in issue.message


def test_a_bad_device_id_is_reported_and_the_card_kept():
    text = "index, name, pci.device_id\n0, NVIDIA L40S, 0xZZZ\n"
    result = parse_nvidia_smi(text, hostname="l40s-01")
    gpus = result.nodes[0].gpus
    assert [(g.model_name, g.pci_device_id) for g in gpus] == [("NVIDIA L40S", None)]
    assert [(i.line, i.field) for i in result.issues] == [(2, "pci.device_id")]


def test_the_610_driver_q_header_gives_kmd_and_umd_versions():
    # vs-jetpack#295: the first lines of `nvidia-smi -q` on driver 610.47.
    text = (
        "==============NVSMI LOG==============\n\n"
        "Timestamp                                              : Fri May 29 15:16:01 2026\n"
        "Driver Version                                         : 610.47 [Deprecated; will be "
        "removed in CUDA 14.0. Use KMD Version instead]\n"
        "CUDA Version                                           : 13.3 [Deprecated; will be "
        "removed in CUDA 14.0. Use CUDA UMD Version instead]\n"
        "KMD Version                                            : 610.47\n"
        "CUDA UMD Version                                       : 13.3\n\n"
        "Attached GPUs                                          : 0\n"
    )
    result = parse_nvidia_smi(text, hostname="new-01")
    [node] = result.nodes
    assert (node.driver_version, node.cuda_version) == ("610.47", "13.3")


@pytest.mark.parametrize(
    "text",
    [
        # the --version layout of the captures, with the old driver line saying only "Deprecated"
        "NVIDIA-SMI version  : 610.47\nNVML version        : 610.47\n"
        "DRIVER version      : Deprecated\nKMD version         : 610.47\n"
        "CUDA Version        : Deprecated\nCUDA UMD Version    : 13.3\n",
        # the same lines with the new ones first
        "KMD version         : 610.47\nCUDA UMD Version    : 13.3\n"
        "DRIVER version      : Deprecated\nCUDA Version        : Deprecated\n",
    ],
)
def test_version_output_never_stores_deprecated(text):
    result = parse_nvidia_smi(text, hostname="new-02")
    [node] = result.nodes
    assert (node.driver_version, node.cuda_version) == ("610.47", "13.3")
    assert [i.message for i in result.issues] == [
        "no GPU listing found (-L, -q, -q -x or --query-gpu): GPUs unknown"
    ]


def test_csv_prefers_kmd_version_over_a_deprecated_driver_version():
    text = (
        "index, name, driver_version, kmd_version\n"
        "0, NVIDIA L40S, [Requested functionality has been deprecated], 610.47\n"
    )
    [node] = parse_nvidia_smi(text, hostname="l40s-02").nodes
    assert node.driver_version == "610.47"
