"""A cluster whose credentials file cannot be read when an approved allocation is applied
(issue 35): nothing is sent and nothing half-applied — the allocation stays provisioning with
the reason and the retry's time, and the retry after the file is back applies it whole."""

from __future__ import annotations

import pytest
from django.utils import timezone
from factories import ClusterFactory

from pools.capacity.models import Allocation
from pools.capacity.services.allocations import allocation_provision
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.common.choices import AllocationStatus
from pools.jobs import retry_note
from scheduler_adapters.errors import CredentialsUnreadable
from scheduler_adapters.fake import FakeScheduler

pytestmark = pytest.mark.django_db


def test_unreadable_credentials_wait_for_a_retry_then_apply_whole(
    setup, submitted, tmp_path, monkeypatch, django_capture_on_commit_callbacks, settings
):
    settings.TIME_ZONE = "UTC"
    pool, a100, team, bob, admin = setup
    token = tmp_path / "slurm.jwt"  # not there yet: the Secret is not mounted
    pool.cluster = ClusterFactory(
        slug="hclops-train", credential_kind="token-file", credential_path=str(token)
    )
    pool.save()
    slurm = FakeScheduler({"gpu": {"a100": 4}})
    monkeypatch.setattr(adapters, "build_scheduler_adapter", lambda config: slurm)
    adapters.reset()
    with django_capture_on_commit_callbacks(execute=True):  # eager: the sweep is the retry
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, timezone.now(), days=10), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.PROVISIONING
    assert allocation.status_reason.startswith(
        "Slurm not asked: the credentials of cluster hclops-train cannot be read ("
    )
    assert str(token) in allocation.status_reason
    assert slurm.calls == [] and not allocation.scheduler_binding  # nothing half-applied

    # a worker's retry (3 of 8 at 14:02) while the file is still missing says so again
    at = timezone.now().replace(hour=14, minute=1, second=50, microsecond=0)
    with pytest.raises(CredentialsUnreadable):
        allocation_provision(
            allocation_id=allocation.pk, final_attempt=False, next_try=retry_note(2, now=at)
        )
    assert Allocation.objects.get(pk=allocation.pk).status_reason.endswith(
        "; retry 3 of 8 at 14:02"
    )

    token.write_text("a-token\n")  # mounted
    applied = allocation_provision(allocation_id=allocation.pk, final_attempt=False)
    assert applied.status == AllocationStatus.ACTIVE
    assert [limit.cards for limit in slurm.get_gpu_limits("vision")] == [2]
    adapters.reset()
