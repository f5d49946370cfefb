"""The capacity calendar of a driver group: the pools × GPU models its nodes hold cards in,
their free cards per day; every figure worked out in the comments."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse
from factories import AllocationFactory, node_with_gpus

from pools.common.choices import Scheduler

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(infer_pool, train_pool, l40s):
    """R550: infer's 2 nodes × 4 L40S (8) and a third infer node of 2 L40S on 535 (not R550's).
    R535: train's node of 8 A100 and that L40S node. nlp holds 5 L40S of infer on Tue 19
    January 2027 10:00-14:00 UTC (TIME_ZONE is UTC in tests)."""
    node_with_gpus(
        2,
        gpu_model="l40s",
        hostname="inf-old",
        pool=infer_pool,
        scheduler=Scheduler.KUBERNETES,
        driver_version="535.129.03",
    )
    AllocationFactory(
        pool=infer_pool,
        gpu_model=l40s,
        card_count=5,
        starts_at=datetime(2027, 1, 19, 10, tzinfo=UTC),
        ends_at=datetime(2027, 1, 19, 14, tzinfo=UTC),
    )


def _rows(html):
    body = re.search(r'<table[^>]*id="group-days".*?<tbody>(.*?)</tbody>', html, re.S)[1]
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_week_of_each_driver_group(client, team_member, fleet):
    client.force_login(team_member)
    # R550 has cards only in infer × L40S (8 of its 10). infer × L40S: 10 usable; Tue: 10 - 5 = 5.
    html = client.get(
        reverse("pools:driver-group-calendar", args=[550]), {"week": "2027-W03"}
    ).content.decode()
    assert "Inference · L40S" in html and "R550 has 8" in html and "Training" not in html
    assert [r[1] for r in _rows(html)] == ["10", "5", "10", "10", "10", "10", "10"]
    # R535: infer × L40S (its 2) and train × A100 SXM4 80GB (8, nothing held: 8 free), by pool name
    html = client.get(
        reverse("pools:driver-group-calendar", args=[535]), {"week": "2027-W03"}
    ).content.decode()
    assert "R535 has 2" in html and "R535 has 8" in html
    assert html.index("Inference · L40S") < html.index("Training · ")
    assert [(r[1], r[2]) for r in _rows(html)][:3] == [("10", "8"), ("5", "8"), ("10", "8")]
    assert client.get(reverse("pools:driver-group-calendar", args=[999])).status_code == 404


def test_month_of_a_driver_group_and_its_link(client, team_member, fleet):
    client.force_login(team_member)
    html = client.get(
        reverse("pools:driver-group-calendar", args=[550]), {"month": "2027-01"}
    ).content.decode()
    # January 2027: 31 days, the 19th 5 free, the others 10
    cells = dict(re.findall(r'data-day="2027-01-(\d\d)">.*?<strong>(\d+)</strong>', html, re.S))
    assert len(cells) == 31
    assert cells["19"] == "5" and {v for k, v in cells.items() if k != "19"} == {"10"}
    assert "?month=2026-12" in html and "?month=2027-02" in html
    pools_page = client.get(reverse("pools:pool-list")).content.decode()
    assert 'href="/driver-groups/550/calendar/"' in pools_page


def test_a_group_without_pooled_cards(client, team_member, db):
    # R570's only node is in no pool: no column, the empty state
    node_with_gpus(4, gpu_model="l40s", hostname="spare-01", pool=None, driver_version="570.86.15")
    client.force_login(team_member)
    html = client.get(reverse("pools:driver-group-calendar", args=[570])).content.decode()
    assert "No node on R570 holds schedulable cards in a pool." in html
