"""Elastic services on PostgreSQL: policy writes, the loop (free cards, cooldown, unknown,
events and audit), the hand-back on a guaranteed approval, and what the quota counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    MembershipFactory,
    PoolFactory,
    TeamFactory,
    node_with_gpus,
)

from pools.audit.models import AuditEvent
from pools.capacity.services.requests import capacity_request_approve
from pools.capacity.services.scheduler_binding import team_cards_applied
from pools.common.choices import AllocationStatus, Scheduler, TeamRole
from pools.common.errors import InvalidInput, PermissionDenied
from pools.elastic.models import ScaleEvent, SignalReading
from pools.elastic.services import (
    elastic_apply,
    elastic_policy_create,
    elastic_policy_update,
    elastic_readings_prune,
    elastic_scan,
    elastic_whatif,
)
from pools.inventory.models import GpuModel
from scheduler_adapters.errors import SchedulerUnavailable
from scheduler_adapters.prometheus import InferenceSignals, Sample
from scheduler_adapters.prometheus_fake import FakePrometheus

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(second=0, microsecond=0)


@pytest.fixture
def pool():
    pool = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    for host in range(2):  # 8 L40S
        node_with_gpus(4, gpu_model="l40s", hostname=f"inf-{host}", pool=pool,
                       scheduler=Scheduler.KUBERNETES)  # fmt: skip
    return pool


@pytest.fixture
def team():
    return TeamFactory(slug="chat")


def active(pool, team, cards, **fields):
    return AllocationFactory(
        pool=pool,
        team=team,
        card_count=cards,
        status=AllocationStatus.ACTIVE,
        starts_at=NOW - timedelta(hours=1),
        ends_at=NOW + timedelta(days=7),
        **fields,
    )


def signals(namespace, util, latency_s, minutes=40, end=None, cards=8):
    """``cards`` report at every step (8: every card up to the largest ceiling here)."""
    end = (end or NOW).timestamp()
    stamps = [end - 60 * m for m in range(minutes, -1, -1)]
    return InferenceSignals(
        namespace,
        util_pct=tuple(Sample(t, util) for t in stamps),
        cards_reporting=tuple(Sample(t, float(cards)) for t in stamps),
        latency_s=tuple(Sample(t, latency_s) for t in stamps),
    )


@pytest.fixture
def admin(pool_admin):
    return pool_admin


def test_policy_create_and_bounds(pool, team, admin):
    allocation = active(pool, team, 2)
    policy = elastic_policy_create(allocation=allocation, actor=admin, ceiling_cards=6,
                                   step_cards=2)  # fmt: skip
    assert (policy.cards_held, policy.ceiling_cards, policy.cooldown_minutes) == (2, 6, 15)
    assert AuditEvent.objects.filter(action="elastic_policy.created").count() == 1
    with pytest.raises(InvalidInput) as caught:
        elastic_policy_update(policy=policy, actor=admin, cooldown_minutes=5)
    assert "cooldown_minutes" in caught.value.data["errors"]
    policy.refresh_from_db()
    assert policy.cooldown_minutes == 15  # nothing changed


def test_policy_create_refuses_wrong_allocations(pool, team, admin):
    slurm = PoolFactory(slug="train")
    with pytest.raises(InvalidInput):
        elastic_policy_create(allocation=active(slurm, team, 1), actor=admin, ceiling_cards=2)
    with pytest.raises(InvalidInput) as caught:
        elastic_policy_create(allocation=active(pool, team, 4), actor=admin, ceiling_cards=2)
    assert "ceiling_cards" in caught.value.data["errors"]


def test_members_cannot_edit_policies(pool, team, member):
    MembershipFactory(team=team, user=member, role=TeamRole.MEMBER)
    with pytest.raises(PermissionDenied):
        elastic_policy_create(allocation=active(pool, team, 2), actor=member, ceiling_cards=4)


def test_loop_scales_up_records_and_respects_cooldown(pool, team, admin):
    allocation = active(pool, team, 2)
    policy = elastic_policy_create(allocation=allocation, actor=admin, ceiling_cards=6,
                                   step_cards=2)  # fmt: skip
    metrics = FakePrometheus(inference=[signals("team-chat", 90.0, 1.2)])
    report = elastic_scan(now=NOW, metrics=metrics)
    assert (report.policies, report.ups, report.events) == (1, 1, 1)
    policy.refresh_from_db()
    assert (policy.cards_held, policy.last_scaled_at) == (4, NOW)
    event = ScaleEvent.objects.get()
    assert (event.action, event.reason, event.cards_from, event.cards_to) == (
        "up", "scale_up", 2, 4,
    )  # fmt: skip
    assert event.numbers["util_pct"] == 90.0 and event.numbers["latency_ms"] == 1200.0
    audit = AuditEvent.objects.get(action="elastic.scale_up")
    assert audit.after["cards_held"] == 4 and audit.after["up_held_s"] == 2100
    # the quota the Kubernetes sync writes counts the cards held
    assert team_cards_applied(team=team, gpu_model=allocation.gpu_model,
                              scheduler=Scheduler.KUBERNETES, cluster=None,
                              now=NOW) == 4  # fmt: skip

    later = NOW + timedelta(minutes=5)
    metrics = FakePrometheus(
        inference=[signals("team-chat", 90.0, 1.2, end=later + timedelta(minutes=1))]
    )
    report = elastic_scan(now=later, metrics=metrics)
    assert (report.ups, report.holds, report.events) == (0, 1, 1)
    assert ScaleEvent.objects.order_by("-decided_at").first().reason == "cooldown"
    # the same hold again is not recorded twice
    report = elastic_scan(now=later + timedelta(minutes=1), metrics=metrics)
    assert (report.holds, report.events) == (1, 0)


def test_burst_is_capped_by_free_cards(pool, team, admin):
    # 8 cards; another team's guaranteed 5 + our floor 2 -> 1 free to lend
    active(pool, TeamFactory(slug="other"), 5)
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    elastic_scan(now=NOW, metrics=FakePrometheus(inference=[signals("team-chat", 90.0, 1.2)]))
    policy.refresh_from_db()
    assert policy.cards_held == 3
    assert "capped at 3" in ScaleEvent.objects.get().message


def test_no_free_cards_holds(pool, team, admin):
    active(pool, TeamFactory(slug="other"), 6)
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    report = elastic_scan(
        now=NOW, metrics=FakePrometheus(inference=[signals("team-chat", 90.0, 1.2)])
    )
    policy.refresh_from_db()
    assert (policy.cards_held, report.ups, report.holds) == (2, 0, 1)
    assert ScaleEvent.objects.get().reason == "no_free_cards"


def test_unknown_metrics_hold(pool, team, admin):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6)  # fmt: skip
    report = elastic_scan(now=NOW, metrics=FakePrometheus())
    assert (report.unknown, report.holds, report.ups) == (1, 1, 0)
    assert ScaleEvent.objects.get().reason == "unknown"
    policy.refresh_from_db()
    assert policy.cards_held == 2
    report = elastic_scan(now=NOW, metrics=None)  # no PROMETHEUS_URL in tests
    assert report.error and report.unknown == 1


def test_low_for_thirty_minutes_goes_down(pool, team, admin):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    policy.cards_held = 6
    policy.save()
    elastic_scan(now=NOW, metrics=FakePrometheus(inference=[signals("team-chat", 10.0, 0.1)]))
    policy.refresh_from_db()
    assert policy.cards_held == 4


def test_low_on_some_of_the_cards_held_does_not_go_down(pool, team, admin):
    """Issue 27 item 1: 6 cards held, 10 % for 40 minutes, but only 3 cards report (the other
    3 send nothing): their mean says nothing about the other 3, so nothing scales ("unknown")."""
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    policy.cards_held = 6
    policy.save()
    metrics = FakePrometheus(inference=[signals("team-chat", 10.0, 0.1, cards=3)])
    report = elastic_scan(now=NOW, metrics=metrics)
    policy.refresh_from_db()
    assert (policy.cards_held, report.downs, report.unknown) == (6, 0, 1)
    assert ScaleEvent.objects.get().reason == "unknown"


def test_guaranteed_approval_takes_borrowed_cards_back(
    pool, team, admin, django_capture_on_commit_callbacks
):
    # floor 2 holding 6 (4 borrowed) in 8 cards; approving 4 guaranteed cards leaves
    # 8 - 2 - 4 = 2 to lend: 2 of the 4 borrowed go back when the approved allocation starts
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6)  # fmt: skip
    policy.cards_held = 6
    policy.borrowed_since = NOW - timedelta(minutes=30)
    policy.save()
    request = CapacityRequestFactory(pool=pool, team=TeamFactory(slug="vision"), card_count=4,
                                     gpu_model=GpuModel.objects.get(slug="l40s"),
                                     starts_at=NOW + timedelta(hours=2),
                                     ends_at=NOW + timedelta(days=2))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=request, actor=admin)
    event = ScaleEvent.objects.get(source="hand_back")
    assert (event.cards_from, event.cards_to, event.effective_at) == (6, 4, request.starts_at)
    assert event.numbers["free_cards"] == 2
    # notice = from the decision to the guaranteed allocation's start
    assert event.numbers["notice_s"] == pytest.approx(
        (request.starts_at - event.decided_at).total_seconds(), abs=1e-3
    )
    assert AuditEvent.objects.filter(action="elastic.hand_back").count() == 1
    policy.refresh_from_db()
    assert policy.cards_held == 6  # notice: the team keeps them until the allocation starts
    assert "handed back" in policy.last_decision["message"]

    # when the notice runs out the loop carries it out (metrics unknown: nothing else moves)
    elastic_scan(now=request.starts_at + timedelta(minutes=1), metrics=FakePrometheus())
    policy.refresh_from_db()
    assert policy.cards_held == 4


def test_hand_back_for_an_allocation_starting_now_is_at_once(
    pool, team, admin, django_capture_on_commit_callbacks
):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6)  # fmt: skip
    policy.cards_held = 6
    policy.save()
    request = CapacityRequestFactory(pool=pool, card_count=6, starts_at=NOW,
                                     ends_at=NOW + timedelta(days=1))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        capacity_request_approve(request=request, actor=admin)
    policy.refresh_from_db()
    assert policy.cards_held == 2  # 8 - 2 - 6 = 0 left to lend


def test_approval_without_borrowed_cards_changes_nothing(pool, team, admin):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6)  # fmt: skip
    request = CapacityRequestFactory(pool=pool, card_count=4, starts_at=NOW + timedelta(hours=2),
                                     ends_at=NOW + timedelta(days=2))  # fmt: skip
    capacity_request_approve(request=request, actor=admin)
    policy.refresh_from_db()
    assert policy.cards_held == 2
    assert not ScaleEvent.objects.exists()


def test_whatif_from_prometheus(pool, team, admin):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    metrics = FakePrometheus(inference=[signals("team-chat", 90.0, 1.2, minutes=10)])
    run = elastic_whatif(policy=policy, metrics=metrics, now=NOW)
    # high for all 10 minutes: up at minute 5 (2 -> 4), then cooldown
    assert (run.result.scale_ups, run.result.max_cards) == (1, 4)
    assert (run.source, run.samples) == ("prometheus", 11)
    # no Prometheus and nothing recorded: no what-if
    with override_settings(PROMETHEUS_URL=""):
        assert elastic_whatif(policy=policy, now=NOW) is None
        assert elastic_whatif(policy=policy, now=NOW, source="prometheus") is None


class ClosedFake(FakePrometheus):
    """A fake Prometheus that counts its ``close()`` calls."""

    closes = 0

    def close(self) -> None:
        self.closes += 1


def test_whatif_closes_the_prometheus_it_builds(pool, team, admin, monkeypatch):
    """The client the what-if builds itself is closed once, after a read and after a failed
    one; a client the caller passes is left open (the caller's to close)."""
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    built: list[ClosedFake] = []

    def build(down: bool):
        def metrics_adapter(**_):
            built.append(ClosedFake(inference=[signals("team-chat", 90.0, 1.2, minutes=10)],
                                    down=down))  # fmt: skip
            return built[-1]

        monkeypatch.setattr("pools.elastic.services.metrics_adapter", metrics_adapter)

    build(down=False)
    assert elastic_whatif(policy=policy, now=NOW).samples == 11
    build(down=True)
    with pytest.raises(SchedulerUnavailable):
        elastic_whatif(policy=policy, now=NOW)
    assert [fake.closes for fake in built] == [1, 1]

    given = ClosedFake(inference=[signals("team-chat", 90.0, 1.2, minutes=10)])
    assert elastic_whatif(policy=policy, now=NOW, metrics=given).samples == 11
    assert given.closes == 0


def _record(policy, rows):
    SignalReading.objects.bulk_create(
        SignalReading(policy=policy, read_at=at, util_pct=util, latency_ms=latency,
                      cards_held=policy.cards_held)
        for at, util, latency in rows
    )  # fmt: skip


def test_whatif_from_the_loops_recorded_readings(pool, team, admin):
    """Ten readings a minute apart, 90 % and 1,200 ms, with no Prometheus configured: up at
    the fifth minute (2 -> 4), then the cooldown. Card-minutes: 2 x 5 + 4 x 4 = 26 over the 9
    counted minutes; a fixed 4 cards: 36; latency above 800 ms all 9 minutes."""
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    _record(policy, [(NOW - timedelta(minutes=9 - m), 90.0, 1200.0) for m in range(10)])
    _record(policy, [(NOW - timedelta(days=8), 90.0, 1200.0)])  # outside 7 days
    with override_settings(PROMETHEUS_URL=""):
        run = elastic_whatif(policy=policy, days=7, now=NOW)
    assert (run.source, run.samples) == ("recorded", 10)
    # the totals are over the readings' 9 minutes, not the 7 days asked
    assert (run.start, run.end) == (NOW - timedelta(minutes=9), NOW)
    assert (run.covered_text, run.short) == ("9 minutes", True)
    result = run.result
    assert [(e.action, e.at) for e in result.events] == [
        ("up", (NOW - timedelta(minutes=4)).timestamp())
    ]
    assert result.card_hours * 60 == pytest.approx(26)
    assert result.fixed_card_hours * 60 == pytest.approx(36)
    assert result.breach_minutes == pytest.approx(9)
    # asked for explicitly, the recorded history is used even with Prometheus configured
    metrics = FakePrometheus(inference=[])
    assert elastic_whatif(policy=policy, days=7, now=NOW, metrics=metrics,
                          source="recorded").samples == 10  # fmt: skip


def test_three_days_of_readings_asked_over_seven_say_three_days(pool, team, admin):
    """Issue #37: readings every hour from 3 days ago to now (73 of them, 72 h apart end to
    end), a what-if over 7 days: its period is the 72 h = 3.0 days they cover, short of the 7
    days asked; asked for 2 days, the readings cover the whole window (2.0 days, not short)."""
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6)  # fmt: skip
    _record(policy, [(NOW - timedelta(hours=72 - h), 20.0, 300.0) for h in range(73)])
    run = elastic_whatif(policy=policy, days=7, now=NOW, source="recorded")
    assert (run.samples, run.start, run.end) == (73, NOW - timedelta(days=3), NOW)
    assert (run.covered_text, run.short) == ("3.0 days", True)
    run = elastic_whatif(policy=policy, days=2, now=NOW, source="recorded")
    assert (run.samples, run.covered_text, run.short) == (49, "2.0 days", False)


