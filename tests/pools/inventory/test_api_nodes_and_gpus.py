"""/api/v1/nodes/, /api/v1/gpus/ and /api/v1/driver-groups/: filters, ordering, pages, shape."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import GpuFactory, PoolFactory, node_with_gpus

from pools.inventory.models import Gpu, MigDevice, Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    """
    node      pool   state  driver      cards
    trn-01    train  up     550.54.15   4 A100 SXM4 80GB
    trn-02    train  drain  535.129.03  2 A100 SXM4 80GB, card 1 in error
    dev-01    dev    up     550.54.15   2 RTX 4090 + 1 unrecognised 'v100'
    mig-01    dev    down   550.54.15   1 H100 SXM5 in MIG mode with two MIG devices
    """
    train = PoolFactory(slug="train", name="Train")
    dev = PoolFactory(slug="dev", name="Dev")
    node_with_gpus(4, hostname="trn-01", pool=train)
    trn2 = node_with_gpus(
        2,
        hostname="trn-02",
        pool=train,
        state="drain",
        driver_version="535.129.03",
        state_reason="ECC",
    )
    trn2.gpus.filter(index=1).update(health="error")
    dev1 = node_with_gpus(2, hostname="dev-01", pool=dev, gpu_model="rtx4090")
    GpuFactory(
        node=dev1,
        index=2,
        gpu_model=None,
        raw_model_name="v100",
        uuid="GPU-0000beef-0000-4000-8000-000000000001",
    )
    mig = node_with_gpus(1, hostname="mig-01", pool=dev, state="down", gpu_model="h100_sxm")
    card = mig.gpus.get()
    card.mig_mode = True
    card.save()
    MigDevice.objects.create(
        gpu=card,
        index=0,
        profile="3g.40gb",
        gpu_instance_id=2,
        compute_instance_id=0,
        memory_total_mib=40448,
        uuid="MIG-11111111-2222-4333-8444-555555555555",
    )
    MigDevice.objects.create(
        gpu=card,
        index=1,
        profile="4g.40gb",
        gpu_instance_id=1,
        compute_instance_id=0,
        memory_total_mib=40448,
    )


def hostnames(api, **params) -> list[str]:
    response = api.get("/api/v1/nodes/", params)
    assert response.status_code == 200, response.content
    return [n["hostname"] for n in response.json()["results"]]


def test_node_list_is_sorted_by_hostname_with_counts(member_api, fleet):
    response = member_api.get("/api/v1/nodes/")

    body = response.json()
    assert body["count"] == 4
    assert [
        (
            n["hostname"],
            n["pool"],
            n["state"],
            n["driver_group"],
            n["gpu_count"],
            n["unrecognised_count"],
        )
        for n in body["results"]
    ] == [
        ("dev-01", "dev", "up", 550, 3, 1),
        ("mig-01", "dev", "down", 550, 1, 0),
        ("trn-01", "train", "up", 550, 4, 0),
        ("trn-02", "train", "drain", 535, 2, 0),
    ]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"pool": "train"}, ["trn-01", "trn-02"]),
        ({"state": "drain"}, ["trn-02"]),
        ({"state": "up", "pool": "dev"}, ["dev-01"]),
        ({"gpu_model": "rtx4090"}, ["dev-01"]),
        ({"gpu_model": "a100_80g_sxm"}, ["trn-01", "trn-02"]),
        ({"driver_group": "535"}, ["trn-02"]),
        ({"q": "trn"}, ["trn-01", "trn-02"]),
        ({"q": "v100"}, ["dev-01"]),
        ({"q": "535.129"}, ["trn-02"]),
        ({"q": "GPU-0000BEEF-0000-4000-8000-000000000001"}, ["dev-01"]),
        ({"unrecognised": "true"}, ["dev-01"]),
        ({"ordering": "-hostname"}, ["trn-02", "trn-01", "mig-01", "dev-01"]),
        ({"ordering": "-gpus"}, ["trn-01", "dev-01", "trn-02", "mig-01"]),
        ({"ordering": "state,hostname"}, ["mig-01", "trn-02", "dev-01", "trn-01"]),
    ],
)
def test_node_filters_and_ordering(member_api, fleet, params, expected):
    assert hostnames(member_api, **params) == expected


def test_a_filtered_node_list_keeps_its_card_counts(member_api, fleet):
    response = member_api.get("/api/v1/nodes/", {"q": "v100"})

    (node,) = response.json()["results"]
    assert (node["gpu_count"], node["unrecognised_count"]) == (3, 1)


def test_an_unknown_pool_slug_is_400_with_a_code(member_api, fleet):
    response = member_api.get("/api/v1/nodes/", {"pool": "nope"})

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input" and "pool" in body["errors"]


def test_node_pages(member_api, fleet):
    first = member_api.get("/api/v1/nodes/", {"page_size": 3}).json()
    second = member_api.get("/api/v1/nodes/", {"page_size": 3, "page": 2}).json()

    assert first["count"] == 4
    assert [n["hostname"] for n in first["results"]] == ["dev-01", "mig-01", "trn-01"]
    assert first["next"].endswith("/api/v1/nodes/?page=2&page_size=3")
    assert first["previous"] is None
    assert [n["hostname"] for n in second["results"]] == ["trn-02"]
    assert second["next"] is None


def test_node_detail_holds_gpus_and_mig_devices(member_api, fleet):
    response = member_api.get("/api/v1/nodes/mig-01/")

    assert response.status_code == 200
    body = response.json()
    assert (body["hostname"], body["pool"], body["state"], body["gpu_count"]) == (
        "mig-01",
        "dev",
        "down",
        1,
    )
    (gpu,) = body["gpus"]
    assert (gpu["index"], gpu["gpu_model"], gpu["mig_mode"]) == (0, "h100_sxm", True)
    assert gpu["mig_devices"] == [
        {
            "index": 0,
            "uuid": "MIG-11111111-2222-4333-8444-555555555555",
            "profile": "3g.40gb",
            "gpu_instance_id": 2,
            "compute_instance_id": 0,
            "memory_total_mib": 40448,
        },
        {
            "index": 1,
            "uuid": "",
            "profile": "4g.40gb",
            "gpu_instance_id": 1,
            "compute_instance_id": 0,
            "memory_total_mib": 40448,
        },
    ]


def test_node_detail_of_a_dotted_host_name(member_api):
    node_with_gpus(2, hostname="gpu-07.cluster.example.com")

    response = member_api.get("/api/v1/nodes/gpu-07.cluster.example.com/")

    assert response.status_code == 200
    assert [g["index"] for g in response.json()["gpus"]] == [0, 1]


def test_node_detail_of_a_missing_host_is_404(member_api, fleet):
    response = member_api.get("/api/v1/nodes/nope-01/")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_nodes_are_read_only(admin_api, fleet):
    response = admin_api.delete("/api/v1/nodes/trn-01/")

    assert response.status_code == 405
    assert Node.objects.filter(hostname="trn-01").exists()


def gpu_keys(api, **params) -> list[tuple[str, int]]:
    response = api.get("/api/v1/gpus/", {"page_size": 500, **params})
    assert response.status_code == 200, response.content
    return [(g["node"], g["index"]) for g in response.json()["results"]]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"node": "trn-02"}, [("trn-02", 0), ("trn-02", 1)]),
        ({"pool": "dev"}, [("dev-01", 0), ("dev-01", 1), ("dev-01", 2), ("mig-01", 0)]),
        ({"gpu_model": "rtx4090"}, [("dev-01", 0), ("dev-01", 1)]),
        ({"health": "error"}, [("trn-02", 1)]),
        ({"mig_mode": "true"}, [("mig-01", 0)]),
        ({"recognised": "false"}, [("dev-01", 2)]),
        ({"driver_group": "535"}, [("trn-02", 0), ("trn-02", 1)]),
        ({"q": "beef"}, [("dev-01", 2)]),
        (
            {"ordering": "-node,index", "pool": "dev"},
            [("mig-01", 0), ("dev-01", 0), ("dev-01", 1), ("dev-01", 2)],
        ),
    ],
)
def test_gpu_filters(member_api, fleet, params, expected):
    assert gpu_keys(member_api, **params) == expected


def test_gpu_list_shape(member_api, fleet):
    response = member_api.get("/api/v1/gpus/", {"node": "mig-01"})

    (gpu,) = response.json()["results"]
    assert {
        k: gpu[k]
        for k in (
            "node",
            "pool",
            "index",
            "gpu_model",
            "raw_model_name",
            "memory_total_mib",
            "mig_mode",
            "mig_device_count",
            "health",
            "driver_version",
        )
    } == {
        "node": "mig-01",
        "pool": "dev",
        "index": 0,
        "gpu_model": "h100_sxm",
        "raw_model_name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81920,
        "mig_mode": True,
        "mig_device_count": 2,
        "health": "unknown",
        "driver_version": "550.54.15",
    }


def test_driver_groups(member_api, fleet):
    response = member_api.get("/api/v1/driver-groups/")

    assert response.status_code == 200
    assert response.json()["results"] == [
        {
            "branch": 535,
            "name": "R535",
            "min_driver_version": "535.129.03",
            "max_driver_version": "535.129.03",
            "max_cuda": "12.2",
            "node_count": 1,
            "gpu_count": 2,
        },
        {
            "branch": 550,
            "name": "R550",
            "min_driver_version": "550.54.15",
            "max_driver_version": "550.54.15",
            "max_cuda": "12.4",
            "node_count": 3,
            "gpu_count": 8,
        },
    ]
    assert member_api.get("/api/v1/driver-groups/550/").json()["max_cuda"] == "12.4"


# --- query-count guards --------------------------------------------------------------------


def build_fleet(start: int, stop: int, cards: int = 8) -> None:
    """Nodes bulk-<start>..bulk-<stop - 1>, each with ``cards`` cards, one of them with MIG."""
    pool = PoolFactory(slug="bulk")
    for number in range(start, stop):
        node = node_with_gpus(cards, hostname=f"bulk-{number:03d}", pool=pool)
        card = node.gpus.first()
        MigDevice.objects.create(gpu=card, index=0, profile="3g.40gb")


def queries_for(api, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = api.get(url, {"page_size": 500})
    assert response.status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/gpus/",
        "/api/v1/nodes/",
        "/api/v1/pools/",
        "/api/v1/driver-groups/",
        "/api/v1/gpu-models/",
    ],
)
def test_list_query_count_does_not_grow_with_the_fleet(member_api, url):
    """Counted warm (a second read): the pools, driver groups and GPU models lists read their
    card counts from the census kept per inventory generation, which a changed inventory reads
    once more, in one statement (``pools.inventory.selectors.inventory_census``)."""
    build_fleet(0, 5)
    cold = queries_for(member_api, url)
    small = queries_for(member_api, url)
    build_fleet(5, 40)
    assert Gpu.objects.count() == 320

    assert queries_for(member_api, url) == cold
    large = queries_for(member_api, url)

    assert large == small
    assert small <= 4
    assert cold - small == (1 if url in CENSUS_LISTS else 0)


CENSUS_LISTS = ("/api/v1/pools/", "/api/v1/driver-groups/", "/api/v1/gpu-models/")


def test_node_detail_query_count_does_not_grow_with_its_cards(member_api):
    pool = PoolFactory(slug="bulk")
    node_with_gpus(1, hostname="small-01", pool=pool)
    big = node_with_gpus(16, hostname="big-01", pool=pool)
    for card in big.gpus.all():
        MigDevice.objects.create(gpu=card, index=0, profile="1g.10gb")

    small = queries_for(member_api, "/api/v1/nodes/small-01/")
    large = queries_for(member_api, "/api/v1/nodes/big-01/")

    assert large == small
