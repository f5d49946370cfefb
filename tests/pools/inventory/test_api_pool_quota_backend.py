"""/api/v1/pools/: a Kubernetes pool's quota backend (where elastic allocations' floor and
ceiling land, pools/elastic/) and its Kueue cohort / Volcano / Koordinator parent: read,
written by pool admins, refused where they cannot work, fixed while allocations hold cards."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from factories import AllocationFactory, PoolFactory

from pools.audit.models import AuditEvent
from pools.common.choices import AllocationStatus, Scheduler
from pools.inventory.models import Pool

pytestmark = pytest.mark.django_db

URL = "/api/v1/pools/"
KUEUE_POOL = {
    "slug": "infer",
    "name": "Inference",
    "scheduler": "kubernetes",
    "quota_backend": "kueue",
    "quota_cohort": "inference",
}


@pytest.fixture
def infer():
    return PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")


def test_an_admin_creates_a_kueue_pool_and_it_is_audited(admin_api):
    response = admin_api.post(URL, KUEUE_POOL, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["quota_backend"], body["quota_cohort"]) == ("kueue", "inference")
    pool = Pool.objects.get(slug="infer")
    assert (pool.quota_backend, pool.quota_cohort) == ("kueue", "inference")
    event = AuditEvent.objects.get(action="pool.created")
    assert (event.after["quota_backend"], event.after["quota_cohort"]) == ("kueue", "inference")


def test_an_admin_moves_an_unused_pool_to_volcano(admin_api, infer):
    response = admin_api.patch(
        f"{URL}infer/", {"quota_backend": "volcano", "quota_cohort": "serving"}, format="json"
    )

    assert response.status_code == 200, response.content
    infer.refresh_from_db()
    assert (infer.quota_backend, infer.quota_cohort) == ("volcano", "serving")
    event = AuditEvent.objects.get(action="pool.updated")
    assert (event.before["quota_backend"], event.after["quota_backend"]) == (
        "resourcequota",
        "volcano",
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({**KUEUE_POOL, "quota_cohort": ""}, "quota_cohort"),  # borrowing needs a cohort
        ({**KUEUE_POOL, "quota_cohort": "Inference_Pool"}, "quota_cohort"),  # not a DNS label
        ({**KUEUE_POOL, "quota_cohort": "a" * 64}, "quota_cohort"),
        ({**KUEUE_POOL, "quota_backend": "yunikorn"}, "quota_backend"),
        (
            {
                "slug": "train",
                "name": "Train",
                "scheduler": "slurm",
                "slurm_partition": "t",
                "quota_backend": "kueue",
                "quota_cohort": "c",
            },
            "quota_backend",
        ),  # fmt: skip
    ],
)
def test_a_backend_that_cannot_work_is_400_and_writes_nothing(admin_api, table_counts, data, field):
    before = table_counts()

    response = admin_api.post(URL, data, format="json")

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid_input"
    assert list(body["errors"]) == [field]
    assert table_counts() == before


def test_clearing_a_kueue_pools_cohort_is_400(admin_api):
    PoolFactory(slug="k", scheduler=Scheduler.KUBERNETES, slurm_partition="",
                quota_backend="kueue", quota_cohort="inference")  # fmt: skip

    response = admin_api.patch(f"{URL}k/", {"quota_cohort": ""}, format="json")

    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["quota_cohort"]
    assert Pool.objects.get(slug="k").quota_cohort == "inference"


@pytest.mark.parametrize("change", [{"quota_backend": "koordinator"}, {"quota_cohort": "other"}])
def test_the_backend_is_fixed_while_allocations_hold_cards(admin_api, infer, change):
    AllocationFactory(pool=infer, status=AllocationStatus.ACTIVE)

    response = admin_api.patch(f"{URL}infer/", change, format="json")

    assert response.status_code == 409
    assert response.json()["data"]["fields"] == list(change)
    infer.refresh_from_db()
    assert (infer.quota_backend, infer.quota_cohort) == ("resourcequota", "")
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"scheduler": Scheduler.SLURM, "quota_backend": "volcano"},
        {"scheduler": Scheduler.KUBERNETES, "quota_backend": "kueue", "quota_cohort": ""},
    ],
)
def test_the_database_refuses_what_the_api_refuses(fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        Pool.objects.create(slug="x", name="X", **fields)


def test_the_schema_describes_the_backend(member_api):
    schema = member_api.get("/api/schema/", {"format": "json"}).json()
    pool = schema["components"]["schemas"]["Pool"]["properties"]
    assert "quota_cohort" in pool
    backend = pool["quota_backend"]
    ref = backend.get("$ref") or backend["allOf"][0]["$ref"]
    enum = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["enum"]
    assert enum == ["resourcequota", "kueue", "volcano", "koordinator"]
