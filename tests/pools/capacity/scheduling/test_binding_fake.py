"""Allocations applied in Slurm through the adapter, with the in-memory fake (unit tier).

The fake mirrors the real adapter (same Protocol, same idempotency, same errors); the same
scenario runs against the real Slurm in tests/integration/slurm/test_portal_binding.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.audit.models import AuditEvent
from pools.capacity.models import Allocation
from pools.capacity.services.allocations import (
    allocation_lifecycle_sweep,
    allocation_provision,
    allocation_release,
)
from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import AllocationStatus
from pools.jobs import retry_note
from scheduler_adapters.errors import SchedulerError, SchedulerUnavailable
from scheduler_adapters.records import GpuLimit

pytestmark = pytest.mark.django_db


def test_approval_sets_grptres_and_release_sets_it_to_zero(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    request = submitted(pool, a100, team, bob, 3, timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()

    assert allocation.status == AllocationStatus.ACTIVE
    assert allocation.scheduler_binding["grp_tres"] == "gres/gpu:a100=3"
    limits = {(lim.gres_type, lim.cards) for lim in fake_slurm.get_gpu_limits("vision")}
    assert limits == {("a100", 3)}

    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=allocation, actor=bob, reason="done early")
    # 0, not "no limit": an association without GrpTRES may use every card
    assert fake_slurm.get_gpu_limits("vision") == (GpuLimit("vision", "gpu", "a100", 0),)


def test_two_allocations_of_one_type_sum_into_one_cap(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        first = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 1, now), actor=admin
        )
        capacity_request_approve(request=submitted(pool, a100, team, bob, 2, now), actor=admin)
    assert [lim.cards for lim in fake_slurm.get_gpu_limits("vision")] == [1 + 2]

    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=first, actor=bob)
    assert [lim.cards for lim in fake_slurm.get_gpu_limits("vision")] == [2]


def test_a_future_window_is_applied_only_when_it_opens(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    start = timezone.now() + timedelta(days=2)
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, start, days=10), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.APPROVED
    assert "vision" not in fake_slurm.accounts  # nothing applied before the window opens

    with django_capture_on_commit_callbacks(execute=True):
        counts = allocation_lifecycle_sweep(now=start)
    assert counts["provisioned"] == 1
    assert Allocation.objects.get(pk=allocation.pk).status == AllocationStatus.ACTIVE
    assert [lim.cards for lim in fake_slurm.get_gpu_limits("vision")] == [2]


def test_a_scheduler_that_is_down_leaves_it_provisioning_until_a_retry_applies_it(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    fake_slurm.fail_next(SchedulerUnavailable("slurmrestd is down"))
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, timezone.now(), days=10), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.PROVISIONING  # visible, not lost, not failed
    assert "vision" not in fake_slurm.accounts

    with django_capture_on_commit_callbacks(execute=True):
        counts = allocation_lifecycle_sweep()
    assert counts["provisioned"] == 1
    assert Allocation.objects.get(pk=allocation.pk).status == AllocationStatus.ACTIVE
    assert [lim.cards for lim in fake_slurm.get_gpu_limits("vision")] == [2]


def test_a_permanent_refusal_fails_the_allocation_with_the_message(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    fake_slurm.reject_next(2045, "Invalid account or account/partition combination specified")
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, timezone.now()), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.FAILED
    assert "Invalid account" in allocation.status_reason
    # nothing granted: the failed allocation's cap is put back to 0 cards (or never written)
    assert sum(lim.cards for lim in fake_slurm.get_gpu_limits("vision")) == 0


def test_a_500_that_refuses_nothing_is_retried_with_the_reason_shown(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    """Issue 27 item 5: slurmrestd answers 500 with error 1 ("Unspecified error") while the
    allocation is applied. Before, it failed for good; now it stays provisioning, saying what
    happened and when it is tried again, and the next sweep applies it."""
    pool, a100, team, bob, admin = setup
    fake_slurm.reject_next(1, "Unspecified error")
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, timezone.now(), days=10), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.PROVISIONING
    # no worker in tests (the task runs eagerly): the lifecycle sweep is the retry
    assert allocation.status_reason == (
        "Slurm answered 500; the lifecycle sweep tries again within 5 min"
    )
    started = AuditEvent.objects.get(action="allocation.provisioning", object_id=str(allocation.pk))
    assert started.reason == "applying in Slurm"  # never provisioning with an empty reason

    with django_capture_on_commit_callbacks(execute=True):
        assert allocation_lifecycle_sweep()["provisioned"] == 1
    assert Allocation.objects.get(pk=allocation.pk).status == AllocationStatus.ACTIVE


def test_each_retry_says_which_and_when(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks, settings
):
    """The task's third retry after a 500 at 14:01:50: retry_countdown(2) = 5 x 2^2 = 20 s, so
    14:02:10, shown to the minute; the final attempt (retries = 8) fails it with the message."""
    settings.TIME_ZONE = "UTC"
    pool, a100, team, bob, admin = setup
    fake_slurm.down = True
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, timezone.now(), days=10), actor=admin
        )
    fake_slurm.down = False
    at = timezone.now().replace(hour=14, minute=1, second=50, microsecond=0)
    assert retry_note(2, now=at) == "retry 3 of 8 at 14:02"
    fake_slurm.reject_next(-1, "Unspecified error")
    with pytest.raises(SchedulerError):
        allocation_provision(
            allocation_id=allocation.pk, final_attempt=False, next_try=retry_note(2, now=at)
        )
    allocation.refresh_from_db()
    assert (allocation.status, allocation.status_reason) == (
        AllocationStatus.PROVISIONING,
        "Slurm answered 500; retry 3 of 8 at 14:02",
    )
    fake_slurm.down = True  # connection refused: no HTTP answer at all
    with pytest.raises(SchedulerError):
        allocation_provision(
            allocation_id=allocation.pk, final_attempt=False, next_try=retry_note(3, now=at)
        )
    allocation.refresh_from_db()
    assert allocation.status_reason == "Slurm did not answer; retry 4 of 8 at 14:02"
    failed = allocation_provision(allocation_id=allocation.pk, final_attempt=True)
    assert failed.status == AllocationStatus.FAILED
    assert "connection refused" in failed.status_reason


def test_an_unreadable_answer_for_one_allocation_does_not_stop_the_sweep(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks, monkeypatch
):
    """Applying the first of two allocations whose windows open together raises something
    that is no scheduler error (a reply the adapter could not read: ``'bool' object has no
    attribute 'get'``). That allocation stays provisioning and says so; the sweep still
    applies the other, and the next sweep applies the first."""
    pool, a100, team, bob, admin = setup
    start = timezone.now() + timedelta(days=2)
    with django_capture_on_commit_callbacks(execute=True):
        first = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 1, start, days=10), actor=admin
        )
        second = capacity_request_approve(
            request=submitted(pool, a100, team, bob, 2, start, days=10), actor=admin
        )
    ensure_account = fake_slurm.ensure_account
    answers = iter([AttributeError("'bool' object has no attribute 'get'")])

    def unreadable_once(*args, **kwargs):
        error = next(answers, None)
        if error is not None:
            raise error
        return ensure_account(*args, **kwargs)

    monkeypatch.setattr(fake_slurm, "ensure_account", unreadable_once)

    with django_capture_on_commit_callbacks(execute=True):
        counts = allocation_lifecycle_sweep(now=start)

    assert counts["provisioned"] == 1
    statuses = {
        a.pk: (a.status, a.status_reason)
        for a in Allocation.objects.filter(pk__in=[first.pk, second.pk])
    }
    broken = [pk for pk, (status, _) in statuses.items() if status == AllocationStatus.PROVISIONING]
    applied = [pk for pk, (status, _) in statuses.items() if status == AllocationStatus.ACTIVE]
    assert len(broken) == 1 and len(applied) == 1
    assert statuses[broken[0]][1] == (
        "Slurm: internal error (AttributeError); the lifecycle sweep tries again within 5 min"
    )

    with django_capture_on_commit_callbacks(execute=True):
        assert allocation_lifecycle_sweep(now=start)["provisioned"] == 1
    assert Allocation.objects.get(pk=broken[0]).status == AllocationStatus.ACTIVE
    assert [lim.cards for lim in fake_slurm.get_gpu_limits("vision")] == [1 + 2]
