"""Card-hour budgets written to the team's Slurm account as GrpTRESMins
(billing/budgets/slurm.py), on the fake scheduler; the real tiers are in
tests/integration/slurm/test_grptres_minutes.py.

Clock 2026-03-10 12:00 UTC. Team ``nlp`` (Slurm account ``nlp``) used 30 A100 card-hours in
March and nothing before. Slurm already counts 125.5 card-minutes of GPU usage (decayed) on
the account. Hand-computed:

- monthly team-wide 100 card-hours: 100 − 30 = 70 h left = 4,200 min;
- quarterly team-wide 90 card-hours (Jan–Mar): 90 − 30 = 60 h = 3,600 min — the smaller one
  wins on ``gres/gpu``: 3,600 + ⌊125.5⌋ = 3,725;
- yearly A100 2,000 card-hours: 2,000 − 30 = 1,970 h = 118,200 min on ``gres/gpu:a100``
  (Slurm counts nothing on it): 118,200.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from billing.budgets.models import Budget
from billing.budgets.slurm import (
    NOTE_NO_ACCOUNT,
    NOTE_NO_SLURM,
    NOTE_POOL,
    budget_minutes_sync,
)
from pools.tenancy.models import Team
from scheduler_adapters.fake import FakeScheduler

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates", "fixed_now")]
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)


@pytest.fixture
def fixed_now(monkeypatch, settings):
    settings.BILLING_TIME_ZONE = "UTC"
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


@pytest.fixture
def slurm_team(team, train_pool, a100):
    from factories import AllocationFactory, UsageRecordFactory

    from pools.common.choices import AliasKind
    from pools.inventory.models import GpuModelAlias

    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    tomorrow = NOW + timedelta(days=1)
    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                      starts_at=tomorrow, ends_at=tomorrow + timedelta(days=1))  # fmt: skip
    start = datetime(2026, 3, 2, tzinfo=UTC)
    UsageRecordFactory(team=team, gpu_model=a100, quantity=Decimal(30 * 3600), basis="used",
                       source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=3), month=date(2026, 3, 1),
                       created_at=NOW, updated_at=NOW)  # fmt: skip
    return team


@pytest.fixture
def fake():
    scheduler = FakeScheduler()
    scheduler.ensure_account("nlp", description="NLP", organization="nlp")
    scheduler.minutes_used["nlp"] = {"gres/gpu": 125.5, "gres/gpu:a100": 0.0}
    return scheduler


def budget(team, period, hours, **extra):
    return Budget.objects.create(team=team, period=period, starts_on=date(2026, 1, 1),
                                 card_hours_limit=Decimal(hours), **extra)  # fmt: skip


def test_remaining_minutes_plus_what_slurm_counts(slurm_team, fake, a100, train_pool):
    monthly = budget(slurm_team, "month", 100)
    quarterly = budget(slurm_team, "quarter", 90)
    yearly = budget(slurm_team, "year", 2000, gpu_model=a100)
    pooled = budget(slurm_team, "year", 500, pool=train_pool)
    fake.set_gpu_minutes("nlp", "rtx4090", 999)  # left from a deleted budget: removed

    written = budget_minutes_sync(team=slurm_team, adapters={None: fake})

    assert written == {"environment": {"gres/gpu": 3725, "gres/gpu:a100": 118_200}}
    assert fake.get_gpu_minutes("nlp") == {"gres/gpu": 3725, "gres/gpu:a100": 118_200}
    # the pool budget (500 h, none of the 30 h in its pool: 30,000 min) is the team's only
    # Slurm pool, so it is written too, and the smaller monthly/quarterly share wins
    for row, tres, minutes in [(monthly, "gres/gpu", 3725), (quarterly, "gres/gpu", 3725),
                               (yearly, "gres/gpu:a100", 118_200),
                               (pooled, "gres/gpu", 3725)]:  # fmt: skip
        row.refresh_from_db()
        assert (row.slurm_tres, row.slurm_minutes, row.slurm_note) == (tres, minutes, "")
        assert row.slurm_clusters == {"environment": minutes}
        assert row.slurm_synced_at == NOW

    # twice: nothing changes
    calls = len(fake.calls)
    assert budget_minutes_sync(team=slurm_team, adapters={None: fake}) == written
    assert "set_gpu_minutes" in fake.calls[calls:]  # asked, but the fake saw equal values
    assert fake.get_gpu_minutes("nlp") == written["environment"]


def test_an_exhausted_budget_writes_only_what_slurm_already_counts(slurm_team, fake):
    budget(slurm_team, "month", 20)  # 30 used > 20: 0 left, floored
    assert budget_minutes_sync(team=slurm_team, adapters={None: fake}) == {
        "environment": {"gres/gpu": 125}
    }


def test_a_refusal_is_kept_on_the_budget_and_nothing_else_moves(slurm_team, fake, l40s):
    refused = budget(slurm_team, "month", 10, gpu_model=l40s)  # GRES type the cluster lacks
    before = Budget.objects.values().get(pk=refused.pk)

    assert budget_minutes_sync(team=slurm_team, adapters={None: fake}) == {}

    refused.refresh_from_db()
    assert refused.slurm_note.startswith("Slurm refused GrpTRESMins gres/gpu:")
    assert "The portal enforces it." in refused.slurm_note
    assert refused.slurm_minutes is None
    assert fake.get_gpu_minutes("nlp") == {}
    after = Budget.objects.values().get(pk=refused.pk)
    moved = {k for k in after if after[k] != before[k]}
    assert moved == {"slurm_tres", "slurm_note", "slurm_synced_at"}


def test_no_slurm_pool_or_no_account(team, fake, slurm_team):
    row = budget(slurm_team, "month", 100)
    other = FakeScheduler()  # the account was never created there
    assert budget_minutes_sync(team=slurm_team, adapters={None: other}) == {}
    row.refresh_from_db()
    assert row.slurm_note == NOTE_NO_ACCOUNT

    from pools.capacity.models import Allocation

    Allocation.objects.filter(team=slurm_team).delete()
    assert budget_minutes_sync(team=slurm_team, adapters={None: fake}) == {}
    row.refresh_from_db()
    assert row.slurm_note == NOTE_NO_SLURM
    assert fake.calls == ["ensure_account"]  # the fixture's own: Slurm not asked


def test_slurm_pools_without_a_connection_are_not_called_no_slurm_pool(slurm_team):
    """The team holds an allocation in a Slurm pool, but no adapter is configured for its
    cluster (the demo: no SLURM_REST_URL): the note says so, not "no allocation in a Slurm
    pool" (QA read that on the demo's budget page next to NLP's active Slurm allocation)."""
    row = budget(slurm_team, "month", 100)
    assert budget_minutes_sync(team=slurm_team, adapters={}) == {}
    row.refresh_from_db()
    assert row.slurm_note == (
        "No connection to the team's Slurm cluster (environment) is configured here: the "
        "portal enforces it."
    )
    assert row.slurm_minutes is None


