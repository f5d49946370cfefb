"""The rollup pass and the compaction on PostgreSQL: values stored as read, unknown where no
series answered, unmatched series listed, a timeout leaving the last rollup, retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import override_settings
from factories import (
    AllocationFactory,
    ElasticPolicyFactory,
    PoolFactory,
    ScaleEventFactory,
    TeamFactory,
)
from serving_support import StubPrometheus, histogram, term

from pools.common.choices import AllocationStatus, Scheduler
from pools.serving.models import ServingCoverage, ServingRollup, ServingRollupRun
from pools.serving.selectors import serving_usage
from pools.serving.services import (
    months_before,
    serving_coverage_note,
    serving_rollup_compact,
    serving_rollup_pass,
)
from scheduler_adapters.serving_metrics import SIGNALS

NOW = datetime(2026, 12, 4, 10, 3, 20, tzinfo=UTC)
BUCKET = datetime(2026, 12, 4, 9, 55, tzinfo=UTC)  # the 5 minutes that ended at 10:00

pytestmark = pytest.mark.django_db


@pytest.fixture
def serving():
    """#A: team nlp, 2 L40S on Kubernetes, serving with vLLM; #B: team cv, nothing exported;
    #C: a Slurm allocation of team nlp (no labelled series: not serving)."""
    k8s = PoolFactory(slug="infer", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    slurm = PoolFactory(slug="train", scheduler=Scheduler.SLURM, slurm_partition="train")
    nlp, cv = TeamFactory(slug="nlp"), TeamFactory(slug="cv")
    window = {"starts_at": NOW - timedelta(days=1), "ends_at": NOW + timedelta(days=6)}
    active = {"status": AllocationStatus.ACTIVE, **window}
    return (
        AllocationFactory(team=nlp, pool=k8s, card_count=2, **active),
        AllocationFactory(team=cv, pool=k8s, **active),
        AllocationFactory(team=nlp, pool=slurm, **active),
    )


def busy_vllm_answers():
    ttft = {"0.1": 60, "0.5": 120, "1": 140, "+Inf": 150}
    return [
        term("requests_running", "vllm", "vllm:num_requests_running", 4),
        term("requests_waiting", "vllm", "vllm:num_requests_waiting", 12),
        term("kv_cache_usage_pct", "vllm", "vllm:kv_cache_usage_perc", 0.97),
        term("generation_tokens", "vllm", "vllm:generation_tokens_total", 90_000),
        term("prompt_tokens", "vllm", "vllm:prompt_tokens_total", 30_000),
        term("requests_finished", "vllm", "vllm:request_success_total", 150),
        term("requests_failed", "vllm", "vllm:request_success_total", 3),
        term("preemptions", "vllm", "vllm:num_preemptions_total", 8),
        *histogram("ttft", "vllm", "vllm:time_to_first_token_seconds_bucket", ttft),
        term("gpu_util_pct", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.81),
        term("fb_free_mib", "dcgm", "DCGM_FI_DEV_FB_FREE", 2048),
        term("cards_reporting", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2),
        term("cards_busy", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2),
        term("requests_running", "vllm", "vllm:num_requests_running", 1, namespace="team-ghost"),
    ]


def test_a_pass_stores_each_serving_allocation_as_read(serving):
    """#A's TTFT: 150 requests; p50 rank 75 in (0.1, 0.5] holding 60..120:
    0.1 + 0.4 x 15/60 = 0.2 s; p95 rank 142.5 in (1, +Inf] -> 1.0 s.
    KV 0.97 -> 97 %; utilisation 0.81 -> 81 %."""
    a, b, c = serving
    stub = StubPrometheus(busy_vllm_answers())
    run = serving_rollup_pass(now=NOW, metrics=stub)

    assert (run.ok, run.queries, stub.requests, run.rollups) == (True, 6, 6, 2)
    assert run.bucket_start == BUCKET
    assert run.unmatched_count == 1
    assert run.unmatched == [
        {
            "namespace": "team-ghost",
            "allocation_label": "",
            "reason": "no open allocation serves in this namespace",
            "series": 1,
        }
    ]
    row = ServingRollup.objects.get(allocation=a)
    assert (row.bucket_start, row.bucket_seconds, row.cards_held, row.engine) == (
        BUCKET, 300, 2, "vllm"
    )  # fmt: skip
    assert (row.requests_running, row.requests_waiting) == (4, 12)
    assert row.kv_cache_usage_pct == pytest.approx(97.0)
    assert (row.generation_tokens, row.prompt_tokens) == (90_000, 30_000)
    assert (row.requests_finished, row.requests_failed, row.preemptions) == (150, 3, 8)
    assert row.ttft_p50_s == pytest.approx(0.2)
    assert row.ttft_p95_s == pytest.approx(1.0)
    assert row.gpu_util_pct == pytest.approx(81.0)
    assert (row.fb_free_mib, row.cards_reporting, row.cards_busy) == (2048, 2, 2)
    assert row.itl_p50_s is None and row.temperature_c is None

    unknown = ServingRollup.objects.get(allocation=b)
    assert unknown.requests_running is None and unknown.gpu_util_pct is None
    assert unknown.engine == ""
    assert len(unknown.missing) == len(SIGNALS) == 24  # every signal, each with its names
    assert not ServingRollup.objects.filter(allocation=c).exists()
    # the API's list reads these: #A and #B rolled up since this bucket, #C not at all
    assert dict(ServingCoverage.objects.values_list("allocation_id", "first_bucket")) == {
        a.pk: BUCKET,
        b.pk: BUCKET,
    }
    later = serving_rollup_pass(now=NOW + timedelta(minutes=5), metrics=StubPrometheus([]))
    assert later.rollups == 2
    assert set(ServingCoverage.objects.values_list("first_bucket", flat=True)) == {BUCKET}


def test_an_elastic_allocation_holds_the_cards_of_its_scale_events_not_its_floor(serving):
    """#A (floor 2, elastic up to 4) scaled up to 4 effective 10:00:00 (a hold decided at
    09:50 changes nothing; its ``cards_to`` is what it already held) and back down to 3
    effective 10:06:00. Buckets and their middles: 09:55 (09:57:30) -> 2; 10:00 (10:02:30)
    -> 4; 10:05 (10:07:30) -> 3. Card-hours of the three: (2 + 4 + 3) x 300 s / 3,600 = 0.75,
    not 3 x 2 x 300 / 3,600 = 0.5 from the floor."""
    a = serving[0]
    policy = ElasticPolicyFactory(allocation=a, ceiling_cards=4, cards_held=3)
    ten = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    ScaleEventFactory(policy=policy, decided_at=ten - timedelta(minutes=10), action="hold",
                      reason="in_band", cards_from=2, cards_to=2)  # fmt: skip
    ScaleEventFactory(policy=policy, decided_at=ten, cards_from=2, cards_to=4)
    ScaleEventFactory(policy=policy, decided_at=ten + timedelta(minutes=6), action="down",
                      reason="scale_down", cards_from=4, cards_to=3)  # fmt: skip

    for minutes in (0, 5, 10):
        serving_rollup_pass(now=NOW + timedelta(minutes=minutes), metrics=StubPrometheus([]))

    held = list(
        ServingRollup.objects.filter(allocation=a)
        .order_by("bucket_start")
        .values_list("bucket_start", "cards_held")
    )
    assert held == [
        (BUCKET, 2),
        (BUCKET + timedelta(minutes=5), 4),
        (BUCKET + timedelta(minutes=10), 3),
    ]
    usage = serving_usage(allocation_ids=[a.pk], start=BUCKET, end=BUCKET + timedelta(minutes=15))
    assert usage[a.pk].held_card_hours == Decimal("0.750")
    # #B is not elastic: its card_count in every bucket
    assert set(ServingRollup.objects.filter(allocation=serving[1]).values_list(
        "cards_held", flat=True)) == {serving[1].card_count}  # fmt: skip


def test_a_second_pass_for_the_same_bucket_writes_nothing_new(serving):
    serving_rollup_pass(now=NOW, metrics=StubPrometheus(busy_vllm_answers()))
    again = serving_rollup_pass(
        now=NOW + timedelta(seconds=30),
        metrics=StubPrometheus([term("requests_running", "vllm", "vllm:num_requests_running", 99)]),
    )
    assert again.ok and again.rollups == 0
    assert ServingRollup.objects.get(allocation=serving[0]).requests_running == 4


def test_a_timeout_leaves_the_last_rollup_and_records_why(serving):
    serving_rollup_pass(now=NOW, metrics=StubPrometheus(busy_vllm_answers()))
    later = NOW + timedelta(minutes=5)
    run = serving_rollup_pass(now=later, metrics=StubPrometheus(down=True))
    assert not run.ok and run.rollups == 0
    assert "did not answer in time" in run.error and "the last rollup stays" in run.error
    assert ServingRollup.objects.count() == 2  # only the 09:55 rows
    assert ServingRollupRun.objects.count() == 2


@override_settings(PROMETHEUS_URL="")
def test_without_prometheus_a_pass_says_so(serving):
    run = serving_rollup_pass(now=NOW)
    assert not run.ok and run.error.startswith("PROMETHEUS_URL is not set")
    assert not ServingRollup.objects.exists()


def test_compaction_folds_an_old_hour_and_keeps_sums_means_and_maxima(serving):
    """Ten 5-minute rows of 10:00-11:00 forty days ago (two buckets lost):
    generation 1,000 each -> 10,000; waiting 2 in five, 6 in five -> mean 4;
    p95 0.4 s and once 0.9 s -> 0.9; p50 0.2 s over 30 requests (five rows of 6) and 0.5 s
    over 10 (five rows of 2): (0.2 x 30 + 0.5 x 10) / 40 = 0.275 s."""
    a = serving[0]
    hour = datetime(2026, 10, 25, 10, 0, tzinfo=UTC)
    for i in range(10):
        ServingRollup.objects.create(
            allocation=a,
            bucket_start=hour + timedelta(minutes=5 * i),
            cards_held=2,
            engine="vllm",
            generation_tokens=1000,
            requests_waiting=2 if i < 5 else 6,
            ttft_p95_s=0.9 if i == 3 else 0.4,
            ttft_p50_s=0.2 if i < 5 else 0.5,
            requests_finished=6 if i < 5 else 2,
            missing=["itl: vllm:inter_token_latency_seconds_bucket"],
        )
    recent = ServingRollup.objects.create(allocation=a, bucket_start=BUCKET, cards_held=2)

    counts = serving_rollup_compact(now=NOW)

    assert counts["hourly"] == 1 and counts["folded"] == 10
    row = ServingRollup.objects.get(allocation=a, bucket_seconds=3600)
    assert row.bucket_start == hour
    assert row.generation_tokens == 10_000
    assert row.requests_waiting == pytest.approx(4.0)
    assert row.ttft_p95_s == pytest.approx(0.9)
    assert row.ttft_p50_s == pytest.approx(0.275)
    assert row.requests_finished == 40
    assert row.missing == ["itl: vllm:inter_token_latency_seconds_bucket"]
    assert row.notes == ["10 of 12 five-minute buckets"]
    assert ServingRollup.objects.filter(pk=recent.pk).exists()
    assert serving_rollup_compact(now=NOW)["hourly"] == 0  # safe to run twice


def test_hourly_rows_expire_after_thirteen_months(serving):
    a = serving[0]
    old = ServingRollup.objects.create(
        allocation=a, bucket_seconds=3600, bucket_start=datetime(2025, 11, 4, 9, tzinfo=UTC),
        cards_held=2,
    )  # fmt: skip
    kept = ServingRollup.objects.create(
        allocation=a, bucket_seconds=3600, bucket_start=datetime(2025, 11, 4, 11, tzinfo=UTC),
        cards_held=2,
    )  # fmt: skip
    serving_coverage_note([old, kept])
    assert serving_rollup_compact(now=NOW)["expired"] == 1
    assert not ServingRollup.objects.filter(pk=old.pk).exists()
    assert ServingRollup.objects.filter(pk=kept.pk).exists()
    assert ServingCoverage.objects.get(allocation=a).first_bucket == old.bucket_start


def test_the_last_rollup_expiring_takes_the_allocation_off_the_served_list(serving):
    """#A's only row is an hour 13 months and 1 h old: expired, and #A no longer rolled up;
    #B's row of this morning keeps #B listed."""
    a, b, _ = serving
    gone = ServingRollup.objects.create(
        allocation=a, bucket_seconds=3600, bucket_start=datetime(2025, 11, 4, 9, tzinfo=UTC),
        cards_held=2,
    )  # fmt: skip
    stays = ServingRollup.objects.create(allocation=b, bucket_start=BUCKET, cards_held=1)
    serving_coverage_note([gone, stays])

    serving_rollup_compact(now=NOW)

    assert list(ServingCoverage.objects.values_list("allocation_id", flat=True)) == [b.pk]


@pytest.mark.parametrize(
    ("moment", "months", "expected"),
    [
        (datetime(2026, 12, 4, 10, tzinfo=UTC), 13, datetime(2025, 11, 4, 10, tzinfo=UTC)),
        (datetime(2026, 3, 31, tzinfo=UTC), 1, datetime(2026, 2, 28, tzinfo=UTC)),
        (datetime(2026, 1, 15, tzinfo=UTC), 13, datetime(2024, 12, 15, tzinfo=UTC)),
    ],
)
def test_months_before_is_calendar_months(moment, months, expected):
    assert months_before(moment, months) == expected


def test_values_no_exporter_can_mean_are_stored_unknown_and_read_back(serving, api_as, pool_admin):
    """An exporter gone wrong answers 1.7e308 (finite: the largest float is ~1.8e308). Two
    engines' tokens add up past a float (``inf``: JSON has none, every serving read was a 500);
    one engine's 1.7e308 prompt tokens stored as read made PostgreSQL's SUM over two buckets
    overflow (the efficiency read a 500); 2e12 output tokens in a bucket (6.7 billion/s) and
    3 cards reporting for an allocation of 2 are not this allocation's readings either. Each is
    unknown with a note naming it; the plausible values of the same buckets are kept."""
    a = serving[0]
    huge = 1.7e308
    answers = [
        term("generation_tokens", "vllm", "vllm:generation_tokens_total", huge),
        term("generation_tokens", "sglang", "sglang:generation_tokens_total", huge),
        term("kv_cache_usage_pct", "vllm", "vllm:kv_cache_usage_perc", 0.5),
        term("prompt_tokens", "vllm", "vllm:prompt_tokens_total", huge),
        term("requests_running", "vllm", "vllm:num_requests_running", 4),
        term("cards_reporting", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 3),
        term("cards_busy", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2),
    ]
    later = [
        term("generation_tokens", "vllm", "vllm:generation_tokens_total", 2e12),
        term("prompt_tokens", "vllm", "vllm:prompt_tokens_total", huge),
        term("cards_reporting", "dcgm", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2),
    ]

    serving_rollup_pass(now=NOW, metrics=StubPrometheus(answers))
    serving_rollup_pass(now=NOW + timedelta(minutes=5), metrics=StubPrometheus(later))

    first, second = ServingRollup.objects.filter(allocation=a).order_by("bucket_start")
    assert (first.generation_tokens, first.prompt_tokens, first.cards_reporting) == (None,) * 3
    assert (first.requests_running, first.cards_busy) == (4, 2)
    assert first.kv_cache_usage_pct == pytest.approx(50.0)
    assert [n.split(":")[0] for n in first.notes] == [
        "prompt_tokens", "generation_tokens", "cards_reporting"
    ]  # fmt: skip
    assert (second.generation_tokens, second.prompt_tokens) == (None, None)
    assert second.cards_reporting == 2
    client = api_as(pool_admin)
    for url in ("/api/v1/serving/", f"/api/v1/serving/{a.pk}/series/",
                f"/api/v1/serving/{a.pk}/series/?span=7d"):  # fmt: skip
        assert client.get(url).status_code == 200, url
    body = client.get(f"/api/v1/serving/{a.pk}/efficiency/?month=2026-12").json()
    assert body["total"]["output_tokens"] is None and body["total"]["input_tokens"] is None
    # 2 cards x 2 buckets x 300 s = 1,200 card-s = 0.333 card-h
    assert body["total"]["held_card_hours"] == "0.333"


def test_a_nul_in_a_pods_labels_does_not_lose_the_pass(serving):
    """A namespace or ``portal_allocation`` label with a NUL character (label values are any
    UTF-8) is listed unmatched; PostgreSQL's jsonb refuses ``\\u0000``, so storing it as read
    failed the whole pass with a DataError: no allocation got its rollup, every 5 minutes while
    such a pod ran. The NUL is listed as U+FFFD; the other targets are rolled up as usual."""
    a = serving[0]
    answers = [
        term("requests_running", "vllm", "vllm:num_requests_running", 4),
        term("requests_running", "vllm", "vllm:num_requests_running", 1, namespace="team-\x00x"),
        term("requests_running", "vllm", "vllm:num_requests_running", 1, allocation="7\x00"),
    ]

    run = serving_rollup_pass(now=NOW, metrics=StubPrometheus(answers))

    assert run.ok and ServingRollup.objects.get(allocation=a).requests_running == 4
    stored = ServingRollupRun.objects.get(pk=run.pk)
    assert sorted((u["namespace"], u["allocation_label"]) for u in stored.unmatched) == [
        ("team-nlp", "7\ufffd"),
        ("team-\ufffdx", ""),
    ]
