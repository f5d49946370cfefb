"""A shaped approval made real in Slurm (issue #20), with the in-memory fake: the whole node the
shape check counted on is reserved for the team's account over the window, a job of that shape
runs in the reservation, release ends it (purged once the job is gone); a part-node placement is
not reserved and the allocation says why. The real cluster:
tests/integration/slurm/test_shaped_reservation.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.capacity.services.allocations import allocation_release
from pools.capacity.services.requests import capacity_request_approve
from pools.common.choices import AllocationStatus
from scheduler_adapters.errors import SchedulerRejected
from scheduler_adapters.records import JobSpec, JobState

pytestmark = pytest.mark.django_db


def _shaped(submitted, pool, a100, team, bob, cards):
    request = submitted(pool, a100, team, bob, cards, timezone.now() - timedelta(minutes=1))
    request.cards_per_node, request.node_count, request.one_nvlink_domain = cards, 1, True
    request.save()
    return request


def test_a_whole_node_shape_is_reserved_and_a_job_runs_in_it(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    pool.nodes.update(hostname="fake-gpu-a100", nvlink_domains=[[0, 1, 2, 3]])
    request = _shaped(submitted, pool, a100, team, bob, 4)
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.ACTIVE
    assert allocation.placement == [{"node": "fake-gpu-a100", "gpus": [0, 1, 2, 3]}]
    name = f"portal-alloc-{allocation.pk}"
    assert allocation.scheduler_binding["reservation"] == name
    record = fake_slurm.get_reservation(name)
    assert (record.accounts, record.nodes, record.state) == (
        ("vision",),
        ("fake-gpu-a100",),
        "ACTIVE",
    )

    job = fake_slurm.submit_job(
        JobSpec(account="vision", user="bob", partition="gpu", script="#!/bin/sh\n", gpus=4,
                gres_type="a100", reservation=name, time_limit_min=60)
    )  # fmt: skip
    assert fake_slurm.get_job(job).state is JobState.RUNNING

    # released while the job runs: the reservation ends now (Slurm will not delete one in use)
    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=allocation, actor=bob, reason="done")
    assert fake_slurm.get_reservation(name).state == "INACTIVE"
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 0
    assert fake_slurm.get_job(job).state is JobState.RUNNING
    fake_slurm.cancel_job(job)
    assert fake_slurm.get_reservation(name) is None


def test_a_part_node_placement_is_not_reserved_and_says_so(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    pool, a100, team, bob, admin = setup
    pool.nodes.update(hostname="fake-gpu-a100", nvlink_domains=[[0, 1, 2, 3]])
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(
            request=_shaped(submitted, pool, a100, team, bob, 2), actor=admin
        )
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.ACTIVE
    assert allocation.scheduler_binding["reservation"] is None
    assert allocation.scheduler_binding["placement_note"].startswith(
        "Not reserved in Slurm: the placement takes part of fake-gpu-a100"
    )
    assert fake_slurm.reservations == {}


def test_a_classed_reservation_admits_only_its_class_qos(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    """A production allocation's reservation takes QOS=portal-production (26.05): the team's
    batch job (its account's default QOS would be batch) may not use the reserved node; its
    production job may."""
    from pools.classes.models import WorkloadClass

    pool, a100, team, bob, admin = setup
    pool.nodes.update(hostname="fake-gpu-a100", nvlink_domains=[[0, 1, 2, 3]])
    request = _shaped(submitted, pool, a100, team, bob, 4)
    request.workload_class = WorkloadClass.objects.get(slug="production")
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()
    name = f"portal-alloc-{allocation.pk}"
    assert allocation.scheduler_binding["reservation"] == name
    assert allocation.scheduler_binding["reservation_qos"] == ["portal-production"]
    assert fake_slurm.get_reservation(name).qos == ("portal-production",)

    job = dict(account="vision", user="bob", partition="gpu", script="#!/bin/sh\n", gpus=4,
               gres_type="a100", reservation=name, time_limit_min=60)  # fmt: skip
    with pytest.raises(SchedulerRejected, match="Problem using reservation"):
        fake_slurm.submit_job(JobSpec(**job, qos="portal-batch"))
    running = fake_slurm.submit_job(JobSpec(**job, qos="portal-production"))
    assert fake_slurm.get_job(running).state is JobState.RUNNING


def test_a_slurm_whose_reservations_take_no_qos_reserves_without_it_and_says_so(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    from pools.classes.models import WorkloadClass

    fake_slurm.reservation_qos = False  # 22.05 / 24.11
    pool, a100, team, bob, admin = setup
    pool.nodes.update(hostname="fake-gpu-a100", nvlink_domains=[[0, 1, 2, 3]])
    request = _shaped(submitted, pool, a100, team, bob, 4)
    request.workload_class = WorkloadClass.objects.get(slug="production")
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()
    binding = allocation.scheduler_binding
    assert binding["reservation"] == f"portal-alloc-{allocation.pk}"
    assert binding["reservation_qos"] is None
    assert "take no QOS" in binding["reservation_qos_note"]
    assert binding["qos"] == ["portal-production"]  # the account's list still applies


def test_released_before_its_window_with_a_job_waiting_the_reservation_holds_nothing_then(
    fake_slurm, setup, submitted, django_capture_on_commit_callbacks
):
    """Provisioned ahead of its window (PROVISION_LEAD), a job already waiting for it: Slurm
    will not delete it (in use) nor end it before its start, so it is moved to the coming
    second; the window it was to hold is free, and the team's cap is 0."""
    pool, a100, team, bob, admin = setup
    pool.nodes.update(hostname="fake-gpu-a100", nvlink_domains=[[0, 1, 2, 3]])
    starts_at = timezone.now().replace(microsecond=0) + timedelta(minutes=10)
    request = submitted(pool, a100, team, bob, 4, starts_at)
    request.cards_per_node, request.node_count, request.one_nvlink_domain = 4, 1, True
    request.save()
    with django_capture_on_commit_callbacks(execute=True):
        allocation = capacity_request_approve(request=request, actor=admin)
    allocation.refresh_from_db()
    name = allocation.scheduler_binding["reservation"]
    assert fake_slurm.get_reservation(name).starts_at == starts_at
    job = fake_slurm.submit_job(
        JobSpec(account="vision", user="bob", partition="gpu", script="#!/bin/sh\n", gpus=4,
                gres_type="a100", reservation=name, time_limit_min=60)
    )  # fmt: skip
    assert fake_slurm.get_job(job).state_reason == "Reservation"

    with django_capture_on_commit_callbacks(execute=True):
        allocation_release(allocation=allocation, actor=bob, reason="not needed")
    released = timezone.now().replace(microsecond=0)
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.CANCELLED
    moved = fake_slurm.get_reservation(name)  # the waiting job ties it
    assert released - timedelta(seconds=1) <= moved.starts_at <= released
    assert moved.ends_at == moved.starts_at + timedelta(seconds=1)
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 0
    fake_slurm.cancel_job(job)
