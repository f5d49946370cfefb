"""POST /api/v1/inventory/imports/ (multipart) and the list of import runs."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from factories import PoolFactory, nvidia_smi_csv, slurm_node, slurm_nodes_json

from pools.inventory.models import Gpu, InventoryImport, Node

pytestmark = pytest.mark.django_db

URL = "/api/v1/inventory/imports/"


def upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def test_an_admin_imports_nvidia_smi_output_201_with_the_report(admin_api, pool_admin):
    PoolFactory(slug="train")

    response = admin_api.post(
        URL,
        {
            "source": "nvidia-smi",
            "node": "trn-01",
            "pool": "train",
            "file": upload("trn-01.csv", nvidia_smi_csv(4)),
        },
        format="multipart",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert {
        k: body[k]
        for k in (
            "source",
            "ok",
            "created",
            "updated",
            "unchanged",
            "rejected",
            "gpus_seen",
            "issues",
            "warnings",
        )
    } == {
        "source": "nvidia-smi",
        "ok": True,
        "created": ["trn-01"],
        "updated": [],
        "unchanged": [],
        "rejected": [],
        "gpus_seen": 4,
        "issues": [],
        "warnings": [],
    }
    record = InventoryImport.objects.get()
    assert body["import_id"] == record.pk
    assert (record.filename, record.actor, record.nodes_created) == ("trn-01.csv", pool_admin, 1)
    assert (Node.objects.get().pool.slug, Gpu.objects.count()) == ("train", 4)

    listed = admin_api.get(URL).json()["results"]
    assert [
        (r["id"], r["source"], r["actor"], r["nodes_created"], r["gpus_seen"]) for r in listed
    ] == [(record.pk, "nvidia-smi", "root-admin", 1, 4)]


def test_a_rejected_node_is_400_import_incomplete_and_the_good_nodes_are_kept(admin_api):
    payload = slurm_nodes_json(
        slurm_node("gpu-node-01", "gpu:rtx4090:4"),
        slurm_node("gpu node 01", "gpu:rtx4090:4"),
        slurm_node("gpu-node-02", "gpu:rtx4090:2"),
    )

    response = admin_api.post(
        URL, {"source": "slurm", "file": upload("nodes.json", payload)}, format="multipart"
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "import_incomplete"
    assert (body["ok"], body["created"], body["rejected"]) == (
        False,
        ["gpu-node-01", "gpu-node-02"],
        ["gpu node 01"],
    )
    assert [i["node"] for i in body["issues"]] == ["gpu node 01"]
    assert sorted(Node.objects.values_list("hostname", flat=True)) == ["gpu-node-01", "gpu-node-02"]
    assert Gpu.objects.count() == 6
    assert InventoryImport.objects.get().nodes_rejected == 1


def test_a_member_cannot_import(member_api, table_counts):
    before = table_counts()

    response = member_api.post(
        URL,
        {"source": "nvidia-smi", "node": "trn-01", "file": upload("trn-01.csv", nvidia_smi_csv(1))},
        format="multipart",
    )

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert table_counts() == before
    assert member_api.get(URL).status_code == 403


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"source": "nvidia-smi", "file": ("a.csv", nvidia_smi_csv(1))}, 400, "invalid_input"),
        ({"source": "nvidia-smi", "node": "n1", "file": ("a.csv", b"")}, 400, "invalid_input"),
        ({"source": "lsf", "file": ("a.txt", b"x")}, 400, "invalid_input"),
        ({"source": "slurm"}, 400, "invalid_input"),
        ({"source": "slurm", "pool": "nope", "file": ("a.json", b"{}")}, 400, "invalid_input"),
    ],
    ids=["no-node", "empty-file", "unknown-source", "no-file", "unknown-pool"],
)
def test_unusable_uploads_are_400_and_write_nothing(admin_api, table_counts, fields, status, code):
    before = table_counts()
    data = {k: upload(*v) if k == "file" else v for k, v in fields.items()}

    response = admin_api.post(URL, data, format="multipart")

    assert response.status_code == status
    assert response.json()["code"] == code
    assert table_counts() == before


@override_settings(INVENTORY_UPLOAD_MAX_BYTES=64)
def test_an_upload_over_the_limit_is_400_upload_too_large(admin_api, table_counts):
    before = table_counts()

    response = admin_api.post(
        URL,
        {"source": "nvidia-smi", "node": "n1", "file": upload("big.csv", nvidia_smi_csv(2))},
        format="multipart",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "upload_too_large"
    assert body["data"]["limit"] == 64
    assert table_counts() == before


@pytest.mark.parametrize("source", ["slurm", "kubernetes"])
def test_a_file_nested_100000_deep_is_400_not_a_recursion_error(admin_api, table_counts, source):
    """Python's decoders recurse once per level: this file was a RecursionError, a 500."""
    before = table_counts()
    deep = b"[" * 100_000 + b"]" * 100_000
    response = admin_api.post(
        URL, {"source": source, "file": upload("nodes.json", deep)}, format="multipart"
    )
    assert response.status_code == 400
    assert "nested deeper than 64 levels" in str(response.json())
    assert {k: v for k, v in table_counts().items() if k != "InventoryImport"} == {
        k: v for k, v in before.items() if k != "InventoryImport"
    }


def test_a_node_reporting_more_than_64_cards_is_rejected_and_the_rest_kept(admin_api):
    """Issue 27, item 6: the parsers let 1,024 cards a node through (and nvidia-smi captures
    any number). 64 is taken, 65 is not (scheduler_adapters.types.MAX_GPUS_PER_NODE)."""
    payload = slurm_nodes_json(
        slurm_node("gpu-node-01", "gpu:a100:1000"),
        slurm_node("gpu-node-02", "gpu:a100:64"),
        slurm_node("gpu-node-03", "gpu:a100:65"),
    )
    response = admin_api.post(
        URL, {"source": "slurm", "file": upload("nodes.json", payload)}, format="multipart"
    )
    assert response.status_code == 400
    body = response.json()
    assert (body["created"], body["rejected"]) == (["gpu-node-02"], ["gpu-node-01", "gpu-node-03"])
    assert list(Node.objects.values_list("hostname", flat=True)) == ["gpu-node-02"]
    assert Gpu.objects.count() == 64


def test_an_nvidia_smi_capture_of_65_cards_is_rejected(admin_api):
    response = admin_api.post(
        URL,
        {"source": "nvidia-smi", "node": "dgx-1",
         "file": upload("smi.csv", nvidia_smi_csv(65))},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json()["issues"][0]["message"] == (
        "65 GPUs on one node: at most 64 are taken (a corrupt count, never imported)"
    )
    assert not Node.objects.exists() and not Gpu.objects.exists()
