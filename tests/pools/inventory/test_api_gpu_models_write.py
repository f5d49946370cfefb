"""/api/v1/gpu-models/ writes: pool admins create and edit catalogue models, audited; the
aliases and PCI device ids imports match are checked before anything is written."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from pools.audit.models import AuditEvent
from pools.inventory.models import Gpu, GpuModel, GpuModelAlias
from pools.inventory.services.gpu_models import GpuModelResolver
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

URL = "/api/v1/gpu-models/"

# NVIDIA RTX A6000 (not in the shipped catalogue): 48 GB GDDR6, 768 GB/s, 300 W, 10752 CUDA
# cores; device 0x2230 (open-gpu-kernel-modules README 'NVIDIA RTX A6000 | 2230').
A6000 = {
    "slug": "rtx_a6000",
    "name": "RTX A6000",
    "vendor_name": "NVIDIA RTX A6000",
    "architecture": "Ampere",
    "card_class": "datacentre",
    "form_factor": "pcie",
    "memory_gib": "48.00",
    "memory_bandwidth_gbps": "768.0",
    "tdp_w": 300,
    "cuda_cores": 10752,
    "sources": {"memory_gib": "NVIDIA RTX A6000 datasheet (48 GB GDDR6)"},
    "pci_device_ids": ["0x2230"],
    "aliases": [
        {"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"},
        {"value": "a6000", "kind": "slurm-gres"},
    ],
}


def _state():
    return (
        GpuModel.objects.count(),
        GpuModelAlias.objects.count(),
        AuditEvent.objects.count(),
        sorted(GpuModel.objects.values_list("slug", "pci_device_ids")),
    )


def test_an_admin_creates_a_model_that_imports_then_match(admin_api, pool_admin):
    response = admin_api.post(URL, A6000, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["slug"], body["memory_gib"], body["pci_device_ids"], body["gpu_count"]) == (
        "rtx_a6000",
        "48.00",
        ["0x2230"],
        0,
    )
    model = GpuModel.objects.get(slug="rtx_a6000")
    assert model.memory_bandwidth_gbps == Decimal("768.0") and model.fp8_dense_tflops is None
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.object_id) == (
        "gpu_model.created",
        pool_admin,
        str(model.pk),
    )
    assert event.after["pci_device_ids"] == ["0x2230"]
    assert event.after["aliases"] == [
        {"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"},
        {"value": "a6000", "kind": "slurm-gres"},
    ]
    # The import resolver sees it: by name, and by the device id nvidia-smi reports
    # (0x223010DE = device 0x2230 of vendor 0x10DE).
    resolver = GpuModelResolver.load()
    assert resolver.match("NVIDIA RTX A6000", pci_device_id="0x223010DE").gpu_model == model
    assert resolver.match("a6000").gpu_model == model
    # Slurm AutoDetect's spelling of the NVML name normalises to the nvidia-smi alias.
    assert resolver.match("nvidia_rtx_a6000").gpu_model == model


def test_an_admin_edits_specs_aliases_and_device_ids_with_before_and_after(admin_api):
    admin_api.post(URL, A6000, format="json")

    response = admin_api.patch(
        f"{URL}rtx_a6000/",
        {
            "tdp_w": 295,
            "pci_device_ids": ["0x2230", "0x2231"],
            "aliases": [{"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"}],
        },
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert response.json()["pci_device_ids"] == ["0x2230", "0x2231"]
    assert response.json()["aliases"] == [{"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"}]
    update = AuditEvent.objects.order_by("id").last()
    assert update.action == "gpu_model.updated"
    assert (update.before["tdp_w"], update.after["tdp_w"]) == (300, 295)
    assert len(update.before["aliases"]) == 2 and len(update.after["aliases"]) == 1
    # The slurm alias is gone: that name no longer matches.
    assert GpuModelResolver.load().match("a6000").gpu_model is None


def test_a_patch_without_aliases_keeps_them(admin_api):
    response = admin_api.patch(f"{URL}h100_sxm/", {"tdp_w": 700}, format="json")

    assert response.status_code == 200
    assert {a["value"] for a in response.json()["aliases"]} == {"NVIDIA H100 80GB HBM3", "h100_sxm"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        # Another model's alias, once normalised ("NVIDIA-H100-80GB-HBM3" -> "h10080gbhbm3").
        ({"aliases": [{"value": "NVIDIA-H100-80GB-HBM3", "kind": "k8s-label"}]}, "aliases"),
        # A name several SKUs share is settled by the device id or an admin mapping only.
        ({"aliases": [{"value": "a100", "kind": "slurm-gres"}]}, "aliases"),
        # Two spellings of one key in one request.
        (
            {
                "aliases": [
                    {"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"},
                    {"value": "NVIDIA-RTX-A6000", "kind": "k8s-label"},
                ]
            },
            "aliases",
        ),
        ({"aliases": [{"value": "---", "kind": "admin"}]}, "aliases"),
        ({"aliases": [{"value": "x", "kind": "guess"}]}, "aliases"),
        # Device ids: the H100 SXM5's, not 0xNNNN, a 32-bit id, not a string.
        ({"pci_device_ids": ["0x2330"]}, "pci_device_ids"),
        ({"pci_device_ids": ["2230"]}, "pci_device_ids"),
        ({"pci_device_ids": ["0x223010DE"]}, "pci_device_ids"),
        ({"pci_device_ids": ["0xZZZZ"]}, "pci_device_ids"),
        ({"pci_device_ids": "0x2230"}, "pci_device_ids"),
        # Specs: unknown is null, never 0 or negative.
        ({"memory_gib": "0"}, "memory_gib"),
        ({"fp16_dense_tflops": "-1"}, "fp16_dense_tflops"),
        ({"tdp_w": 0}, "tdp_w"),
        ({"memory_gib": "123456.78"}, "memory_gib"),
        ({"card_class": "gaming"}, "card_class"),
        ({"sources": ["datasheet"]}, "sources"),
        # NUL is refused at the edge, before any field (portal.middleware.InputCharactersMiddleware)
        ({"sources": {"memory_gib": "a\x00b"}}, None),
        ({"slug": "h100_sxm"}, "slug"),
        ({"slug": "Bad Slug"}, "slug"),
    ],
)
def test_bad_input_is_a_field_error_and_changes_nothing(admin_api, change, field):
    before = _state()

    response = admin_api.post(URL, {**A6000, **change}, format="json")

    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "invalid_input" and (field is None or field in body["errors"]), body
    assert _state() == before


def test_the_slug_cannot_change(admin_api):
    response = admin_api.patch(f"{URL}h100_sxm/", {"slug": "h100"}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()["errors"]
    assert GpuModel.objects.filter(slug="h100_sxm").exists()


def test_an_edit_may_keep_its_own_device_ids_and_aliases(admin_api):
    response = admin_api.patch(
        f"{URL}h100_sxm/",
        {"pci_device_ids": ["0x2330"], "aliases": [{"value": "h100_sxm", "kind": "slurm-gres"}]},
        format="json",
    )

    assert response.status_code == 200, response.json()


def test_a_member_is_refused_and_nothing_changes(member_api):
    before = _state()

    created = member_api.post(URL, A6000, format="json")
    edited = member_api.patch(f"{URL}h100_sxm/", {"tdp_w": 1}, format="json")

    assert (created.status_code, edited.status_code) == (403, 403)
    assert created.json()["code"] == "permission_denied"
    assert _state() == before and GpuModel.objects.get(slug="h100_sxm").tdp_w == 700


def test_anonymous_is_401(db):
    client = APIClient()

    assert client.get(URL).status_code == 401
    assert client.post(URL, A6000, format="json").status_code == 401
    assert not GpuModel.objects.filter(slug="rtx_a6000").exists()


def test_models_are_not_deleted_through_the_api(admin_api):
    assert admin_api.delete(f"{URL}h100_sxm/").status_code == 405


def test_a_vendor_name_another_model_answers_to_is_a_field_error(admin_api):
    """'NVIDIA H100 80GB HBM3' is the shipped H100 SXM's nvidia-smi alias: a second model with
    that nvidia-smi name could never be told apart by an import. 400 on vendor_name, nothing
    written."""
    before = _state()

    response = admin_api.post(
        URL, {**A6000, "vendor_name": "NVIDIA H100 80GB HBM3", "aliases": []}, format="json"
    )

    assert response.status_code == 400
    assert "vendor_name" in response.json()["errors"]
    assert _state() == before


def test_an_edit_of_the_nvidia_smi_name_recognises_the_cards_already_imported(admin_api):
    """ws-03 reports 'NVIDIA RTX A6000' and is imported while the catalogue's A6000 is named
    'NVIDIA RTX A6000 (typo)': 1 unrecognised card. PATCHing vendor_name alone (no aliases)
    makes the model answer to the name, and the 1 card is recognised in the same request,
    audited on the update."""
    admin_api.post(
        URL, {**A6000, "vendor_name": "NVIDIA RTX A6000 (typo)", "aliases": []}, format="json"
    )
    smi = (
        b"index, name, uuid, pci.device_id, memory.total [MiB], driver_version\n"
        b"0, NVIDIA RTX A6000, GPU-5d2c1e7a-0000-4000-8000-000000000001, 0x223010DE, "
        b"49140 MiB, 535.183.01\n"
    )
    inventory_import_file(data=smi, source="nvidia-smi", node="ws-03")
    card = Gpu.objects.get(node__hostname="ws-03")
    assert card.gpu_model is None

    response = admin_api.patch(
        f"{URL}rtx_a6000/", {"vendor_name": "NVIDIA RTX A6000"}, format="json"
    )

    assert response.status_code == 200, response.json()
    card.refresh_from_db()
    assert card.gpu_model.slug == "rtx_a6000"
    update = AuditEvent.objects.order_by("id").last()
    assert (update.action, update.after["cards_recognised"]) == ("gpu_model.updated", 1)
    assert {"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"} in update.after["aliases"]
