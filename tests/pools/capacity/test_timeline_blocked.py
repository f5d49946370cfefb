"""The capacity timeline counts what the approval counts besides allocations: the cards recurring
reservations hold and those planned maintenance windows take away, as bars of their own, so the
gap to the usable line is the free capacity. It used to show only allocations, and so more free
cards than an approval would grant."""

from __future__ import annotations

import csv
import io
from datetime import time, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from factories import AllocationFactory, MaintenanceWindowFactory, RecurringReservationFactory

from pools.inventory.models import Node
from pools.maintenance.models import MaintenanceScope
from pools.recurring.models import Recurrence

pytestmark = pytest.mark.django_db


def test_reservations_and_maintenance_are_held_and_free_is_counted_by_hand(
    team, team_member, infer_pool, l40s
):
    # The page's days: from today's local midnight, 56 of them, each at its busiest instant.
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    day = [midnight + timedelta(days=i) for i in range(56)]
    # nlp holds 2 cards on days 0-9 (noons 0..9).
    AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                      starts_at=day[0], ends_at=day[10], status="active")  # fmt: skip
    # A course holds 3 cards 09:00-18:00 every day from day 14 to day 20.
    RecurringReservationFactory(
        pool=infer_pool, gpu_model=l40s, card_count=3, recurrence=Recurrence.DAILY,
        time_zone=timezone.get_current_timezone_name(),
        first_date=day[14].date(), last_date=day[20].date(),
        start_time=time(9), end_time=time(18),
    )  # fmt: skip
    # inf-01 (4 of the 8 cards) is out from day 3 06:00 to day 4 06:00: part of days 3 and 4.
    window = MaintenanceWindowFactory(
        pool=infer_pool, scope=MaintenanceScope.NODES,
        starts_at=day[3] + timedelta(hours=6), ends_at=day[4] + timedelta(hours=6),
    )  # fmt: skip
    window.nodes.set(Node.objects.filter(hostname="inf-01"))
    client = Client()
    client.force_login(team_member)

    page = client.get("/timeline/")

    [chart] = page.context["charts"]
    assert chart["usable"] == 8  # 2 nodes × 4 L40S, no over-commit
    sets = {d["label"]: d["data"] for d in chart["data"]["datasets"] if d["type"] == "bar"}
    assert sets["NLP"] == [2] * 10 + [0] * 46
    assert sets["recurring reservations"] == [0] * 14 + [3] * 7 + [0] * 35
    assert sets["maintenance"] == [0] * 3 + [4, 4] + [0] * 51
    # free = 8 - held - reserved - away: 6 on days 0-9 but 8 - 2 - 4 = 2 on days 3 (from
    # 06:00) and 4 (until 06:00), 8 on days 10-13, 8 - 3 = 5 on days 14-20, 8 after.
    expected = [6, 6, 6, 2, 2, 6, 6, 6, 6, 6] + [8] * 4 + [5] * 7 + [8] * 35
    assert chart["free"] == expected
    assert (chart["fewest_free"], chart["fewest_free_day"]) == (2, day[3])
    assert "<span data-fewest-free>2</span>" in page.content.decode()

    export = client.get("/timeline/", {"export": "csv"})
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    by_team = {}
    for row in rows:
        by_team.setdefault(row["team"], []).append(int(row["cards_held_at_peak"]))
    assert by_team["maintenance"] == sets["maintenance"]
    assert by_team["recurring reservations"] == sets["recurring reservations"]


def test_a_pool_with_only_maintenance_has_its_chart(team_member, infer_pool, l40s):
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    window = MaintenanceWindowFactory(pool=infer_pool, scope=MaintenanceScope.POOL,
                                      starts_at=midnight + timedelta(days=5, hours=10),
                                      ends_at=midnight + timedelta(days=5, hours=14))  # fmt: skip
    window.nodes.set(Node.objects.filter(pool=infer_pool))  # the service adds the pool's nodes
    client = Client()
    client.force_login(team_member)

    [chart] = client.get("/timeline/").context["charts"]

    sets = {d["label"]: d["data"] for d in chart["data"]["datasets"] if d["type"] == "bar"}
    assert sets == {"maintenance": [0] * 5 + [8] + [0] * 50}
    assert (chart["fewest_free"], chart["free"][5]) == (0, 0)