def test_an_unknown_reading_is_unknown_in_the_whatif(pool, team, admin):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6)  # fmt: skip
    _record(policy, [(NOW - timedelta(minutes=2), 20.0, 300.0),
                     (NOW - timedelta(minutes=1), None, None), (NOW, 20.0, 300.0)])  # fmt: skip
    run = elastic_whatif(policy=policy, days=1, now=NOW, source="recorded")
    assert run.result.unknown_minutes == pytest.approx(1)
    assert run.result.breach_minutes == 0


def test_each_pass_records_what_it_read(pool, team, admin):
    """The newest sample of each namespace, at its own timestamp, with the cards held after the
    pass; a pass repeated for the same instant stores nothing twice; a namespace Prometheus
    has no series for is an unknown reading at the pass's time; no Prometheus: nothing."""
    busy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                 ceiling_cards=6, step_cards=2)  # fmt: skip
    quiet = elastic_policy_create(allocation=active(pool, TeamFactory(slug="quiet"), 2),
                                  actor=admin, ceiling_cards=4)  # fmt: skip
    found = signals("team-chat", 90.0, 1.2)
    stamps = [s.timestamp for s in found.util_pct]
    found = InferenceSignals(
        "team-chat",
        util_pct=found.util_pct,
        cards_reporting=found.cards_reporting,
        latency_s=found.latency_s,
        request_s=tuple(Sample(t, 12.5) for t in stamps),
    )
    metrics = FakePrometheus(inference=[found])
    elastic_scan(now=NOW, metrics=metrics)
    elastic_scan(now=NOW, metrics=metrics)  # a retried pass
    [reading] = SignalReading.objects.filter(policy=busy)
    assert (reading.read_at, reading.util_pct, reading.latency_ms, reading.request_s) == (
        NOW, 90.0, 1200.0, 12.5,
    )  # fmt: skip
    assert reading.cards_held == 4  # after the pass's scale-up
    [unknown] = SignalReading.objects.filter(policy=quiet)
    assert (unknown.read_at, unknown.util_pct, unknown.latency_ms, unknown.request_s) == (
        NOW, None, None, None,
    )  # fmt: skip
    with override_settings(PROMETHEUS_URL=""):
        elastic_scan(now=NOW + timedelta(minutes=1))
    assert SignalReading.objects.count() == 2


