"""The catalogue page: pool admins create and edit GPU models (audited through the service);
members are refused, anonymous users sent to sign in; bad input is a field error that saves
nothing."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.test import Client

from pools.audit.models import AuditEvent
from pools.inventory.models import GpuModel, GpuModelAlias

pytestmark = pytest.mark.django_db

NEW = "/gpu-models/new/"
EDIT = "/gpu-models/h100_sxm/edit/"

# NVIDIA RTX A6000: 48 GB GDDR6, 768 GB/s, 300 W, 10752 CUDA cores, device 0x2230.
FORM = {
    "slug": "rtx_a6000",
    "name": "RTX A6000",
    "vendor_name": "NVIDIA RTX A6000",
    "architecture": "Ampere",
    "card_class": "datacentre",
    "form_factor": "pcie",
    "memory_gib": "48",
    "memory_bandwidth_gbps": "768",
    "fp16_dense_tflops": "",
    "bf16_dense_tflops": "",
    "fp8_dense_tflops": "",
    "int8_dense_tops": "",
    "nvlink_gbps": "",
    "tdp_w": "300",
    "cuda_cores": "10752",
    "aliases_text": "nvidia-smi: NVIDIA RTX A6000\nslurm-gres: a6000\n",
    "pci_device_ids_text": "0x2230",
    "sources_text": "memory_gib: NVIDIA RTX A6000 datasheet (48 GB GDDR6)",
}


@pytest.fixture
def admin_page(pool_admin):
    client = Client()
    client.force_login(pool_admin)
    return client


def test_an_admin_creates_a_model_from_the_page(admin_page, pool_admin):
    response = admin_page.post(NEW, FORM)

    assert response.status_code == 302 and response["Location"] == "/gpu-models/?q=rtx_a6000"
    model = GpuModel.objects.get(slug="rtx_a6000")
    assert (str(model.memory_gib), model.fp16_dense_tflops, model.pci_device_ids) == (
        "48.00",
        None,
        ["0x2230"],
    )
    assert model.sources == {"memory_gib": "NVIDIA RTX A6000 datasheet (48 GB GDDR6)"}
    assert sorted(model.aliases.values_list("kind", "value")) == [
        ("nvidia-smi", "NVIDIA RTX A6000"),
        ("slurm-gres", "a6000"),
    ]
    event = AuditEvent.objects.get()
    assert (event.action, event.actor) == ("gpu_model.created", pool_admin)


def test_the_edit_form_shows_the_model_and_saves_a_change(admin_page):
    shown = admin_page.get(EDIT)
    form = shown.context["form"]
    assert form.initial["pci_device_ids_text"] == "0x2330"
    assert "nvidia-smi: NVIDIA H100 80GB HBM3" in form.initial["aliases_text"]
    data = {
        name: form.initial.get(name, getattr(form.instance, name, ""))
        for name in form.fields
        if name != "slug"
    }
    data = {k: "" if v is None else v for k, v in data.items()}
    data["tdp_w"] = "690"

    response = admin_page.post(EDIT, data)

    assert response.status_code == 302
    model = GpuModel.objects.get(slug="h100_sxm")
    assert model.tdp_w == 690 and model.pci_device_ids == ["0x2330"]
    assert model.aliases.count() == 2
    event = AuditEvent.objects.get()
    assert (event.action, event.before["tdp_w"], event.after["tdp_w"]) == (
        "gpu_model.updated",
        700,
        690,
    )


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"pci_device_ids_text": "0x2330"}, "pci_device_ids_text", "0x2330 is already"),
        ({"pci_device_ids_text": "2230"}, "pci_device_ids_text", "0xNNNN"),
        ({"aliases_text": "nvidia-smi: NVIDIA H100 80GB HBM3"}, "aliases_text", "already names"),
        ({"aliases_text": "gres a6000"}, "aliases_text", "Line 1"),
        ({"memory_gib": "0"}, "memory_gib", "greater than or equal to 0.01"),
        ({"memory_gib": ""}, "memory_gib", "required"),
        ({"slug": "h100_sxm"}, "slug", "already exists"),
    ],
)
def test_bad_input_is_shown_on_its_field_and_saves_nothing(admin_page, change, field, message):
    before = (GpuModel.objects.count(), GpuModelAlias.objects.count(), AuditEvent.objects.count())

    response = admin_page.post(NEW, {**FORM, **change})

    assert response.status_code == 200
    errors = " ".join(response.context["form"].errors.get(field, []))
    assert message in errors, response.context["form"].errors
    after = (GpuModel.objects.count(), GpuModelAlias.objects.count(), AuditEvent.objects.count())
    assert after == before


def test_an_unknown_model_is_404(admin_page):
    assert admin_page.get("/gpu-models/v100/edit/").status_code == 404


@pytest.mark.parametrize("url", [NEW, EDIT])
def test_a_member_is_refused(member_page, url):
    assert member_page.get(url).status_code == 403
    assert member_page.post(url, FORM).status_code == 403
    assert not GpuModel.objects.filter(slug="rtx_a6000").exists()


@pytest.mark.parametrize("url", [NEW, EDIT])
def test_anonymous_users_are_sent_to_sign_in(db, url):
    response = Client().get(url)

    assert response.status_code == 302 and response["Location"] == f"/login/?next={quote(url)}"


def test_the_list_offers_editing_to_admins_only(admin_page, member_page):
    assert b"/gpu-models/new/" in admin_page.get("/gpu-models/").content
    assert b"/gpu-models/new/" not in member_page.get("/gpu-models/").content
