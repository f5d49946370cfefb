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
from pools.common.choices import AllocationStatus, PricingMethod
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
    assert "+8.000 card-h added · 64.00 EUR" in detail
    assert "−4.000 card-h released · 32.00 EUR" in detail
    assert "−2.000 card-h released · 16.00 EUR" in detail
    assert (
        "<strong>12.000 card-hours</strong> borrowed above the floor cost <strong>96.00 EUR"
        in detail
    )
    assert "released <strong>6.000 card-hours</strong> worth <strong>48.00 EUR" in detail
    listing = " ".join(admin_page.get("/elastic/").content.decode().split())
    assert "12.000 card-h<br><small>96.00 EUR</small>" in listing
    assert "cost <strong>96.00 EUR</strong> for 12.000 card-hours" in listing
    assert "released 6.000 card-hours worth <strong>48.00 EUR</strong>" in listing


def test_the_api_has_the_money(admin_api, policy, rates, at_now):
    week = admin_api.get(f"/api/v1/elastic-policies/{policy.pk}/").json()["scaling_last_7_days"]
    assert week == {
        "since": (NOW - timedelta(days=7)).isoformat(), "until": NOW.isoformat(),
        "burst_card_hours": "12.000", "burst_amount": "96.00", "released_card_hours": "6.000",
        "released_amount": "48.00", "currency": "EUR", "price_per_card_hour": "8",
        "burst_pools": [], "reason": None,
    }  # fmt: skip
    assert (
        admin_api.get("/api/v1/elastic-policies/").json()["results"][0]["scaling_last_7_days"]
        == week
    )
    events = admin_api.get("/api/v1/scale-events/", {"policy": policy.pk}).json()["results"]
    money = {e["action"] + str(e["cards_to"]): e["money"] for e in events}
    assert money["up6"] == {"cards": 4, "card_hours": "8.000", "amount": "64.00", "currency": "EUR"}
    assert money["down4"] == {
        "cards": -2,
        "card_hours": "4.000",
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


@pytest.fixture
def rented(db):
    from factories import PoolFactory

    from pools.common.choices import Scheduler

    return PoolFactory(slug="rented", name="Rented", scheduler=Scheduler.KUBERNETES,
                       slurm_partition="", burst=True)  # fmt: skip


@pytest.fixture
def spilling(team, infer_pool, l40s, rented):
    """Floor 2 from 08:00; 09:00 up to 6 (4 lent by home); 10:00 up to 10, the 4 more in the
    burst pool (home full); 12:00 down to 8 (2 burst-pool cards back first); 13:00 down to 4
    (the last 2 burst-pool cards and 2 home cards)."""
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                   starts_at=T0, ends_at=T0 + timedelta(hours=10),
                                   status=AllocationStatus.ACTIVE)  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=10, cards_held=4)
    changes = [(1, "up", 2, 6, 0), (2, "up", 6, 10, 4), (4, "down", 10, 8, 2),
               (5, "down", 8, 4, 0)]  # fmt: skip
    for hours, action, before, after, burst in changes:
        at = T0 + timedelta(hours=hours)
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=at, action=action,
                                  reason="test", cards_from=before, cards_to=after,
                                  burst_pool=rented if burst else None,
                                  burst_cards_to=burst)  # fmt: skip
    return ElasticPolicy.objects.select_related("allocation__gpu_model").get(pk=policy.pk)


@pytest.fixture
def rented_card(l40s, rented):
    """EUR: L40S reserved 8.00 / card-hour (no burst price: burst at 8.00); 2.90 in Rented."""
    return rate_card_create(
        name="rented", currency="EUR", effective_from=date(2026, 1, 1),
        gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")},
        pool_prices={(RateKind.POOL_BURST, rented.pk, l40s.pk): Decimal("2.90")},
    )  # fmt: skip


