"""Query-count guard of My teams: the same number of queries with one allocation and with more
than a page of teams and allocations (issue #16, "flat at fleet scale")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from factories import AllocationFactory, TeamFactory

from pools.common.choices import AllocationStatus

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


def test_my_teams_constant_queries(pool_admin, team, team_member, infer_pool, l40s):
    start = timezone.now() - timedelta(hours=1)

    def allocate(owner, cards=1):
        return AllocationFactory(team=owner, pool=infer_pool, gpu_model=l40s, card_count=cards,
                                 starts_at=start, ends_at=start + timedelta(days=2),
                                 status=AllocationStatus.ACTIVE)  # fmt: skip

    mine = allocate(team, cards=2)
    member, admin = _client(team_member), _client(pool_admin)
    page, member_few = _get(member, "/teams/mine/")
    (row,) = page.context["rows"]
    assert row["allocation"] == mine
    assert page.context["held"] == {team.pk: 2}
    _, admin_few = _get(admin, "/teams/mine/")
    for n in range(60):
        allocate(TeamFactory(slug=f"t{n:02d}"))
        allocate(team)
    page, member_many = _get(member, "/teams/mine/")
    assert member_many == member_few
    assert len(page.context["rows"]) == 50 and page.context["page"].paginator.count == 61
    page, admin_many = _get(admin, "/teams/mine/")
    assert admin_many == admin_few
    assert page.context["team_page"].paginator.count == 61  # every team, 50 a page
    assert len(page.context["teams"]) == 50
