"""Temporary overrides (issue 32 item 2): the wanted cap with and without one, worked by hand;
the Slurm cap (in-memory fake) and the Kubernetes quota (HTTP fake of kube-apiserver) raised,
then put back by the beat with the clock moved past ``until``; bad input refused with field
errors and nothing written. The real Slurm tier: tests/integration/slurm/test_overrides.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, TeamFactory
from kubernetes_support import portal_on_fake_apiserver

from pools.audit.models import AuditEvent
from pools.capacity.models import OverrideStatus, SchedulerDrift, TemporaryOverride
from pools.capacity.services.overrides import override_cancel, override_create, override_expire_due
from pools.capacity.services.reconcile import reconcile_slurm
from pools.capacity.services.scheduler_binding import (
    kubernetes_quota_wanted,
    team_cards_applied,
)
from pools.classes.models import WorkloadClass
from pools.common.choices import AllocationStatus, Scheduler
from pools.common.errors import InvalidInput
from pools.inventory.models import GpuModel
from scheduler_adapters.records import AccountQos, GpuLimit

pytestmark = pytest.mark.django_db
YEAR = timezone.now().year + 2
MONDAY = datetime(YEAR, 1, 4, tzinfo=UTC)
FRIDAY = MONDAY + timedelta(days=4)


def allocation(team, pool, model, cards, **fields):
    # open from yesterday (the sync after commit runs at the clock) to after Friday
    values = {
        "starts_at": timezone.now() - timedelta(days=1),
        "ends_at": FRIDAY + timedelta(days=9),
    }
    return AllocationFactory(
        team=team, pool=pool, gpu_model=model, card_count=cards, status=AllocationStatus.ACTIVE,
        **(values | fields),
    )  # fmt: skip


@pytest.fixture
def lift(django_capture_on_commit_callbacks):
    """``lift(actor, team, pool, model, cards, **fields)``: a ceiling override made on Monday
    until Friday 00:00, the sync task queued on commit run as it returns (as with a broker)."""

    def make(actor, team, pool, model, cards, **fields):
        values = {"kind": "ceiling", "until": FRIDAY, "reason": "paper deadline"} | fields
        with django_capture_on_commit_callbacks(execute=True):
            return override_create(
                actor=actor, team=team, pool=pool, gpu_model=model, cards=cards, now=MONDAY,
                **values,
            )  # fmt: skip

    return make


def test_the_wanted_slurm_cap_is_raised_while_the_override_lasts(fake_slurm, setup, lift):
    """vision holds 1 A100 (its cap: 1). Raised to 3 until Friday 00:00: the cap is
    max(1, 3) = 3 from Monday to Thursday 23:59, and 1 from Friday 00:00 (half-open)."""
    pool, a100, team, _bob, admin = setup
    allocation(team, pool, a100, 1)

    def cap(at):
        return team_cards_applied(
            team=team, gpu_model=a100, scheduler=Scheduler.SLURM, cluster=None, now=at
        )

    assert cap(MONDAY) == 1
    override = lift(admin, team, pool, a100, 3)
    assert (override.cards_before, override.cards) == (1, 3)
    assert cap(MONDAY) == 3
    assert cap(FRIDAY - timedelta(minutes=1)) == 3
    assert cap(FRIDAY) == 1  # in force no more, before the beat marks it


def test_slurm_cap_raised_then_put_back_by_the_beat(fake_slurm, setup, lift):
    """The sync after create writes GrpTRES gres/gpu:a100=3; the beat at Friday 00:05 expires
    the override (audited) and writes 1; run again, it writes nothing and audits nothing."""
    pool, a100, team, _bob, admin = setup
    allocation(team, pool, a100, 1)
    override = lift(admin, team, pool, a100, 3)
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 3  # eager task after commit

    counts = override_expire_due(now=FRIDAY + timedelta(minutes=5))
    assert counts == {"expired": 1, "restored": 1, "errors": 0}
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 1
    override.refresh_from_db()
    assert (override.status, override.ended_at) == (OverrideStatus.EXPIRED, FRIDAY)
    assert override.restored_at == FRIDAY + timedelta(minutes=5)
    assert override.scheduler_binding["grp_tres"] == "gres/gpu:a100=1"
    actions = list(
        AuditEvent.objects.filter(object_id=str(override.pk)).values_list("action", flat=True)
    )
    assert sorted(actions) == ["override.created", "override.expired"]

    assert override_expire_due(now=FRIDAY + timedelta(minutes=10)) == {
        "expired": 0, "restored": 0, "errors": 0,
    }  # fmt: skip
    assert AuditEvent.objects.filter(object_id=str(override.pk)).count() == 2


def test_kubernetes_quota_raised_then_put_back_after_expiry(pool_admin, infer_pool, l40s, lift):
    """nlp holds 2 L40S: quota 2. Ceiling raised to 6 until Friday: the quota written is 6;
    the beat at Friday 00:05 puts 2 back (read from the fake apiserver both times)."""
    team = TeamFactory(slug="nlp")
    allocation(team, infer_pool, l40s, 2)
    assert kubernetes_quota_wanted(team=team, cluster=None, now=MONDAY)[0] == {"NVIDIA-L40S": 2}

    def hard(server) -> str:
        quota = server.get("", "resourcequotas", "team-nlp", "gpu-quota")
        return quota["spec"]["hard"]["requests.nvidia.com/gpu"]

    with portal_on_fake_apiserver() as server:
        override = lift(pool_admin, team, infer_pool, l40s, 6)
        assert hard(server) == "6"
        assert kubernetes_quota_wanted(team=team, cluster=None, now=MONDAY)[0] == {"NVIDIA-L40S": 6}
        assert override_expire_due(now=FRIDAY + timedelta(minutes=5))["restored"] == 1
        assert hard(server) == "2"
        override.refresh_from_db()
        assert override.scheduler_binding["total"] == 2


def test_cancel_ends_it_now_and_puts_the_cap_back(
    fake_slurm, setup, lift, django_capture_on_commit_callbacks
):
    """Cancelled (at the real clock, before Monday), the cap is the allocation's 1 again."""
    pool, a100, team, _bob, admin = setup
    allocation(team, pool, a100, 1)
    override = lift(admin, team, pool, a100, 4)
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 4
    with django_capture_on_commit_callbacks(execute=True):
        override = override_cancel(override=override, actor=admin, reason="done early")
    assert override.status == OverrideStatus.CANCELLED
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 1
    override.refresh_from_db()
    assert override.restored_at is not None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"until": MONDAY - timedelta(hours=1)}, "until"),  # in the past
        ({"cards": 1}, "cards"),  # the cap is 1 already: not a raise
        ({"cards": 5}, "cards"),  # the pool has 4 usable A100
        ({"reason": " "}, "reason"),
        ({"kind": "borrowing_limit"}, "pool"),  # a Slurm pool has no Kueue cohort
        ({"kind": "priority", "gpu_model": None, "cards": None}, "workload_class"),
    ],
)
def test_bad_input_is_a_field_error_and_writes_nothing(fake_slurm, setup, fields, field):
    pool, a100, team, _bob, admin = setup
    allocation(team, pool, a100, 1)
    values = {"kind": "ceiling", "until": FRIDAY, "reason": "x", "gpu_model": a100, "cards": 3}
    values |= fields
    with pytest.raises(InvalidInput) as refused:
        override_create(actor=admin, team=team, pool=pool, now=MONDAY, **values)
    assert field in refused.value.data["errors"]
    assert not TemporaryOverride.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="override.").exists()


