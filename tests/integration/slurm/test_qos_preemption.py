"""Workload classes as Slurm QOS on the real cluster (issue #36's "Done when"): the portal writes a
batch and a production QOS (production may preempt batch) and an account's QOS list through
slurmrestd, reads them back, and then a production job really preempts a batch job that holds
the cards it needs.

Needs ``PreemptType=preempt/qos`` in slurm.conf (``scripts/services/slurm-lib.sh``). Names start
with ``hqos`` so that nothing collides with other tests; the QOS are deleted afterwards.
"""

from __future__ import annotations

import time
import uuid

import pytest
from integration.slurm.slurm_cluster import build_adapter, eventually, sacctmgr, slurm_command

from scheduler_adapters.errors import NotFound, SchedulerError, SchedulerRejected
from scheduler_adapters.records import AccountQos, GpuLimit, JobSpec, JobState, QosSpec

pytestmark = pytest.mark.integration


@pytest.fixture
def qos_names(slurm, cleanup):
    """A fresh batch / production QOS name pair; both QOS are deleted after the test (after
    ``cleanup`` has cancelled the jobs and deleted the accounts that use them)."""
    suffix = uuid.uuid4().hex[:6]
    names = (f"hqos-batch-{suffix}", f"hqos-prod-{suffix}")
    yield names
    cleanup.run()
    cleanup.jobs.clear()
    cleanup.accounts.clear()
    for _ in range(20):  # a QOS still named by a completing job cannot go yet
        if "Job(s) active" not in sacctmgr("-i", "delete", "qos", f"name={','.join(names)}"):
            break
        time.sleep(0.5)


def _writer(slurm, slurm_settings):
    """The adapter that may change an account's QOS list: the REST one, except on 22.05, where
    the change goes through sacctmgr (the REST one refuses it, as checked below)."""
    if slurm.api_version == "v0.0.38":
        return build_adapter(slurm_settings, SACCTMGR={"ENABLED": True})
    return slurm


def _assoc_field(account: str, field: str) -> str:
    return sacctmgr("show", "assoc", f"account={account}", "user=", f"format={field}")


def test_qos_written_read_back_and_idempotent(slurm, slurm_settings, cleanup, qos_names):
    batch_name, prod_name = qos_names
    batch = QosSpec(batch_name, 10, (), "CANCEL", description="hqos batch")
    prod = QosSpec(prod_name, 1000, (batch_name,), "REQUEUE", description="hqos production")

    with pytest.raises(NotFound):  # what it preempts must exist first
        slurm.ensure_qos(prod)
    assert slurm.get_qos(prod_name) is None
    assert slurm.ensure_qos(batch) is True
    assert slurm.ensure_qos(prod) is True
    assert slurm.ensure_qos(prod) is False  # nothing to change

    assert slurm.get_qos(prod_name) == QosSpec(
        prod_name, 1000, (batch_name,), "REQUEUE", description="hqos production"
    )
    # sacctmgr, not the adapter, as the independent witness
    shown = sacctmgr(
        "show", "qos", f"name={prod_name},{batch_name}", "format=name,priority,preempt,preemptmode"
    )
    assert sorted(shown.splitlines()) == sorted(
        [f"{batch_name}|10||cancel", f"{prod_name}|1000|{batch_name}|requeue"]
    )

    # a change is written: priority 1000 -> 2000, read back
    assert slurm.ensure_qos(QosSpec(prod_name, 2000, (batch_name,), "REQUEUE")) is True
    assert f"{prod_name}|2000" in sacctmgr(
        "show", "qos", f"name={prod_name}", "format=name,priority"
    )


def test_account_qos_list_and_default_keep_the_gpu_limit(
    slurm, slurm_settings, cleanup, qos_names, a100_partition
):
    batch_name, prod_name = qos_names
    slurm.ensure_qos(QosSpec(batch_name, 10, (), "REQUEUE"))
    slurm.ensure_qos(QosSpec(prod_name, 1000, (batch_name,), "REQUEUE"))
    account = f"hqos-{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    slurm.ensure_account(account, description="hqos", organization="hqos")
    slurm.set_gpu_limit(GpuLimit(account, a100_partition, "a100", 3))
    wanted = AccountQos(account, (batch_name, prod_name), batch_name)

    if slurm.api_version == "v0.0.38":
        with pytest.raises(SchedulerRejected, match="sacctmgr fallback"):
            slurm.set_account_qos(wanted)
    writer = _writer(slurm, slurm_settings)
    with pytest.raises(NotFound):
        writer.set_account_qos(AccountQos(account, (f"hqos-none-{uuid.uuid4().hex[:6]}",)))
    assert writer.set_account_qos(wanted) is True
    assert writer.set_account_qos(wanted) is False

    assert slurm.get_account_qos(account) == wanted
    assert _assoc_field(account, "qos,defaultqos") == f"{batch_name},{prod_name}|{batch_name}"
    # the QOS write sent the GrpTRES along: 24.11/26.05 would have cleared it otherwise
    assert slurm.get_gpu_limits(account) == (GpuLimit(account, a100_partition, "a100", 3),)
    assert _assoc_field(account, "grptres") == "gres/gpu:a100=3"

    # narrowing to production only, default production
    assert writer.set_account_qos(AccountQos(account, (prod_name,), prod_name)) is True
    assert _assoc_field(account, "qos,defaultqos") == f"{prod_name}|{prod_name}"


