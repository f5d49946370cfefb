"""The pages that write: the inventory import form and the unrecognised-model mapping."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from factories import PoolFactory, nvidia_smi_csv, slurm_node, slurm_nodes_json

from pools.audit.models import AuditEvent
from pools.inventory.models import Gpu, GpuModelAlias, InventoryImport, Node
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

IMPORT = "/inventory/import/"
UNRECOGNISED = "/unrecognised-models/"


def upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="text/plain")


def test_an_admin_imports_a_file_and_sees_the_report(admin_page, pool_admin):
    PoolFactory(slug="train")

    response = admin_page.post(
        IMPORT,
        {
            "source": "nvidia-smi",
            "node": "trn-01",
            "pool": "train",
            "file": upload("trn-01.csv", nvidia_smi_csv(2)),
        },
    )

    assert response.status_code == 200
    report = response.context["report"]
    assert (report.created, report.gpus_seen, report.ok) == (["trn-01"], 2, True)
    assert "2 GPUs read" in response.content.decode()
    node = Node.objects.get()
    assert (node.hostname, node.pool.slug, node.gpus.count()) == ("trn-01", "train", 2)
    assert InventoryImport.objects.get().actor == pool_admin


def test_an_htmx_import_answers_with_the_result_fragment(admin_page):
    response = admin_page.post(
        IMPORT,
        {"source": "nvidia-smi", "node": "trn-01", "file": upload("trn-01.csv", nvidia_smi_csv(1))},
        headers={"HX-Request": "true"},
    )

    assert b"<html" not in response.content
    assert b'id="report"' in response.content
    assert "HX-Request" in response["Vary"]


@pytest.mark.parametrize("node", ["", "   "])
def test_nvidia_smi_without_a_node_shows_a_field_error_and_writes_nothing(
    admin_page, table_counts, node
):
    before = table_counts()

    response = admin_page.post(
        IMPORT, {"source": "nvidia-smi", "node": node, "file": upload("a.csv", nvidia_smi_csv(1))}
    )

    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors["node"] == [
        "nvidia-smi output needs the name of the node it came from. "
        "Suggested from the file name: a — check it and import."
    ]
    assert form["node"].value() == "a"  # filled in from a.csv
    assert response.context["report"] is None
    assert "nvidia-smi output needs the name of the node it came from." in (
        response.content.decode()
    )
    assert table_counts() == before


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"source": "nvidia-smi", "node": "gpu node 01", "file": ("a.csv", nvidia_smi_csv(1))},
            "node",
            "no spaces",
        ),
        ({"source": "slurm", "file": ("a.json", b"")}, "file", "empty"),
        ({"source": "lsf", "file": ("a.json", b"{}")}, "source", "Select a valid choice"),
        (
            {"source": "slurm", "pool": "nope", "file": ("a.json", b"{}")},
            "pool",
            "Select a valid choice",
        ),
    ],
)
def test_an_unusable_upload_shows_its_field_error_and_writes_nothing(
    admin_page, table_counts, fields, field, message
):
    before = table_counts()
    data = {k: upload(*v) if k == "file" else v for k, v in fields.items()}

    response = admin_page.post(IMPORT, data)

    assert response.status_code == 200
    assert any(message in e for e in response.context["form"].errors[field])
    assert table_counts() == before


@override_settings(INVENTORY_UPLOAD_MAX_BYTES=64)
def test_an_upload_over_the_limit_shows_a_file_error(admin_page, table_counts):
    before = table_counts()

    response = admin_page.post(
        IMPORT, {"source": "nvidia-smi", "node": "n1", "file": upload("big.csv", nvidia_smi_csv(2))}
    )

    assert response.context["form"].errors["file"][0].endswith("the limit is 64 bytes.")
    assert table_counts() == before


def test_an_import_with_a_rejected_node_reports_it_and_keeps_the_others(admin_page):
    payload = slurm_nodes_json(
        slurm_node("gpu-node-01", "gpu:rtx4090:4"), slurm_node("gpu node 01", "gpu:rtx4090:4")
    )

    response = admin_page.post(IMPORT, {"source": "slurm", "file": upload("n.json", payload)})

    report = response.context["report"]
    assert (report.created, report.rejected) == (["gpu-node-01"], ["gpu node 01"])
    assert "Imported with problems" in response.content.decode()
    assert list(Node.objects.values_list("hostname", flat=True)) == ["gpu-node-01"]


def test_a_member_cannot_post_an_import(member_page, table_counts):
    before = table_counts()

    response = member_page.post(
        IMPORT,
        {"source": "nvidia-smi", "node": "trn-01", "file": upload("trn-01.csv", nvidia_smi_csv(1))},
    )

    assert response.status_code == 403  # the portal's 403 page, not the admin's sign-in
    assert table_counts() == before


# --- unrecognised models --------------------------------------------------------------------


@pytest.fixture
def legacy():
    inventory_import_file(
        data=slurm_nodes_json(
            slurm_node("legacy-01", "gpu:p100:4"), slurm_node("legacy-02", "gpu:p100:4")
        ),
        source="slurm",
    )


def test_the_unrecognised_page_lists_names_and_offers_the_mapping_to_admins(
    admin_page, member_page, legacy
):
    admin_view = admin_page.get(UNRECOGNISED)
    member_view = member_page.get(UNRECOGNISED)

    assert admin_view.context["rows"] == [
        {"raw_model_name": "p100", "model_candidates": [], "gpu_count": 8, "node_count": 2}
    ]
    assert b'name="gpu_model"' in admin_view.content
    assert b'name="gpu_model"' not in member_view.content


def test_an_admin_maps_a_name_from_the_page(admin_page, pool_admin, legacy):
    response = admin_page.post(
        UNRECOGNISED, {"raw_model_name": "p100", "gpu_model": "a100_40g_sxm"}, follow=True
    )

    assert response.redirect_chain == [(UNRECOGNISED, 302)]
    assert response.context["rows"] == []
    assert "8 cards recognised" in response.content.decode()
    assert Gpu.objects.filter(gpu_model__slug="a100_40g_sxm").count() == 8
    assert AuditEvent.objects.filter(action="gpu_model_alias.created", actor=pool_admin).exists()


def test_a_conflicting_mapping_shows_the_error_and_changes_nothing(
    admin_page, legacy, table_counts
):
    before = table_counts()

    response = admin_page.post(
        UNRECOGNISED, {"raw_model_name": "NVIDIA GeForce RTX 4090", "gpu_model": "rtx4090d"}
    )

    assert response.status_code == 200
    assert "already maps to GeForce RTX 4090" in response.content.decode()
    assert table_counts() == before


def test_a_member_cannot_map_a_name(member_page, legacy, table_counts):
    before = table_counts()

    response = member_page.post(
        UNRECOGNISED, {"raw_model_name": "p100", "gpu_model": "a100_40g_sxm"}
    )

    assert response.status_code == 403
    assert table_counts() == before
    assert not GpuModelAlias.objects.filter(kind="admin").exists()


def test_the_unrecognised_list_exports_csv(member_page, legacy):
    response = member_page.get(UNRECOGNISED, {"export": "csv"})

    assert b"".join(response.streaming_content).decode().splitlines() == [
        "raw_model_name,model_candidates,gpu_count,node_count",
        "p100,,8,2",
    ]


def test_a_file_with_no_readable_node_says_nothing_was_imported_and_the_list_refreshes(admin_page):
    """Issue #21: a garbage file used to read "Imported with problems · 0 rejected"."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    garbage = SimpleUploadedFile("notes.txt", b"hello\nthis is not nvidia-smi output\n")
    response = admin_page.post(
        "/inventory/import/",
        {"source": "nvidia-smi", "node": "gpu-99", "file": garbage},
        HTTP_HX_REQUEST="true",
    )

    html = response.content.decode()
    assert "Nothing imported" in html and "nothing was changed" in html
    assert "Imported with problems" not in html
    assert 'id="recent-imports" hx-swap-oob="true"' in html
    assert "notes.txt" in html  # the new import is in the refreshed list
