"""Every inventory page renders for members and admins; anonymous users are sent to sign in."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import reverse
from factories import GpuFactory, PoolFactory, node_with_gpus

from pools.inventory.models import MigDevice
from pools.inventory.services.import_files import inventory_import_file

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/nodes/",
    "/nodes/trn-01/",
    "/nodes/mig-01/",
    "/gpus/",
    "/gpu-models/",
    "/pools/",
    "/pools/?cuda=12.4",
    "/unrecognised-models/",
]


@pytest.fixture
def fleet():
    train = PoolFactory(slug="train", name="Train")
    node_with_gpus(4, hostname="trn-01", pool=train)
    old = node_with_gpus(
        2,
        hostname="trn-02",
        pool=train,
        driver_version="535.129.03",
        state="drain",
        state_reason="ECC errors",
    )
    GpuFactory(node=old, index=2, gpu_model=None, raw_model_name="v100")
    mig = node_with_gpus(1, hostname="mig-01", pool=None, gpu_model="h100_sxm")
    MigDevice.objects.create(gpu=mig.gpus.get(), index=0, profile="3g.40gb", memory_total_mib=40448)
    listing = b"GPU 0: NVIDIA L4 (UUID: GPU-1a2b3c4d-0000-4000-8000-0000000000aa)\n"
    inventory_import_file(data=listing, source="nvidia-smi", node="l4-01", filename="l4-01.txt")


@pytest.mark.parametrize("url", PAGES)
def test_every_page_renders_for_a_member(member_page, fleet, url):
    response = member_page.get(url)

    assert response.status_code == 200
    assert b"<html" in response.content


@pytest.mark.parametrize("url", [*PAGES, "/inventory/import/"])
def test_every_page_renders_for_an_admin(admin_page, fleet, url):
    assert admin_page.get(url).status_code == 200


@pytest.mark.parametrize("url", PAGES)
def test_every_page_renders_on_an_empty_fleet(member_page, url):
    expected = 404 if url.startswith("/nodes/") and url != "/nodes/" else 200
    assert member_page.get(url).status_code == expected


def test_the_import_page_is_for_admins_only(member_page):
    response = member_page.get("/inventory/import/")

    assert response.status_code == 403  # the portal's 403 page, not the admin's sign-in


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_users_are_redirected_to_sign_in(fleet, url):
    response = Client().get(url)

    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={quote(url)}"


def test_anonymous_users_are_sent_to_a_sign_in_page_from_the_import_page():
    response = Client().get("/inventory/import/")

    assert response.status_code == 302
    # the portal's sign-in page (pool_admin_required), not the Django admin's
    assert response["Location"] == "/login/?next=/inventory/import/"


def test_the_sign_in_page_is_open():
    assert Client().get("/login/").status_code == 200


def test_node_detail_of_a_missing_host_is_404(member_page):
    assert member_page.get("/nodes/nope-01/").status_code == 404


def test_node_detail_shows_cards_and_mig_devices(member_page, fleet):
    response = member_page.get("/nodes/mig-01/")

    content = response.content.decode()
    assert "NVIDIA H100 80GB HBM3" in content or "H100 SXM5 80GB" in content
    assert "3g.40gb" in content


def test_node_detail_exports_its_cards_as_csv(member_page, fleet):
    response = member_page.get("/nodes/trn-02/", {"export": "csv"})

    assert response["Content-Type"].startswith("text/csv")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0].startswith("node,index,gpu_model,raw_model_name,uuid")
    assert [line.split(",")[:4] for line in lines[1:]] == [
        ["trn-02", "0", "a100_80g_sxm", "NVIDIA A100-SXM4-80GB"],
        ["trn-02", "1", "a100_80g_sxm", "NVIDIA A100-SXM4-80GB"],
        ["trn-02", "2", "", "v100"],
    ]


def test_the_fleet_overview_shows_the_totals(member_page, fleet):
    response = member_page.get("/")

    # trn-01 4 + trn-02 3 + mig-01 1 + l4-01 1 cards on 4 nodes; healthy: the up nodes
    # trn-01 and mig-01 (l4-01 came from `nvidia-smi -L`, which has no node state).
    assert response.context["totals"] == {
        "nodes": 4,
        "pools": 1,
        "cards": 9,
        "healthy": 5,
        "unrecognised": 1,
    }
    assert [r["raw_model_name"] for r in response.context["unrecognised"]] == ["v100"]


def test_the_fleet_overview_exports_csv(member_page, fleet):
    response = member_page.get("/", {"export": "csv"})

    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0] == (
        "pool,gpu_model,driver_group,node_state,cards,healthy_cards,mig_cards,mig_slices"
    )
    assert sorted(lines[1:]) == sorted(
        [  # no card in MIG mode
            "(no pool),H100 SXM5 80GB,R550,up,1,1,0,",
            "(no pool),L4,(unknown driver),unknown,1,0,0,",
            "Train,A100 SXM4 80GB,R550,up,4,4,0,",
            "Train,A100 SXM4 80GB,R535,drain,2,0,0,",
            "Train,? v100,R535,drain,1,0,0,",
        ]
    )


def test_the_pools_page_answers_the_cuda_question(member_page, fleet):
    response = member_page.get("/pools/", {"cuda": "12.4"})

    support = {
        row["pool"]: (row["capable_cards"], row["other_cards"])
        for row in response.context["support"]
    }
    # trn-01's 4 cards on 550.54.15 run 12.4; trn-02's 3 on 535.129.03 do not; mig-01 (550)
    # and l4-01 (no driver reported) have no pool.
    assert support == {"Train": (4, 3), "(no pool)": (1, 1)}


def test_the_pools_page_refuses_a_bad_cuda_version_with_a_field_error(member_page, fleet):
    response = member_page.get("/pools/", {"cuda": "abc"})

    assert response.status_code == 200
    assert response.context["support"] is None
    assert "MAJOR.MINOR" in response.content.decode()


def test_the_pools_page_htmx_fragment(member_page, fleet):
    response = member_page.get("/pools/", {"cuda": "12.4"}, headers={"HX-Request": "true"})

    assert b"<html" not in response.content
    assert "HX-Request" in response["Vary"]


def test_the_pools_page_links_each_pool_and_model_calendar(member_page, fleet):
    # QA defect 7: only driver-group calendars were linked. Train holds A100 SXM4 80GB cards
    # (trn-01's 4, trn-02's 2) and one unrecognised v100 (no model, no calendar); Spare has none.
    PoolFactory(slug="spare", name="Spare")
    html = member_page.get("/pools/").content.decode()
    links = re.findall(r'href="(/pools/[^"]+/calendar/)"', html)
    assert links == [reverse("pools:pool-calendar", args=["train", "a100_80g_sxm"])]
    assert "no cards" in html
