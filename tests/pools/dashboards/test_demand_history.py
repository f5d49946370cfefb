"""The demand forecast's cached hourly sums (pools.dashboards.demand_history) give the weeks the
straightforward sum gives: random requests (fixed seeds) around every week start, summed here
in Python request by request, against the forecast read cold, from the cache, later the same
day, narrowed by pool, model and team, and after a request is cancelled."""

from __future__ import annotations

import bisect
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from factories import CapacityRequestFactory, PoolFactory, TeamFactory

from pools.capacity.models import CapacityRequest
from pools.common.choices import RequestKind, RequestStatus
from pools.dashboards import capacity as dashboard
from pools.dashboards.demand_history import requests_generation
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

# 10:17:23.456789 UTC: week starts fall mid-hour, 13 weeks (91 days) back from it.
NOW = datetime(2026, 3, 10, 10, 17, 23, 456789, tzinfo=UTC)
WEEK = timedelta(weeks=1)


def _requests(seed: int, n: int = 160) -> None:
    """``n`` requests over two pools × two models and two teams, in every status, submitted
    from 95 days before ``NOW`` to 10 days after it, a third of them at or next to a week start
    (exactly on it, 1 µs before, in its hour); one in ten names no pool."""
    rng = random.Random(seed)
    pools = [PoolFactory(slug="p-a"), PoolFactory(slug="p-b")]
    models = list(GpuModel.objects.filter(slug__in=["l40s", "a100_80g_sxm"]))
    teams = [TeamFactory(slug="t-a"), TeamFactory(slug="t-b")]
    since = NOW - 13 * WEEK
    for _ in range(n):
        if rng.random() < 1 / 3:
            start = since + rng.randrange(14) * WEEK
            near = start + timedelta(minutes=rng.randrange(-59, 60))
            at = rng.choice([start, start - timedelta(microseconds=1), near])
        else:
            at = NOW - timedelta(days=95) + timedelta(seconds=rng.randrange(105 * 86400))
        starts_at = at + timedelta(hours=rng.randrange(1, 500))
        length = timedelta(minutes=rng.randrange(1, 43200), microseconds=rng.randrange(10**6))
        status = rng.choice(list(RequestStatus))
        CapacityRequestFactory(
            team=rng.choice(teams),
            pool=None if rng.random() < 0.1 else rng.choice(pools),
            gpu_model=rng.choice(models),
            card_count=rng.randrange(1, 9),
            starts_at=starts_at,
            ends_at=starts_at + length,
            status=status,
            # only a growth request is accepted (constraint request_accepted_is_growth)
            kind=RequestKind.GROWTH if status == RequestStatus.ACCEPTED else RequestKind.CARDS,
            submitted_at=at,
        )


def _by_hand(now: datetime, *, pool: str = "", model: str = "", team: str = "") -> dict:
    """{(pool slug, model slug): 13 weekly card-days}: every request of a demand status that
    names its pool and model (none here has an allocation to take them from), submitted at or
    after ``now`` − 13 weeks, in the week whose start (``now`` − 13 + k weeks) it is at or after."""
    since = now - 13 * WEEK
    starts = [since + k * WEEK for k in range(1, 13)]
    sums: dict[tuple, list[timedelta]] = {}
    for r in CapacityRequest.objects.select_related("pool", "gpu_model", "team"):
        if (
            r.status not in dashboard.DEMAND_STATUSES
            or r.pool is None
            or r.submitted_at < since
            or (pool and r.pool.slug != pool)
            or (model and r.gpu_model.slug != model)
            or (team and r.team.slug != team)
        ):
            continue
        weeks = sums.setdefault((r.pool.slug, r.gpu_model.slug), [timedelta(0)] * 13)
        week = bisect.bisect_right(starts, r.submitted_at)
        weeks[week] += r.card_count * (r.ends_at - r.starts_at)
    return {key: [t / timedelta(days=1) for t in ts] for key, ts in sums.items()}


def _forecast(now: datetime, **filters) -> dict:
    found = dashboard.demand_forecasts(
        filters=dashboard.DashboardFilters(**filters), now=now, usable={}
    )
    return {(f.pool_slug, f.gpu_model_slug): f.weekly for f in found}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cached_weeks_equal_the_straightforward_sum(seed):
    _requests(seed)
    expected = _by_hand(NOW)
    assert len(expected) == 4  # both pools × both models had demand
    assert _forecast(NOW) == expected  # cold: sums read and cached
    assert _forecast(NOW) == expected  # from the cache
    # Later the same day: the same cached hours, the week starts 5 h 43 min on.
    later = NOW + timedelta(hours=5, minutes=43, seconds=7)
    assert _forecast(later) == _by_hand(later)
    cache.clear()  # read first later that day, the sums serve the earlier instant all the same
    assert _forecast(later) == _by_hand(later)
    assert _forecast(NOW) == expected
    assert _forecast(NOW, pool="p-a") == _by_hand(NOW, pool="p-a")
    assert _forecast(NOW, gpu_model="l40s") == _by_hand(NOW, model="l40s")
    assert _forecast(NOW, team="t-b") == _by_hand(NOW, team="t-b")


def test_a_cancelled_request_leaves_the_cached_weeks(django_capture_on_commit_callbacks):
    pool = PoolFactory(slug="p-a")
    l40s = GpuModel.objects.get(slug="l40s")
    # 2 cards × 3 days, submitted 20 days before NOW: week 10 (starts NOW − 3 weeks).
    kept, cancelled = (
        CapacityRequestFactory(
            pool=pool,
            gpu_model=l40s,
            card_count=2,
            starts_at=NOW,
            ends_at=NOW + timedelta(days=3),
            submitted_at=NOW - timedelta(days=20),
        )
        for _ in range(2)
    )
    assert _forecast(NOW)[("p-a", "l40s")][10] == 12.0
    before = requests_generation()
    with django_capture_on_commit_callbacks(execute=True):
        cancelled.status = RequestStatus.CANCELLED
        cancelled.save(update_fields=["status"])
    assert requests_generation() != before
    assert _forecast(NOW)[("p-a", "l40s")][10] == 6.0
