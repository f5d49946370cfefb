"""The timeline's named teams for a pool admin: the teams holding the most cards in the window,
ties by name, every other team's cards summed as one series (``team`` None)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from factories import AllocationFactory, PoolFactory, TeamFactory

from pools.capacity.selectors import TIMELINE_NAMED_TEAMS, timeline_holdings
from pools.inventory.models import GpuModel
from pools.tenancy.models import Team

pytestmark = pytest.mark.django_db


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, tzinfo=UTC)


def test_most_cards_named_the_tie_at_the_cut_by_name_the_rest_summed(pool_admin):
    assert TIMELINE_NAMED_TEAMS == 10
    pool, l40s = PoolFactory(slug="p"), GpuModel.objects.get(slug="l40s")
    # Teams 01..09 hold 20, 19, ..., 12 cards; teams 10, 11, 12 hold 5 each: the tenth name
    # goes to "Team 10" by name. Team 01 holds its 20 as 15 + 5 (two allocations).
    cards = {f"{i:02d}": 21 - i for i in range(1, 10)} | {"10": 5, "11": 5, "12": 5}
    for suffix, count in cards.items():
        team = TeamFactory(slug=f"t{suffix}", name=f"Team {suffix}")
        parts = [15, 5] if suffix == "01" else [count]
        for part in parts:
            AllocationFactory(team=team, pool=pool, gpu_model=l40s, card_count=part,
                              starts_at=at(7), ends_at=at(9), status="active")  # fmt: skip
    # outside the window: counts for no ranking
    late = TeamFactory(slug="t13", name="Team 13")
    AllocationFactory(team=late, pool=pool, gpu_model=l40s, card_count=50,
                      starts_at=at(20), ends_at=at(21), status="approved")  # fmt: skip

    series = timeline_holdings(
        user=pool_admin, start=at(7), end=at(9), instants=[at(7, 12), at(9, 12)]
    )

    held = {s.team: s.cards for s in series}
    expected = {f"Team {i:02d}": [21 - i, 0] for i in range(1, 10)}
    expected |= {"Team 10": [5, 0], None: [5 + 5, 0]}  # teams 11 and 12, summed
    assert held == expected


def test_a_team_keeps_its_colour_in_every_chart_of_the_page(
    client, team, team_member, infer_pool, train_pool
):
    """nlp's member: in Inference only vision holds cards ("other teams" alone); in Training
    nlp and vision do ("NLP", "other teams"). The page's teams, sorted, are NLP then "other
    teams": NLP takes the palette's first colour and "other teams" its second, in both charts
    (by position per chart, "other teams" was the first colour in Inference, NLP's colour)."""
    from datetime import timedelta

    from django.utils import timezone

    from pools.web.pages import PALETTE

    vision = TeamFactory(slug="vision", name="Vision")
    now = timezone.now()
    window = {"starts_at": now - timedelta(days=1), "ends_at": now + timedelta(days=3),
              "status": "active"}  # fmt: skip
    l40s, a100 = GpuModel.objects.get(slug="l40s"), GpuModel.objects.get(slug="a100_80g_sxm")
    AllocationFactory(team=vision, pool=infer_pool, gpu_model=l40s, card_count=2, **window)
    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=4, **window)
    AllocationFactory(team=vision, pool=train_pool, gpu_model=a100, card_count=2, **window)
    client.force_login(team_member)
    charts = client.get("/timeline/").context["charts"]
    colours = {
        chart["title"]: {d["label"]: d["backgroundColor"] for d in chart["data"]["datasets"]
                         if d["type"] == "bar"}
        for chart in charts
    }  # fmt: skip
    assert colours == {
        "Inference · L40S": {"other teams": PALETTE[1]},
        "Training · A100 SXM4 80GB": {"NLP": PALETTE[0], "other teams": PALETTE[1]},
    }


