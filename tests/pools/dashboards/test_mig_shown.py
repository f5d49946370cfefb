"""Issue 38: pages and the API show whole cards and MIG slices apart — the admin dashboard (page
and CSV), the fleet overview (page and CSV), the pools page and
``GET /api/v1/pools/{slug}/capacity/``.

The fleet is ``tests/mig_nodes.py``'s (real GFD node objects of both strategies), by hand:
* A100 SXM4 80GB: 8 cards, 6 whole, 2 in MIG mode holding 9 × 1g.10gb + 2 × 2g.20gb = 11 slices;
* H100 NVL: 2 cards, 0 whole, 2 in MIG mode holding 14 × 1g.12gb.
"""

from __future__ import annotations

import csv
import io

import pytest
from mig_nodes import mig_fleet

from pools.inventory import selectors
from pools.inventory.models import MigDevice

pytestmark = pytest.mark.django_db


def _csv(response) -> list[dict[str, str]]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_the_dashboard_shows_usable_whole_cards_and_the_slices_apart(admin):
    mig_fleet()
    page = admin.get("/dashboard/").content.decode()
    assert "2 cards: 9 × 1g.10gb, 2 × 2g.20gb" in page
    assert "2 cards: 14 × 1g.12gb" in page
    rows = {
        (r["gpu_model"], r["driver_group"]): r
        for r in _csv(admin.get("/dashboard/?export=capacity"))
    }
    a100, nvl = rows[("A100 SXM4 80GB", "all")], rows[("H100 NVL", "all")]
    assert (a100["total"], a100["schedulable"], a100["usable"], a100["mig_cards"]) == (
        "8",
        "6",
        "6",
        "2",
    )
    assert a100["mig_slices"] == "9 × 1g.10gb, 2 × 2g.20gb"
    assert (nvl["total"], nvl["schedulable"], nvl["usable"], nvl["mig_cards"]) == (
        "2",
        "0",
        "0",
        "2",
    )


def test_the_fleet_overview_shows_cards_in_mig_mode_and_their_slices(admin):
    mig_fleet()
    rows = {r.gpu_model: r for r in selectors.fleet_summary()}
    a100, nvl = rows["A100 SXM4 80GB"], rows["H100 NVL"]
    assert (a100.cards, a100.healthy, a100.mig_cards) == (8, 8, 2)
    assert a100.mig_slices == {"1g.10gb": 9, "2g.20gb": 2}
    assert (nvl.cards, nvl.mig_cards, nvl.mig_slices) == (2, 2, {"1g.12gb": 14})
    page = admin.get("/").content.decode()
    assert "9 × 1g.10gb, 2 × 2g.20gb" in page
    [a100_line] = [r for r in _csv(admin.get("/?export=csv")) if r["gpu_model"] == "A100 SXM4 80GB"]
    assert (a100_line["mig_cards"], a100_line["mig_slices"]) == ("2", "9 × 1g.10gb, 2 × 2g.20gb")


def test_the_pool_capacity_api_gives_whole_cards_and_slices_per_profile(member_api):
    mig_fleet()
    response = member_api.get("/api/v1/pools/infer/capacity/")
    assert response.status_code == 200
    assert response.json() == [
        {
            "gpu_model": "a100_80g_sxm",
            "cards": 8,
            "whole_cards": 6,
            "mig_cards": 2,
            "mig_slices": [
                {"profile": "1g.10gb", "slices": 9},
                {"profile": "2g.20gb", "slices": 2},
            ],
        },
        {
            "gpu_model": "h100_nvl",
            "cards": 2,
            "whole_cards": 0,
            "mig_cards": 2,
            "mig_slices": [{"profile": "1g.12gb", "slices": 14}],
        },
    ]
    assert member_api.get("/api/v1/pools/nope/capacity/").status_code == 404


def test_slices_of_a_card_in_error_are_not_counted(member_api):
    """A card in error holds no schedulable slices: GPU 7 of a100-mixed (3 × 1g.10gb + 2 ×
    2g.20gb) in error leaves 6 × 1g.10gb on GPU 6."""
    mig_fleet()
    card = MigDevice.objects.filter(gpu__node__hostname="a100-mixed", gpu__index=7).first().gpu
    card.health = "error"
    card.save()
    [a100, _] = member_api.get("/api/v1/pools/infer/capacity/").json()
    assert (a100["whole_cards"], a100["mig_cards"]) == (6, 1)
    assert a100["mig_slices"] == [{"profile": "1g.10gb", "slices": 6}]


def test_the_pools_page_counts_the_cards_in_mig_mode(client, member):
    """Pool infer: 10 cards (8 A100 + 2 H100 NVL), 4 of them in MIG mode (A100 GPUs 6-7 and
    both H100 NVL)."""
    mig_fleet()
    client.force_login(member)
    [pool] = client.get("/pools/").context["pools"]
    assert (pool.gpu_count, pool.mig_gpu_count) == (10, 4)
