"""Every table of the pools, idle policies, My teams, approval queue and timeline pages has a
CSV export: the same rows, filters and order as the page, linked from the page."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    ExemptionFactory,
    MembershipFactory,
    PoolFactory,
    ReclamationPolicyFactory,
    TeamFactory,
    node_with_gpus,
)

from pools.common.choices import AllocationStatus, Scheduler
from pools.elastic.models import ElasticPolicy

pytestmark = pytest.mark.django_db


def _csv(response) -> list[dict]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_pools_and_driver_groups_export_their_tables(admin_page):
    """Two pools by name: ``Alpha`` with one node of 4 A100 (driver 550) and ``Beta`` empty."""
    alpha = PoolFactory(slug="alpha", name="Alpha", slurm_partition="gpu")
    PoolFactory(slug="beta", name="Beta", slurm_partition="beta")
    node_with_gpus(4, hostname="a-1", pool=alpha)
    page = admin_page.get("/pools/").content.decode()
    assert 'href="?export=csv" class="csv" data-pools-csv' in page
    assert 'href="?export=driver-groups" class="csv" data-driver-groups-csv' in page
    rows = _csv(admin_page.get("/pools/?export=csv"))
    assert [(r["pool"], r["slurm_partition"], r["nodes"], r["gpus"]) for r in rows] == [
        ("alpha", "gpu", "1", "4"),
        ("beta", "beta", "0", "0"),
    ]
    groups = _csv(admin_page.get("/pools/?export=driver-groups"))
    assert [(g["branch"], g["nodes"], g["gpus"]) for g in groups] == [("550", "1", "4")]


def test_reclamation_policies_and_exemptions_export(admin_page):
    """Pool ``a`` saved at 20 % in dry run, pool ``b`` on the defaults (30 %); one exemption."""
    a = PoolFactory(slug="a", name="A")
    PoolFactory(slug="b", name="B")
    ReclamationPolicyFactory(pool=a, idle_below_pct=Decimal("20"))
    assert "data-exemptions-csv" not in admin_page.get("/idle/policies/").content.decode()
    team = TeamFactory(slug="nlp")
    ExemptionFactory(team=team, allocation=None, reason="=HYPERLINK(x)",
                     expires_at=timezone.now() + timedelta(days=2))  # fmt: skip
    page = admin_page.get("/idle/policies/").content.decode()
    assert 'href="?export=policies"' in page and 'href="?export=exemptions"' in page
    rows = _csv(admin_page.get("/idle/policies/?export=policies"))
    assert [(r["pool"], r["saved"], r["idle_below_pct"]) for r in rows] == [
        ("a", "True", "20"),
        ("b", "False", "30"),
    ]
    exemptions = _csv(admin_page.get("/idle/policies/?export=exemptions"))
    assert [(e["team"], e["reason"]) for e in exemptions] == [("nlp", "'=HYPERLINK(x)")]


@pytest.fixture
def elastic_allocation(member):
    """An elastic allocation of the member's team: floor 2, holding 5, ceiling 6, active for
    one more day of a two-day window."""
    team = TeamFactory(slug="chat", name="Chat")
    MembershipFactory(team=team, user=member)
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node_with_gpus(8, gpu_model="l40s", hostname="inf-0", pool=pool,
                   scheduler=Scheduler.KUBERNETES)  # fmt: skip
    now = timezone.now()
    allocation = AllocationFactory(pool=pool, team=team, card_count=2,
                                   status=AllocationStatus.ACTIVE,
                                   starts_at=now - timedelta(days=1),
                                   ends_at=now + timedelta(days=1))  # fmt: skip
    ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=5)
    return allocation


def test_my_teams_shows_an_elastic_allocations_cards_held_not_its_floor(
    member_page, elastic_allocation
):
    """The allocation's row said 2 (its floor); it holds 5 now, between floor 2 and ceiling 6."""
    page = member_page.get("/teams/mine/")
    text = " ".join(page.content.decode().split())
    assert (
        '<td class="num">5<small class="muted" style="display:block" data-elastic>floor 2 · '
        "ceiling 6</small></td>" in text
    )
    rows = _csv(member_page.get("/teams/mine/?export=allocations"))
    assert [
        (r["allocation"], r["cards"], r["elastic_floor"], r["elastic_ceiling"]) for r in rows
    ] == [(str(elastic_allocation.pk), "5", "2", "6")]
    # the floor's card-hours: 2 cards x 48 h window, 2 x 24 h so far (within a minute of now)
    assert rows[0]["window_card_hours"] == "96.000"
    held = Decimal(rows[0]["held_card_hours"])
    assert Decimal("47.95") <= held <= Decimal("48.05")


def test_my_teams_exports_its_tables_and_links_them(member_page, elastic_allocation):
    other = AllocationFactory(card_count=1)  # another team's: not the member's
    page = member_page.get("/teams/mine/").content.decode()
    assert 'href="?export=allocations"' in page and 'href="?export=requests"' in page
    rows = _csv(member_page.get("/teams/mine/?export=allocations"))
    assert str(other.pk) not in {r["allocation"] for r in rows}
    requests = _csv(member_page.get("/teams/mine/?export=requests"))
    assert [(r["request"], r["team"], r["cards"]) for r in requests] == [
        (str(elastic_allocation.request_id), "chat", "2")
    ]


def test_the_approval_queue_exports_in_the_pages_order(admin_page):
    """Three submitted requests of 1, 3 and 2 cards; sorted by cards, largest first."""
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node_with_gpus(4, gpu_model="l40s", hostname="inf-0", pool=pool,
                   scheduler=Scheduler.KUBERNETES)  # fmt: skip
    made = {n: CapacityRequestFactory(pool=pool, card_count=n) for n in (1, 3, 2)}
    page = admin_page.get("/requests/queue/?ordering=-card_count").content.decode()
    assert 'href="?ordering=-card_count&amp;export=csv"' in page
    rows = _csv(admin_page.get("/requests/queue/?ordering=-card_count&export=csv"))
    assert [(r["request"], r["cards"], r["free_in_pool"]) for r in rows] == [
        (str(made[3].pk), "3", "4"),
        (str(made[2].pk), "2", "4"),
        (str(made[1].pk), "1", "4"),
    ]
    assert {r["could_approve_now"] for r in rows} == {"True"}


def test_the_timeline_exports_each_days_cards(member_page, elastic_allocation):
    """The member's allocation holds 2 cards (its floor: the timeline counts allocations' cards)
    today and tomorrow's noon only if it still runs then; 8 L40S are usable."""
    page = member_page.get("/timeline/").content.decode()
    assert 'href="?export=csv" class="csv" data-timeline-csv' in page
    rows = _csv(member_page.get("/timeline/?export=csv"))
    assert len(rows) == 56  # one team, one pool x model, 56 days
    assert {(r["pool"], r["gpu_model"], r["team"], r["usable_cards"]) for r in rows} == {
        ("infer", "l40s", "chat", "8")  # the team by slug, as the allocations' CSV
    }
    assert sum(int(r["cards_held_at_peak"]) for r in rows) in (2, 4)
