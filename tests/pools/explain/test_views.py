"""The explainer's pages: a request's explanation (fragment and page), the request form's live
panel with one-click alternatives, and the approval queue's "could approve now" column and
ordering."""

from __future__ import annotations

import re
from datetime import time, timedelta
from decimal import Decimal
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client
from django.utils import timezone
from factories import (
    AllocationFactory,
    BudgetFactory,
    CapacityRequestFactory,
    MembershipFactory,
    PoolFactory,
    RecurringReservationFactory,
    TeamFactory,
    next_week_9am,
    node_with_gpus,
)

from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    """Pool ``train-slurm``: 2 nodes × 8 A100 (16), 2 nodes × 8 H800 (16). Team vision holds
    12 A100 over next week → 4 A100 free. bob (nlp) asked for 8 A100 (cannot: 4 free) and for
    2 A100 (can)."""
    pool = PoolFactory(slug="train-slurm", name="Training", slurm_partition="train")
    for host in range(2):
        node_with_gpus(8, hostname=f"a100-{host}", pool=pool)
        node_with_gpus(8, gpu_model="h800_sxm", hostname=f"h800-{host}", pool=pool)
    start = next_week_9am()
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    AllocationFactory(team=TeamFactory(slug="vision", name="Vision"), pool=pool, gpu_model=a100,
                      card_count=12, starts_at=start - timedelta(days=1),
                      ends_at=start + timedelta(days=2))  # fmt: skip
    nlp = TeamFactory(slug="nlp", name="NLP")
    bob = MembershipFactory(team=nlp, user__username="bob").user
    asks = {
        cards: CapacityRequestFactory(
            team=nlp,
            requested_by=bob,
            pool=pool,
            workload_kind="training",
            gpu_model=a100,
            card_count=cards,
            starts_at=start,
            ends_at=start + timedelta(days=7),
        )  # fmt: skip
        for cards in (8, 2)
    }
    return {"pool": pool, "start": start, "bob": bob, "asks": asks}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_request_explanation_fragment_for_the_team(world):
    """8 asked, 4 free (16 − 12): not approvable; vision's name never shown to bob."""
    req = world["asks"][8]
    page = _client(world["bob"]).get(
        f"/requests/{req.pk}/explanation/", headers={"HX-Request": "true"}
    )
    html = page.content.decode()
    assert page.status_code == 200
    assert "cannot be approved as asked" in html and "only 4 of 16" in html
    assert "Vision" not in html and "vision" not in html
    assert "<html" not in html  # the fragment, not the page
    assert page["Vary"].count("HX-Request") == 1


def test_a_budget_left_to_a_pool_admin_is_not_why_not_when_it_can_be_approved(world):
    """2 A100 for 7 days = 2 × 168 = 336 card-hours > a 100 card-hour month budget that leaves
    it to a pool admin: 4 cards are free, so it can be approved now, and the budget, which does
    not block, is no longer listed under "Why not now" beside that verdict."""
    req = world["asks"][2]
    BudgetFactory(team=req.team, card_hours_limit=Decimal(100), enforcement="needs_admin")
    page = _client(world["bob"]).get(f"/requests/{req.pk}/explanation/")
    html = page.content.decode()
    assert "can be approved now" in html and "2 cards can be approved as asked." in html
    assert "a pool admin decides" in html
    assert "<h4>Not blocking</h4>" in html
    assert "Why not now" not in html

    blocked = _client(world["bob"]).get(f"/requests/{world['asks'][8].pk}/explanation/")
    assert "<h4>Why not now</h4>" in blocked.content.decode()


def test_request_explanation_is_404_for_another_team(world, other_member):
    req = world["asks"][8]
    assert _client(other_member).get(f"/requests/{req.pk}/explanation/").status_code == 404


def test_pool_admin_sees_who_holds(world, admin_page):
    html = admin_page.get(f"/requests/{world['asks'][8].pk}/explanation/").content.decode()
    assert "Vision" in html and "<html" in html


def test_form_panel_offers_alternatives_as_prefilled_links(world):
    """The form's fields for 8 A100 → panel warns; "Use this" on H800 (16 free) links to the
    form with gpu_model=h800_sxm and the other fields kept."""
    local = timezone.localtime(world["start"])
    fields = {
        "team": "nlp", "kind": "cards", "workload_kind": "training", "pool": "train-slurm",
        "gpu_model": "a100_80g_sxm", "card_count": "8",
        "starts_at": local.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (local + timedelta(days=7)).strftime("%Y-%m-%dT%H:%M"),
        "justification": "fine-tune",
    }  # fmt: skip
    page = _client(world["bob"]).get("/requests/explain/", fields, headers={"HX-Request": "true"})
    html = page.content.decode()
    assert 'role="alert"' in html and "cannot be approved as asked" in html
    href = next(
        re.search(r'href="([^"]+)"', part).group(1)
        for part in html.split("<a ")
        if 'class="explain-apply"' in part and 'data-kind="other_model"' in part
    )
    query = parse_qs(urlparse(href.replace("&amp;", "&")).query)
    assert query["gpu_model"] == ["h800_sxm"] and query["card_count"] == ["8"]
    assert query["team"] == ["nlp"] and query["justification"] == ["fine-tune"]
    filled = _client(world["bob"]).get(href.replace("&amp;", "&")).content.decode()
    assert 'value="h800_sxm" selected' in filled


