"""Temporary overrides on the pool × GPU model calendar (week and month) and in the explainer
(issue #32: "show an override in force"). Times in Europe/Berlin (CET, UTC+1 in January)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from factories import TeamFactory, TemporaryOverrideFactory, UserFactory, next_week_9am

pytestmark = pytest.mark.django_db


@pytest.fixture
def overrides(settings, team, infer_pool, l40s):
    """Around week 2027-W03 (Mon 18 - Sun 24 January 2027) on infer × L40S:

    - nlp's ceiling raised 4 → 8 by ``admin`` from Sat 16 Jan until Fri 22 Jan 17:00 UTC
      (18:00 CET): counts that week;
    - vision's ceiling raised 2 → 5 by ``boss`` from Mon 18 Jan 08:00 UTC until 1 March, ended
      early Tue 19 Jan 11:00 UTC (12:00 CET): counts that week, read "other teams" by nlp;
    - vision's borrowing limit raised to 6 until Sun 17 Jan 11:00 UTC: over before the week.
    """
    settings.TIME_ZONE = "Europe/Berlin"
    vision = TeamFactory(slug="vision", name="Vision")
    admin, boss = UserFactory(username="admin"), UserFactory(username="boss")
    TemporaryOverrideFactory(team=team, pool=infer_pool, gpu_model=l40s, cards=8,
                             cards_before=4, created_by=admin,
                             created_at=datetime(2027, 1, 16, tzinfo=UTC),
                             until=datetime(2027, 1, 22, 17, tzinfo=UTC))  # fmt: skip
    TemporaryOverrideFactory(team=vision, pool=infer_pool, gpu_model=l40s, cards=5,
                             cards_before=2, created_by=boss, status="cancelled",
                             created_at=datetime(2027, 1, 18, 8, tzinfo=UTC),
                             ended_at=datetime(2027, 1, 19, 11, tzinfo=UTC),
                             until=datetime(2027, 3, 1, tzinfo=UTC))  # fmt: skip
    TemporaryOverrideFactory(team=vision, pool=infer_pool, gpu_model=l40s, cards=6,
                             kind="borrowing_limit", cards_before=None, created_by=boss,
                             created_at=datetime(2027, 1, 10, tzinfo=UTC),
                             until=datetime(2027, 1, 17, 11, tzinfo=UTC))  # fmt: skip


def _items(html: str) -> list[str]:
    body = re.search(r'<ul class="calendar-overrides"[^>]*>(.*?)</ul>', html, re.S)[1]
    return [re.sub(r"<[^>]+>", "", li).strip() for li in re.findall(r"<li[^>]*>(.*?)</li>", body)]


MINE = "Ceiling (card cap) of NLP raised 4 → 8 cards of L40S until Fri 22 Jan 18:00 CET by admin"


def test_the_week_shows_the_overrides_that_count_in_it(client, team_member, overrides):
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"week": "2027-W03"}).content.decode()
    assert _items(html) == [
        MINE,
        "Ceiling (card cap) of other teams raised 2 → 5 cards of L40S until Tue 19 Jan 12:00 "
        "CET (ended early) by boss",
    ]


def test_the_month_shows_them_too_and_a_pool_admin_reads_every_team(client, pool_admin, overrides):
    """January 2027 holds all three: by start, vision's borrowing limit (from 10 Jan, cards
    before unknown: "—"), nlp's ceiling, vision's ceiling."""
    client.force_login(pool_admin)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"month": "2027-01"}).content.decode()
    assert _items(html) == [
        "Borrowing limit (Kueue) of Vision raised — → 6 cards of L40S until Sun 17 Jan 12:00 CET "
        "by boss",
        MINE,
        "Ceiling (card cap) of Vision raised 2 → 5 cards of L40S until Tue 19 Jan 12:00 CET "
        "(ended early) by boss",
    ]


def test_a_week_without_overrides_says_so(client, team_member, overrides):
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, {"week": "2027-W10"}).content.decode()
    assert _items(html) == ["No temporary override of L40S in Inference counts this week."]


def test_the_explainer_names_the_teams_override_in_force(
    api_as, team, team_member, infer_pool, l40s
):
    """nlp's L40S ceiling in infer raised 4 → 8 until next week's Monday 09:00 (UTC here):
    an explanation of 2 L40S in infer says it; one for the train pool does not."""
    until = next_week_9am()
    TemporaryOverrideFactory(team=team, pool=infer_pool, gpu_model=l40s, cards=8,
                             cards_before=4, created_by=UserFactory(username="admin"),
                             created_at=timezone.now() - timedelta(hours=1),
                             until=until)  # fmt: skip
    start = until - timedelta(days=3)
    ask = {"team": team.slug, "workload_kind": "inference", "pool": "infer",
           "gpu_model": "l40s", "card_count": 2, "starts_at": start.isoformat(),
           "ends_at": (start + timedelta(days=1)).isoformat()}  # fmt: skip
    data = api_as(team_member).post("/api/v1/requests/explain/", ask, format="json").json()
    when = until.strftime("%a %d %b %H:%M")
    assert data["overrides"] == [
        f"Ceiling (card cap) of NLP raised 4 → 8 cards of L40S until {when} UTC by admin"
    ]
    other = {**ask, "gpu_model": "a100_80g_sxm"}
    data = api_as(team_member).post("/api/v1/requests/explain/", other, format="json").json()
    assert data["overrides"] == []


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ({"week": "2027-W03"}, "Inference · L40S calendar · gpu-pool-portal"),
        ({"month": "2027-01"}, "Inference · L40S calendar 2027-01 · gpu-pool-portal"),
    ],
)
def test_the_overrides_list_sits_once_in_the_page_not_in_its_title(
    client, team_member, overrides, query, title
):
    """The browser tab reads the pool, model and span only; the overrides list is one element
    of the page's body (it once sat in the title block too, so the tab showed its markup)."""
    client.force_login(team_member)
    url = reverse("pools:pool-calendar", args=["infer", "l40s"])
    html = client.get(url, query).content.decode()
    assert re.search(r"<title>(.*?)</title>", html, re.S)[1] == title
    assert html.count('id="calendar-overrides"') == 1
    assert html.index('id="calendar-overrides"') > html.index("<main")
