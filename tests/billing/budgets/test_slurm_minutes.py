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

    from pools.choices import AliasKind
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

    written = budget_minutes_sync(team=slurm_team, adapter=fake)

    assert written == {"gres/gpu": 3725, "gres/gpu:a100": 118_200}
    assert fake.get_gpu_minutes("nlp") == {"gres/gpu": 3725, "gres/gpu:a100": 118_200}
    for row, tres, minutes in [(monthly, "gres/gpu", 3725), (quarterly, "gres/gpu", 3725),
                               (yearly, "gres/gpu:a100", 118_200)]:  # fmt: skip
        row.refresh_from_db()
        assert (row.slurm_tres, row.slurm_minutes, row.slurm_note) == (tres, minutes, "")
        assert row.slurm_synced_at == NOW
    pooled.refresh_from_db()
    assert (pooled.slurm_minutes, pooled.slurm_note) == (None, NOTE_POOL)

    # twice: nothing changes
    calls = len(fake.calls)
    assert budget_minutes_sync(team=slurm_team, adapter=fake) == written
    assert "set_gpu_minutes" in fake.calls[calls:]  # asked, but the fake saw equal values
    assert fake.get_gpu_minutes("nlp") == written


def test_an_exhausted_budget_writes_only_what_slurm_already_counts(slurm_team, fake):
    budget(slurm_team, "month", 20)  # 30 used > 20: 0 left, floored
    assert budget_minutes_sync(team=slurm_team, adapter=fake) == {"gres/gpu": 125}


def test_a_refusal_is_kept_on_the_budget_and_nothing_else_moves(slurm_team, fake, l40s):
    refused = budget(slurm_team, "month", 10, gpu_model=l40s)  # GRES type the cluster lacks
    before = Budget.objects.values().get(pk=refused.pk)

    assert budget_minutes_sync(team=slurm_team, adapter=fake) == {}

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
    assert budget_minutes_sync(team=slurm_team, adapter=other) == {}
    row.refresh_from_db()
    assert row.slurm_note == NOTE_NO_ACCOUNT

    from pools.capacity.models import Allocation

    Allocation.objects.filter(team=slurm_team).delete()
    assert budget_minutes_sync(team=slurm_team, adapter=fake) == {}
    row.refresh_from_db()
    assert row.slurm_note == NOTE_NO_SLURM
    assert fake.calls == ["ensure_account"]  # the fixture's own: Slurm not asked


def test_the_budget_page_shows_what_slurm_holds_or_why_not(slurm_team, fake, l40s, a100,
                                                           team_member, client):  # fmt: skip
    budget(slurm_team, "year", 2000, gpu_model=a100)
    budget(slurm_team, "month", 10, gpu_model=l40s)
    budget_minutes_sync(team=slurm_team, adapter=fake)
    client.force_login(team_member)
    html = client.get("/costs/budgets/").content.decode()
    assert "<code>GrpTRESMins=gres/gpu:a100=118200</code>" in html
    assert 'class="error">Slurm refused GrpTRESMins gres/gpu:' in html