def test_readings_past_retention_are_pruned(pool, team, admin):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=4)  # fmt: skip
    _record(policy, [(NOW - timedelta(days=31, minutes=1), 50.0, 400.0),
                     (NOW - timedelta(days=30), 50.0, 400.0)])  # fmt: skip
    assert elastic_readings_prune(now=NOW) == 1
    assert SignalReading.objects.get().read_at == NOW - timedelta(days=30)


def test_apply_without_kubernetes_says_portal_only(pool, team, admin):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    elastic_scan(now=NOW, metrics=FakePrometheus(inference=[signals("team-chat", 90.0, 1.2)]))
    assert elastic_apply(policy_id=policy.pk, now=NOW)["applied"] is False
    event = ScaleEvent.objects.get(policy=policy)
    assert event.applied is False
    assert event.apply_note == "Portal only: no Kubernetes connection is configured."


@pytest.fixture
def fake_k8s():
    from django.test import override_settings

    from pools.clusters import adapters

    adapters.reset()
    with override_settings(SCHEDULERS={"kubernetes": {"BACKEND": "kubernetes-fake"}}):
        yield adapters.scheduler_adapter("kubernetes")
    adapters.reset()


def test_scale_up_lands_in_the_namespace_quota(
    fake_k8s, pool, team, admin, django_capture_on_commit_callbacks
):
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        elastic_scan(now=NOW, metrics=FakePrometheus(inference=[signals("team-chat", 90.0, 1.2)]))
    quota = fake_k8s.get_gpu_quota("chat")
    assert quota.cards == 4  # the cards the loop decided, not the floor of 2
    event = ScaleEvent.objects.get(policy=policy)
    assert event.applied is True
    assert event.apply_note == "ResourceQuota of team-chat: 4 nvidia.com/gpu"


