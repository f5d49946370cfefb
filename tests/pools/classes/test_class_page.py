"""The workload classes page (issue 36 item 5): each class's rule and the cards held now per
class × GPU model class, on the page, as CSV, and as the part the admin dashboard loads; pool
admins only; a fixed number of queries whatever the number of allocations."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from factories import AllocationFactory

from pools.common.choices import AllocationStatus
from pools.dashboards.classes import class_holdings
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(fleet, teams, classes):
    """Held now on the hand-built fleet (4 L40S data-centre, 8 RTX 4090 consumer):

    * svc production 3 L40S (active) and 1 L40S (approved, window open): production 4 DC;
    * etl batch 2 + 3 RTX 4090: batch 5 consumer;
    * lab unclassed 2 RTX 4090: unclassed 2 consumer;
    * not counted: etl batch 1 RTX 4090 ended, svc production 2 L40S next month, a MIG
      slice allocation (slices are not cards)."""
    now = timezone.now()
    l40s, rtx = GpuModel.objects.get(slug="l40s"), GpuModel.objects.get(slug="rtx4090")
    window = {"starts_at": now - timedelta(hours=1), "ends_at": now + timedelta(days=1)}

    def make(team, model, cards, cls, **kw):
        values = {"pool": fleet, "gpu_model": model, "card_count": cards, **window} | kw
        return AllocationFactory(team=teams[team], workload_class=cls, **values)

    make("svc", l40s, 3, classes["production"], status=AllocationStatus.ACTIVE)
    make("svc", l40s, 1, classes["production"])
    make("etl", rtx, 2, classes["batch"], status=AllocationStatus.ACTIVE)
    make("etl", rtx, 3, classes["batch"])
    make("lab", rtx, 2, None)
    make("etl", rtx, 1, classes["batch"], status=AllocationStatus.ENDED)
    later = now + timedelta(days=30)
    make("svc", l40s, 2, classes["production"], starts_at=later, ends_at=later + timedelta(1))
    make("lab", l40s, 2, None, mig_profile="1g.10gb")
    return now


def test_cards_held_per_class_and_card_class(held):
    holdings = class_holdings(now=timezone.now())
    table = {
        (r.workload_class.slug if r.workload_class else None): (r.cards, r.total)
        for r in holdings.rows
    }
    assert table == {
        "production": ({"consumer": 0, "datacentre": 4}, 4),  # 3 + 1 L40S
        "internal": ({"consumer": 0, "datacentre": 0}, 0),
        "development": ({"consumer": 0, "datacentre": 0}, 0),
        "batch": ({"consumer": 5, "datacentre": 0}, 5),  # 2 + 3 RTX 4090
        None: ({"consumer": 2, "datacentre": 0}, 2),  # lab's, unclassed
    }
    # consumer 5 + 2 = 7, data-centre 4: 11 in all
    assert (holdings.totals, holdings.total) == ([7, 4], 11)
    assert [r.workload_class.slug for r in holdings.rows if r.workload_class] == [
        "production", "internal", "development", "batch",
    ]  # fmt: skip
    production = holdings.rows[0]
    assert production.rule == "data-centre cards"
    assert production.preempts == ["Internal", "Development", "Batch"]
    assert production.qos == "portal-production"
    assert holdings.rows[3].preempts == []  # batch, preempted first


def _cells(html, table_id):
    body = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)[1]
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_page_part_and_csv(client, pool_admin, held):
    client.force_login(pool_admin)
    url = reverse("pools:class-list")
    html = client.get(url).content.decode()
    rules = _cells(html, "class-rules")
    names = ["Production", "Internal", "Development", "Batch"]
    assert [next(n for n in names if r[0].startswith(n)) for r in rules] == names
    assert rules[0][1] == "data-centre cards" and rules[3][1] == "consumer cards"
    assert [r[-1] for r in rules] == ["4", "0", "0", "5"]
    held_rows = _cells(html, "class-held")
    assert held_rows[0] == ["Production", "0", "4", "4"]
    assert held_rows[-1] == ["Unclassed", "2", "0", "2"]

    part = client.get(url, {"part": "held"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in part and 'id="class-held"' in part and 'id="class-rules"' not in part

    response = client.get(url, {"export": "csv"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    by_class = {r["class"]: r for r in rows}
    assert set(by_class) == {"production", "internal", "development", "batch", "unclassed"}
    assert by_class["production"]["cards_held_datacentre"] == "4"
    assert by_class["batch"]["cards_held_consumer"] == "5"
    assert by_class["batch"]["priority"] == "100"
    assert by_class["production"]["preempts"] == "Internal; Development; Batch"
    assert by_class["unclassed"]["cards_held"] == "2"
    assert by_class["unclassed"]["priority"] == ""


def test_members_get_the_403_page(client, member):
    client.force_login(member)
    assert client.get(reverse("pools:class-list")).status_code == 403


def test_queries_do_not_grow_with_allocations(
    client, pool_admin, held, fleet, teams, classes, django_assert_num_queries
):
    """Session, user, the classes, their named models, the held cards grouped: 5, for 5 or for
    25 more allocations."""
    client.force_login(pool_admin)
    url = reverse("pools:class-list")
    with django_assert_num_queries(5):
        client.get(url)
    rtx = GpuModel.objects.get(slug="rtx4090")
    for _ in range(20):
        AllocationFactory(
            team=teams["etl"], pool=fleet, gpu_model=rtx, workload_class=classes["batch"],
            starts_at=held - timedelta(hours=1), ends_at=held + timedelta(days=1),
        )  # fmt: skip
    with django_assert_num_queries(5):
        client.get(url)
    with django_assert_num_queries(5):
        client.get(url, {"part": "held"})


def test_no_classes_is_an_empty_state(client, pool_admin):
    from pools.classes.models import WorkloadClass

    WorkloadClass.objects.all().delete()
    client.force_login(pool_admin)
    html = client.get(reverse("pools:class-list")).content.decode()
    assert "No workload classes: requests are unclassed" in html
    assert "No workload classes and no cards held." in html
