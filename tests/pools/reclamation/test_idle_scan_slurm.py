"""idle_scan on a Slurm pool shared by several teams, against the fake Slurm and Prometheus.

The pool is the fake's partition ``gpu``: node ``fake-gpu-a100`` with 4 A100 (indexes 0-3).
A starting job takes the lowest free indexes, as in the fake's contract test. Each team's
jobs are found by account (its slug); the series of the cards they hold decide. The scan's
``now`` is an hour after the jobs started unless a test says otherwise (window 30 min).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.capacity.services import scheduler_binding
from pools.clusters import adapters
from pools.common.choices import AliasKind, AllocationStatus, IdleFindingState, Scheduler, TeamRole
from pools.inventory.models import GpuModel, GpuModelAlias
from pools.reclamation.models import IdleFinding, ReclamationPolicy
from pools.reclamation.services.scan import idle_scan
from pools.tenancy.models import Membership
from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.prometheus import DeviceUsage, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus
from scheduler_adapters.records import GpuLimit, JobSpec

pytestmark = pytest.mark.django_db
NODE = "fake-gpu-a100"
T0 = timezone.now().replace(microsecond=0)  # the fake Slurm starts jobs on the real clock
LATER = T0 + timedelta(hours=25)  # past the 24 h grace
HOUR_ON = T0 + timedelta(hours=1)


@pytest.fixture(autouse=True)
def _clock():
    """T0 is "now" when each test starts, not when the module was imported: the fake Slurm
    stamps jobs with the real clock, and a long run reaches the last tests minutes later."""
    global T0, LATER, HOUR_ON
    T0 = timezone.now().replace(microsecond=0)
    LATER, HOUR_ON = T0 + timedelta(hours=25), T0 + timedelta(hours=1)


@pytest.fixture
def slurm():
    adapters.reset()
    with override_settings(SCHEDULERS={"slurm": {"BACKEND": "fake"}}):
        yield adapters.scheduler_adapter("slurm")
    adapters.reset()


@pytest.fixture
def pool(slurm, django_user_model):
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    GpuModelAlias.objects.create(gpu_model=a100, value="a100", kind=AliasKind.ADMIN, key="a100")
    pool = PoolFactory(slug="train", scheduler=Scheduler.SLURM, slurm_partition="gpu")
    node = NodeFactory(hostname=NODE, pool=pool)
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    ReclamationPolicy.objects.create(pool=pool, dry_run=False)
    return pool


def hold(pool, slug, cards, user, capture):
    """Team ``slug`` with an active allocation of ``cards`` A100, applied in the fake Slurm."""
    team = TeamFactory(slug=slug)
    Membership.objects.create(team=team, user=user, role=TeamRole.MANAGER)
    allocation = AllocationFactory(
        team=team,
        pool=pool,
        gpu_model=pool.nodes.get().gpus.first().gpu_model,
        card_count=cards,
        status=AllocationStatus.ACTIVE,
        starts_at=T0 - timedelta(days=2),
        ends_at=T0 + timedelta(days=5),
    )
    with capture(execute=True):
        scheduler_binding.binding_apply(allocation)
    return allocation


def run_job(slurm, account, gpus, user="alice"):
    spec = JobSpec(
        account=account,
        user=user,
        partition="gpu",
        script="#!/bin/bash\nsleep 9999\n",
        gpus=gpus,
        gres_type="a100",
        time_limit_min=60 * 24 * 7,
    )
    return slurm.submit_job(spec)


def card(index, util, fb=0.0):
    """The dcgm series of A100 ``index`` of the node, every 60 s from T0 - 1 h to LATER + 1 h
    at ``util`` %, framebuffer ``fb`` MiB; device level (no pod), as on Slurm."""
    start, end = (T0 - timedelta(hours=1)).timestamp(), (LATER + timedelta(hours=1)).timestamp()
    stamps = [start + 60 * i for i in range(int((end - start) // 60) + 1)]
    return DeviceUsage(
        hostname=NODE,
        uuid=f"GPU-a100-{index}",
        gpu=str(index),
        model_name="NVIDIA A100-SXM4-80GB",
        gpu_instance_id=None,
        mig_profile=None,
        namespace=None,
        pods=(),
        hpc_jobs=(),
        util_source="prof",
        util_pct=tuple(Sample(t, util) for t in stamps),
        fb_used_mib=tuple(Sample(t, fb) for t in stamps),
    )


def scan(now, devices, capture):
    with capture(execute=True):
        return idle_scan(now=now, metrics=FakePrometheus(devices))


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", email="alice@example.com")


def test_teams_sharing_a_pool_are_judged_by_their_own_jobs_cards(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    nlp = hold(pool, "nlp", 2, alice, capture)
    vision = hold(pool, "vision", 2, alice, capture)
    run_job(slurm, "nlp", 2)  # cards 0, 1
    run_job(slurm, "vision", 1)  # card 2; vision's second card runs nothing
    devices = [card(0, 85.0), card(1, 60.0), card(2, 1.0), card(3, 0.0)]

    report = scan(HOUR_ON, devices, capture)

    assert (report.busy, report.idle, report.unknown) == (1, 1, 0), report.as_dict()
    finding = IdleFinding.objects.get()
    assert finding.allocation == vision
    assert (finding.card_count, finding.cards_in_use) == (2, 0)
    # card 2 at 1 %, the jobless card at 0 %: (1 + 0) / 2
    assert str(finding.mean_util_pct) == "0.50"
    assert finding.certainly_idle
    assert [c["hostname"] for c in finding.detail["cards"]] == [NODE]
    assert not IdleFinding.objects.filter(allocation=nlp).exists()


def test_a_shrink_keeps_the_busy_card_and_lowers_grp_tres(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    allocation = hold(pool, "nlp", 3, alice, capture)
    job = run_job(slurm, "nlp", 1)  # card 0, busy; two held cards run nothing
    devices = [card(0, 90.0, fb=30_000.0), card(1, 0.0), card(2, 0.0), card(3, 0.0)]

    first = scan(HOUR_ON, devices, capture)
    assert (first.idle, first.warned, first.reclaimed) == (1, 1, 0)
    done = scan(LATER, devices, capture)

    assert done.reclaimed == 1, done.as_dict()
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 1)
    assert slurm.get_gpu_limits("nlp") == (GpuLimit("nlp", "gpu", "a100", 1),)
    assert slurm.get_job(job).state.name == "RUNNING"  # never a job that uses its card
    finding = IdleFinding.objects.get()
    assert (finding.state, finding.cards_reclaimed, finding.cards_in_use) == (
        IdleFindingState.RECLAIMED,
        2,
        1,
    )


def test_a_job_younger_than_the_window_counts_in_use(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    hold(pool, "nlp", 1, alice, capture)
    run_job(slurm, "nlp", 1)  # started at about T0, idle so far (loading data)
    report = scan(T0 + timedelta(minutes=10), [card(0, 0.0)], capture)
    assert (report.busy, report.idle) == (1, 0)
    # an hour on, with the job still idle, it is judged
    report = scan(HOUR_ON, [card(0, 0.0)], capture)
    assert (report.busy, report.idle) == (0, 1)


def test_a_job_that_ended_within_the_window_counts_in_use(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    hold(pool, "nlp", 2, alice, capture)
    job = run_job(slurm, "nlp", 2)
    slurm.finish_job(job)  # ended at about T0
    devices = [card(0, 0.0), card(1, 0.0)]
    report = scan(T0 + timedelta(minutes=10), devices, capture)
    assert (report.busy, report.idle) == (1, 0)
    report = scan(HOUR_ON, devices, capture)  # ended before the window: nothing ran in it
    assert (report.busy, report.idle) == (0, 1)
    assert IdleFinding.objects.get().cards_in_use == 0


def test_a_job_card_without_metrics_is_unknown(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    hold(pool, "nlp", 2, alice, capture)
    run_job(slurm, "nlp", 2)
    report = scan(HOUR_ON, [card(0, 0.0)], capture)  # card 1 reports nothing
    assert (report.unknown, report.idle) == (1, 0)
    assert not IdleFinding.objects.exists()


def test_slurm_unreachable_makes_its_pools_unknown(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    hold(pool, "nlp", 1, alice, capture)
    slurm.fail_next(SchedulerUnavailable("connection refused", operation="running_gpu_jobs"))
    report = scan(HOUR_ON, [card(0, 0.0)], capture)
    assert (report.unknown, report.idle) == (1, 0)
    assert any("Slurm unavailable" in note for note in report.notes)
    assert not IdleFinding.objects.exists()


def test_no_slurm_configured_is_unknown(pool, alice, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    hold(pool, "nlp", 1, alice, capture)
    with override_settings(SCHEDULERS={}):
        report = scan(HOUR_ON, [card(0, 0.0)], capture)
    assert (report.unknown, report.idle) == (1, 0)


# ---------------------------------------------------------- issue 27 item 1: cards without series


def _gap(device, start, end):
    """``device`` with no samples in ``[start, end]``."""
    kept = tuple(
        s for s in device.util_pct if not start.timestamp() <= s.timestamp <= end.timestamp()
    )
    return DeviceUsage(**{**device.__dict__, "util_pct": kept})


def test_a_busy_job_card_beside_a_silent_one_is_unknown_not_shrunk(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    """4 cards held, a job on 2 of them: card 0 busy at 90 %, card 1 reports nothing. The 2
    jobless cards are idle, but card 1 cannot be told: unknown, never "shrink to 1"."""
    capture = django_capture_on_commit_callbacks
    allocation = hold(pool, "nlp", 4, alice, capture)
    run_job(slurm, "nlp", 2)
    for now in (HOUR_ON, LATER):
        report = scan(now, [card(0, 90.0)], capture)
        assert (report.unknown, report.idle, report.reclaimed) == (1, 0, 0)
    allocation.refresh_from_db()
    assert allocation.card_count == 4
    assert "1 of 2 job cards without usable metrics" in report.no_data[0]


def test_a_stale_or_gappy_job_card_is_unknown(
    slurm, pool, alice, django_capture_on_commit_callbacks
):
    """A job on 2 cards, both idle at HOUR_ON (finding opened). At LATER card 1's exporter has
    been silent for 10 min (newest sample 600 s old: stale), then it reports with 8 of the 31
    steps missing (coverage 74 % < 90 %): unknown each time, not reclaimed."""
    capture = django_capture_on_commit_callbacks
    allocation = hold(pool, "nlp", 2, alice, capture)
    run_job(slurm, "nlp", 2)
    assert scan(HOUR_ON, [card(0, 0.0), card(1, 0.0)], capture).idle == 1
    stale = _gap(card(1, 0.0), LATER - timedelta(minutes=9), LATER + timedelta(hours=1))
    report = scan(LATER, [card(0, 0.0), stale], capture)
    assert (report.unknown, report.reclaimed) == (1, 0)
    gappy = card(1, 0.0)
    gappy = DeviceUsage(
        **{
            **gappy.__dict__,
            "util_pct": tuple(
                s
                for s in gappy.util_pct
                if not (
                    LATER.timestamp() - 1800 <= s.timestamp <= LATER.timestamp()
                    and round((s.timestamp - LATER.timestamp() + 1800) / 60) % 4 == 0
                )
            ),
        }
    )
    report = scan(LATER, [card(0, 0.0), gappy], capture)
    assert (report.unknown, report.reclaimed) == (1, 0)
    allocation.refresh_from_db()
    assert (allocation.status, allocation.card_count) == (AllocationStatus.ACTIVE, 2)
    assert IdleFinding.objects.get().state == IdleFindingState.OPEN