def test_a_team_without_cards_in_the_pool_is_refused(fake_slurm, setup, lift):
    pool, a100, _team, _bob, admin = setup
    other = TeamFactory(slug="audio")
    with pytest.raises(InvalidInput) as refused:
        lift(admin, other, pool, a100, 2)
    assert "holds no cards" in refused.value.data["errors"]["pool"]
    assert not TemporaryOverride.objects.exists()


def test_a_second_override_of_the_same_figure_is_refused(fake_slurm, setup, lift):
    pool, a100, team, _bob, admin = setup
    allocation(team, pool, a100, 1)
    lift(admin, team, pool, a100, 3)
    with pytest.raises(InvalidInput) as refused:
        lift(admin, team, pool, a100, 4)
    assert refused.value.data["errors"]["kind"].startswith("Already raised until")
    assert TemporaryOverride.objects.count() == 1


def test_kueue_borrowing_limit_raised_then_put_back(pool_admin, infer_pool, l40s, lift):
    """nlp holds 2 L40S (not elastic) in a Kueue pool: its ClusterQueue has nominalQuota 2, no
    cohort, no borrowingLimit. Borrowing raised from 0 to 3 until Friday: it joins the pool's
    cohort with borrowingLimit 3, the quota is 2 + 3 = 5 so nominalQuota stays 5 - 3 = 2. After
    the beat at Friday 00:05: nominalQuota 2, no borrowingLimit, quota 2."""
    infer_pool.quota_backend, infer_pool.quota_cohort = "kueue", "infer"
    infer_pool.save()
    team = TeamFactory(slug="nlp")
    allocation(team, infer_pool, l40s, 2)

    def read(server) -> tuple[str, dict]:
        quota = server.get("", "resourcequotas", "team-nlp", "gpu-quota")
        queue = server.get("kueue.x-k8s.io", "clusterqueues", None, "team-nlp")
        (flavour,) = queue["spec"]["resourceGroups"][0]["flavors"]
        (gpu,) = [r for r in flavour["resources"] if r["name"] == "nvidia.com/gpu"]
        gpu = {k: v for k, v in gpu.items() if k in ("nominalQuota", "borrowingLimit")}
        return quota["spec"]["hard"]["requests.nvidia.com/gpu"], gpu | {
            "cohort": queue["spec"].get("cohortName")
        }

    with portal_on_fake_apiserver(KUEUE=True) as server:
        override = lift(pool_admin, team, infer_pool, l40s, 3, kind="borrowing_limit")
        assert override.cards_before == 0
        assert read(server) == (
            "5",
            {"nominalQuota": "2", "borrowingLimit": "3", "cohort": "infer"},
        )
        assert server.get("kueue.x-k8s.io", "clusterqueues", None, "infer-free") is not None
        assert override_expire_due(now=FRIDAY + timedelta(minutes=5))["restored"] == 1
        assert read(server) == ("2", {"nominalQuota": "2", "cohort": None})


