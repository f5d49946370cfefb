"""A reservation that admits only one workload class's QOS (issue #36), on the real Slurms:
26.05 takes ``QOS=`` on ``scontrol create reservation`` and then refuses a job of the account
under another QOS ("Problem using reservation") while it queues one under the admitted QOS;
22.05 and 24.11 refuse ``QOS=`` as an unknown parameter and create nothing, which the adapter
raises as :class:`ReservationQosUnsupported` (the portal then reserves without it and says so).

Names start with ``hclass``; the reservation (three days ahead, ten minutes, on the
partition's first node), the account and the QOS are deleted afterwards.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from integration.slurm.slurm_cluster import eventually, sacctmgr

from scheduler_adapters.errors import ReservationQosUnsupported, SchedulerRejected
from scheduler_adapters.records import AccountQos, JobSpec, QosSpec, ReservationSpec

pytestmark = pytest.mark.integration


def test_reservation_qos_admits_only_its_class_or_is_refused_whole(
    slurm, slurm_settings, cluster, cleanup
):
    partition = slurm_settings.get("SLURM_PARTITION", "gpu")
    node, _gres = cluster.require_node(partition, cards=1)
    suffix = uuid.uuid4().hex[:6]
    prod, batch = f"hclass-prod-{suffix}", f"hclass-batch-{suffix}"
    account = f"hclass-{suffix}"
    cleanup.accounts.append(account)
    # a ten-minute window three days ahead at a random minute: clear of other tests' reservations
    start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(
        days=3, minutes=random.randrange(0, 600) * 10
    )
    spec = ReservationSpec(
        name=f"hclass-r-{suffix}",
        account=account,
        nodes=(node,),
        starts_at=start,
        ends_at=start + timedelta(minutes=10),
        qos=(prod,),
    )
    try:
        slurm.ensure_account(account, description="hclass", organization="hclass")
        # the QOS first: 26.05 refuses a reservation naming a QOS it does not have ("Invalid
        # qos specification"); the portal writes the class QOS before the reservation too
        slurm.ensure_qos(QosSpec(batch, 10, (), "REQUEUE"))
        slurm.ensure_qos(QosSpec(prod, 1000, (batch,), "REQUEUE"))
        try:
            slurm.create_reservation(spec)
        except ReservationQosUnsupported:  # 22.05.8 and 24.11.5 here
            assert slurm.get_reservation(spec.name) is None  # nothing was created
            return
        slurm.delete_reservation(spec.name)  # made again below once the account may use it
        slurm.ensure_user_association(account, "alice", partition)
        slurm.set_account_qos(AccountQos(account, (batch, prod), batch))

        assert slurm.create_reservation(spec) is True
        assert slurm.get_reservation(spec.name).qos == (prod,)
        assert slurm.create_reservation(spec) is False  # read back as the same one

        job = dict(account=account, user="alice", partition=partition,
                   script="#!/bin/sh\nsleep 1\n", reservation=spec.name)  # fmt: skip
        with pytest.raises(SchedulerRejected):  # 26.05: "Problem using reservation"
            slurm.submit_job(JobSpec(**job, qos=batch))
        job_id = slurm.submit_job(JobSpec(**job, qos=prod))
        cleanup.jobs.append(job_id)
    finally:
        for queued in cleanup.jobs:  # a queued job keeps the reservation "in use"
            slurm.cancel_job(queued)
        cleanup.jobs.clear()
        eventually(lambda: _deleted(slurm, spec.name), bool)
        cleanup.run()
        cleanup.accounts.clear()
        sacctmgr("-i", "delete", "qos", f"name={prod},{batch}")


def _deleted(slurm, name: str) -> bool:
    slurm.delete_reservation(name)  # ended instead while the cancelled job still ties it
    return slurm.get_reservation(name) is None
