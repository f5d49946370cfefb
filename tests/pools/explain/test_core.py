"""The explainer's pure core over hand-made facts: every number worked out in the docstring."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from pools.capacity.placement import NodeGroup, Shape
from pools.explain.core import (
    Ask,
    BudgetFacts,
    CardCounts,
    HoldFacts,
    ModelFacts,
    OptionFacts,
    TeamCeiling,
    Viewer,
    _window_peaks,
    earliest_start,
    explain,
    stamp,
)

T0 = datetime(2027, 1, 11, 9, tzinfo=UTC)
DAY = timedelta(days=1)
A100 = ModelFacts("a100", "A100", Decimal(80), "datacentre")
H800 = ModelFacts("h800", "H800", Decimal(80), "datacentre")
L40S = ModelFacts("l40s", "L40S", Decimal(45), "datacentre")
RTX = ModelFacts("rtx", "RTX 4090", Decimal(24), "consumer")


def hold(pk, team, cards, start_day, end_day, placed=()):
    return HoldFacts(pk, team, team.title(), cards, T0 + start_day * DAY, T0 + end_day * DAY,
                     placed)  # fmt: skip


def option(model=A100, *, usable=48, holds=(), pool="train", groups=None, price=None, **counts):
    return OptionFacts(
        pool_slug=pool,
        pool_name=pool.title(),
        scheduler="slurm",
        overcommit_ratio=Decimal("1.00"),
        model=model,
        cards=CardCounts(schedulable=usable, on_driver=usable, **counts),
        holds=tuple(holds),
        groups=groups,
        price_per_card_hour=price,
        currency="EUR" if price is not None else None,
    )


MODELS = {
    m.slug: m
    for m in (A100, H800, L40S, RTX, ModelFacts("h100", "H100", Decimal("79.65"), "datacentre"))
}


def ask(cards, *, model="a100", pool="train", days=7, shape=None, **fields):
    return Ask(
        team_slug="bob-team",
        workload_kind="training",
        scheduler="slurm",
        cards=cards,
        start=T0,
        end=T0 + days * DAY,
        pool_slug=pool,
        pool_name=pool.title() if pool else None,
        pool_scheduler="slurm" if pool else None,
        model_slug=model,
        model_name=model.upper() if model else None,
        model_memory_gib=MODELS[model].memory_gib if model else None,
        model_card_class=MODELS[model].card_class if model else None,
        shape=shape,
        **fields,
    )


MEMBER = Viewer(pool_admin=False)
ADMIN = Viewer(pool_admin=True)


def test_window_peaks_slide_over_the_step_function():
    """Holds: 8 cards [0, 2), 8 cards [0, 3), 4 cards [1, 5) (days). Held: 16 on [0, 1),
    20 on [1, 2), 12 on [2, 3), 4 on [3, 5), 0 after. 2-day windows from 0, 2, 3, 5:
    [0, 2) → 20; [2, 4) → 12; [3, 5) → 4; [5, 7) → 0."""
    opt = option(holds=[hold(1, "a", 8, 0, 2), hold(2, "b", 8, 0, 3), hold(3, "c", 4, 1, 5)])
    starts = [T0, T0 + 2 * DAY, T0 + 3 * DAY, T0 + 5 * DAY]
    assert list(_window_peaks(opt, starts, 2 * DAY)) == [20, 12, 4, 0]
    assert [opt.peak(c, c + 2 * DAY) for c in starts] == [20, 12, 4, 0]
    assert opt.peak(T0 - DAY, T0) == 0 and opt.peak(T0 + DAY, T0 + DAY + DAY / 2) == 20


def test_earliest_start_is_an_allocation_end_where_the_count_fits():
    """48 usable; 8 until day 2, 8 until day 3, 4 until day 5. 40 for 7 days needs ≤ 8
    held over the whole window: from day 2 held is 12 (8 + 4) → 36 free, no; from day 3 held
    is 4 → 44 free: day 3."""
    opt = option(holds=[hold(1, "a", 8, -1, 2), hold(2, "b", 8, -1, 3), hold(3, "c", 4, -1, 5)])
    at = earliest_start(opt, cards=40, shape=None, start=T0, length=7 * DAY)
    assert at == T0 + 3 * DAY
    assert earliest_start(opt, cards=49, shape=None, start=T0, length=DAY) is None


def test_bob_free_cards_reason_names_held_and_down_cards():
    """48 usable, 20 held (8 + 8 + 4 by three teams) → 28 free of 48; 16 down or drained
    (8 down + 8 drained) are named apart. Asked 40: not approvable, reason free_cards."""
    opt = option(
        holds=[hold(1, "vision", 8, -1, 2), hold(2, "speech", 8, -1, 3),
               hold(3, "robotics", 4, -1, 5)],
        down=8, drained=8,
    )  # fmt: skip
    answer = explain(ask(40), [opt], viewer=MEMBER)
    assert answer.approvable_now is False
    (reason,) = answer.why_not
    assert reason.code == "free_cards"
    assert reason.data["free"] == 28 and reason.data["usable"] == 48
    assert reason.data["held_peak"] == 20 and reason.data["down_or_drained"] == 16
    assert "only 28 of 48 A100 cards" in reason.text and "3 teams" in reason.text
    assert answer.when[0]["earliest_start"] == T0 + 3 * DAY


def test_member_sees_counts_and_ends_never_other_teams():
    """Member view: three other teams, their ends; frees: at day 2, 8 more → 36; at day 3,
    8 more → 44; at day 5, 4 more → 48."""
    opt = option(holds=[hold(90011, "vision", 8, -1, 2), hold(90012, "speech", 8, -1, 3),
                        hold(90013, "robotics", 4, -1, 5)])  # fmt: skip
    holders = explain(ask(40), [opt], viewer=MEMBER).as_dict()["holders"]
    assert holders["other_teams"] == 3
    assert [e["cards"] for e in holders["other_ends"]] == [8, 8, 4]
    assert [(f["at"], f["free"]) for f in holders["frees"]] == [
        ("2027-01-13T09:00:00Z", 36),
        ("2027-01-14T09:00:00Z", 44),
        ("2027-01-16T09:00:00Z", 48),
    ]
    text = repr(holders)
    for secret in ("vision", "Vision", "speech", "robotics", "90011", "90012", "90013"):
        assert secret not in text
    assert "allocations" not in holders
    assert holders["text"] == "held by 3 other teams; 36 free from 13 Jan 2027 09:00 UTC"


def test_pool_admin_sees_teams_and_allocations():
    opt = option(holds=[hold(11, "vision", 8, -1, 2), hold(12, "speech", 8, -1, 3)])
    holders = explain(ask(40), [opt], viewer=ADMIN).as_dict()["holders"]
    assert [(a["allocation"], a["team"], a["cards"]) for a in holders["allocations"]] == [
        (11, "vision", 8),
        (12, "speech", 8),
    ]


def test_other_model_of_the_same_class_and_memory_is_offered_with_its_price():
    """H800 (80 GiB, data-centre) qualifies for an A100 80 GiB ask; L40S (45 GiB) and the
    consumer RTX do not. 40 H800 free; price 2.50 EUR × 40 cards × 168 h = 16,800.00 EUR."""
    a100 = option(holds=[hold(1, "vision", 20, -1, 3)])
    h800 = option(H800, usable=40, price=Decimal("2.50"))
    others = [option(L40S, usable=64), option(RTX, usable=64)]
    answer = explain(ask(40), [a100, h800, *others], viewer=MEMBER)
    first = answer.where_instead[0]
    assert (first["kind"], first["gpu_model"], first["free"], first["fits_now"]) == (
        "other_model", "h800", 40, True,
    )  # fmt: skip
    assert first["price"]["window_total"] == Decimal("16800.00")
    # grouped as every page groups money (the budget reason beside it reads "1 535.74")
    assert first["text"].endswith(", 16\u202f800.00 EUR for the window")
    assert first["prefill"] == {"pool": "train", "gpu_model": "h800", "card_count": 40,
                                "cards_per_node": None, "node_count": None}  # fmt: skip
    assert {r["gpu_model"] for r in answer.where_instead} <= {"h800", "a100"}


def test_shape_that_fits_only_later_and_its_split():
    """Two 8-card nodes in one NVLink domain each; placed holds: n1 GPUs 0–3 until day 3,
    n2 GPUs 0–3 until day 5. 1 node × 8 (one domain): 8 cards free in count, no node has 8
    → refused now; earliest day 3 (n1 whole). Split 2 nodes × 4 fits now."""
    domain = (frozenset(range(8)),)
    groups = (NodeGroup(("n1", "n2"), frozenset(range(8)), domain),)
    opt = option(
        usable=16,
        groups=groups,
        holds=[hold(1, "x", 4, -1, 3, (("n1", 0b1111),)), hold(2, "y", 4, -1, 5,
                                                             (("n2", 0b1111),))],
    )  # fmt: skip
    shape = Shape(cards_per_node=8, nodes=1, one_nvlink_domain=True)
    answer = explain(ask(8, shape=shape), [opt], viewer=MEMBER)
    assert [r.code for r in answer.why_not] == ["shape"]
    assert answer.when[0]["earliest_start"] == T0 + 3 * DAY
    split = next(r for r in answer.where_instead if r["kind"] == "split_shape")
    assert split["shape"] == "2 nodes × 4 cards each, one NVLink domain"
    assert split["fits_now"] is True


def test_reasons_come_in_order_budget_blocks_and_ceiling():
    """Budget refuse blocks; the ceiling of 10 with 6 held blocks a 8-card ask (6 + 8 > 10);
    reasons in the order eligibility, budget, free cards, shape, ceiling."""
    opt = option(usable=8, holds=[hold(1, "x", 4, -1, 3)])
    answer = explain(
        ask(8),
        [opt],
        viewer=MEMBER,
        budget=BudgetFacts("refuse", "over the monthly 100 card-hours"),
        ceiling=TeamCeiling(cards=10, held_peak=6),
    )
    assert [r.code for r in answer.why_not] == ["budget", "free_cards", "ceiling"]
    assert answer.approvable_now is False
    warn = explain(ask(4), [opt], viewer=MEMBER, budget=BudgetFacts("warn", "near"))
    assert warn.approvable_now is True and [r.code for r in warn.why_not] == ["budget"]


def test_summary_names_what_blocks_not_a_budget_left_to_an_admin():
    """12 cards of 8 usable, and a budget that leaves it to a pool admin (it does not block):
    the summary names the free cards, which block, not the budget, which comes first in
    why_not (QA: a 64-card dry run read "Cannot be approved as asked: Beyond the month budget
    … a pool admin decides", while the pool has 48 cards)."""
    said = "Beyond the month budget of NLP: a pool admin decides."
    answer = explain(ask(12), [option(usable=8)], viewer=MEMBER,
                     budget=BudgetFacts("needs_admin", said))  # fmt: skip
    assert answer.approvable_now is False
    assert [r.code for r in answer.why_not][:2] == ["budget", "free_cards"]
    free_cards = answer.why_not[1].text
    assert answer.summary.startswith(f"Cannot be approved as asked: {free_cards}.")
    assert "budget" not in answer.summary


@pytest.mark.parametrize(("cards", "said"), [(1, "1 card can"), (2, "2 cards can")])
def test_an_approvable_summary_counts_its_cards_in_words(cards, said):
    """One card is "1 card" (the request form read "1 cards can be approved as asked.")."""
    answer = explain(ask(cards), [option(usable=8)], viewer=MEMBER)
    assert answer.approvable_now is True
    assert answer.summary == f"{said} be approved as asked."


def test_summary_ends_each_sentence_once():
    """The budget check's message is a sentence of its own ("… card-hours: refused."): the
    summary puts no second full stop after it (QA saw "decides.. Instead:" on the demo)."""
    opt = option(usable=8)
    said = "Beyond the month budget of NLP: 900 + 10 > 898.00 card-hours: refused."
    answer = explain(ask(4), [opt], viewer=MEMBER, budget=BudgetFacts("refuse", said))
    assert answer.summary.startswith(f"Cannot be approved as asked: {said}")
    assert ".." not in answer.summary


def test_model_no_pool_has_points_to_growth_and_the_model_that_is_there():
    """alice: 8 H100 in train, which has no H100 (only H800): reason model, alternatives
    H800 (80 ≥ 79.65 GiB) and capacity to add."""
    h800 = option(H800, usable=40)
    answer = explain(ask(8, model="h100"), [h800], viewer=MEMBER)
    assert [r.code for r in answer.why_not] == ["model"]
    kinds = [(r["kind"], r["gpu_model"]) for r in answer.where_instead]
    assert kinds == [("other_model", "h800"), ("growth", "h100")]
    assert answer.holders is None


def test_stamp_is_utc():
    assert stamp(datetime(2026, 12, 9, 15, tzinfo=UTC).astimezone()) == "9 Dec 2026 15:00 UTC"


def test_peak_agrees_with_the_capacity_sweep_on_random_holds():
    """:meth:`OptionFacts.peak` (step function + bisect) against
    :func:`pools.capacity.arithmetic.peak_cards` (the approval's sweep) on 300 random windows
    over 200 random holds on an hour grid (touching ends and starts included)."""
    import random

    from pools.capacity.arithmetic import peak_cards

    rng = random.Random(33)
    hours = timedelta(hours=1)
    holds = []
    for pk in range(200):
        start = rng.randrange(-200, 400)
        holds.append(HoldFacts(pk, "t", "T", rng.choice([1, 2, 4, 8]), T0 + start * hours,
                               T0 + (start + rng.randrange(1, 100)) * hours))  # fmt: skip
    opt = option(holds=holds)
    intervals = [(h.starts_at, h.ends_at, h.cards) for h in holds]
    for _ in range(300):
        a = rng.randrange(-250, 500)
        b = a + rng.randrange(1, 150)
        lo, hi = T0 + a * hours, T0 + b * hours
        assert opt.peak(lo, hi) == peak_cards(intervals, lo, hi)


def test_min_memory_ask_whose_cards_are_all_down_says_so():
    """Any model with ≥ 40 GiB: the only one, A100, has no schedulable card (all 16 down):
    one reason, ``model``, and nothing is approvable."""
    down = option(usable=0, down=16)
    answer = explain(ask(4, model=None, min_memory_gib=Decimal(40)), [down], viewer=MEMBER)
    assert [r.code for r in answer.why_not] == ["model"]
    assert answer.why_not[0].text == "Train has no schedulable card of a model with at least 40 GiB"
    assert answer.approvable_now is False


def test_held_beyond_usable_is_reported_as_held():
    """Over-committed: 8 usable, 10 held (an import took 2 cards away) → 0 free, 10 held."""
    opt = option(usable=8, holds=[hold(1, "x", 10, -1, 3)])
    answer = explain(ask(2), [opt], viewer=MEMBER)
    assert answer.why_not[0].data["held_peak"] == 10 and answer.why_not[0].data["free"] == 0
    assert answer.holders["held_peak"] == 10


def test_any_pool_neither_lands_on_nor_is_pointed_to_a_burst_pool():
    """Any pool, 2 A100: home 'train' has 48 usable with 46 held (2 free), the burst pool 8
    free. As the request form's panel (availability) says, only a request naming the burst
    pool lands there: 'when' and 'who holds it' speak of train alone, and no alternative
    names the burst pool; named, it is the target."""
    home = option(holds=[hold(1, "vision", 46, -1, 9)])
    burst = replace(option(usable=8, pool="burst"), burst=True)
    answer = explain(ask(2, pool=None), [burst, home], viewer=MEMBER)
    assert [row["pool"] for row in answer.when] == ["train"]
    assert answer.holders["pool"] == "train"
    assert all(row["pool"] != "burst" for row in answer.where_instead)
    named = explain(ask(2, pool="burst"), [burst, home], viewer=MEMBER)
    assert [row["pool"] for row in named.when] == ["burst"]


def test_member_is_told_the_most_cards_the_team_holds_at_once_not_their_sum():
    """36 usable L40S; the member's own team holds a daily reservation of 8 cards 08:00–17:00
    on days 1–5 of the week asked (five occurrences, never two at once), another team 4 over
    the whole week. The team holds 8 at its peak (the sum of the five would be 40, more than
    the pool's 36); at the peak 8 + 4 = 12 are held → 24 free. Ends inside the window: from
    day 1–4 17:00 another occurrence still comes (12 held, 24 free: no more); from day 5
    17:00 only the 4 → 32 free, on 16 Jan 2027 (T0 = Mon 11 Jan 09:00 UTC)."""
    eight = timedelta(hours=-1)  # 08:00 of T0's day
    own = [
        HoldFacts(0, "bob-team", "Bob-Team", 8, T0 + eight + d * DAY,
                  T0 + eight + d * DAY + timedelta(hours=9), recurring_id=1)
        for d in range(1, 6)
    ]  # fmt: skip
    opt = option(L40S, usable=36, holds=[*own, hold(7, "vision", 4, -1, 9)])
    holders = explain(ask(2, model="l40s"), [opt], viewer=MEMBER).as_dict()["holders"]
    assert holders["own_held_peak"] == 8
    assert holders["held_peak"] == 12
    assert len(holders["own_allocations"]) == 5
    assert holders["text"] == (
        "held by 1 other team; your team holds 8 at its peak; 32 free from 16 Jan 2027 17:00 UTC"
    )


def test_own_cards_that_overlap_count_where_they_overlap():
    """Own holds 8 on days [0, 2), 4 on [1, 3), 6 on [2, 4): held by the team 8 on day 0,
    12 on day 1, 10 on day 2, 6 on day 3 → 12 at its peak (the sum 18 is never held): 48 − 12
    = 36 free; from day 2 (13 Jan) 10 at most → 38. A viewer not in the team sees none of
    them, so 0."""
    holds = [hold(1, "bob-team", 8, 0, 2), hold(2, "bob-team", 4, 1, 3),
             hold(3, "bob-team", 6, 2, 4)]  # fmt: skip
    answer = explain(ask(2), [option(holds=holds)], viewer=MEMBER).as_dict()
    assert answer["holders"]["own_held_peak"] == 12
    assert answer["holders"]["text"] == (
        "no other team holds any; your team holds 12 at its peak; 38 free from 13 Jan 2027 "
        "09:00 UTC"
    )
    outside = explain(ask(2), [option(holds=holds)], viewer=Viewer(False, member_of_team=False))
    assert outside.holders["own_held_peak"] == 0


def test_where_instead_leaves_out_a_pool_with_fewer_usable_cards_than_asked():
    """30 L40S asked in 'infer' (36 usable, 12 held → 24 free). A100 (80 GiB ≥ 45, data-centre)
    has 8 usable there: 30 never fit, so it is no alternative, priced or not. H800 in 'train'
    has exactly 30 usable, 10 held until day 1: 30 fit from day 1, so it stays. Left: 24 L40S
    now (fewer cards), then 30 H800 from day 1. With a sizing estimate of 31 H800 (one more
    than usable: left out) and 8 A100 (8 usable, all free: offered, and first, as both fit now
    and only the A100 has a price)."""
    l40s = option(L40S, usable=36, pool="infer", holds=[hold(1, "vision", 12, -1, 9)])
    a100 = option(A100, usable=8, pool="infer", price=Decimal("1.70"))
    h800 = option(H800, usable=30, holds=[hold(2, "speech", 10, -1, 1)])
    answer = explain(ask(30, model="l40s", pool="infer", days=1), [l40s, a100, h800],
                     viewer=MEMBER)  # fmt: skip
    rows = [(r["kind"], r["gpu_model"], r["card_count"]) for r in answer.where_instead]
    assert rows == [("fewer_cards", "l40s", 24), ("other_model", "h800", 30)]
    assert answer.where_instead[1]["earliest_start"] == T0 + DAY
    assert "never" not in repr(answer.as_dict()["where_instead"])
    sized = explain(ask(30, model="l40s", pool="infer", days=1, sizing_cards={"h800": 31,
                    "a100": 8}), [l40s, a100, h800], viewer=MEMBER)  # fmt: skip
    assert [(r["gpu_model"], r["card_count"]) for r in sized.where_instead] == [
        ("a100", 8), ("l40s", 24),
    ]  # fmt: skip