def test_volcano_pool_gets_its_queue(
    fake_k8s, pool, team, admin, django_capture_on_commit_callbacks
):
    pool.quota_backend = "volcano"
    pool.quota_cohort = "inference"
    pool.save()
    elastic_policy_create(allocation=active(pool, team, 2), actor=admin, ceiling_cards=6,
                          step_cards=2)  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        elastic_scan(now=NOW, metrics=FakePrometheus(inference=[signals("team-chat", 90.0, 1.2)]))
    queue = fake_k8s.objects[("Queue", None, "team-chat")]
    assert queue["spec"]["guarantee"] == {"resource": {"nvidia.com/gpu": "2"}}
    assert queue["spec"]["deserved"] == {"nvidia.com/gpu": "4"}
    assert queue["spec"]["capability"] == {"nvidia.com/gpu": "6"}
    assert queue["spec"]["parent"] == "inference"
    # the namespace quota is the ceiling, so it never blocks what Volcano admits
    assert fake_k8s.get_gpu_quota("chat").cards == 6


def test_hourly_forecast_then_the_loop_pre_scales_before_the_peak(pool, team, admin):
    """Four weeks of token rate at 15-min steps: 1000 tok/s 09:00-10:00 UTC every day, else
    100 (prompt 0). 250 tok/s per card -> the peak needs 4 cards. At 08:30 the loop (metrics
    steady, nothing else would move) pre-scales 2 -> 4; at 08:29 it does not."""
    from datetime import UTC, datetime

    from pools.elastic.services import elastic_forecast, next_prescale

    monday = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
    allocation = AllocationFactory(pool=pool, team=team, card_count=2,
                                   status=AllocationStatus.ACTIVE,
                                   starts_at=monday - timedelta(days=1),
                                   ends_at=monday + timedelta(days=7))  # fmt: skip
    policy = elastic_policy_create(allocation=allocation, actor=admin, ceiling_cards=8,
                                   per_card_tok_s="250")  # fmt: skip
    stamps = range(int((monday - timedelta(weeks=4)).timestamp()), int(monday.timestamp()), 900)

    def rate(t):
        return 1000.0 if 9 <= datetime.fromtimestamp(t, UTC).hour < 10 else 100.0

    tokens = InferenceSignals(
        "team-chat",
        generation_tok_s=tuple(Sample(t, rate(t)) for t in stamps),
        prompt_tok_s=tuple(Sample(t, 0.0) for t in stamps),
    )
    assert elastic_forecast(now=monday, metrics=FakePrometheus(inference=[tokens])) == 1
    policy.refresh_from_db()
    assert policy.prescale_plan[4] == [(monday + timedelta(hours=1)).timestamp(), 1000.0]
    rise = next_prescale(policy, monday)
    assert rise is not None and rise.cards == 4
    assert rise.start == (monday + timedelta(minutes=30)).timestamp()

    def steady(end):
        return FakePrometheus(inference=[signals("team-chat", 50.0, 0.3, end=end)])

    at_0829 = monday + timedelta(minutes=29)
    elastic_scan(now=at_0829, metrics=steady(at_0829))
    policy.refresh_from_db()
    assert policy.cards_held == 2
    at_0830 = monday + timedelta(minutes=30)
    elastic_scan(now=at_0830, metrics=steady(at_0830))
    policy.refresh_from_db()
    assert policy.cards_held == 4
    assert ScaleEvent.objects.get(policy=policy, action="up").reason == "prescale"