def _job_history(job_id: int) -> list[str]:
    """sacct's records of the job, requeued runs included (``--duplicates``):
    ``state|reason|restarts``... one line per run; the independent witness of what happened."""
    import subprocess

    done = subprocess.run(
        slurm_command(
            "sacct",
            "-j",
            str(job_id),
            "--duplicates",
            "-X",
            "-n",
            "-P",
            "-o",
            "jobid,state,reason,qos,start,end",
        ),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


def _require_qos_preemption() -> None:
    """Fail (never skip) with the fix when the cluster does not preempt by QOS: a slurm.conf
    written by a ``slurm-lib.sh`` older than issue #36 (the services outlive sessions; the
    scripts rewrite the file and restart the daemons once when it differs)."""
    import subprocess

    done = subprocess.run(
        slurm_command("scontrol", "show", "config"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    found = {
        key.strip(): value.strip()
        for key, _, value in (line.partition("=") for line in done.stdout.splitlines())
    }
    if found.get("PreemptType") != "preempt/qos":
        pytest.fail(
            f"the test Slurm runs PreemptType={found.get('PreemptType')!r}, not preempt/qos: "
            "rerun scripts/ensure_services.sh from a tree whose scripts/services/slurm-lib.sh "
            "writes it (it restarts the Slurm daemons once)",
            pytrace=False,
        )


@pytest.mark.parametrize("mode", ["REQUEUE", "CANCEL"])
def test_a_production_job_preempts_a_batch_job_on_the_real_cluster(
    slurm, slurm_settings, cleanup, qos_names, a100_partition, cluster, mode
):
    """Batch fills the 4 A100 of one node; a production job asking for the same 4 cards makes
    slurmctld preempt the batch job by the batch QOS's PreemptMode (REQUEUE: back to pending,
    to run again; CANCEL: ended as PREEMPTED) and start itself."""
    _require_qos_preemption()
    batch_name, prod_name = qos_names
    slurm.ensure_qos(QosSpec(batch_name, 10, (), mode, description="hqos batch"))
    slurm.ensure_qos(QosSpec(prod_name, 1000, (batch_name,), "REQUEUE", description="hqos prod"))
    account = f"hqos-{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    slurm.ensure_account(account, description="hqos", organization="hqos")
    slurm.ensure_user_association(account, "alice", a100_partition)
    _writer(slurm, slurm_settings).set_account_qos(
        AccountQos(account, (batch_name, prod_name), batch_name)
    )
    cards = cluster.most_on_one_node(a100_partition, "a100")
    spec = dict(
        account=account,
        user="alice",
        partition=a100_partition,
        gres_type="a100",
        gpus=cards,
        time_limit_min=10,
    )
    batch_job = slurm.submit_job(
        JobSpec(**spec, qos=batch_name, name="hqos-batch", script="#!/bin/sh\nsleep 300\n")
    )
    cleanup.jobs.append(batch_job)
    started = eventually(
        lambda: slurm.get_job(batch_job), lambda j: j.state == JobState.RUNNING, timeout_s=90
    )
    assert started.gpus_allocated == {"a100": cards}

    submitted = time.monotonic()
    prod_job = slurm.submit_job(
        JobSpec(**spec, qos=prod_name, name="hqos-prod", script="#!/bin/sh\nsleep 60\n")
    )
    cleanup.jobs.append(prod_job)
    seen: list[tuple[float, str, str | None, str, str | None]] = []

    def both():
        batch, prod = slurm.get_job(batch_job), slurm.get_job(prod_job)
        row = (
            round(time.monotonic() - submitted, 1),
            str(batch.state),
            batch.state_reason,
            str(prod.state),
            prod.state_reason,
        )
        if not seen or seen[-1][1:] != row[1:]:
            seen.append(row)
        return batch, prod

    batch, prod = eventually(
        both,
        # the batch job passes through COMPLETING (its epilog runs) after production started:
        # wait for the state it settles in
        lambda pair: (
            pair[1].state == JobState.RUNNING
            and pair[0].state not in {JobState.RUNNING, JobState.COMPLETING}
        ),
        timeout_s=90,
    )
    release = slurm_settings.get("SLURM_RELEASE")
    print(f"\npreemption ({mode}) on Slurm {release} ({slurm.api_version}):")
    for row in seen:
        print("  t+{:5.1f}s batch {} ({}) / production {} ({})".format(*row))
    history = _job_history(batch_job)
    print("  sacct of the batch job:", *history, sep="\n    ")

    assert prod.gpus_allocated == {"a100": cards}
    if mode == "REQUEUE":  # back to pending, to run again when the cards come back
        assert batch.state in {JobState.PENDING, JobState.REQUEUED}, batch
    else:  # ended for good, as preempted (not cancelled by anyone, not failed)
        assert batch.state == JobState.PREEMPTED, batch
    # the accounting record of the run that held the cards says it was preempted
    assert any(line.split("|")[1] == "PREEMPTED" for line in history), history


def test_account_qos_on_an_unknown_account_is_not_found(slurm, slurm_settings, qos_names):
    batch_name, _ = qos_names
    slurm.ensure_qos(QosSpec(batch_name, 10, (), "REQUEUE"))
    with pytest.raises(NotFound):
        _writer(slurm, slurm_settings).set_account_qos(
            AccountQos(f"hqos-none-{uuid.uuid4().hex[:6]}", (batch_name,))
        )
    with pytest.raises(SchedulerError):
        slurm.get_account_qos(f"hqos-none-{uuid.uuid4().hex[:6]}")


@pytest.mark.django_db
def test_portal_approval_writes_the_class_qos_on_the_real_cluster(
    slurm,
    slurm_settings,
    cleanup,
    a100_partition,
    django_user_model,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """A production request approved through the portal: every class's QOS is written (under a
    test prefix here), the team account gets the production QOS as its list and default, and
    reconcile finds nothing to repair; sacctmgr is the witness."""
    from datetime import timedelta

    from django.test import override_settings
    from django.utils import timezone
    from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory

    from pools.capacity.models import CapacityRequest
    from pools.capacity.services.reconcile import reconcile_slurm
    from pools.capacity.services.requests import capacity_request_approve
    from pools.classes import slurm_qos
    from pools.classes.models import WorkloadClass
    from pools.clusters import adapters
    from pools.common.choices import AliasKind, AllocationStatus, RequestStatus, Scheduler
    from pools.inventory.models import GpuModel, GpuModelAlias
    from scheduler_adapters.registry import slurm_settings_from_env

    prefix = f"hqos-{uuid.uuid4().hex[:6]}-"
    monkeypatch.setattr(slurm_qos, "QOS_PREFIX", prefix)
    names = [f"{prefix}{c.slug}" for c in WorkloadClass.objects.all()]
    account = f"hqos-{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    pool = PoolFactory(slug="gpu", scheduler=Scheduler.SLURM, slurm_partition=a100_partition)
    node = NodeFactory(pool=pool)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    team = TeamFactory(slug=account)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    now = timezone.now()
    request = CapacityRequest.objects.create(
        team=team,
        requested_by=admin,
        workload_kind="training",
        workload_class=WorkloadClass.objects.get(slug="production"),
        pool=pool,
        gpu_model=a100,
        card_count=1,
        starts_at=now,
        ends_at=now + timedelta(days=7),
        justification="integration",
        status=RequestStatus.SUBMITTED,
    )
    config = slurm_settings_from_env(slurm_settings)
    if slurm.api_version == "v0.0.38":  # 22.05 changes association QOS only through sacctmgr
        config["SACCTMGR"] = config["SACCTMGR"] | {"ENABLED": True}
    adapters.reset()
    try:
        with override_settings(SCHEDULERS={"slurm": config}):
            with django_capture_on_commit_callbacks(execute=True):
                allocation = capacity_request_approve(request=request, actor=admin)
            allocation.refresh_from_db()
            assert allocation.status == AllocationStatus.ACTIVE, allocation.status_reason
            report = reconcile_slurm()
        assoc = _assoc_field(account, "qos,defaultqos")
        qos_rows = sacctmgr(
            "show", "qos", f"name={','.join(names)}", "format=name,priority,preempt"
        )
    finally:
        adapters.reset()
        cleanup.run()
        cleanup.accounts.clear()
        for _ in range(20):
            if "Job(s) active" not in sacctmgr("-i", "delete", "qos", f"name={','.join(names)}"):
                break
            time.sleep(0.5)

    assert allocation.scheduler_binding["qos"] == [f"{prefix}production"]
    assert assoc == f"{prefix}production|{prefix}production"
    # the seeded classes (batch 100, development 200, internal 500, production 1000), each
    # preempting those of a lower preemption order
    p = prefix
    assert sorted(qos_rows.splitlines()) == sorted(
        [
            f"{p}batch|100|",
            f"{p}development|200|{p}batch",
            f"{p}internal|500|{p}batch,{p}development",
            f"{p}production|1000|{p}batch,{p}development,{p}internal",
        ]
    )
    assert [d.subject for d in report.drifts if "QOS" in d.subject] == []
    assert report.errors == []


def test_account_qos_refusal_is_known_before_writing(slurm, slurm_settings):
    """Only 22.05 over REST without the sacctmgr fallback refuses an account's QOS list, and the
    adapter says so without writing (24.11 and 26.05 take it over REST)."""
    if slurm.api_version == "v0.0.38":
        assert "sacctmgr fallback" in slurm.account_qos_refusal()
        with_fallback = build_adapter(slurm_settings, SACCTMGR={"ENABLED": True})
        try:
            assert with_fallback.account_qos_refusal() is None
        finally:
            with_fallback.close()
    else:
        assert slurm.account_qos_refusal() is None


def test_portal_approval_on_22_05_without_sacctmgr_writes_no_cap_and_no_qos(
    slurm,
    slurm_settings,
    cleanup,
    a100_partition,
    django_user_model,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    """22.05, REST only: a production allocation is refused before its cap is written (before
    issue 36's fix the cap was raised to 1 and then the QOS refused). What Slurm holds after is
    the failed allocation's release: the account with a cap of 0 cards and no class QOS."""
    if slurm.api_version != "v0.0.38":
        pytest.skip("only 22.05 (v0.0.38) refuses association QOS over REST")
    from datetime import timedelta

    from django.test import override_settings
    from django.utils import timezone
    from factories import GpuFactory, NodeFactory, PoolFactory, TeamFactory

    from pools.capacity.models import CapacityRequest
    from pools.capacity.services.requests import capacity_request_approve
    from pools.classes import slurm_qos
    from pools.classes.models import WorkloadClass
    from pools.clusters import adapters
    from pools.common.choices import AliasKind, AllocationStatus, RequestStatus, Scheduler
    from pools.inventory.models import GpuModel, GpuModelAlias
    from scheduler_adapters.registry import slurm_settings_from_env

    prefix = f"hclass-{uuid.uuid4().hex[:6]}-"
    monkeypatch.setattr(slurm_qos, "QOS_PREFIX", prefix)
    names = [f"{prefix}{c.slug}" for c in WorkloadClass.objects.all()]
    account = f"hclass-{uuid.uuid4().hex[:8]}"
    cleanup.accounts.append(account)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    pool = PoolFactory(slug="gpu", scheduler=Scheduler.SLURM, slurm_partition=a100_partition)
    node = NodeFactory(pool=pool)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    team = TeamFactory(slug=account)
    admin = django_user_model.objects.create_user("admin", password="x", is_staff=True)
    now = timezone.now()
    request = CapacityRequest.objects.create(
        team=team,
        requested_by=admin,
        workload_kind="training",
        workload_class=WorkloadClass.objects.get(slug="production"),
        pool=pool,
        gpu_model=a100,
        card_count=1,
        starts_at=now,
        ends_at=now + timedelta(days=7),
        justification="integration",
        status=RequestStatus.SUBMITTED,
    )
    config = slurm_settings_from_env(slurm_settings)
    config["SACCTMGR"] = config["SACCTMGR"] | {"ENABLED": False}
    adapters.reset()
    try:
        with override_settings(SCHEDULERS={"slurm": config}):
            with django_capture_on_commit_callbacks(execute=True):
                allocation = capacity_request_approve(request=request, actor=admin)
            allocation.refresh_from_db()
        assoc = _assoc_field(account, "grptres,qos")
        qos_rows = sacctmgr("show", "qos", f"name={','.join(names)}", "format=name")
    finally:
        adapters.reset()
        cleanup.run()
        cleanup.accounts.clear()
        sacctmgr("-i", "delete", "qos", f"name={','.join(names)}")

    assert allocation.status == AllocationStatus.FAILED
    assert "sacctmgr fallback" in allocation.status_reason
    assert assoc.split("|")[0] == "gres/gpu:a100=0"
    assert prefix not in assoc
    assert qos_rows.strip() == ""
