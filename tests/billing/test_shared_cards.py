"""Shared-card chargeback, pure (billing/shared_cards.py, billing.pricing.split_minor_units):
the tenants' shares plus the idle remainder are the card's amount, to the cent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from billing.pricing import card_hour_amount, split_minor_units
from billing.shared_cards import (
    CardOverShared,
    CardUse,
    card_split,
    replicas_fraction,
    utilisation_fraction,
)

NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)  # November: 30 × 86,400 = 2,592,000 s = 720 h


def at(day: int, seconds: int = 0) -> datetime:
    return datetime(2026, 11, day, tzinfo=UTC) + timedelta(seconds=seconds)


def ts(tenant: str, k: int, replicas: int, start: datetime, end: datetime) -> CardUse:
    return CardUse(tenant, "time-slicing", start, end, replicas_fraction(k, replicas))


def test_split_minor_units_thirds_odd_cent_to_the_first():
    # 1000 cents / 3 = 333.33 each: floors 333 × 3 = 999, 1 missing, remainders tie at 1/3,
    # weights tie → the first part gets it.
    thirds = [Fraction(1, 3)] * 3
    assert split_minor_units(Decimal("10.00"), thirds, "EUR") == [
        Decimal("3.34"), Decimal("3.33"), Decimal("3.33")]  # fmt: skip
    # JPY has no minor unit: 10 yen / 3 → 4, 3, 3
    assert split_minor_units(Decimal(10), thirds, "JPY") == [Decimal(4), Decimal(3), Decimal(3)]


def test_split_minor_units_refuses_weights_not_summing_to_one():
    with pytest.raises(ValueError, match="sum to 1"):
        split_minor_units(Decimal("1.00"), [Fraction(1, 2)], "EUR")


def test_three_tenants_with_idle_gaps_sum_to_the_card_hour():
    """An L40S time-sliced into R = 3 replicas, November 2026 at 8.00 EUR per card-hour.

    Card: 2,592,000 s = 720 card-h × 8.00 = 5,760.00 EUR = 576,000 cents.
    - alpha, 1 of 3 replicas, 1 Nov 00:00 → 13:53:20 (50,000 s) and 3 Nov 00:00 → 13:53:20
      (50,000 s), a gap of a day and more between: 100,000 s × 1/3 = 33,333.33 card-s;
      cents 33,333.33 × 800 / 3,600 = 7,407.407…
    - beta, 2 of 3 replicas, 3 Nov 00:00 → 13:53:20 beside alpha (the card full: 3 of 3):
      50,000 s × 2/3 = 33,333.33 card-s, the same 7,407.407… cents
    - gamma, 1 of 3, 10 Nov 00:00 → 07:30 (27,000 s): 9,000 card-s = 2,000 cents exactly
    - idle: 2,592,000 − 200,000/3 − 9,000 = 7,549,000/3 card-s = 2,516,333.33;
      cents 7,549,000/3 × 800/3,600 = 559,185.185…
    Floors 7,407 + 7,407 + 2,000 + 559,185 = 575,999: one cent missing. Remainders: alpha
    0.407, beta 0.407, gamma 0, idle 0.185 → alpha and beta tie on remainder and on share;
    alpha comes first in team order and gets it: 74.08, beta 74.07, gamma 20.00, idle 5,591.85.
    74.08 + 74.07 + 20.00 + 5,591.85 = 5,760.00.
    """
    uses = [
        ts("alpha", 1, 3, at(1), at(1, 50_000)),
        ts("alpha", 1, 3, at(3), at(3, 50_000)),
        ts("beta", 2, 3, at(3), at(3, 50_000)),
        ts("gamma", 1, 3, at(10), at(10, 27_000)),
    ]
    split = card_split(start=NOV, end=DEC, uses=uses, price_per_card_hour=Decimal("8.00"),
                       currency="EUR", order=["alpha", "beta", "gamma"])  # fmt: skip
    assert split.window_seconds == 2_592_000
    assert split.amount == Decimal("5760.00")
    got = [(p.tenant, p.card_seconds, p.amount) for p in split.parts]
    assert got == [
        ("alpha", Fraction(100_000, 3), Decimal("74.08")),
        ("beta", Fraction(100_000, 3), Decimal("74.07")),
        ("gamma", Fraction(9_000), Decimal("20.00")),
    ]
    assert split.idle_seconds == Fraction(7_549_000, 3)
    assert split.idle_amount == Decimal("5591.85")
    assert sum(p.amount for p in split.parts) + split.idle_amount == Decimal("5760.00")


def test_team_order_decides_the_tie_the_other_way():
    """The same month with beta listed first: beta's 74.08, alpha's 74.07 (tie → team order)."""
    uses = [ts("alpha", 1, 3, at(1), at(1, 100_000)), ts("beta", 2, 3, at(3), at(3, 50_000)),
            ts("gamma", 1, 3, at(10), at(10, 27_000))]  # fmt: skip
    split = card_split(start=NOV, end=DEC, uses=uses, price_per_card_hour=Decimal("8.00"),
                       currency="EUR", order=["beta", "alpha", "gamma"])  # fmt: skip
    assert [(p.tenant, p.amount) for p in split.parts] == [
        ("beta", Decimal("74.08")),
        ("alpha", Decimal("74.07")),
        ("gamma", Decimal("20.00")),
    ]


def test_mig_shared_card():
    """An A100 80GB, 7 compute slices, November at 2.00 EUR: 720 card-h = 1,440.00 EUR.
    alpha 3g.40gb (3/7) for 7 h = 3 card-h = 6.00; beta 2g.20gb (2/7) for 14 h = 4 card-h =
    8.00; idle 713 card-h = 1,426.00. 6.00 + 8.00 + 1,426.00 = 1,440.00."""
    uses = [
        CardUse("alpha", "mig", at(2), at(2, 7 * 3600), replicas_fraction(3, 7)),
        CardUse("beta", "mig", at(2), at(2, 14 * 3600), replicas_fraction(2, 7)),
    ]
    split = card_split(start=NOV, end=DEC, uses=uses, price_per_card_hour=Decimal("2.00"),
                       currency="EUR", order=["alpha", "beta"])  # fmt: skip
    assert [(p.tenant, p.card_seconds, p.amount) for p in split.parts] == [
        ("alpha", Fraction(3 * 3600), Decimal("6.00")),
        ("beta", Fraction(4 * 3600), Decimal("8.00")),
    ]
    assert (split.idle_seconds, split.idle_amount) == (Fraction(713 * 3600), Decimal("1426.00"))


def test_dcgm_utilisation_shares():
    """L40S at 8.00 EUR, November (5,760.00 EUR). DCGM per pod, 1 Nov 00:00 → 10:00 (36,000 s):
    alpha at 45 % = 16,200 card-s = 4.5 card-h = 36.00; beta at 30.5 % = 10,980 card-s =
    3.05 card-h = 24.40; idle 2,592,000 − 27,180 = 2,564,820 card-s = 712.45 card-h =
    5,699.60. 36.00 + 24.40 + 5,699.60 = 5,760.00."""
    uses = [
        CardUse("alpha", "dcgm-util", at(1), at(1, 36_000), utilisation_fraction(Decimal("45"))),
        CardUse("beta", "dcgm-util", at(1), at(1, 36_000), utilisation_fraction(Decimal("30.5"))),
    ]
    split = card_split(start=NOV, end=DEC, uses=uses, price_per_card_hour=Decimal("8.00"),
                       currency="EUR", order=["alpha", "beta"])  # fmt: skip
    assert [(p.card_seconds, p.amount) for p in split.parts] == [
        (Fraction(16_200), Decimal("36.00")), (Fraction(10_980), Decimal("24.40"))]  # fmt: skip
    assert (split.idle_seconds, split.idle_amount) == (Fraction(2_564_820), Decimal("5699.60"))


def test_more_than_the_card_is_refused():
    """4 of 3 replicas at once (alpha 2 + beta 2 from 1 Nov 05:00), or DCGM 60 % + 50 %."""
    uses = [ts("alpha", 2, 3, at(1), at(1, 36_000)), ts("beta", 2, 3, at(1, 18_000), at(2))]
    with pytest.raises(CardOverShared) as info:
        card_split(start=NOV, end=DEC, uses=uses, price_per_card_hour=Decimal(8), currency="EUR")
    assert (info.value.at, info.value.share) == (at(1, 18_000), Fraction(4, 3))
    util = [CardUse(t, "dcgm-util", at(1), at(2), utilisation_fraction(Decimal(p)))
            for t, p in (("alpha", 60), ("beta", 50))]  # fmt: skip
    with pytest.raises(CardOverShared):
        card_split(start=NOV, end=DEC, uses=util, price_per_card_hour=Decimal(8), currency="EUR")
    with pytest.raises(ValueError, match="replicas"):
        replicas_fraction(4, 3)
    with pytest.raises(ValueError, match="0-100"):
        utilisation_fraction(Decimal("100.5"))


@st.composite
def tenancies(draw):
    """A card with ``R`` replicas over one month: the month cut at random instants into slots;
    in each slot random tenants hold random replicas, never more than ``R`` in all."""
    replicas = draw(st.integers(1, 8))
    cuts = sorted(set(draw(st.lists(st.integers(1, 2_591_999), max_size=12))))
    points = [0, *cuts, 2_592_000]
    uses = []
    for a, b in zip(points, points[1:], strict=False):
        free = replicas
        for tenant in draw(st.lists(st.sampled_from("abcde"), max_size=4)):
            if free == 0:
                break
            k = draw(st.integers(1, free))
            free -= k
            uses.append(ts(tenant, k, replicas, NOV + timedelta(seconds=a),
                           NOV + timedelta(seconds=b)))  # fmt: skip
    price = draw(st.decimals(Decimal("0.01"), Decimal("50"), places=4))
    return uses, price


@settings(max_examples=200, deadline=None)
@given(tenancies(), st.sampled_from(["EUR", "JPY", "KWD"]))
def test_shares_plus_idle_are_the_card_hour(case, currency):
    """For random tenancies: card-seconds + idle = the month's seconds; amounts + idle amount
    = the card's amount (one rounding of 720 card-h × price); each within one minor unit of
    its exact share."""
    uses, price = case
    split = card_split(start=NOV, end=DEC, uses=uses, price_per_card_hour=price,
                       currency=currency)  # fmt: skip
    card = card_hour_amount(Decimal(2_592_000), price, currency)
    assert split.amount == card
    assert sum((p.card_seconds for p in split.parts), Fraction(0)) + split.idle_seconds == 2_592_000
    assert sum(p.amount for p in split.parts) + split.idle_amount == card
    unit = Fraction(Decimal(1).scaleb(-{"EUR": 2, "JPY": 0, "KWD": 3}[currency]))
    for part in split.parts:
        assert abs(Fraction(part.amount) - Fraction(card) * part.share) < unit
    assert abs(Fraction(split.idle_amount) - Fraction(card) * split.idle_share) < unit
