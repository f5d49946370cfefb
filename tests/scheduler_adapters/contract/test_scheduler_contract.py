"""What every SchedulerAdapter promises (scheduler_adapters/base.py), checked on the fake and on
the real Slurm alike. The cards each node has are read from the cluster (``scheduler.shape``:
the fake's ``TEST_CLUSTER``, the real cluster's ``scontrol show nodes``); the tests run jobs on
partition gpu's ``a100`` cards and set limits on ``a100`` and ``rtx4090``, as the test clusters
have them, and skip, saying why, on a cluster without them; ``b200`` is a type it has none of."""

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from scheduler_adapters.errors import NotFound, SchedulerRejected
from scheduler_adapters.records import GpuLimit, JobState


def test_nodes_report_cards_by_gres_type(scheduler):
    result = scheduler.adapter.list_nodes()

    cards = Counter(
        (partition, gpu.model_name)
        for node in result.nodes
        for partition in node.partitions
        for gpu in node.gpus
    )
    assert cards == scheduler.shape.cards()
    assert result.issues == ()


def test_ensure_account_is_idempotent(scheduler):
    adapter = scheduler.adapter
    account = scheduler.account_name()

    assert adapter.ensure_account(account, description="Team", organization="acme") is True
    assert adapter.ensure_account(account, description="Team", organization="acme") is False
    assert adapter.ensure_account(account, description="Team, renamed", organization="acme") is True
    assert adapter.get_gpu_limits(account) == ()


def test_user_association_is_idempotent_and_needs_real_targets(scheduler):
    adapter = scheduler.adapter
    account = scheduler.account()

    assert adapter.ensure_user_association(account, "alice", "gpu") is True
    assert adapter.ensure_user_association(account, "alice", "gpu") is False

    with pytest.raises(NotFound) as no_partition:
        adapter.ensure_user_association(account, "alice", "no-such-partition")
    with pytest.raises(NotFound) as no_account:
        adapter.ensure_user_association(scheduler.account_name(), "alice", "gpu")
    assert no_partition.value.kind == "partition"
    assert no_account.value.kind == "account"


def test_gpu_limits_are_kept_per_type(scheduler):
    scheduler.needs("a100", 1)
    scheduler.needs("rtx4090", 1)
    adapter = scheduler.adapter
    account = scheduler.account()

    assert adapter.set_gpu_limit(GpuLimit(account, "gpu", "a100", 2)) is True
    assert adapter.set_gpu_limit(GpuLimit(account, "gpu", "a100", 2)) is False
    assert adapter.set_gpu_limit(GpuLimit(account, "gpu", "rtx4090", 1)) is True
    assert adapter.get_gpu_limits(account) == (
        GpuLimit(account, "gpu", "a100", 2),
        GpuLimit(account, "gpu", "rtx4090", 1),
    )

    assert adapter.remove_gpu_limit(account, "gpu", "rtx4090") is True
    assert adapter.remove_gpu_limit(account, "gpu", "rtx4090") is False
    assert adapter.get_gpu_limits(account) == (GpuLimit(account, "gpu", "a100", 2),)


def test_limit_targets_must_exist(scheduler):
    scheduler.needs("a100", 1)
    adapter = scheduler.adapter
    missing = scheduler.account_name()
    account = scheduler.account()

    with pytest.raises(NotFound) as no_account:
        adapter.set_gpu_limit(GpuLimit(missing, "gpu", "a100", 1))
    with pytest.raises(NotFound) as no_partition:
        adapter.set_gpu_limit(GpuLimit(account, "no-such-partition", "a100", 1))
    with pytest.raises(SchedulerRejected):
        adapter.set_gpu_limit(GpuLimit(account, "gpu", "b200", 1))
    with pytest.raises(NotFound):
        adapter.get_gpu_limits(missing)

    assert (no_account.value.kind, no_partition.value.kind) == ("account", "partition")
    assert adapter.remove_gpu_limit(missing, "gpu", "a100") is False
    assert adapter.get_gpu_limits(account) == ()


