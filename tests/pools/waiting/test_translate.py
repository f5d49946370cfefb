"""The sentences of pools.waiting.translate, each worked out by hand from the job in the test."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pools.waiting.choices import WaitKind
from pools.waiting.translate import Holder, cards, kueue_wait, slurm_wait, when
from scheduler_adapters.kueue_workloads import PendingWorkload, QuotaShortfall
from scheduler_adapters.records import PendingJob
from scheduler_adapters.slurm.reasons import KINDS, KNOWN_REASONS, classify

NOW = datetime(2026, 12, 4, 11, 30, tzinfo=UTC)


def job(reason: str | None, **changes) -> PendingJob:
    values = {
        "job_id": 125,
        "name": "train",
        "account": "nlp",
        "user": "alice",
        "partition": "gpu",
        "reason": reason,
        "reason_detail": None,
        "gpus_requested": {"a100": 2},
        "nodes_requested": 1,
        "submit": NOW,
        "expected_start": None,
        "time_limit_min": 60,
        "priority": 1,
        "qos": "normal",
        "dependency": None,
        "reservation": None,
    }
    values.update(changes)
    return PendingJob(**values)


def test_the_cap_sentence_names_the_cap_the_holders_and_the_first_end():
    """Cap 8 a100; jobs 123 (4 cards, ends 14:00) and 124 (4 cards, ends 15:30) hold 4 + 4 = 8.
    Ordered by end: 123 first, so "the first ends at 14:00 UTC" (same UTC day as NOW)."""
    holders = [
        Holder("124", 4, datetime(2026, 12, 4, 15, 30, tzinfo=UTC)),
        Holder("123", 4, datetime(2026, 12, 4, 14, 0, tzinfo=UTC)),
    ]
    wait = slurm_wait(job("AssocGrpGRES"), now=NOW, cap=8, holders=holders)
    assert wait.kind == "cap_full"
    assert wait.translated is True
    assert wait.text == (
        "Your team's cap of 8 cards is full — 8 cards held by jobs 123 and 124; "
        "the first ends at 14:00 UTC"
    )


def test_a_job_larger_than_the_cap_is_told_it_cannot_start():
    """Cap 2, the job asks for 3: 3 > 2, no number of finishing jobs lets it start."""
    wait = slurm_wait(job("AssocGrpGRES", gpus_requested={"a100": 3}), now=NOW, cap=2)
    assert wait.text == (
        "Your team's cap of 2 cards is full, and this job alone asks for 3 cards: it cannot "
        "start until the cap is raised (Slurm: AssocGrpGRES)"
    )


def test_more_than_three_holders_are_counted_and_another_day_gets_its_date():
    """Five holders of 1 card: three named (ordered by end), "and 2 more"; the first end is on
    5 Dec, not NOW's day, so the date is written."""
    ends = [datetime(2026, 12, 5, h, 0, tzinfo=UTC) for h in (9, 10, 11, 12, 13)]
    holders = [Holder(str(200 + i), 1, end) for i, end in enumerate(ends)]
    wait = slurm_wait(job("QOSGrpGRES", qos="gpu-normal"), now=NOW, cap=5, holders=holders)
    assert wait.text == (
        "The QOS gpu-normal cap of 5 cards is full — 5 cards held by jobs 200, 201, 202 and "
        "2 more; the first ends at 5 Dec 09:00 UTC"
    )


def test_an_unknown_cap_still_explains_without_figures():
    wait = slurm_wait(job("AssocGrpGRES"), now=NOW)
    assert wait.text == "Your team's cap on cards is full (Slurm: AssocGrpGRES)"


def test_resources_with_the_backfill_estimate():
    """2 a100 cards on one node; Slurm's estimate 5 Dec 02:15 (another day)."""
    estimate = datetime(2026, 12, 5, 2, 15, tzinfo=UTC)
    wait = slurm_wait(job("Resources", expected_start=estimate), now=NOW)
    assert wait.kind == "resources"
    assert wait.text == (
        "Waiting for 2 cards to be free in partition gpu: all that fit are in use; "
        "Slurm expects to start it at 5 Dec 02:15 UTC"
    )


def test_limits_read_from_the_code_grammar():
    assert slurm_wait(job("AssocGrpGRESMinutes"), now=NOW).text == (
        "Your team's budget of card-minutes is used up (Slurm: AssocGrpGRESMinutes)"
    )
    assert slurm_wait(job("QOSMaxGRESPerUser"), now=NOW).text == (
        "Your own limit on cards (per user, in the QOS) is reached (Slurm: QOSMaxGRESPerUser)"
    )
    assert slurm_wait(job("AssocMaxGRESPerJob"), now=NOW).text == (
        "This job asks for more cards than one job may have (Slurm: AssocMaxGRESPerJob)"
    )
    assert slurm_wait(job("QOSMinGRES"), now=NOW).text == (
        "This job asks for less cards than the minimum (Slurm: QOSMinGRES)"
    )


