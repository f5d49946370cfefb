"""/api/v1/unrecognised-models/: list reported names no alias matches; admins map them."""

from __future__ import annotations

import pytest
from factories import slurm_node, slurm_nodes_json

from pools.audit.models import AuditEvent
from pools.inventory.models import Gpu, GpuModelAlias
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

URL = "/api/v1/unrecognised-models/"


@pytest.fixture
def legacy():
    inventory_import_file(
        data=slurm_nodes_json(
            slurm_node("legacy-01", "gpu:v100:4"),
            slurm_node("legacy-02", "gpu:v100:4"),
            slurm_node("legacy-03", "gpu:p100:2"),
        ),
        source="slurm",
    )


def test_a_member_lists_unrecognised_names_largest_first(member_api, legacy):
    response = member_api.get(URL)

    assert response.status_code == 200
    assert response.json() == {
        "count": 2,
        "next": None,
        "previous": None,
        "results": [
            {"raw_model_name": "v100", "gpu_count": 8, "node_count": 2},
            {"raw_model_name": "p100", "gpu_count": 2, "node_count": 1},
        ],
    }


def test_the_list_is_paginated_as_every_list(member_api, legacy):
    """Two names, one a page: v100 (8 cards) on page 1 with a link to page 2, p100 (2) on
    page 2; a page size past 500 is a 400 naming ``page_size``."""
    first = member_api.get(URL, {"page_size": 1}).json()
    second = member_api.get(URL, {"page_size": 1, "page": 2}).json()

    assert first["count"] == 2
    assert [r["raw_model_name"] for r in first["results"]] == ["v100"]
    assert first["next"].endswith("/api/v1/unrecognised-models/?page=2&page_size=1")
    assert [r["raw_model_name"] for r in second["results"]] == ["p100"]
    assert second["next"] is None
    too_big = member_api.get(URL, {"page_size": 501})
    assert too_big.status_code == 400 and "page_size" in too_big.json()["errors"]


def test_an_admin_maps_a_name(admin_api, pool_admin, legacy):
    response = admin_api.post(
        URL, {"raw_model_name": "v100", "gpu_model": "a100_40g_sxm"}, format="json"
    )

    assert response.status_code == 200, response.content
    assert response.json() == {"mapped_gpus": 8, "gpu_model": "a100_40g_sxm"}
    assert Gpu.objects.filter(gpu_model__slug="a100_40g_sxm").count() == 8
    assert admin_api.get(URL).json()["results"] == [
        {"raw_model_name": "p100", "gpu_count": 2, "node_count": 1}
    ]
    assert (
        AuditEvent.objects.filter(action="gpu_model_alias.created", actor=pool_admin).count() == 1
    )


def test_a_member_cannot_map(member_api, legacy, table_counts):
    before = table_counts()

    response = member_api.post(
        URL, {"raw_model_name": "v100", "gpu_model": "a100_40g_sxm"}, format="json"
    )

    assert response.status_code == 403
    assert table_counts() == before
    assert Gpu.objects.filter(gpu_model__isnull=True).count() == 10


def test_mapping_a_catalogue_name_elsewhere_is_409_conflict(admin_api, legacy, table_counts):
    before = table_counts()

    response = admin_api.post(
        URL, {"raw_model_name": "rtx4090", "gpu_model": "rtx4090d"}, format="json"
    )

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "conflict"
    assert body["data"] == {"raw_name": "rtx4090", "gpu_model": "rtx4090"}
    assert table_counts() == before


@pytest.mark.parametrize(
    "data",
    [
        {"raw_model_name": "v100", "gpu_model": "nope"},
        {"gpu_model": "l4"},
        {"raw_model_name": "NVIDIA", "gpu_model": "l4"},
    ],
)
def test_a_bad_mapping_request_is_400(admin_api, legacy, data):
    response = admin_api.post(URL, data, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert not GpuModelAlias.objects.filter(kind="admin").exists()
