"""Used card-hours metered from the real Slurm accounting (issue #6 against issue #4's cluster).

A team's job runs on the test cluster under its account; the billing importer reads it back
from slurmdbd and records cards × elapsed seconds; importing the same window again adds nothing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from integration.slurm.slurm_cluster import eventually

from billing.models import UsageRecord
from billing.services.usage_import import usage_import_slurm
from pools.capacity.services.requests import capacity_request_approve
from pools.clusters import adapters
from pools.common.choices import AllocationStatus
from scheduler_adapters.records import JobSpec, JobState
from scheduler_adapters.registry import slurm_settings_from_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_a_finished_job_becomes_card_seconds_once(
    slurm, slurm_settings, cleanup, portal_slurm_team, django_capture_on_commit_callbacks
):
    pool, a100, team, alice, admin, submit = portal_slurm_team
    adapters.reset()
    with override_settings(SCHEDULERS={"slurm": slurm_settings_from_env(slurm_settings)}):
        with django_capture_on_commit_callbacks(execute=True):
            allocation = capacity_request_approve(request=submit(1), actor=admin)
    adapters.reset()
    allocation.refresh_from_db()
    assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason

    started = timezone.now() - timedelta(minutes=1)
    job_id = slurm.submit_job(
        JobSpec(
            account=team.slug,
            user="alice",
            partition=pool.slurm_partition,
            gres_type="a100",
            gpus=1,
            time_limit_min=2,
            script="#!/bin/sh\nsleep 3\n",
            name="billing-import",
        )
    )
    cleanup.jobs.append(job_id)
    job = eventually(
        lambda: slurm.get_job(job_id),
        lambda j: j.state == JobState.COMPLETED and j.elapsed_s is not None,
        timeout_s=60,
    )
    window_end = timezone.now() + timedelta(minutes=1)
    # slurmdbd learns of the job's end a moment after slurmctld does.
    eventually(
        lambda: [j for j in slurm.jobs_from_accounting(started, window_end) if j.job_id == job_id],
        lambda found: bool(found) and found[0].end is not None,
        timeout_s=60,
    )

    report = usage_import_slurm(scheduler=slurm, start=started, end=window_end)
    # the job's own key at 0 (nothing ran outside the reservation) and its part inside it
    records = list(UsageRecord.objects.filter(team=team, source="slurm-accounting", quantity__gt=0))
    assert len(records) == 1, report.issues
    record = records[0]
    # 1 card × the job's own elapsed seconds, as slurmdbd reports them.
    assert record.quantity == job.elapsed_s * 1
    assert record.gpu_model == a100
    assert record.allocation_id == allocation.pk  # inside the team's reservation: not charged twice

    usage_import_slurm(scheduler=slurm, start=started, end=window_end)
    assert UsageRecord.objects.filter(team=team, source="slurm-accounting").count() == 2