@pytest.mark.parametrize(
    ("enforcement", "held", "reason"),
    [("refuse", 2, "budget_exceeded"), ("needs_admin", 2, "budget_exceeded"),
     ("warn", 4, "scale_up")],
)  # fmt: skip
def test_scale_up_checked_against_the_budget(pool, team, admin, enforcement, held, reason):
    """A step of 2 burst cards for the lending hour is 2 card-h; the team's monthly budget of
    1 card-h (nothing used yet) cannot take it: refuse and needs_admin hold (no person decides
    in the loop), warn scales and says why."""
    from datetime import date
    from decimal import Decimal

    from billing.budgets.models import Budget

    Budget.objects.create(team=team, period="month", starts_on=date(2020, 1, 1),
                          card_hours_limit=Decimal(1), enforcement=enforcement)  # fmt: skip
    policy = elastic_policy_create(allocation=active(pool, team, 2), actor=admin,
                                   ceiling_cards=6, step_cards=2)  # fmt: skip
    elastic_scan(now=NOW, metrics=FakePrometheus(inference=[signals("team-chat", 90.0, 1.2)]))
    policy.refresh_from_db()
    event = ScaleEvent.objects.get()
    assert (policy.cards_held, event.reason) == (held, reason)
    assert "Beyond the month budget of" in event.message