def test_burst_pool_cards_are_priced_at_the_burst_pools_price(spilling, rented_card):
    """Above the floor of 2: 09-10 4 cards, 10-12 8, 12-13 6, 13-14 2 = 4 + 16 + 6 + 2 = 28
    card-hours, of which in Rented 10-12 4 x 2 h + 12-13 2 x 1 h = 10 (29.00 EUR at 2.90) and
    at home 18 (144.00 EUR at 8.00): 173.00 EUR, not 28 x 8.00 = 224.00."""
    money = elastic_scale_costs(policies=[spilling], start=T0 - timedelta(days=7), now=NOW).get(
        spilling.pk
    )
    assert (money.burst_card_hours, money.burst_amount) == (Decimal(28), Decimal("173.00"))
    [pool] = money.burst_pools
    assert (pool.pool_slug, pool.card_hours, pool.price_per_card_hour) == (
        "rented", Decimal(10), Decimal("2.90"),
    )  # fmt: skip
    by_hour = {(e.decided_at - T0).total_seconds() / 3600: e.pk for e in spilling.events.all()}
    d = {h: money.decisions[by_hour[h]] for h in (1, 2, 4, 5)}
    # 09:00 +4 home x 1 h x 8.00 = 32.00; 10:00 +4 in Rented x 2 h x 2.90 = 23.20;
    # 12:00 -2 in Rented x 1 h = 5.80; 13:00 -2 in Rented and -2 home x 1 h (to now):
    # 2 x 2.90 + 2 x 8.00 = 21.80
    assert [(d[h].cards, d[h].card_hours, d[h].amount) for h in (1, 2, 4, 5)] == [
        (4, Decimal(4), Decimal("32.00")), (4, Decimal(8), Decimal("23.20")),
        (-2, Decimal(2), Decimal("5.80")), (-4, Decimal(4), Decimal("21.80")),
    ]  # fmt: skip
    # released: 2 + 4 card-hours, 5.80 + 21.80 EUR
    assert (money.released_card_hours, money.released_amount) == (Decimal(6), Decimal("27.60"))


def test_a_period_from_half_past_twelve_reads_the_burst_pool_of_the_change_before(
    spilling, rented_card
):
    """From 12:30 the 12:00 change (8 cards, 2 in Rented) opens the timeline: 12:30-13:00 6
    above the floor (1 card-hour of them in Rented), 13:00-14:00 2: 5 card-hours, 4 x 8.00 +
    1 x 2.90 = 34.90 EUR; released in the period: the 12:00 one's 2 Rented cards x 0.5 h
    (2.90) and the 13:00 one's 21.80: 5 card-hours, 24.70 EUR. The 12:00 decision's own money
    (2 Rented cards x 1 h = 5.80) comes whole."""
    money = elastic_scale_costs(
        policies=[spilling], start=T0 + timedelta(hours=4, minutes=30), now=NOW
    ).get(spilling.pk)
    assert (money.burst_card_hours, money.burst_amount) == (Decimal(5), Decimal("34.90"))
    assert (money.released_card_hours, money.released_amount) == (Decimal(5), Decimal("24.70"))
    noon = spilling.events.get(decided_at=T0 + timedelta(hours=4))
    assert money.decisions[noon.pk].amount == Decimal("5.80")


