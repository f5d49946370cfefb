"""/api/v1/pools/: everyone signed in reads, pool admins write, every write is audited."""

from __future__ import annotations

from decimal import Decimal

import pytest
from factories import PoolFactory, node_with_gpus
from rest_framework.test import APIClient

from pools.audit.models import AuditEvent
from pools.inventory.models import Pool

pytestmark = pytest.mark.django_db

URL = "/api/v1/pools/"
NEW_POOL = {
    "slug": "infer",
    "name": "Inference",
    "scheduler": "kubernetes",
    "k8s_node_selector": {"gpu-pool.example.com/pool": "inference"},
    "overcommit_ratio": "1.50",
}


@pytest.fixture
def train():
    pool = PoolFactory(slug="train", name="Train", slurm_partition="train")
    node_with_gpus(4, hostname="trn-01", pool=pool)
    node_with_gpus(2, hostname="trn-02", pool=pool)
    return pool


def test_a_member_reads_pools_with_counts(member_api, train):
    response = member_api.get(URL)

    assert response.status_code == 200
    assert response.json()["results"] == [
        {
            "slug": "train",
            "name": "Train",
            "description": "",
            "scheduler": "slurm",
            "cluster": None,
            "slurm_partition": "train",
            "k8s_node_selector": {},
            "overcommit_ratio": "1.00",
            "quota_backend": "resourcequota",
            "quota_cohort": "",
            "burst": False,
            "node_count": 2,
            "gpu_count": 6,
        }
    ]
    assert member_api.get(f"{URL}train/").json()["gpu_count"] == 6


@pytest.mark.parametrize(
    ("method", "path", "data"),
    [
        ("post", URL, NEW_POOL),
        ("patch", f"{URL}train/", {"name": "Renamed"}),
        ("put", f"{URL}train/", {**NEW_POOL, "slug": "train"}),
        ("delete", f"{URL}train/", None),
    ],
)
def test_a_member_cannot_write_pools(member_api, train, table_counts, method, path, data):
    before = table_counts()

    response = getattr(member_api, method)(path, data, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert table_counts() == before
    assert Pool.objects.get(slug="train").name == "Train"


def test_an_admin_creates_a_pool_and_it_is_audited(admin_api, pool_admin):
    response = admin_api.post(URL, NEW_POOL, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["slug"] == "infer"
    pool = Pool.objects.get(slug="infer")
    assert (pool.name, pool.scheduler, pool.overcommit_ratio, pool.k8s_node_selector) == (
        "Inference",
        "kubernetes",
        Decimal("1.50"),
        {"gpu-pool.example.com/pool": "inference"},
    )
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.object_type, event.object_id) == (
        "pool.created",
        pool_admin,
        "pools.pool",
        str(pool.pk),
    )
    assert event.after["slug"] == "infer" and event.after["overcommit_ratio"] == "1.50"


def test_an_admin_updates_and_deletes_a_pool_with_before_and_after(admin_api, train):
    patched = admin_api.patch(f"{URL}train/", {"overcommit_ratio": "2.00"}, format="json")
    deleted = admin_api.delete(f"{URL}train/")

    assert patched.status_code == 200 and deleted.status_code == 204
    update, delete = AuditEvent.objects.order_by("id")
    assert update.action == "pool.updated"
    assert (update.before["overcommit_ratio"], update.after["overcommit_ratio"]) == ("1.00", "2.00")
    assert delete.action == "pool.deleted" and delete.before["slug"] == "train"
    assert not Pool.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"slug": "Bad Slug"}, "slug"),
        ({"slug": "-train"}, "slug"),
        ({"overcommit_ratio": "0"}, "overcommit_ratio"),
        ({"overcommit_ratio": "0.05"}, "overcommit_ratio"),
        ({"scheduler": "lsf"}, "scheduler"),
        ({"k8s_node_selector": {"pool": 3}}, "k8s_node_selector"),
    ],
)
def test_an_invalid_pool_is_400_with_a_machine_readable_body(
    admin_api, table_counts, change, field
):
    before = table_counts()

    response = admin_api.post(URL, {**NEW_POOL, **change}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input"
    assert list(body["errors"]) == [field]
    assert table_counts() == before


def test_a_duplicate_slug_is_400(admin_api, train):
    response = admin_api.post(URL, {**NEW_POOL, "slug": "train"}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()["errors"]
    assert Pool.objects.count() == 1


@pytest.mark.parametrize(
    "url",
    [
        URL,
        "/api/v1/nodes/",
        "/api/v1/gpus/",
        "/api/v1/gpu-models/",
        "/api/v1/unrecognised-models/",
        "/api/v1/inventory/imports/",
    ],
)
def test_anonymous_requests_get_json_401_not_a_login_redirect(url):
    response = APIClient().get(url)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_authenticated"


def test_cuda_support(member_api, train):
    node_with_gpus(2, hostname="old-01", pool=train, driver_version="535.129.03")

    response = member_api.get(f"{URL}cuda-support/", {"cuda": "12.4"})

    assert response.status_code == 200
    body = response.json()
    assert body["cuda"] == "12.4"
    (row,) = body["pools"]
    # 6 cards on 550.54.15 (CUDA 12.4), 2 on 535.129.03 (12.2).
    assert (row["slug"], row["capable_cards"], row["other_cards"]) == ("train", 6, 2)


@pytest.mark.parametrize("params", [{"cuda": "abc"}, {"cuda": "12"}, {}])
def test_cuda_support_rejects_what_is_not_a_version(member_api, params):
    response = member_api.get(f"{URL}cuda-support/", params)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input" and "cuda" in body["errors"]