def test_a_gpu_type_the_cluster_does_not_have_changes_no_limit(scheduler):
    """Without a partition to check against, a type no node has is refused too: Slurm 24.11+
    would take ``gres/gpu:b200`` as "clear every GPU limit" and answer 200."""
    scheduler.needs("a100", 1)
    adapter = scheduler.adapter
    account = scheduler.account()
    adapter.set_gpu_limit(GpuLimit(account, "gpu", "a100", 2))

    with pytest.raises(SchedulerRejected):
        adapter.set_gpu_limit(GpuLimit(account, None, "b200", 1))

    assert adapter.get_gpu_limits(account) == (GpuLimit(account, "gpu", "a100", 2),)


def test_a_job_over_the_limit_pends_until_the_limit_is_lifted(scheduler):
    scheduler.needs("a100", 2)
    adapter = scheduler.adapter
    account = scheduler.account(user="alice")
    adapter.set_gpu_limit(GpuLimit(account, "gpu", "a100", 1))
    window_start = datetime.now(UTC) - timedelta(seconds=5)

    first = scheduler.submit(scheduler.job(account))
    second = scheduler.submit(scheduler.job(account))

    running = scheduler.eventually(
        lambda: adapter.get_job(first), lambda j: j.state is JobState.RUNNING
    )
    held = scheduler.eventually(
        lambda: adapter.get_job(second),
        lambda j: j.state_reason is not None and j.state_reason.startswith("AssocGrp"),
    )
    assert running.gpus_allocated == {"a100": 1}
    assert (running.account, running.user, running.partition) == (account, "alice", "gpu")
    assert held.state is JobState.PENDING
    assert held.state_reason == "AssocGrpGRES"
    assert held.gpus_requested == {"a100": 1}
    assert held.gpus_allocated == {}

    adapter.remove_gpu_limit(account, "gpu", "a100")
    scheduler.eventually(lambda: adapter.get_job(second), lambda j: j.state is JobState.RUNNING)

    for job_id in (first, second):
        adapter.cancel_job(job_id)
        adapter.cancel_job(job_id)  # a second cancel is a no-op
    records = scheduler.eventually(
        lambda: adapter.jobs_from_accounting(
            window_start, datetime.now(UTC) + timedelta(minutes=1), accounts=[account]
        ),
        lambda found: (
            [(r.job_id, r.state) for r in found]
            == [(first, JobState.CANCELLED), (second, JobState.CANCELLED)]
        ),
    )
    for record in records:
        assert record.gpus_allocated == {"a100": 1}
        assert record.start is not None and record.end is not None
        assert record.elapsed_s == int((record.end - record.start).total_seconds())
        assert record.card_seconds == {"a100": record.elapsed_s}


def test_submissions_the_scheduler_refuses(scheduler):
    scheduler.needs("a100", 1)
    adapter = scheduler.adapter
    # more a100 than the partition has (4 + 1 on the test clusters)
    more_than_any = scheduler.shape.cards()[(scheduler.partition, "a100")] + 1
    account = scheduler.account(user="alice")

    with pytest.raises(SchedulerRejected) as no_association:
        adapter.submit_job(scheduler.job(account, user="bob"))
    with pytest.raises(SchedulerRejected) as unknown_type:
        adapter.submit_job(scheduler.job(account, gres_type="b200"))
    with pytest.raises(SchedulerRejected) as too_many:
        adapter.submit_job(scheduler.job(account, gpus=more_than_any))

    assert no_association.value.error_numbers == (2045,)
    assert unknown_type.value.error_numbers == (2014,)
    assert too_many.value.error_numbers == (2014,)


def test_unknown_jobs_are_not_found(scheduler):
    with pytest.raises(NotFound) as by_get:
        scheduler.adapter.get_job(2_000_000_000)
    with pytest.raises(NotFound):
        scheduler.adapter.cancel_job(2_000_000_000)

    assert (by_get.value.kind, by_get.value.key) == ("job", 2_000_000_000)