def test_the_csv_names_teams_by_slug_and_two_of_one_name_stay_two(admin_page, member, member_page):
    """Teams ``nlp-a`` and ``nlp-b``, both named "NLP", hold 2 and 1 L40S of pool ``p`` from a
    day ago to in 3 days: today's noon rows say 2 for nlp-a and 1 for nlp-b (by slug, as the
    requests' and allocations' CSVs; by name they were one "NLP" row), and the chart shows two
    "NLP" bars. A member of nlp-a sees nlp-b's card as "other teams"."""
    from datetime import timedelta

    from django.utils import timezone
    from factories import MembershipFactory, node_with_gpus

    from pools.common.choices import Scheduler

    pool = PoolFactory(slug="p", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node_with_gpus(8, gpu_model="l40s", hostname="p-0", pool=pool)
    l40s, now = GpuModel.objects.get(slug="l40s"), timezone.now()
    for slug, cards in (("nlp-a", 2), ("nlp-b", 1)):
        AllocationFactory(team=TeamFactory(slug=slug, name="NLP"), pool=pool, gpu_model=l40s,
                          card_count=cards, starts_at=now - timedelta(days=1),
                          ends_at=now + timedelta(days=3), status="active")  # fmt: skip
    today = timezone.localdate().isoformat()

    def today_rows(client):
        response = client.get("/timeline/?export=csv")
        rows = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
        return {r["team"]: r["cards_held_at_peak"] for r in rows if r["day"] == today}

    assert today_rows(admin_page) == {"nlp-a": "2", "nlp-b": "1"}
    [chart] = admin_page.get("/timeline/").context["charts"]
    bars = [d["label"] for d in chart["data"]["datasets"] if d["type"] == "bar"]
    assert bars[:2] == ["NLP", "NLP"]

    MembershipFactory(user=member, team=Team.objects.get(slug="nlp-a"))
    assert today_rows(member_page) == {"nlp-a": "2", "other teams": "1"}


def test_the_team_filter_names_that_team_alone_and_refuses_a_team_not_seen(
    admin_page, member, member_page
):
    """Teams ``nlp`` and ``vision`` hold 2 and 3 L40S of pool ``p`` from a day ago to in 3 days.
    ``?team=vision`` as a pool admin: today's noon rows are vision 3 and "other teams" 2 (nlp's;
    capacity is shared, the total stays 5) and only vision's allocation is listed; the same page
    unfiltered right before (the cache) names both. A member of nlp only: ``?team=vision`` is a
    400 saying why (page and CSV), ``?team=nlp`` lists nlp's. ``?team=`` was ignored."""
    from datetime import timedelta

    from django.utils import timezone
    from factories import MembershipFactory, node_with_gpus

    from pools.common.choices import Scheduler

    pool = PoolFactory(slug="p", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    node_with_gpus(8, gpu_model="l40s", hostname="p-0", pool=pool)
    l40s, now = GpuModel.objects.get(slug="l40s"), timezone.now()
    made = {}
    for slug, cards in (("nlp", 2), ("vision", 3)):
        made[slug] = AllocationFactory(
            team=TeamFactory(slug=slug, name=slug.upper()), pool=pool, gpu_model=l40s,
            card_count=cards, starts_at=now - timedelta(days=1),
            ends_at=now + timedelta(days=3), status="active",
        )  # fmt: skip
    today = timezone.localdate().isoformat()

    def today_rows(client, query=""):
        response = client.get(f"/timeline/?{query}export=csv")
        assert response.status_code == 200
        rows = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
        return {r["team"]: r["cards_held_at_peak"] for r in rows if r["day"] == today}

    assert today_rows(admin_page) == {"nlp": "2", "vision": "3"}
    assert today_rows(admin_page, "team=vision&") == {"vision": "3", "other teams": "2"}
    [chart] = admin_page.get("/timeline/?team=vision").context["charts"]
    assert [a.pk for a in chart["allocations"]] == [made["vision"].pk]
    assert chart["allocation_count"] == 1
    assert chart["all_url"].endswith("&team=vision")
    [chart] = admin_page.get("/timeline/").context["charts"]
    assert chart["allocation_count"] == 2

    MembershipFactory(user=member, team=Team.objects.get(slug="nlp"))
    refused = member_page.get("/timeline/?team=vision")
    assert refused.status_code == 400
    assert refused.context["refusal"] == 'Team "vision": No team you can see has this slug.'
    assert refused.context["charts"] == []
    assert "Cards held per day" not in refused.content.decode()  # no window to describe
    refused_csv = member_page.get("/timeline/?team=vision&export=csv")
    assert (refused_csv.status_code, refused_csv["Content-Type"]) == (
        400,
        "text/plain; charset=utf-8",
    )
    [chart] = member_page.get("/timeline/?team=nlp").context["charts"]
    assert [a.pk for a in chart["allocations"]] == [made["nlp"].pk]
