"""Against the real Slurm (24.11, 26.05; 22.05 too): a temporary override of a team's ceiling
raises its account's GrpTRES cap, read back from slurmdbd, and the beat with the clock moved
past ``until`` puts the allocation's cap back, read back again (issue 32 item 2).

The team's account is ``hoverride_<hex>``, removed at the end (``cleanup``)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import TeamFactory
from integration.slurm.slurm_cluster import sacctmgr

from pools.capacity.models import CapacityRequest, OverrideStatus
from pools.capacity.services.overrides import override_create, override_expire_due
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.common.choices import RequestStatus
from scheduler_adapters.records import GpuLimit
from scheduler_adapters.registry import slurm_settings_from_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def portal_on_real_slurm(slurm, slurm_settings, cleanup):
    adapters.reset()
    with override_settings(SCHEDULERS={"slurm": slurm_settings_from_env(slurm_settings)}):
        yield slurm
    adapters.reset()


def grp_tres(account: str) -> str:
    return sacctmgr("show", "assoc", f"account={account}", "user=", "format=account,grptres")


def test_a_ceiling_override_raises_grptres_and_expiry_restores_it(
    portal_on_real_slurm, portal_slurm_team, cleanup, django_capture_on_commit_callbacks
):
    """1 A100 approved: GrpTRES gres/gpu:a100=1. Raised to 3 until an hour from now:
    max(1, 3) = 3 on the account. The beat two hours on: expired, the cap is 1 again; a
    second run writes nothing."""
    slurm = portal_on_real_slurm
    pool, a100, _team, alice, admin, _submit = portal_slurm_team
    account = f"hoverride_{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    team = TeamFactory(slug=account)
    now = timezone.now()
    request = CapacityRequest.objects.create(
        team=team, requested_by=alice, workload_kind="training", pool=pool, gpu_model=a100,
        card_count=1, starts_at=now, ends_at=now + timedelta(days=7), justification="override",
        status=RequestStatus.SUBMITTED,
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=request, actor=admin)
    assert slurm.get_gpu_limits(account) == (GpuLimit(account, pool.slurm_partition, "a100", 1),)

    until = timezone.now() + timedelta(hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        override = override_create(
            actor=admin, team=team, pool=pool, kind="ceiling", gpu_model=a100, cards=3,
            until=until, reason="integration",
        )  # fmt: skip
    assert override.cards_before == 1
    assert slurm.get_gpu_limits(account)[0].cards == 3
    assert "gres/gpu:a100=3" in grp_tres(account)

    later = until + timedelta(hours=1)
    assert override_expire_due(now=later) == {"expired": 1, "restored": 1, "errors": 0}
    assert slurm.get_gpu_limits(account)[0].cards == 1
    assert "gres/gpu:a100=1" in grp_tres(account)
    override.refresh_from_db()
    assert (override.status, override.restored_at) == (OverrideStatus.EXPIRED, later)
    assert override_expire_due(now=later) == {"expired": 0, "restored": 0, "errors": 0}