@pytest.mark.parametrize(
    ("code", "kind", "text"),
    [
        ("Priority", "priority", "Jobs with higher priority are ahead of it in the queue"),
        ("JobHeldUser", "held", "Held by its owner: scontrol release 125"),
        ("Dependency", "dependency", "Waits for other jobs to finish (afterok:123)"),
        (
            "ReqNodeNotAvail",
            "nodes_unavailable",
            "The nodes it may run on are down, drained or reserved (UnavailableNodes:gpu-01)",
        ),  # fmt: skip
        (
            "PartitionNodeLimit",
            "job_limit",
            "Asks for more nodes than partition gpu allows per job",
        ),  # fmt: skip
        ("InvalidQOS", "never", "Will never start: its QOS is not valid"),
    ],
)
def test_fixed_sentences(code, kind, text):
    wait = slurm_wait(
        job(code, dependency="afterok:123", reason_detail="UnavailableNodes:gpu-01"), now=NOW
    )
    assert (wait.kind, wait.translated, wait.text) == (kind, True, text)


def test_no_reason_yet_means_not_looked_at():
    """Slurm's "None" (read as None): submitted, not yet considered by the scheduler."""
    wait = slurm_wait(job(None), now=NOW)
    assert (wait.kind, wait.text) == ("not_tried", "Not looked at by the scheduler yet")


def test_an_unknown_reason_is_kept_verbatim_and_marked():
    wait = slurm_wait(job("SomethingNewIn27", reason_detail="details"), now=NOW)
    assert (wait.kind, wait.translated, wait.text) == ("other", False, "SomethingNewIn27: details")


def test_a_known_reason_without_a_sentence_is_shown_verbatim_not_dropped():
    wait = slurm_wait(job("BurstBufferStageIn"), now=NOW)
    assert (wait.kind, wait.translated, wait.text) == ("other", False, "BurstBufferStageIn")


def test_every_known_slurm_reason_gets_an_answer_of_a_stored_kind():
    """All 221 codes: none raises, every kind is a WaitKind value (the model's choices)."""
    assert len(KNOWN_REASONS) == 221
    stored = set(WaitKind.values)
    assert set(KINDS) <= stored
    for code in KNOWN_REASONS:
        wait = slurm_wait(job(code), now=NOW, cap=8)
        assert wait.kind in stored, code
        assert wait.text, code


def test_classify_reads_scope_resource_and_measure():
    got = classify("MaxGRESRunMinsPerAccount")
    assert (got.kind, got.scope, got.resource, got.measure) == (
        "card_minutes", "account", "gpu", "run_minutes",
    )  # fmt: skip
    assert classify("QOSMaxMemoryPerNode").kind == "job_limit"
    assert classify("AssocGrpCpuLimit").resource == "cpu"
    assert classify("NotASlurmReason").known is False


def workload(reason, message=None, condition="QuotaReserved", **changes):
    values = {
        "namespace": "team-nlp",
        "name": "job-a",
        "queue_name": "default",
        "gpus_requested": 8,
        "created": NOW,
        "condition": condition,
        "reason": reason,
        "message": message,
        "since": NOW,
        "shortfall": None,
    }
    values.update(changes)
    return PendingWorkload(**values)


def test_kueue_quota_in_use_and_over_the_maximum():
    full = workload("Pending", shortfall=QuotaShortfall("a100", more_needed=4))
    assert kueue_wait(full, now=NOW).text == (
        "Your team's quota of a100 cards is in use: 4 cards more needed"
    )
    over = workload("ExceedsMaxQuota", shortfall=QuotaShortfall("a100", requested=16, maximum=8))
    wait = kueue_wait(over, now=NOW)
    assert (wait.kind, wait.text) == (
        "quota_exceeded",
        "Asks for 16 cards of a100; the team's queue can never give more than 8 cards",
    )


def test_kueue_topology_unknown_and_untried():
    assert kueue_wait(workload("TopologyPlacementFailed"), now=NOW).text == (
        "Waiting for 8 cards in one NVLink domain: no domain has that many free"
    )
    odd = kueue_wait(workload("SomeFutureReason", "from a newer Kueue"), now=NOW)
    assert (odd.kind, odd.translated, odd.text) == (
        "other", False, "SomeFutureReason: from a newer Kueue",
    )  # fmt: skip
    assert kueue_wait(workload(None, condition=None), now=NOW).kind == "not_tried"


def test_small_words():
    assert cards(1) == "1 card"
    assert when(datetime(2026, 12, 4, 23, 59, tzinfo=UTC), NOW) == "23:59 UTC"