def test_accounting_window(scheduler):
    adapter = scheduler.adapter
    long_ago = datetime(2001, 1, 1, tzinfo=UTC)

    assert adapter.jobs_from_accounting(long_ago, long_ago + timedelta(days=1)) == ()
    with pytest.raises(ValueError):
        adapter.jobs_from_accounting(datetime(2001, 1, 1), datetime(2001, 1, 2))


def test_names_the_scheduler_would_mangle_are_refused(scheduler):
    with pytest.raises(ValueError):
        scheduler.adapter.ensure_account("Team A!", description="x", organization="y")
    with pytest.raises(ValueError):
        GpuLimit("team a", "gpu", "a100", 1)


def test_running_gpu_jobs_say_which_cards_each_job_holds(scheduler):
    scheduler.needs("a100", 3)
    adapter = scheduler.adapter
    account = scheduler.account(user="alice")
    first = scheduler.submit(scheduler.job(account, gpus=2))
    second = scheduler.submit(scheduler.job(account, gpus=1))
    for job_id in (first, second):
        scheduler.eventually(
            lambda j=job_id: adapter.get_job(j), lambda j: j.state is JobState.RUNNING
        )
    mine = [p for p in adapter.running_gpu_jobs("gpu") if p.account == account]
    assert [(p.job_id, p.gpus_allocated, p.placed) for p in mine] == [
        (first, {"a100": 2}, True),
        (second, {"a100": 1}, True),
    ]
    slots = [(s.node, s.index, s.gres_type) for p in mine for s in p.slots]
    assert len(set(slots)) == 3  # three distinct cards of one a100 node
    assert {s[2] for s in slots} == {"a100"} and len({s[0] for s in slots}) == 1
    assert all(
        0 <= s[1] < scheduler.shape.most_on_one_node(scheduler.partition, "a100") for s in slots
    )
    assert [p.job_id for p in adapter.running_gpu_jobs("no-such-partition")] == []
    with pytest.raises(ValueError):
        adapter.running_gpu_jobs("bad partition!")
    adapter.cancel_job(first)
    scheduler.eventually(
        lambda: [p.job_id for p in adapter.running_gpu_jobs() if p.account == account],
        lambda ids: ids == [second],
    )


def test_the_job_queue_shows_who_waits_on_the_cap_and_who_holds_it(scheduler):
    """Cap 1 a100; the first job runs (time limit 10 min), the second pends on AssocGrpGRES.
    The queue of that account lists exactly those two, the holder ending 10 min after its
    start as get_job reports it."""
    scheduler.needs("a100", 2)
    adapter = scheduler.adapter
    account = scheduler.account(user="alice")
    adapter.set_gpu_limit(GpuLimit(account, "gpu", "a100", 1))
    first = scheduler.submit(scheduler.job(account))
    scheduler.eventually(lambda: adapter.get_job(first), lambda j: j.state is JobState.RUNNING)
    second = scheduler.submit(scheduler.job(account, name="capped"))

    queue = scheduler.eventually(
        lambda: adapter.job_queue(accounts=[account]),
        lambda q: [(j.job_id, j.reason) for j in q.pending] == [(second, "AssocGrpGRES")],
    )
    (waiting,) = queue.pending
    assert (waiting.name, waiting.user, waiting.partition) == ("capped", "alice", "gpu")
    assert dict(waiting.gpus_requested) == {"a100": 1}
    assert waiting.time_limit_min == 10
    (holder,) = queue.running
    assert (holder.job_id, dict(holder.gpus_allocated)) == (first, {"a100": 1})
    assert holder.expected_end == adapter.get_job(first).start + timedelta(minutes=10)
    assert adapter.job_queue(accounts=[scheduler.account_name()]).pending == ()
