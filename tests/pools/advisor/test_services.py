"""The advisor pass over stored rollups (opens, updates, closes; undecided keeps; a repeat
writes nothing twice; constant queries), neighbours from placement, triage (audited,
refusals change nothing) and the weekly digest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from factories import (
    AdvisorDigestOptInFactory,
    AdvisorFindingFactory,
    AllocationFactory,
    ElasticPolicyFactory,
    MembershipFactory,
    ScaleEventFactory,
    ServingRollupFactory,
)

from pools.advisor.models import AdvisorFinding
from pools.advisor.selectors import neighbours_of
from pools.advisor.services import (
    advisor_digest_send,
    advisor_finding_triage,
    advisor_pass,
    advisor_thresholds,
)
from pools.audit.models import AuditEvent
from pools.common.choices import AllocationStatus, TeamRole
from pools.common.errors import InvalidInput, InvalidTransition, PermissionDenied

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def serving(team=None, **kwargs):
    extra = {"team": team} if team else {}
    return AllocationFactory(
        status=AllocationStatus.ACTIVE,
        card_count=4,
        starts_at=NOW - timedelta(days=2),
        ends_at=NOW + timedelta(days=2),
        **extra,
        **kwargs,
    )


def rollups(allocation, n: int, *, end=NOW, **values):
    """``n`` 5-minute rows ending at ``end``: a value or a function of the index (oldest 0)."""
    for i in range(n):
        fields = {k: (v(i) if callable(v) else v) for k, v in values.items()}
        ServingRollupFactory(
            allocation=allocation,
            bucket_start=end - timedelta(minutes=5 * (n - i)),
            cards_held=4,
            **fields,
        )


IDLE_WITH_QUEUE = {"gpu_util_pct": 25.0, "requests_waiting": 12.0, "kv_cache_usage_pct": 35.0}
BUSY = {"gpu_util_pct": 70.0, "requests_waiting": 0.0, "kv_cache_usage_pct": 50.0}


def test_a_pass_opens_a_finding_updates_it_and_closes_it_when_the_signal_clears():
    """6 buckets idle with a queue to 12:00 -> batching opens (since 11:30). The same pass
    again updates it (one row). Three busy buckets to 12:15 clear it: closed at 12:15."""
    allocation = serving()
    rollups(allocation, 6, **IDLE_WITH_QUEUE)

    first = advisor_pass(now=NOW)
    finding = AdvisorFinding.objects.get(rule="batching")
    assert (first.opened, finding.team_id, finding.status) == (1, allocation.team_id, "open")
    assert finding.since == datetime(2026, 12, 4, 11, 30, tzinfo=UTC)
    assert finding.evidence["requests_waiting_mean"] == 12.0

    again = advisor_pass(now=NOW)
    assert (again.opened, again.updated) == (0, 1)
    assert AdvisorFinding.objects.filter(rule="batching").count() == 1

    later = NOW + timedelta(minutes=15)
    rollups(allocation, 3, end=later, **BUSY)
    cleared = advisor_pass(now=later)
    finding.refresh_from_db()
    assert cleared.closed >= 1
    assert (finding.status, finding.closed_at) == ("closed", later)


def test_a_finding_seen_again_unchanged_only_moves_last_seen_at():
    """The same six idle buckets judged again a minute later (still fresh: the newest, 11:55,
    is 6 min old): same severity, summary, fix and evidence, so the finding keeps them and
    its opening, and only ``last_seen_at`` becomes 12:01; the run counts it updated."""
    allocation = serving()
    rollups(allocation, 6, **IDLE_WITH_QUEUE)
    advisor_pass(now=NOW)
    before = AdvisorFinding.objects.get(rule="batching")
    later = NOW + timedelta(minutes=1)
    run = advisor_pass(now=later)
    after = AdvisorFinding.objects.get(rule="batching")
    assert (run.opened, run.updated) == (0, 1)
    assert after.last_seen_at == later
    assert (after.opened_at, after.since) == (NOW, datetime(2026, 12, 4, 11, 30, tzinfo=UTC))
    assert (after.evidence, after.summary, after.severity) == (
        before.evidence,
        before.summary,
        before.severity,
    )


def test_an_undecided_rule_keeps_its_open_finding():
    """The KV gauge disappears (None): the batching AND is unknown, the finding stays open
    with its last evidence; missing is never healthy."""
    allocation = serving()
    rollups(allocation, 6, **IDLE_WITH_QUEUE)
    advisor_pass(now=NOW)
    later = NOW + timedelta(minutes=15)
    rollups(allocation, 3, end=later, **{**IDLE_WITH_QUEUE, "kv_cache_usage_pct": None})
    run = advisor_pass(now=later)
    finding = AdvisorFinding.objects.get(rule="batching")
    assert finding.status == "open" and finding.last_seen_at == NOW
    assert run.undecided["batching"] == 1


def test_findings_of_an_allocation_that_ended_close():
    finding = AdvisorFindingFactory(allocation__status=AllocationStatus.ENDED)
    run = advisor_pass(now=NOW)
    finding.refresh_from_db()
    assert finding.status == "closed" and run.closed == 1


def test_an_allocation_without_rollups_is_undecided_for_every_serving_rule():
    serving()
    run = advisor_pass(now=NOW)
    assert AdvisorFinding.objects.count() == 0
    for rule in ("batching", "memory_pressure", "queue_avalanche", "saturation", "outside_gpu"):
        assert run.undecided[rule] == 1
    assert run.undecided["prompt_bloat"] == 1  # no per-call token data yet


def test_scale_ups_that_change_nothing_open_scaling_churn():
    """Elastic, cooldown 15 min; ups at 10:00 and 11:00 with e2e p95 4 s throughout (gain 0
    < 10 %): scaling churn."""
    allocation = serving()
    rollups(allocation, 36, e2e_p95_s=4.0, **BUSY)
    policy = ElasticPolicyFactory(allocation=allocation, ceiling_cards=8, cards_held=8)
    for hour, cards in ((10, 6), (11, 8)):
        at = datetime(2026, 12, 4, hour, tzinfo=UTC)
        ScaleEventFactory(
            policy=policy, decided_at=at, effective_at=at, cards_from=cards - 2, cards_to=cards
        )
    advisor_pass(now=NOW)
    finding = AdvisorFinding.objects.get(rule="scaling_churn")
    assert finding.evidence["scale_ups"] == 2
    assert finding.evidence["latency_gain_per_up"] == [0.0, 0.0]


def test_the_pass_reads_in_constant_queries():
    """Three allocations or nine: the same number of queries (gathered per kind, not per
    allocation)."""

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            advisor_pass(now=NOW)
        return len(ctx.captured_queries)

    for _ in range(3):
        rollups(serving(), 4, **BUSY)
    few = queries()
    for _ in range(6):
        rollups(serving(), 4, **IDLE_WITH_QUEUE)
    assert queries() == few + 1  # + the bulk insert of the new findings


def test_rule_5_reads_the_token_flow_of_any_number_of_allocations_in_constant_queries():
    """Each allocation serves ``qwen2_5_14b`` and its team has one agent task on the gateway's
    ``qwen2.5-14b-instruct`` in the window (one task < the 10 rule 5 needs: undecided, so no
    finding is written): two allocations or eight, the pass makes the same number of queries
    (the token flow of every team read at once, not per allocation)."""
    from factories import AgentTaskFactory, ServedModelFactory

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            run = advisor_pass(now=NOW)
        assert run.undecided["prompt_bloat"] == run.allocations
        return len(ctx.captured_queries)

    def add(n: int) -> None:
        for _ in range(n):
            allocation = serving()
            rollups(allocation, 4, **BUSY)
            ServedModelFactory(allocation=allocation, model_id="qwen2_5_14b")
            AgentTaskFactory(team=allocation.team, served_model="qwen2.5-14b-instruct",
                             first_call_at=NOW - timedelta(hours=1))  # fmt: skip

    add(2)
    few = queries()
    add(6)
    assert queries() == few
    assert AdvisorFinding.objects.count() == 0


def test_neighbours_share_a_node_or_a_card():
    """A on n1 GPUs 0-1 (mask 3) and n2; B on n1 GPU 1 (mask 2): they share card 1. C on n3
    alone."""
    n1, n2, n3 = (None, "n1"), (None, "n2"), (None, "n3")
    out = neighbours_of({1: [(n1, 3), (n2, 1)], 2: [(n1, 2)], 3: [(n3, 1)]})
    assert out[1] == ({2}, "card", ("n1",))
    assert out[2] == ({1}, "card", ("n1",))
    assert out[3] == (set(), "node", ())
    assert neighbours_of({1: [(n1, 1)], 2: [(n1, 2)]})[1][1] == "node"


def test_namesake_nodes_of_two_clusters_are_not_neighbours():
    """A on n1 of cluster 7 and B on n1 of cluster 8, the same GPU: two nodes, no neighbours."""
    out = neighbours_of({1: [((7, "n1"), 1)], 2: [((8, "n1"), 1)]})
    assert out == {1: (set(), "node", ()), 2: (set(), "node", ())}


def test_thresholds_from_settings_and_an_unknown_name_refused(settings):
    settings.ADVISOR_THRESHOLDS = {"saturation_util_pct": 85.0}
    assert advisor_thresholds().saturation_util_pct == 85.0
    settings.ADVISOR_THRESHOLDS = {"saturation_pct": 85.0}
    with pytest.raises(ValueError, match="saturation_pct"):
        advisor_thresholds()


# ------------------------------------------------------------------------------- triage


def test_a_manager_acknowledges_with_a_reason_and_it_is_audited(team, team_manager):
    finding = AdvisorFindingFactory(allocation__team=team, team=team)
    advisor_finding_triage(
        finding=finding, action="acknowledge", actor=team_manager, reason="Raising max-num-seqs"
    )
    finding.refresh_from_db()
    assert (finding.status, finding.reason, finding.status_by) == (
        "acknowledged",
        "Raising max-num-seqs",
        team_manager,
    )
    event = AuditEvent.objects.get(action="advisor_finding.acknowledge")
    assert event.before["status"] == "open" and event.after["status"] == "acknowledged"


def test_refusals_change_nothing(team, team_member, team_manager):
    finding = AdvisorFindingFactory(allocation__team=team, team=team)
    with pytest.raises(PermissionDenied):
        advisor_finding_triage(finding=finding, action="mute", actor=team_member, reason="x")
    with pytest.raises(InvalidInput):
        advisor_finding_triage(finding=finding, action="mute", actor=team_manager, reason="  ")
    closed = AdvisorFindingFactory(
        allocation__team=team, team=team, status="closed", closed_at=NOW, rule="saturation"
    )
    with pytest.raises(InvalidTransition):
        advisor_finding_triage(finding=closed, action="mute", actor=team_manager, reason="x")
    finding.refresh_from_db()
    assert finding.status == "open" and finding.reason == ""
    assert not AuditEvent.objects.filter(action__startswith="advisor_finding").exists()


# ------------------------------------------------------------------------------- digest


def test_the_weekly_digest_goes_to_opted_in_managers_once_a_week(team):
    """Mia manages nlp and opted in: one mail with the open finding, not the muted one; a
    second run two days later sends nothing; Ted opted in but manages nothing: skipped."""
    mia = MembershipFactory(
        team=team, role=TeamRole.MANAGER, user__username="mia", user__email="mia@example.com"
    ).user
    AdvisorDigestOptInFactory(user=mia)
    AdvisorDigestOptInFactory(user__username="ted", user__email="ted@example.com")
    AdvisorFindingFactory(allocation__team=team, team=team)
    AdvisorFindingFactory(allocation__team=team, team=team, rule="saturation", status="muted")

    assert advisor_digest_send(now=NOW) == {"sent": 1, "skipped": 1}
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["mia@example.com"]
    assert "GPU idle while requests queue" in mail.outbox[0].body
    assert "Sustained utilisation" not in mail.outbox[0].body
    assert advisor_digest_send(now=NOW + timedelta(days=2)) == {"sent": 0, "skipped": 2}


def test_rule_5_reads_the_token_flow_of_the_model_the_allocation_serves(team):
    """Ten agent tasks of the allocation's team on ``qwen2.5-14b-instruct`` (the gateway's name
    of the sizing id ``qwen2_5_14b`` the allocation serves), each 12 calls of which calls 3-9
    (7) are retries, prompts 3,000 + 800·i tokens: retry share 7/12 = 0.583 > 0.25 and the last
    call's input 11,800 / the first's 3,000 = 3.93 ≥ 3, and 2,000 cached of each call's input:
    12 × 2,000 / (12 × 3,000 + 800 × 66) = 24,000 / 88,800 = 0.270 < 0.3 → prompt bloat fires
    with all three. Tasks
    on another model of the team (``llama-3-8b``) are not read; a second allocation serving
    ``llama3_70b`` has no matching gateway model and stays undecided."""
    from factories import ServedModelFactory
    from tokenflow_support import T0, task_records

    from billing.services.tokens import usage_tokens_ingest

    allocation = serving(team=team)
    ServedModelFactory(allocation=allocation, model_id="qwen2_5_14b")
    other = serving(team=team)
    ServedModelFactory(allocation=other, model_id="llama3_70b")
    for n in range(10):
        records = task_records(f"T{n}", 12, range(2, 9), team=team.slug, key=f"q{n}")
        for r in records:
            r["served_model"] = "qwen2.5-14b-instruct"
        usage_tokens_ingest(records=records)
    calm = task_records("L", 2, team=team.slug, key="l")
    for r in calm:
        r["served_model"] = "llama-3-8b"
    usage_tokens_ingest(records=calm)

    advisor_pass(now=T0 + timedelta(hours=1))

    finding = AdvisorFinding.objects.get(rule="prompt_bloat")
    assert finding.allocation_id == allocation.pk
    assert finding.evidence["tasks"] == 10
    assert finding.evidence["retry_share"] == 0.583
    assert finding.evidence["input_growth"] == 3.93
    assert finding.evidence["cached_share"] == 0.27
    assert sorted(finding.evidence["triggers"]) == ["growth", "low_cache", "retries"]
    assert not AdvisorFinding.objects.filter(rule="prompt_bloat", allocation=other).exists()


def test_placement_and_fabric_are_keyed_by_the_allocations_cluster():
    """gpu-01 in cluster ``a`` has an RDMA fabric label, gpu-01 in cluster ``b`` says none: the
    allocation in ``a``'s pool is placed on a's gpu-01 and reads a's label."""
    from factories import AllocationFactory, ClusterFactory, NodeFactory, PoolFactory

    from pools.advisor.selectors import advisor_placement, fabric_of
    from pools.capacity.models import PlacedCards

    pools = {s: PoolFactory(slug=s, cluster=ClusterFactory(slug=s)) for s in ("a", "b")}
    rdma = "feature.node.kubernetes.io/rdma.available"
    NodeFactory(hostname="gpu-01", pool=pools["a"], labels={rdma: "true"})
    NodeFactory(hostname="gpu-01", pool=pools["b"], labels={rdma: "false"})
    allocation = AllocationFactory(pool=pools["a"], card_count=1)
    PlacedCards.objects.create(allocation=allocation, hostname="gpu-01", gpu_mask=1)
    placement = advisor_placement(allocation_ids=[allocation.pk])
    a = pools["a"].cluster_id
    assert placement == {allocation.pk: [((a, "gpu-01"), 1)]}
    assert fabric_of([(a, "gpu-01")]) == {(a, "gpu-01"): True}
