"""Elastic scaling money (issue #37): each decision's card-hours added or released and their
cost, and the period's burst and released totals, priced as the statement's burst line (the
reserved price when the card has no burst price). Expected figures worked by hand."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from factories import AllocationFactory
from kit import utc

from billing.choices import RateKind
from billing.elastic_costs import elastic_scale_costs
from billing.services.rates import rate_card_create
from pools.choices import AllocationStatus
from pools.elastic.models import ElasticPolicy, ScaleEvent

pytestmark = pytest.mark.django_db

T0 = utc(2026, 10, 5, 8)  # window 08:00 - 18:00 on 5 Oct, floor 2 cards
NOW = T0 + timedelta(hours=6)  # 14:00


@pytest.fixture
def policy(team, infer_pool, l40s):
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                   starts_at=T0, ends_at=T0 + timedelta(hours=10),
                                   status=AllocationStatus.ACTIVE)  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2)
    # up 2 -> 6 at 09:00, a hold at 10:00, down 6 -> 4 at 11:00, down 4 -> 2 at 13:00,
    # and an up decided at 13:30 that only takes effect at 15:00 (after now)
    for hours, action, before, after in [(1, "up", 2, 6), (2, "hold", 6, 6), (3, "down", 6, 4),
                                         (5, "down", 4, 2), (5.5, "up", 2, 4)]:  # fmt: skip
        at = T0 + timedelta(hours=hours)
        effective = T0 + timedelta(hours=7) if hours == 5.5 else at
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=effective,
                                  action=action, reason="test", cards_from=before,
                                  cards_to=after)  # fmt: skip
    return ElasticPolicy.objects.select_related("allocation__gpu_model").get(pk=policy.pk)


def _events(policy):
    """Event id by the hour after 08:00 it was decided at (1, 3, 5, 5.5)."""
    return {(e.decided_at - T0).total_seconds() / 3600: e.pk for e in policy.events.all()}


def test_each_decision_and_the_week_at_the_reserved_price(policy, rates):
    costs = elastic_scale_costs(policies=[policy], start=NOW - timedelta(days=7), now=NOW)
    money = costs.get(policy.pk)
    ids = _events(policy)
    up, down_4, down_2, later = (money.decisions[ids[k]] for k in (1, 3, 5, 5.5))
    # +4 cards 09:00-11:00 = 8 card-hours x 8.00 EUR (L40S reserved; no burst price) = 64.00
    assert (up.cards, up.card_hours, up.amount, up.currency) == (
        4,
        Decimal(8),
        Decimal("64.00"),
        "EUR",
    )
    # -2 cards 11:00-13:00 = 4 card-hours released = 32.00; -2 cards 13:00-14:00 (now) = 2 = 16.00
    assert (down_4.cards, down_4.card_hours, down_4.amount) == (-2, Decimal(4), Decimal("32.00"))
    assert (down_2.cards, down_2.card_hours, down_2.amount) == (-2, Decimal(2), Decimal("16.00"))
    assert (later.cards, later.card_hours, later.amount) == (2, Decimal(0), Decimal("0.00"))
    # burst above the floor of 2: 4 cards x 2 h + 2 cards x 2 h = 12 card-hours = 96.00 EUR;
    # released: 4 + 2 = 6 card-hours = 48.00 EUR
    assert (money.burst_card_hours, money.burst_amount) == (Decimal(12), Decimal("96.00"))
    assert (money.released_card_hours, money.released_amount) == (Decimal(6), Decimal("48.00"))
    assert (costs.burst_amount_text, costs.released_amount_text) == (
        "96.00\u00a0EUR", "48.00\u00a0EUR",
    )  # fmt: skip


def test_a_period_starting_at_noon_clips_burst_and_releases(policy, rates):
    money = elastic_scale_costs(policies=[policy], start=T0 + timedelta(hours=4), now=NOW).get(
        policy.pk
    )
    # 12:00-13:00 at 4 cards: 2 above the floor x 1 h = 2 card-hours = 16.00 EUR
    assert (money.burst_card_hours, money.burst_amount) == (Decimal(2), Decimal("16.00"))
    # the 11:00 release counts 12:00-13:00 (2 cards x 1 h) and the 13:00 one 13:00-14:00: 4
    assert (money.released_card_hours, money.released_amount) == (Decimal(4), Decimal("32.00"))
    # only the changes from the period's start, and the last one before it (11:00), are read:
    # the 11:00 release's own card-hours are not clipped to the period (2 cards x 2 h = 4)
    ids = _events(policy)
    assert set(money.decisions) == {ids[3], ids[5], ids[5.5]}
    assert (money.decisions[ids[3]].cards, money.decisions[ids[3]].card_hours) == (-2, Decimal(4))
    assert (money.decisions[ids[5]].cards, money.decisions[ids[5]].card_hours) == (-2, Decimal(2))


def test_an_earlier_since_prices_older_decisions(policy, rates):
    """A page listing the 09:00 up asks from then: its own card-hours (4 cards x 2 h) come
    whole, while the period's sums stay those from noon."""
    money = elastic_scale_costs(policies=[policy], start=T0 + timedelta(hours=4), now=NOW,
                                since=T0 + timedelta(hours=1)).get(policy.pk)  # fmt: skip
    up = money.decisions[_events(policy)[1]]
    assert (up.cards, up.card_hours, up.amount) == (4, Decimal(8), Decimal("64.00"))
    assert (money.burst_card_hours, money.released_card_hours) == (Decimal(2), Decimal(4))