def test_form_panel_for_more_cards_than_the_pool_has(world):
    """100 A100 from start + 3 d (vision's 12 have ended): all 16 are free and fewer than
    asked. The list of reasons starts each with a capital, as the budget's does; 100 H800,
    of which the pool has 16, are never free, so they are no alternative (they were offered as
    "never (the pool has 16 usable)"): the 16 A100 free now are."""
    local = timezone.localtime(world["start"] + timedelta(days=3))
    fields = {
        "team": "nlp", "kind": "cards", "workload_kind": "training", "pool": "train-slurm",
        "gpu_model": "a100_80g_sxm", "card_count": "100",
        "starts_at": local.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (local + timedelta(days=7)).strftime("%Y-%m-%dT%H:%M"),
    }  # fmt: skip
    html = _client(world["bob"]).get("/requests/explain/", fields).content.decode()

    assert (
        '<li data-code="free_cards">All 16 A100 SXM4 80GB cards in Training are free for the '
        "whole window, fewer than the 100 asked</li>"
    ) in html
    assert "H800" not in html
    assert '<li data-kind="fewer_cards">16 A100 SXM4 80GB in Training: 16 free, free now' in html


def test_form_panel_without_enough_fields_says_what_is_missing(world):
    html = _client(world["bob"]).get("/requests/explain/", {"team": "nlp"}).content.decode()
    assert "Fill in the team" in html


def test_form_panel_opened_directly_is_a_page_that_links_back_to_its_form(world):
    """Opened without htmx (a bookmarked or pasted panel URL) it is a page of the portal, with
    its stylesheet, and links back to the form with the same fields (the form's own, nothing
    else of the query); the panel's fragment has neither. With no field: the empty form."""
    fields = {"team": "nlp", "kind": "cards", "card_count": "8", "junk": "x"}
    client = _client(world["bob"])
    page = client.get("/requests/explain/", fields)
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html and "portal.css" in html
    assert page["Vary"].count("HX-Request") == 1
    link = re.search(r'<p class="explain-form-link"><a href="([^"]+)">([^<]+)</a>', html)
    assert link.group(2) == "Open these fields in the request form"
    href = urlparse(link.group(1).replace("&amp;", "&"))
    assert href.path == "/requests/new/"
    assert parse_qs(href.query) == {"team": ["nlp"], "kind": ["cards"], "card_count": ["8"]}
    fragment = client.get("/requests/explain/", fields, headers={"HX-Request": "true"})
    assert "<html" not in fragment.content.decode()
    assert "explain-form-link" not in fragment.content.decode()
    empty = client.get("/requests/explain/").content.decode()
    assert '<a href="/requests/new/">Open the request form</a>' in empty


def test_a_member_is_told_the_most_cards_the_team_holds_at_once(world, api_as):
    """nlp (bob's team) reserves 2 A100 every day 08:00–17:00 UTC on days 1–5 of the 7-day
    window of its 8-card ask; vision holds 12 until start + 2 d. nlp holds 2 at its peak (five
    occurrences, never two at once; their sum, 10, was said). At the peak 12 + 2 = 14 held;
    from start + 2 d only nlp's 2 → 14 free."""
    start = world["start"]
    RecurringReservationFactory(
        team=world["bob"].teams.get(), pool=world["pool"],
        gpu_model=GpuModel.objects.get(slug="a100_80g_sxm"), card_count=2, recurrence="daily",
        time_zone="UTC", first_date=start.date() + timedelta(days=1),
        last_date=start.date() + timedelta(days=5), start_time=time(8), end_time=time(17),
    )  # fmt: skip
    req = world["asks"][8]
    holders = api_as(world["bob"]).get(f"/api/v1/requests/{req.pk}/explanation/").json()["holders"]
    assert len(holders["own_allocations"]) == 5 and holders["own_held_peak"] == 2
    assert holders["held_peak"] == 14
    assert holders["text"].startswith("held by 1 other team; your team holds 2 at its peak; 14 ")
    html = _client(world["bob"]).get(f"/requests/{req.pk}/explanation/").content.decode()
    assert "your team holds 2 at its peak" in html


def test_queue_sorts_by_could_be_approved_now(world, admin_page):
    """The 2-card ask can be approved (4 free), the 8-card one cannot: ``approvable`` puts the
    2 first, ``-approvable`` the 8."""
    small, big = world["asks"][2].pk, world["asks"][8].pk
    first = admin_page.get("/requests/queue/?ordering=approvable").content.decode()
    assert first.index(f"#{small}<") < first.index(f"#{big}<")
    last = admin_page.get("/requests/queue/?ordering=-approvable").content.decode()
    assert last.index(f"#{big}<") < last.index(f"#{small}<")
    assert 'class="badge ok">yes' in first and 'class="badge down">no' in first


def test_pool_admin_sees_a_recurring_occurrence_as_the_reservation(world, admin_page):
    """A course of 4 A100 weekly from the window's first day: its occurrence is a row
    "Recurring #<id>", and the 8 asked find 0 free (16 − 12 − 4)."""
    start = world["start"]
    course = RecurringReservationFactory(
        team=TeamFactory(slug="course", name="Course"), pool=world["pool"],
        gpu_model=GpuModel.objects.get(slug="a100_80g_sxm"), card_count=4, recurrence="weekly",
        time_zone="UTC", first_date=start.date(), last_date=start.date(),
    )  # fmt: skip
    html = admin_page.get(f"/requests/{world['asks'][8].pk}/explanation/").content.decode()
    assert f"Recurring #{course.pk}" in html and "Course" in html
    assert "only 0 of 16" in html
