"""QA (h-qa): the GPU catalogue as pool admins keep it (issue #38 item 2), used as they would.

Each test states what an admin who fills in the API or the page expects; none reads what the
code printed.
"""

from __future__ import annotations

import csv
import io

import pytest

from pools.inventory.models import Gpu
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

URL = "/api/v1/gpu-models/"

# A card the shipped catalogue lacks, as the page's "nvidia-smi name" field asks for it: NVIDIA
# RTX A6000, 48 GB (NVIDIA RTX A6000 datasheet). No aliases given: the page labels vendor_name
# "nvidia-smi name" and the model's help text says "Exact name nvidia-smi prints".
A6000 = {
    "slug": "rtx_a6000",
    "name": "RTX A6000",
    "vendor_name": "NVIDIA RTX A6000",
    "card_class": "datacentre",
    "form_factor": "pcie",
    "memory_gib": "48.00",
}
SMI = (
    b"index, name, uuid, pci.device_id, memory.total [MiB], driver_version\n"
    b"0, NVIDIA RTX A6000, GPU-5d2c1e7a-0000-4000-8000-000000000000, 0x223010DE, 49140 MiB, "
    b"535.183.01\n"
)


def card_model(host: str) -> str | None:
    card = Gpu.objects.select_related("gpu_model").get(node__hostname=host, index=0)
    return card.gpu_model.slug if card.gpu_model else None


def test_a_model_matches_the_nvidia_smi_name_it_was_given(admin_api):
    """Created with vendor_name 'NVIDIA RTX A6000' and no aliases, the model is not matched by
    an nvidia-smi import of exactly that name: the card is listed as unrecognised ('matches
    no catalogue alias'). The shipped catalogue answers to slug, name and nvidia-smi name
    (gpu_names.model_key_index); a model made on the page should answer to its nvidia-smi name
    too (or the API/page should refuse a model no import can match)."""
    assert admin_api.post(URL, A6000, format="json").status_code == 201

    report = inventory_import_file(data=SMI, source="nvidia-smi", node="ws-01")

    assert report.ok
    assert card_model("ws-01") == "rtx_a6000"


def test_an_alias_added_for_an_unrecognised_name_recognises_the_cards(admin_api):
    """An import lists 'NVIDIA RTX A6000' as unrecognised (1 card, 1 node). A pool admin then
    creates the model with that alias through the catalogue API. The card keeps gpu_model None
    and /api/v1/unrecognised-models/ still lists the name, although the catalogue now has it:
    the admin has to map the same name a second time (POST unrecognised-models) to fix it."""
    inventory_import_file(data=SMI, source="nvidia-smi", node="ws-02")
    assert card_model("ws-02") is None

    body = {**A6000, "aliases": [{"value": "NVIDIA RTX A6000", "kind": "nvidia-smi"}]}
    assert admin_api.post(URL, body, format="json").status_code == 201

    assert card_model("ws-02") == "rtx_a6000"
    listed = admin_api.get("/api/v1/unrecognised-models/").json()["results"]
    assert [row["raw_model_name"] for row in listed] == []


def test_the_catalogue_csv_does_not_start_a_cell_with_a_formula(admin_api, client, pool_admin):
    """A pool admin may name a model '=HYPERLINK("http://x","A6000")' through the API; the
    page's CSV export (/gpu-models/?export=csv) writes that cell as it is, which a spreadsheet
    runs as a formula (OWASP 'CSV Injection': prefix a cell starting with = + - @ tab CR with
    a single quote). Expected: the cell reads "'=HYPERLINK(...)"."""
    name = '=HYPERLINK("http://x","A6000")'
    assert admin_api.post(URL, {**A6000, "name": name}, format="json").status_code == 201
    client.force_login(pool_admin)

    response = client.get("/gpu-models/?export=csv")

    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.reader(io.StringIO(text)))
    row = next(r for r in rows if r and r[0] == "rtx_a6000")
    assert not row[1].startswith(("=", "+", "-", "@", "\t", "\r"))