def test_a_burst_pool_without_a_price_leaves_the_money_unknown(spilling, l40s):
    rate_card_create(name="home only", currency="EUR", effective_from=date(2026, 1, 1),
                     gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")})  # fmt: skip
    money = elastic_scale_costs(policies=[spilling], start=T0, now=NOW).get(spilling.pk)
    assert money.burst_card_hours == Decimal(28) and money.burst_amount is None
    assert money.reason == "the rate card has no price for L40S in burst pool Rented"


def test_the_pages_and_the_api_price_burst_pool_cards_at_their_pool(
    admin_page, admin_api, spilling, rented_card, at_now
):
    detail = " ".join(admin_page.get(f"/elastic/{spilling.pk}/").content.decode().split())
    assert (
        "<strong>28.000 card-hours</strong> borrowed above the floor, 10.000 of them in burst "
        "pool Rented, cost <strong>173.00 EUR" in detail
    )
    assert "cards in burst pool Rented at its own price (2.90 EUR per card-hour)" in detail
    assert "+8.000 card-h added · 23.20 EUR" in detail
    listing = " ".join(admin_page.get("/elastic/").content.decode().split())
    assert "28.000 card-h<br><small>173.00 EUR</small>" in listing
    week = admin_api.get(f"/api/v1/elastic-policies/{spilling.pk}/").json()["scaling_last_7_days"]
    assert (week["burst_amount"], week["burst_pools"]) == (
        "173.00",
        [{"pool": "rented", "card_hours": "10.000", "price_per_card_hour": "2.9"}],
    )


def test_without_a_rate_card_burst_pool_cards_keep_their_hours(spilling):
    """No rate card in force (the demo before its billing data): the same 28 card-hours above
    the floor, 10 of them in Rented (the first test's figures), the money unknown; it raised
    KeyError on the pool's missing price and the elastic page answered 500."""
    money = elastic_scale_costs(policies=[spilling], start=T0, now=NOW).get(spilling.pk)
    assert (money.burst_card_hours, money.burst_amount) == (Decimal(28), None)
    [pool] = money.burst_pools
    assert (pool.card_hours, pool.price_per_card_hour) == (Decimal(10), None)
    assert money.reason == "no rate card is in force now"


def test_an_allocation_priced_on_use_pays_no_home_burst(spilling, rented_card, admin_page):
    """The same scaling priced on use: its statement charges the usage on the home burst cards
    as used, not as burst, so the 18 home card-hours above the floor cost 0 here; the 10 in
    Rented keep its price, 29.00 EUR. 09:00 +4 home: 0.00; 10:00 +4 in Rented × 2 h × 2.90 =
    23.20; 12:00 −2 in Rented × 1 h = 5.80; 13:00 −2 in Rented and −2 home × 1 h: 5.80."""
    spilling.allocation.pricing_method = PricingMethod.USED
    spilling.allocation.save()
    money = elastic_scale_costs(policies=[spilling], start=T0 - timedelta(days=7), now=NOW).get(
        spilling.pk
    )
    assert (money.on_use, money.price_per_card_hour) == (True, Decimal(0))
    assert (money.burst_card_hours, money.burst_amount) == (Decimal(28), Decimal("29.00"))
    by_hour = {(e.decided_at - T0).total_seconds() / 3600: e.pk for e in spilling.events.all()}
    assert [money.decisions[by_hour[h]].amount for h in (1, 2, 4, 5)] == [
        Decimal("0.00"), Decimal("23.20"), Decimal("5.80"), Decimal("5.80"),
    ]  # fmt: skip
    page = " ".join(admin_page.get(f"/elastic/{spilling.pk}/").content.decode().split())
    assert "Priced on use: cards borrowed at home cost nothing as burst" in page
    assert "at 0 for cards at home (priced on use" in page


def test_an_allocation_priced_by_tokens_pays_no_home_burst(spilling, rented_card, admin_page):
    """The same scaling priced by tokens: its tokens pay for its cards at home, so, as for one
    priced on use, the 18 home card-hours above the floor cost 0 here and the 10 in Rented keep
    its price, 29.00 EUR (before: 173.00, the first test's)."""
    spilling.allocation.pricing_method = PricingMethod.TOKENS
    spilling.allocation.save()
    money = elastic_scale_costs(policies=[spilling], start=T0 - timedelta(days=7), now=NOW).get(
        spilling.pk
    )
    assert (money.by_tokens, money.on_use, money.price_per_card_hour) == (True, False, Decimal(0))
    assert (money.burst_card_hours, money.burst_amount) == (Decimal(28), Decimal("29.00"))
    page = " ".join(admin_page.get(f"/elastic/{spilling.pk}/").content.decode().split())
    assert "Priced by tokens: cards borrowed at home cost nothing as burst" in page
    assert "at 0 for cards at home (priced by tokens" in page
