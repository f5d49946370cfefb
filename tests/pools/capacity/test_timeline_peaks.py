"""The capacity timeline counts every allocation that holds cards at any moment of a day, not
only those holding at noon: each day is drawn at its busiest instant, and its free cards are
those the week calendar and the approval give for the whole day. A 15-hour allocation from 17:06
to 08:00 the next morning used to be missed by both noon samples."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from factories import AllocationFactory, TeamFactory

from pools.calendar.week import free_per_day
from pools.capacity.arithmetic import peak_cards, peaks_per_span
from pools.capacity.availability import pool_free_cards


def test_peaks_per_span_by_hand():
    """Three intervals over two spans [0, 10) and [10, 20) (seconds):
    2 cards [0, 10), 3 cards [5, 15), 4 cards [10, 12).
    Span 1: 2 from 0, 2 + 3 = 5 from 5: peak 5 first at 5.
    Span 2: at 10 the 2 end and the 4 start: 3 + 4 = 7 from 10, 3 from 12, 0 from 15: 7 at 10."""
    intervals = [(0, 10, 2), (5, 15, 3), (10, 12, 4)]
    assert peaks_per_span(intervals, [0, 10, 20]) == [(5, 5), (7, 10)]
    assert [peak_cards(intervals, 0, 10), peak_cards(intervals, 10, 20)] == [5, 7]


def test_intervals_that_touch_do_not_add_up_and_a_quiet_span_is_its_start():
    """4 cards [0, 5) then 4 cards [5, 8): never 8 at once (half-open). [10, 20) holds nothing
    from its start on: 0 at 10."""
    assert peaks_per_span([(0, 5, 4), (5, 8, 4)], [0, 10, 20]) == [(4, 0), (0, 10)]


@pytest.mark.django_db
def test_an_overnight_allocation_is_counted_and_free_agrees_with_the_calendar(
    team, team_member, infer_pool, l40s
):
    """Inference has 8 usable L40S (2 nodes × 4, no over-commit).

    - NLP (the member's team) holds 2 cards all of days 0-9;
    - Platform (another team) holds 4 cards from day 0 17:06 to day 1 08:00: held at neither
      noon;
    - Vision (another team) holds 3 cards on day 5 from 02:00 to 04:00 only.

    Busiest instants: day 0 at 17:06 (2 + 4 = 6), day 1 at 00:00 (6), day 5 at 02:00
    (2 + 3 = 5), every other day of 0-9 at midnight (2), days 10-55 nothing.
    Free = 8 - peak: [2, 2, 6, 6, 6, 3, 6, 6, 6, 6] then 8; fewest 2, first on day 0.
    The member sees Platform and Vision summed as "other teams": [4, 4, 0, 0, 0, 3, 0...]."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    day = [midnight + timedelta(days=i) for i in range(57)]
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                      starts_at=day[0], ends_at=day[10], status="active")  # fmt: skip
    AllocationFactory(team=TeamFactory(name="Platform", slug="platform"), pool=infer_pool,
                      gpu_model=l40s, card_count=4, status="approved",
                      starts_at=day[0] + timedelta(hours=17, minutes=6),
                      ends_at=day[1] + timedelta(hours=8))  # fmt: skip
    AllocationFactory(team=TeamFactory(name="Vision", slug="vision"), pool=infer_pool,
                      gpu_model=l40s, card_count=3, status="approved",
                      starts_at=day[5] + timedelta(hours=2),
                      ends_at=day[5] + timedelta(hours=4))  # fmt: skip
    client = Client()
    client.force_login(team_member)

    page = client.get("/timeline/")

    [chart] = page.context["charts"]
    expected_free = [2, 2, 6, 6, 6, 3, 6, 6, 6, 6] + [8] * 46
    assert chart["free"] == expected_free
    assert (chart["fewest_free"], chart["fewest_free_day"]) == (2, day[0])
    assert "<span data-fewest-free>2</span>" in page.content.decode()
    bars = {d["label"]: d["data"] for d in chart["data"]["datasets"] if d["type"] == "bar"}
    assert bars["NLP"] == [2] * 10 + [0] * 46
    assert bars["other teams"] == [4, 4, 0, 0, 0, 3] + [0] * 50
    assert chart["data"]["peaks"][:6] == ["17:06", "00:00", "00:00", "00:00", "00:00", "02:00"]
    # the bars stack to the day's peak: usable − bars is free wherever nothing is over-committed
    assert [8 - sum(v[i] for v in bars.values()) for i in range(56)] == expected_free
    # the week calendar's count, and the approval's for each whole day, are the same numbers
    assert free_per_day(pool=infer_pool, gpu_model=l40s, bounds=day) == expected_free
    assert [
        pool_free_cards(pool=infer_pool, gpu_model=l40s, start=day[i], end=day[i + 1])
        for i in range(7)
    ] == expected_free[:7]