def test_the_budget_page_shows_what_slurm_holds_or_why_not(slurm_team, fake, l40s, a100,
                                                           team_member, client):  # fmt: skip
    budget(slurm_team, "year", 2000, gpu_model=a100)
    budget(slurm_team, "month", 10, gpu_model=l40s)
    budget_minutes_sync(team=slurm_team, adapters={None: fake})
    client.force_login(team_member)
    html = client.get("/costs/budgets/").content.decode()
    assert '<code class="ident">GrpTRESMins=<wbr>gres/<wbr>gpu:<wbr>a100=<wbr>118200</code>' in html
    assert 'class="error">Slurm refused GrpTRESMins gres/gpu:' in html


# ------------------------------------------------------------------ several Slurm clusters


def test_split_minutes_by_hand():
    from billing.budgets.slurm import split_minutes

    assert split_minutes(1000, {"a": 3, "b": 1}) == {"a": 750, "b": 250}
    # 1,000 × 2/3 = 666.67 -> 666, × 1/3 = 333.33 -> 333; the 1 left goes to the cap of 2
    assert split_minutes(1000, {"a": 1, "b": 2}) == {"a": 333, "b": 667}
    # 10 × 1/3 = 3 each, 1 left to the first of the equal caps
    assert split_minutes(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    assert split_minutes(1000, {"a": 4, "b": 0}) == {"a": 1000, "b": 0}
    assert split_minutes(1001, {"a": None, "b": 5}) == {"a": 501, "b": 500}  # no cap: equal
    assert split_minutes(7, {"a": 0, "b": 0}) == {"a": 4, "b": 3}
    assert split_minutes(0, {"a": 3, "b": 1}) == {"a": 0, "b": 0}
    assert split_minutes(500, {}) == {}


@pytest.fixture
def two_clusters(slurm_team, train_pool, a100):
    """``nlp`` in a second Slurm cluster too: train_pool moves to cluster ``east``, pool
    ``west-gpu`` of cluster ``west`` gets an allocation; caps A100 3 in east, 1 in west."""
    from factories import AllocationFactory, ClusterFactory, PoolFactory

    from scheduler_adapters.records import GpuLimit

    east, west = ClusterFactory(slug="east"), ClusterFactory(slug="west")
    train_pool.cluster = east
    train_pool.save(update_fields=["cluster"])
    west_pool = PoolFactory(slug="west-gpu", cluster=west)
    tomorrow = NOW + timedelta(days=1)
    AllocationFactory(team=slurm_team, pool=west_pool, gpu_model=a100, card_count=1,
                      starts_at=tomorrow, ends_at=tomorrow + timedelta(days=1))  # fmt: skip
    fakes = {}
    for cluster, cards, used in [(east, 3, 40.7), (west, 1, 10.2)]:
        fake = FakeScheduler()
        fake.ensure_account("nlp", description="NLP", organization="nlp")
        fake.set_gpu_limit(GpuLimit("nlp", None, "a100", cards))
        fake.minutes_used["nlp"] = {"gres/gpu": used}
        fakes[cluster.pk] = fake
    return east, west, west_pool, fakes


def test_a_team_wide_budget_is_split_by_the_cards_cap_in_each_cluster(two_clusters):
    east, west, _, fakes = two_clusters
    # monthly 50 h, 30 h used: 20 h = 1,200 min left; caps 3 and 1: 900 in east + the 40.7
    # its Slurm counts (floored: 40), 300 in west + its 10
    row = budget(Team.objects.get(slug="nlp"), "month", 50)
    written = budget_minutes_sync(team=row.team, adapters=fakes)
    assert written == {"east": {"gres/gpu": 940}, "west": {"gres/gpu": 310}}
    assert fakes[east.pk].get_gpu_minutes("nlp") == {"gres/gpu": 940}
    assert fakes[west.pk].get_gpu_minutes("nlp") == {"gres/gpu": 310}
    row.refresh_from_db()
    assert (row.slurm_tres, row.slurm_minutes, row.slurm_note) == ("gres/gpu", 1250, "")
    assert row.slurm_clusters == {"east": 940, "west": 310}

    # west's cap raised to 2: the next sync splits 1,200 as 3/5 = 720 and 2/5 = 480
    from scheduler_adapters.records import GpuLimit

    fakes[west.pk].set_gpu_limit(GpuLimit("nlp", None, "a100", 2))
    assert budget_minutes_sync(team=row.team, adapters=fakes) == {
        "east": {"gres/gpu": 720 + 40},
        "west": {"gres/gpu": 480 + 10},
    }


def test_a_pool_budget_goes_to_its_cluster_only(two_clusters, train_pool):
    east, west, west_pool, fakes = two_clusters
    team = Team.objects.get(slug="nlp")
    pooled = budget(team, "year", 20, pool=west_pool)  # 20 h, none used in west: 1,200 min
    assert budget_minutes_sync(team=team, adapters=fakes) == {"west": {"gres/gpu": 1210}}
    assert fakes[east.pk].get_gpu_minutes("nlp") == {}
    pooled.refresh_from_db()
    assert pooled.slurm_clusters == {"west": 1210}

    # a second pool of the team in west: Slurm cannot limit one partition, the portal does
    from factories import AllocationFactory, PoolFactory

    other = PoolFactory(slug="west-more", cluster=west)
    AllocationFactory(team=team, pool=other, gpu_model=pooled.team.allocations.first().gpu_model,
                      card_count=1, starts_at=NOW + timedelta(days=1),
                      ends_at=NOW + timedelta(days=2))  # fmt: skip
    assert budget_minutes_sync(team=team, adapters=fakes) == {}
    assert fakes[west.pk].get_gpu_minutes("nlp") == {}  # the portal owns it: removed
    pooled.refresh_from_db()
    assert (pooled.slurm_minutes, pooled.slurm_note) == (None, NOTE_POOL)


def test_one_cluster_down_re_splits_nothing(two_clusters):
    east, west, _, fakes = two_clusters
    team = Team.objects.get(slug="nlp")
    row = budget(team, "month", 100)  # 70 h left = 4,200 min: 3,150 / 1,050
    assert budget_minutes_sync(team=team, adapters=fakes) == {
        "east": {"gres/gpu": 3150 + 40},
        "west": {"gres/gpu": 1050 + 10},
    }
    fakes[west.pk].down = True
    budget_update_limit(row, 200)
    assert budget_minutes_sync(team=team, adapters=fakes) == {}
    assert fakes[east.pk].get_gpu_minutes("nlp") == {"gres/gpu": 3190}  # kept as it was
    row.refresh_from_db()
    assert row.slurm_note.startswith("Slurm in west could not be asked: ")
    assert row.slurm_note.endswith("The portal enforces it.")


def test_a_cluster_without_the_account_gets_no_share(two_clusters):
    east, west, _, fakes = two_clusters
    team = Team.objects.get(slug="nlp")
    budget(team, "month", 100)
    fakes[west.pk] = FakeScheduler()  # no account there yet: it cannot run there
    assert budget_minutes_sync(team=team, adapters=fakes) == {"east": {"gres/gpu": 4200 + 40}}


def budget_update_limit(row, hours):
    Budget.objects.filter(pk=row.pk).update(card_hours_limit=Decimal(hours))


def test_the_budget_page_shows_each_clusters_share(two_clusters, team_member, client):
    _, _, _, fakes = two_clusters
    budget(Team.objects.get(slug="nlp"), "month", 50)
    budget_minutes_sync(team=Team.objects.get(slug="nlp"), adapters=fakes)
    client.force_login(team_member)
    html = client.get("/costs/budgets/").content.decode()
    assert '<code class="ident">GrpTRESMins=<wbr>gres/<wbr>gpu=<wbr>940</code> in east<br>' in html
    assert '<code class="ident">GrpTRESMins=<wbr>gres/<wbr>gpu=<wbr>310</code> in west' in html
    assert "caps of 3 and 1 cards: 750 and 250" in html