def test_priority_raised_to_a_higher_class_then_put_back(fake_slurm, setup, lift):
    """vision's work runs as batch (priority 100): its account allows portal-batch, default
    portal-batch. Raised to production (1000) until Friday: allowed portal-batch and
    portal-production, default portal-production; after the beat, back to batch alone. A
    class of no higher priority (development is 200 > 100, but batch itself is not) is
    refused."""
    pool, a100, team, _bob, admin = setup
    batch = WorkloadClass.objects.get(slug="batch")
    production = WorkloadClass.objects.get(slug="production")
    allocation(team, pool, a100, 1, workload_class=batch)
    with pytest.raises(InvalidInput) as refused:
        lift(admin, team, pool, None, None, kind="priority", workload_class=batch)
    assert "higher priority" in refused.value.data["errors"]["workload_class"]

    override = lift(admin, team, pool, None, None, kind="priority", workload_class=production)
    assert override.class_before == batch
    assert fake_slurm.get_account_qos("vision") == AccountQos(
        "vision", ("portal-batch", "portal-production"), "portal-production"
    )
    override_expire_due(now=FRIDAY + timedelta(minutes=5))
    assert fake_slurm.get_account_qos("vision") == AccountQos(
        "vision", ("portal-batch",), "portal-batch"
    )


def test_reconcile_wants_the_raised_cap_while_it_lasts_and_the_normal_one_after(
    fake_slurm, setup, lift
):
    """vision holds 1 A100, raised to 3. A cap set to 1 by hand is drift while the override is
    in force (expected 3, put back to 3); once ``until`` has passed (moved into the past here:
    reconcile reads the clock) 3 is the drift (expected 1, put back to 1) — before any beat."""
    pool, a100, team, _bob, admin = setup
    allocation(team, pool, a100, 1)
    override = lift(admin, team, pool, a100, 3)
    fake_slurm.set_gpu_limit(GpuLimit(account="vision", partition="gpu", gres_type="a100", cards=1))
    reconcile_slurm()
    drift = SchedulerDrift.objects.get()
    assert (drift.expected, drift.found, drift.repaired) == ("3", "1", True)
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 3

    TemporaryOverride.objects.filter(pk=override.pk).update(
        created_at=timezone.now() - timedelta(days=2), until=timezone.now() - timedelta(minutes=1)
    )
    reconcile_slurm()
    latest = SchedulerDrift.objects.order_by("-pk").first()
    assert (latest.expected, latest.found, latest.repaired) == ("1", "3", True)
    assert fake_slurm.get_gpu_limits("vision")[0].cards == 1
    assert reconcile_slurm().drifts == []


def test_reconcile_keeps_a_cap_an_override_holds_for_a_model_without_allocations(
    fake_slurm, setup, lift
):
    """vision holds 1 A100 and no RTX 4090; its RTX 4090 ceiling raised from 0 to 2 (the pool
    has 2): the account's rtx4090 cap is 2, which reconcile wants too (without the override's
    pair it would read as a type the portal no longer maps and be set to 0)."""
    pool, a100, team, _bob, admin = setup
    rtx4090 = GpuModel.objects.get(slug="rtx4090")
    node = NodeFactory(pool=pool)
    for index in range(2):
        GpuFactory(node=node, index=index, gpu_model=rtx4090)
    allocation(team, pool, a100, 1)
    override = lift(admin, team, pool, rtx4090, 2)
    assert override.cards_before == 0
    caps = {limit.gres_type: limit.cards for limit in fake_slurm.get_gpu_limits("vision")}
    assert caps == {"rtx4090": 2}  # the sync wrote the override's type (a100 by approval only)
    (drift,) = reconcile_slurm().drifts  # the a100 cap the factory's allocation never wrote
    assert (drift.subject, drift.expected, drift.found) == (
        "account vision GrpTRES gres/gpu:a100", "1", "no limit")  # fmt: skip
    caps = {limit.gres_type: limit.cards for limit in fake_slurm.get_gpu_limits("vision")}
    assert caps == {"a100": 1, "rtx4090": 2}
    assert reconcile_slurm().drifts == []
