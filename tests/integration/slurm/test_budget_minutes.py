"""A team's card-hour budgets written to its real Slurm account as GrpTRESMins
(billing/budgets/slurm.py), read back from slurmdbd (sacctmgr). Accounts ``hgrpt_*``, deleted
after.

Hand-computed: no usage yet, so a monthly team-wide budget of 100 card-hours leaves
100 × 60 = 6,000 card-minutes on ``gres/gpu``; lowered to 50, 3,000; a fresh account has no
Slurm usage to add (sshare reads 0). On 22.05 over REST the write is refused and kept on the
budget; nothing reaches slurmdbd.
"""

import uuid
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from integration.slurm.slurm_cluster import build_adapter, sacctmgr

from billing.budgets.models import Budget
from billing.budgets.services import budget_update
from billing.budgets.slurm import budget_minutes_sync

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def minutes_in_slurmdbd(account: str) -> str:
    return sacctmgr("show", "assoc", "where", f"account={account}", "user=", "format=grptresmins")


@pytest.mark.parametrize("through", ["rest", "sacctmgr"])
def test_a_budget_becomes_grptresmins(slurm, slurm_settings, cleanup, through, django_user_model):
    from factories import AllocationFactory, PoolFactory, TeamFactory

    from pools.common.choices import Scheduler
    from pools.inventory.models import GpuModel

    adapter = (
        slurm if through == "rest" else build_adapter(slurm_settings, SACCTMGR={"ENABLED": True})
    )
    account = f"hgrpt_{uuid.uuid4().hex[:10]}"
    cleanup.accounts.append(account)
    adapter.ensure_account(account, description="hgrpt budget", organization="portal")
    team = TeamFactory(slug=account)
    pool = PoolFactory(slug="hgrpt-gpu", scheduler=Scheduler.SLURM, slurm_partition="gpu")
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    tomorrow = timezone.now() + timedelta(days=1)
    AllocationFactory(team=team, pool=pool, gpu_model=a100, card_count=1,
                      starts_at=tomorrow, ends_at=tomorrow + timedelta(days=1))  # fmt: skip
    # monthly since 2020: the period counted is the month containing now
    budget = Budget.objects.create(team=team, period="month", starts_on=date(2020, 1, 1),
                                   card_hours_limit=Decimal(100))  # fmt: skip

    written = budget_minutes_sync(team=team, adapters={None: adapter})

    budget.refresh_from_db()
    if through == "rest" and adapter.api_version == "v0.0.38":
        assert written == {}
        assert budget.slurm_note.startswith("Slurm refused GrpTRESMins gres/gpu:")
        assert "sacctmgr" in budget.slurm_note
        assert minutes_in_slurmdbd(account) == ""
        return
    assert list(written.values()) == [{"gres/gpu": 6000}]  # one cluster: the environment's
    assert minutes_in_slurmdbd(account) == "gres/gpu=6000"
    assert (budget.slurm_tres, budget.slurm_minutes, budget.slurm_note) == ("gres/gpu", 6000, "")

    admin = django_user_model.objects.create_user("hgrpt-admin", password="x", is_staff=True)
    budget_update(budget=budget, actor=admin, card_hours_limit=Decimal(50))
    assert list(budget_minutes_sync(team=team, adapters={None: adapter}).values()) == [
        {"gres/gpu": 3000}
    ]
    assert minutes_in_slurmdbd(account) == "gres/gpu=3000"

    budget.delete()
    assert budget_minutes_sync(team=team, adapters={None: adapter}) == {}
    assert minutes_in_slurmdbd(account) == ""  # no budget asks for it: removed
