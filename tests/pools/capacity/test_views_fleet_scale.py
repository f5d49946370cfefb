"""Query-count guards of the approval queue and the timeline: the same number of queries with
a handful of rows and with more than a page of them, and the numbers they show worked out by
hand (issue #16, "flat at fleet scale")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import AllocationFactory, CapacityRequestFactory, TeamFactory

from pools.common.choices import WorkloadKind
from pools.models import GpuModel

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _get(client, url):
    """(response, queries) of one GET."""
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return response, len(ctx.captured_queries)


@pytest.fixture
def a100(db):
    return GpuModel.objects.get(slug="a100_80g_sxm")


def test_approval_queue_free_cards_by_hand_and_constant_queries(
    pool_admin, team, team_member, train_pool, infer_pool, a100, l40s
):
    """``train``: 8 A100 on driver 535 (CUDA ≤ 12.2), 3 of them allocated over the requests'
    window; ``infer``: 2 × 4 L40S on 550 (CUDA ≤ 12.4)."""
    start = (timezone.now() + timedelta(days=3)).replace(microsecond=0)
    end = start + timedelta(days=2)
    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=3,
                      starts_at=start - timedelta(days=1), ends_at=end)  # fmt: skip

    def submit(**fields):
        defaults = {"team": team, "requested_by": team_member, "starts_at": start, "ends_at": end}
        return CapacityRequestFactory(**{**defaults, **fields})

    named = submit(pool=train_pool, gpu_model=a100, card_count=2)  # 8 − 3 = 5 free
    anywhere = submit(pool=None, gpu_model=l40s, card_count=4,
                      workload_kind=WorkloadKind.INFERENCE)  # fmt: skip  # → infer, 8 free
    new_cuda = submit(pool=train_pool, gpu_model=a100, card_count=1, cuda_version="12.4")  # 0
    admin = _client(pool_admin)
    admin.get("/requests/queue/")  # warm what is kept per inventory generation (pools.explain)
    page, few = _get(admin, "/requests/queue/")
    rows = {row["req"].pk: row for row in page.context["rows"]}
    assert rows[named.pk]["free"] == 5 and rows[named.pk]["suggestion"] is None
    assert rows[anywhere.pk]["free"] == 8
    assert (rows[anywhere.pk]["suggestion"].pool, rows[anywhere.pk]["suggestion"].gpu_model) == (
        infer_pool, l40s)  # fmt: skip
    assert rows[new_cuda.pk]["free"] == 0
    assert rows[named.pk]["team_cards"] == 0  # the allocation starts in two days

    for n in range(57):  # 60 waiting: more than a page, half of them "any eligible pool"
        other = TeamFactory(slug=f"t{n:02d}")
        if n % 2:
            submit(team=other, pool=train_pool, gpu_model=a100, cuda_version="12.2")
        else:
            submit(team=other, pool=None, gpu_model=l40s, workload_kind=WorkloadKind.INFERENCE)
    page, many = _get(admin, "/requests/queue/")
    assert many == few
    assert len(page.context["rows"]) == 50 and page.context["page"].paginator.count == 60
    _, last = _get(admin, "/requests/queue/?page=2")
    assert last == few


def test_timeline_by_hand_and_constant_queries(
    pool_admin, team, team_member, other_member, infer_pool, train_pool, l40s, a100,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    """Tomorrow 00:00 → the day after 23:00 (local): held at the noons of days 1 and 2."""
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = midnight + timedelta(days=1), midnight + timedelta(days=2, hours=23)
    vision = other_member.memberships.get().team

    def allocate(owner, cards, pool=infer_pool, model=l40s):
        return AllocationFactory(team=owner, pool=pool, gpu_model=model, card_count=cards,
                                 starts_at=start, ends_at=end)  # fmt: skip

    allocate(team, 2)
    allocate(vision, 3)
    member = _client(team_member)
    member.get("/timeline/")  # warm the census kept per inventory generation (usable cards)
    page, few = _get(member, "/timeline/")
    (chart,) = page.context["charts"]
    sets = {d["label"]: d["data"] for d in chart["data"]["datasets"]}
    expected = [0, 2, 2] + [0] * 53
    assert sets["NLP"] == expected
    assert sets["other teams"] == [0, 3, 3] + [0] * 53
    assert sets["usable cards"] == [8] * 56
    assert chart["allocation_count"] == 1 and len(chart["allocations"]) == 1
    admin = _client(pool_admin)
    page, admin_few = _get(admin, "/timeline/")
    (chart,) = page.context["charts"]
    assert {d["label"] for d in chart["data"]["datasets"]} == {"NLP", "Vision", "usable cards"}

    # committed, as a request's would be: a new allocations' generation, so the timeline's
    # sums kept under the last one are not read again (pools.capacity.generation)
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(30):
            owner = team if n % 3 == 0 else TeamFactory(slug=f"t{n:02d}")
            allocate(owner, 1, pool=train_pool if n % 2 else infer_pool,
                     model=a100 if n % 2 else l40s)  # fmt: skip
    member.get("/timeline/")  # warm again, as above: ``few`` was read from the cache
    page, many = _get(member, "/timeline/")
    assert many == few
    assert len(page.context["charts"]) == 2
    page, admin_many = _get(admin, "/timeline/")
    assert admin_many == admin_few
    for chart in page.context["charts"]:  # ten teams by name at most, the rest summed
        assert len(chart["data"]["datasets"]) <= 10 + 2
        assert len(chart["allocations"]) <= 10
