"""Inventory files over ``INVENTORY_ASYNC_IMPORT_BYTES`` are imported by a Celery task with
progress (pools/inventory/services/uploads.py): the API answers 202 with a status URL, the page
polls the upload; smaller files stay synchronous. Tasks run eagerly here, on commit."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from factories import PoolFactory, nvidia_smi_csv, slurm_node, slurm_nodes_json

from pools.inventory.models import Gpu, InventoryImport, InventoryUpload, Node

pytestmark = pytest.mark.django_db

URL = "/api/v1/inventory/imports/"


def _file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def _twelve_slurm_nodes() -> bytes:
    """12 nodes x 8 A100 GRES in partition ``train``: 96 cards."""
    return slurm_nodes_json(
        *(slurm_node(f"bg-{n:02d}", "gpu:a100:8", partitions=("train",)) for n in range(12))
    )


@override_settings(INVENTORY_ASYNC_IMPORT_BYTES=1000)
def test_a_big_file_is_202_with_a_status_url_and_the_report_when_done(
    admin_api, django_capture_on_commit_callbacks
):
    PoolFactory(slug="train", slurm_partition="train")
    data = _twelve_slurm_nodes()
    assert len(data) > 1000

    with django_capture_on_commit_callbacks(execute=True) as queued:
        response = admin_api.post(
            URL, {"source": "slurm", "file": _file("nodes.json", data)}, format="multipart"
        )

    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["status"], body["progress"], body["report"]) == ("pending", 0, None)
    assert response["Location"] == body["status_url"] == f"/api/v1/inventory/uploads/{body['id']}/"
    assert len(queued) == 1  # the task, sent once the upload row was committed

    done = admin_api.get(body["status_url"]).json()
    assert (done["status"], done["progress"], done["error"]) == ("done", 100, "")
    report = done["report"]
    assert report["created"] == [f"bg-{n:02d}" for n in range(12)]
    assert (report["gpus_seen"], report["ok"]) == (96, True)
    assert Gpu.objects.filter(node__hostname__startswith="bg-").count() == 96
    assert report["import_id"] == InventoryImport.objects.get().pk
    # the file's bytes are dropped once read
    assert bytes(InventoryUpload.objects.get(pk=body["id"]).data) == b""


@override_settings(INVENTORY_ASYNC_IMPORT_BYTES=10_000_000)
def test_a_small_file_is_still_imported_in_the_request(admin_api):
    PoolFactory(slug="train", slurm_partition="train")
    response = admin_api.post(
        URL, {"source": "slurm", "file": _file("nodes.json", _twelve_slurm_nodes())},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201
    assert response.json()["gpus_seen"] == 96
    assert not InventoryUpload.objects.exists()


@override_settings(INVENTORY_ASYNC_IMPORT_BYTES=10)
def test_what_can_be_told_without_parsing_is_refused_in_the_request(admin_api):
    response = admin_api.post(
        URL, {"source": "nvidia-smi", "file": _file("x.csv", nvidia_smi_csv(2))},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 400
    body = response.json()
    assert (body["code"], body["data"]["field"]) == ("invalid_input", "node")
    assert body["detail"] == "nvidia-smi output needs the name of the node it came from."
    assert not InventoryUpload.objects.exists()


@override_settings(INVENTORY_ASYNC_IMPORT_BYTES=100)
def test_a_file_in_a_format_it_cannot_read_fails_the_upload_with_the_reason(
    admin_api, django_capture_on_commit_callbacks
):
    data = b'{"meta": {"plugin": {"data_parser": "data_parser/v0.0.99"}}, "nodes": []}' + b" " * 100
    with django_capture_on_commit_callbacks(execute=True):
        body = admin_api.post(
            URL, {"source": "slurm", "file": _file("n.json", data)}, format="multipart"
        ).json()

    failed = admin_api.get(body["status_url"]).json()
    assert failed["status"] == "failed"
    assert "v0.0.99" in failed["error"]
    assert not Node.objects.exists()


def test_members_cannot_see_uploads(member_api):
    upload = InventoryUpload.objects.create(source="slurm", filename="n.json")
    assert member_api.get(f"/api/v1/inventory/uploads/{upload.pk}/").status_code == 403


@override_settings(INVENTORY_ASYNC_IMPORT_BYTES=1000)
def test_the_page_polls_a_big_import_and_shows_its_report(
    admin_page, django_capture_on_commit_callbacks
):
    PoolFactory(slug="train", slurm_partition="train")
    with django_capture_on_commit_callbacks(execute=False) as queued:
        page = admin_page.post(
            "/inventory/import/",
            {"source": "slurm", "file": _file("nodes.json", _twelve_slurm_nodes())},
            HTTP_HX_REQUEST="true",
        )
    upload = InventoryUpload.objects.get()
    text = page.content.decode()
    assert f'hx-get="/inventory/uploads/{upload.pk}/"' in text
    assert "queued" in text

    waiting = admin_page.get(f"/inventory/uploads/{upload.pk}/", HTTP_HX_REQUEST="true")
    assert 'hx-trigger="load delay:2s"' in waiting.content.decode()  # still polling

    queued[0]()  # the worker runs the task
    done = admin_page.get(f"/inventory/uploads/{upload.pk}/", HTTP_HX_REQUEST="true")
    text = " ".join(done.content.decode().split())
    assert "hx-get" not in text  # polling stops
    assert "12 created · 0 updated · 0 unchanged · 0 rejected · 96 GPUs read" in text
    # the same page without htmx is a whole page (a link to keep)
    whole = admin_page.get(f"/inventory/uploads/{upload.pk}/")
    assert "<html" in whole.content.decode() and "Background import" in whole.content.decode()