def test_a_burst_price_on_the_card_wins(policy, l40s):
    rate_card_create(name="burst", currency="EUR", effective_from=date(2026, 1, 1),
                     gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00"),
                                 (l40s.pk, RateKind.GPU_BURST): Decimal("5.00")})  # fmt: skip
    money = elastic_scale_costs(policies=[policy], start=T0, now=NOW).get(policy.pk)
    assert money.price_per_card_hour == Decimal("5.00")
    assert (money.burst_amount, money.released_amount) == (Decimal("60.00"), Decimal("30.00"))


def test_without_a_rate_card_the_card_hours_stay_and_the_money_is_unknown(policy):
    costs = elastic_scale_costs(policies=[policy], start=T0, now=NOW)
    money = costs.get(policy.pk)
    assert money.burst_card_hours == Decimal(12) and money.burst_amount is None
    assert money.reason == "no rate card is in force now"
    assert (costs.burst_amount, costs.unpriced) == (None, 1)


@pytest.fixture
def at_now(monkeypatch):
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


def test_the_pages_show_each_decision_and_the_week(admin_page, policy, rates, at_now):
    """(Whitespace joined: the money format's no-break space reads as a space.)"""
    detail = " ".join(admin_page.get(f"/elastic/{policy.pk}/").content.decode().split())
    assert "+8.00 card-h added · 64.00 EUR" in detail
    assert "−4.00 card-h released · 32.00 EUR" in detail
    assert "−2.00 card-h released · 16.00 EUR" in detail
    assert (
        "<strong>12.00 card-hours</strong> borrowed above the floor cost <strong>96.00 EUR"
        in detail
    )
    assert "released <strong>6.00 card-hours</strong> worth <strong>48.00 EUR" in detail
    listing = " ".join(admin_page.get("/elastic/").content.decode().split())
    assert "12.00 card-h<br><small>96.00 EUR</small>" in listing
    assert "cost <strong>96.00 EUR</strong> for 12.00 card-hours" in listing
    assert "released 6.00 card-hours worth <strong>48.00 EUR</strong>" in listing


def test_the_api_has_the_money(admin_api, policy, rates, at_now):
    week = admin_api.get(f"/api/v1/elastic-policies/{policy.pk}/").json()["scaling_last_7_days"]
    assert week == {
        "since": (NOW - timedelta(days=7)).isoformat(), "until": NOW.isoformat(),
        "burst_card_hours": "12.00", "burst_amount": "96.00", "released_card_hours": "6.00",
        "released_amount": "48.00", "currency": "EUR", "price_per_card_hour": "8",
        "reason": None,
    }  # fmt: skip
    assert (
        admin_api.get("/api/v1/elastic-policies/").json()["results"][0]["scaling_last_7_days"]
        == week
    )
    events = admin_api.get("/api/v1/scale-events/", {"policy": policy.pk}).json()["results"]
    money = {e["action"] + str(e["cards_to"]): e["money"] for e in events}
    assert money["up6"] == {"cards": 4, "card_hours": "8.00", "amount": "64.00", "currency": "EUR"}
    assert money["down4"] == {
        "cards": -2,
        "card_hours": "4.00",
        "amount": "32.00",
        "currency": "EUR",
    }
    assert money["hold6"] is None


def test_queries_do_not_grow_with_the_policies(policy, rates, team, infer_pool, l40s):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count():
        policies = ElasticPolicy.objects.select_related("allocation__gpu_model")
        with CaptureQueriesContext(connection) as queries:
            elastic_scale_costs(policies=list(policies), start=T0, now=NOW)
        return len(queries)

    one = count()
    other = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=1,
                              starts_at=T0, ends_at=NOW,
                              status=AllocationStatus.ACTIVE)  # fmt: skip
    second = ElasticPolicy.objects.create(allocation=other, ceiling_cards=3, cards_held=1)
    ScaleEvent.objects.create(policy=second, decided_at=T0, effective_at=T0, action="up",
                              reason="test", cards_from=1, cards_to=3)  # fmt: skip
    assert count() == one
