"""The timeline's ranking of the user's allocations (how many per chart, the first by start) is
kept per allocations' generation (:mod:`pools.capacity.generation`): a second read runs no
ranking query, a committed write is in the next one, a member's key is their own teams, and
the rows themselves are read afresh (a renamed team shows its new name)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import AllocationFactory, MembershipFactory, PoolFactory, TeamFactory, UserFactory

from pools.capacity.selectors import timeline_allocations
from pools.inventory.models import GpuModel

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("outside_a_transaction")]


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, tzinfo=UTC)


def _read(user, first=2):
    """({(pool slug, model slug): count}, {(pool slug, model slug): [(id, team name)]}) of the
    window 7-9 December."""
    counts, listed = timeline_allocations(user=user, start=at(7), end=at(9), first=first)
    slugs = {}
    for rows in listed.values():
        for a in rows:
            slugs[(a.pool_id, a.gpu_model_id)] = (a.pool.slug, a.gpu_model.slug)
    return (
        {slugs.get(k, k): n for k, n in counts.items()},
        {slugs[k]: [(a.pk, a.team.name) for a in rows] for k, rows in listed.items()},
    )


def _ranking_queries(ctx) -> int:
    return sum("ROW_NUMBER()" in q["sql"].upper() for q in ctx.captured_queries)


def test_cached_ranking_fresh_rows_and_a_committed_write_shows_at_once(
    pool_admin, django_capture_on_commit_callbacks
):
    pool, l40s = PoolFactory(slug="p"), GpuModel.objects.get(slug="l40s")
    nlp = TeamFactory(slug="nlp", name="NLP")
    with django_capture_on_commit_callbacks(execute=True):
        a = AllocationFactory(team=nlp, pool=pool, gpu_model=l40s, card_count=1,
                              starts_at=at(7, 6), ends_at=at(8), status="active")  # fmt: skip
        b = AllocationFactory(team=nlp, pool=pool, gpu_model=l40s, card_count=1,
                              starts_at=at(7, 8), ends_at=at(8), status="active")  # fmt: skip
        # ends before the window: not in it
        AllocationFactory(team=nlp, pool=pool, gpu_model=l40s, card_count=1,
                          starts_at=at(5), ends_at=at(6), status="active")  # fmt: skip
    assert _read(pool_admin) == (
        {("p", "l40s"): 2},
        {("p", "l40s"): [(a.pk, "NLP"), (b.pk, "NLP")]},
    )

    nlp.name = "Language"  # a team's name is no allocation write: the rows are read afresh
    nlp.save()
    with CaptureQueriesContext(connection) as ctx:
        again = _read(pool_admin)
    assert _ranking_queries(ctx) == 0  # from the cache
    assert again == ({("p", "l40s"): 2}, {("p", "l40s"): [(a.pk, "Language"), (b.pk, "Language")]})

    with django_capture_on_commit_callbacks(execute=True):  # starts first: ranked first
        c = AllocationFactory(team=nlp, pool=pool, gpu_model=l40s, card_count=1,
                              starts_at=at(7, 1), ends_at=at(8), status="approved")  # fmt: skip
    with CaptureQueriesContext(connection) as ctx:
        after = _read(pool_admin)
    assert _ranking_queries(ctx) == 1
    assert after == ({("p", "l40s"): 3}, {("p", "l40s"): [(c.pk, "Language"), (a.pk, "Language")]})


def test_a_member_is_ranked_over_their_own_teams_not_a_cached_ranking_of_others(pool_admin):
    pool, l40s = PoolFactory(slug="p"), GpuModel.objects.get(slug="l40s")
    nlp, vision = TeamFactory(slug="nlp", name="NLP"), TeamFactory(slug="vision", name="Vision")
    mine = AllocationFactory(team=nlp, pool=pool, gpu_model=l40s, card_count=1,
                             starts_at=at(7, 6), ends_at=at(8), status="active")  # fmt: skip
    theirs = AllocationFactory(team=vision, pool=pool, gpu_model=l40s, card_count=1,
                               starts_at=at(7, 1), ends_at=at(8), status="active")  # fmt: skip
    member = UserFactory(username="ann")
    MembershipFactory(user=member, team=nlp)

    assert _read(pool_admin)[0] == {("p", "l40s"): 2}  # cached for "every team"
    assert _read(member) == ({("p", "l40s"): 1}, {("p", "l40s"): [(mine.pk, "NLP")]})
    MembershipFactory(user=member, team=vision)  # a new team of hers: a new key
    assert _read(member) == (
        {("p", "l40s"): 2},
        {("p", "l40s"): [(theirs.pk, "Vision"), (mine.pk, "NLP")]},
    )
