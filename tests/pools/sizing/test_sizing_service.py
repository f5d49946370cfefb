"""The sizing service: inputs checked before anything is written, the plan computed from the
database's GPU models and the inference pools' free cards, and the job's life (pending →
running → done / failed), idempotent.

The issue's "Done when" case: Qwen2.5-72B for 2,000 output tok/s on the demo fleet
(:func:`factories.inference_fleet`), served in FP8, turned into a capacity request.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from factories import AllocationFactory, MembershipFactory, inference_fleet

from pools.audit.models import AuditEvent
from pools.common.choices import EstimateStatus
from pools.common.errors import InvalidInput, PermissionDenied
from pools.inventory.models import GpuModel, Pool
from pools.sizing.inputs import (
    CUSTOM_MODEL_FIELDS,
    DEFAULT_INPUTS,
    WEIGHT_PRECISIONS,
    sizing_inputs_clean,
)
from pools.sizing.models import SizingEstimate
from pools.sizing.services import (
    capacity_window,
    sizing_estimate_create,
    sizing_estimate_run,
    sizing_preview,
    sizing_request_url,
    sizing_results,
)
from pools.sizing.tasks import sizing_estimate_task

pytestmark = pytest.mark.django_db

DEFAULT_CUSTOM_FIELDS = [name for name, _ in CUSTOM_MODEL_FIELDS]

QWEN_72B = {
    "model": "qwen2_5_72b",
    "precision": "FP8",
    "kv_cache_dtype": "FP8",
    "engine": "vllm",
    "input_len": 1000,
    "output_len": 200,
    "demand_kind": "output_rate",
    "output_tok_s": 2000,
    "tpot_target_ms": 50,
    "ttft_target_ms": 2000,
}

# Qwen2.5-72B's published config (hf.co/Qwen/Qwen2.5-72B-Instruct config.json): 80 layers,
# 8 KV heads, head dim 8192 / 64 = 128; parameters counted by the dataset's rule.
QWEN_72B_PARAMS = 72_706_203_648
#: Input embedding and untied output head: 2 x vocab 152,064 x hidden 8,192 (config.json).
QWEN_72B_EMBEDDING_PARAMS = 2 * 152_064 * 8_192


@pytest.fixture
def fleet(db):
    return inference_fleet()


@pytest.fixture
def qwen(fleet):
    inputs, results = sizing_preview(raw=QWEN_72B)
    return results


def _row(results, slug):
    return next(row for row in results["rows"] if row["gpu_model"] == slug)


# ---------------------------------------------------------------------------------------------
# The "Done when" case


def test_qwen_72b_demand_and_memory_are_the_hand_arithmetic(qwen):
    demand = qwen["demand"]

    assert demand["peak_requests_per_s"] == 10.0  # 2,000 tok/s ÷ 200 output tokens
    assert demand["equivalent_output_tokens_per_request"] == 700.0  # 200 + 1,000 × 0.5
    assert demand["peak_equivalent_output_tok_s"] == 7000.0
    assert qwen["seed_rule"] == {"per_card_tok_s": 60.0, "equivalent_tok_s": 7000.0, "cards": 117}
    # FP8: one byte per layer weight, two per embedding and head weight (16 bit in the checkpoint).
    assert qwen["weights_bytes"] == QWEN_72B_PARAMS + QWEN_72B_EMBEDDING_PARAMS
    assert qwen["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 1  # 163,840 B at FP8
    assert qwen["kv_bytes_per_sequence"] == 163_840 * 1_200


def test_qwen_72b_every_sized_row_covers_the_peak(qwen):
    sized = [row for row in qwen["rows"] if row["cards"] is not None]

    assert sized
    for row in sized:
        assert row["replicas"] == math.ceil(10.0 / row["replica_requests_per_s"] - 1e-9)
        assert row["cards"] == row["replicas"] * row["tp"]
        assert row["weights_bytes_per_gpu"] == math.ceil(
            (QWEN_72B_PARAMS + QWEN_72B_EMBEDDING_PARAMS) / row["tp"]
        )
        if row["meets_targets"]:
            assert row["tpot_ms"] <= 50 and row["ttft_ms"] <= 2000


def test_qwen_72b_needs_more_l40s_than_are_free_and_the_request_goes_to_a_pool(qwen):
    l40s = _row(qwen, "l40s")

    # L40S nodes have 4 cards: TP 4 over PCIe, whose all-reduces (half the 32 GB/s link, NCCL
    # measurements) leave 7 sequences per replica within 50 ms TPOT: 15 replicas, 60 cards.
    assert (l40s["tp"], l40s["cards_per_node"], l40s["batch"]) == (4, 4, 7)
    assert l40s["replicas"] == 15 and l40s["cards"] == 60
    assert l40s["cards"] == l40s["tp"] * l40s["replicas"]
    assert (l40s["free_cards"], l40s["pool"], l40s["fits_free_capacity"]) == (
        40,
        "infer-k8s",
        False,
    )
    assert qwen["recommended_in_free_capacity"] is None
    # The cheapest overall (fewest cards: no prices) is a card the inference pool does not have.
    best = _row(qwen, qwen["recommended"])
    assert best["cards"] == min(r["cards"] for r in qwen["rows"] if r["meets_targets"]) == 2
    assert best["pool"] is None
    # What the pool offers with the fewest cards, though not free yet: 44 A100 PCIe (TP 2, FP8
    # run weight-only: 5 sequences per replica within 50 ms TPOT, 22 replicas for 10 req/s).
    a100 = _row(qwen, "a100_80g_pcie")
    assert (a100["tp"], a100["batch"], a100["replicas"]) == (2, 5, 22)
    assert (a100["cards"], a100["free_cards"]) == (44, 8)
    # ... but the pool holds only 8 (usable), and a request for cards may not ask for more than
    # a pool can hold: the estimate ends in a request for capacity to add, for the cheapest
    # option, in no pool (none has the model), and says what it lacks.
    assert (a100["usable_cards"], _row(qwen, "l40s")["usable_cards"]) == (8, 40)
    lacks = f"no inference pool has {best['gpu_name']} cards: ask a pool admin to host 2 of them"
    assert qwen["request_lacks"] == lacks
    request = dict(qwen["request"])
    assert request.pop("justification").startswith(
        f"Serve Qwen2.5-72B for 2,000 output tok/s at peak. Sized by the portal: 2 × "
        f"{best['gpu_name']} (TP {best['tp']} × {best['replicas']} replicas)"
    )
    assert (best["tp"], best["replicas"]) == (1, 2)
    assert request == {
        "basis": "capacity_to_add", "kind": "growth", "lacks": lacks,
        "workload_kind": "inference", "gpu_model": best["gpu_model"], "card_count": 2,
        "pool": None, "cards_per_node": None, "node_count": None,  # TP 1: any cards
    }  # fmt: skip
    assert sizing_request_url(qwen["request"]).startswith(
        f"/requests/new/?workload_kind=inference&gpu_model={best['gpu_model']}&card_count=2"
        "&kind=growth&justification="
    )


def test_at_half_the_load_l40s_fit_and_the_request_explains_itself(fleet):
    """1,000 tok/s: 32 L40S (TP 4 × 8) fit the 40 free, so that is what is requested, with
    the estimate as the justification."""
    _, results = sizing_preview(raw=QWEN_72B | {"output_tok_s": 1000})
    l40s = _row(results, "l40s")

    assert (l40s["cards"], l40s["tp"] * l40s["replicas"], l40s["free_cards"]) == (32, 32, 40)
    request = dict(results["request"])
    justification = request.pop("justification")
    assert request == {
        "basis": "recommended_in_free_capacity",
        "kind": "cards",
        "lacks": None,
        "workload_kind": "inference",
        "gpu_model": "l40s",
        "card_count": 32,
        "pool": "infer-k8s",
        # TP 4 x 8 replicas: eight 4-card groups, each on one node; L40S have no NVLink, so
        # no domain is asked, and replicas may share a node
        "cards_per_node": 4,
        "node_count": 8,
        "one_nvlink_domain": False,
        "shared_nodes": True,
    }
    assert justification.startswith(
        "Serve Qwen2.5-72B for 1,000 output tok/s at peak. Sized by the portal: 32 × L40S "
        f"(TP {l40s['tp']} × {l40s['replicas']} replicas)"
    )
    url = sizing_request_url(results["request"])
    assert url.startswith(
        "/requests/new/?workload_kind=inference&gpu_model=l40s&card_count=32"
        "&justification=Serve+Qwen2.5-72B+for+1%2C000+output+tok%2Fs+at+peak."
    )
    assert url.endswith("&cards_per_node=4&node_count=8&shared_nodes=on&pool=infer-k8s")


def test_cards_held_in_the_window_are_not_free(fleet):
    start, end = capacity_window()
    AllocationFactory(
        pool=fleet,
        gpu_model=GpuModel.objects.get(slug="l40s"),
        card_count=20,
        starts_at=start - timedelta(days=1),
        ends_at=end,
    )

    _, results = sizing_preview(raw=QWEN_72B)

    assert _row(results, "l40s")["free_cards"] == 20
    assert _row(results, "l40s")["fits_free_capacity"] is False
    # the pool's name, not its slug
    assert "20 are free in Inference (Kubernetes) for" in str(_row(results, "l40s")["warnings"])
    # L40S: 20 held, 20 free of 40, 60 needed; A100 PCIe: 50 needed of 8: nothing fits now
    # and nothing fits the pool at all, so what is asked for is capacity to add.
    assert results["recommended_in_free_capacity"] is None
    assert (results["request"]["kind"], results["request"]["pool"]) == ("growth", None)
    assert results["request_lacks"].startswith("no inference pool has ")


def test_a_request_that_waits_for_cards_says_how_many_more_it_needs(fleet):
    """1,000 tok/s: 32 L40S needed, the pool holds 40 but 20 are held: the request waits."""
    start, end = capacity_window()
    AllocationFactory(
        pool=fleet,
        gpu_model=GpuModel.objects.get(slug="l40s"),
        card_count=20,
        starts_at=start - timedelta(days=1),
        ends_at=end,
    )

    _, results = sizing_preview(raw=QWEN_72B | {"output_tok_s": 1000})

    assert (_row(results, "l40s")["cards"], _row(results, "l40s")["free_cards"]) == (32, 20)
    assert results["request"]["basis"] == "offered_by_a_pool"
    assert (results["request"]["gpu_model"], results["request"]["pool"]) == ("l40s", "infer-k8s")
    assert results["request"]["kind"] == "cards"
    # the 20 held cards come back when that allocation ends, at the end of the page's window:
    # the request asks for the week from then, and says so
    when = timezone.localtime(end)
    assert results["request"]["lacks"] == (
        "needs 12 more L40S cards free in Inference (Kubernetes) than the 20 free now"  # 32 - 20
        f"; 32 are free from {when:%Y-%m-%d %H:%M} UTC"
    )
    assert (results["request"]["starts_at"], results["request"]["ends_at"]) == (
        end.isoformat(),
        (end + timedelta(days=7)).isoformat(),
    )
    assert sizing_request_url(results["request"]).endswith(
        f"&pool=infer-k8s&starts_at={when:%Y-%m-%dT%H}%3A00&ends_at="
        f"{when + timedelta(days=7):%Y-%m-%dT%H}%3A00"
    )


def test_training_pools_do_not_count_as_free_serving_capacity(qwen):
    a100_sxm = _row(qwen, "a100_80g_sxm")

    assert a100_sxm["pool"] is None
    assert a100_sxm["cards_per_node"] == 8  # no inference node: the usual 8-card server
    codes = [w["code"] for w in a100_sxm["warnings"]]
    assert codes == ["fp8_weight_only", "not_in_inference_pools"]  # Ampere has no FP8 cores
    assert a100_sxm["precision"] == "FP8-WO"


def test_bf16_misses_the_targets_on_the_pool_and_the_page_says_so(fleet):
    _, results = sizing_preview(raw={**QWEN_72B, "precision": "BF16", "kv_cache_dtype": "FP16"})

    l40s = _row(results, "l40s")
    assert l40s["meets_targets"] is False
    assert "tpot_over_target" in [w["code"] for w in l40s["warnings"]]
    assert results["recommended_in_free_capacity"] is None
    assert results["weights_bytes"] == 2 * QWEN_72B_PARAMS


# ---------------------------------------------------------------------------------------------
# Other loads, prices, filters


def test_concurrency_needs_replicas_for_every_sequence(fleet):
    raw = {**QWEN_72B, "demand_kind": "concurrency", "concurrency": 100, "output_tok_s": None}

    inputs, results = sizing_preview(raw=raw)

    assert results["demand"] is None and results["seed_rule"] is None
    assert results["kv_bytes_for_concurrency"] == 163_840 * 1_200 * 100
    for row in results["rows"]:
        if row["cards"] is not None:
            assert row["replicas"] == math.ceil(100 / row["batch"])
            assert row["cards"] == row["replicas"] * row["tp"]


def test_traffic_is_spread_over_its_peak_window(fleet):
    raw = {
        **QWEN_72B,
        "demand_kind": "traffic",
        "requests_per_day": 100_000,
        "peak_share": 1,
        "peak_hours": 4,
        "input_len": 5000,
        "output_len": 1500,
    }

    _, results = sizing_preview(raw=raw)

    assert results["demand"]["peak_window_s"] == 14_400
    assert results["demand"]["peak_requests_per_s"] == pytest.approx(100_000 / 14_400, rel=1e-5)
    assert results["seed_rule"]["cards"] == 463  # 27,778 equivalent tok/s ÷ 60


@pytest.fixture
def l40s_rate_card(fleet):
    """A rate card from 2020 with a reserved L40S card-hour at 1.20 EUR and nothing for H100."""
    from datetime import date

    from billing.choices import RateKind
    from billing.models import RateCard, RateCardEntry

    card = RateCard.objects.create(name="2020", currency="EUR", effective_from=date(2020, 1, 1))
    RateCardEntry.objects.create(rate_card=card, kind=RateKind.GPU_RESERVED,
                                 gpu_model=GpuModel.objects.get(slug="l40s"),
                                 price=Decimal("1.20"))  # fmt: skip
    return card


def test_the_rate_card_prices_the_plan_in_its_currency(l40s_rate_card):
    """No price given: the rate card's reserved rate in force now, 60 L40S × 1.20 EUR × 730 h =
    52,560.00 EUR a month; H100 SXM has no rate, so its cost is unknown (None), not 0."""
    _, results = sizing_preview(raw=QWEN_72B)

    assert _row(results, "l40s")["price_per_card_hour"] == "1.20"
    assert _row(results, "l40s")["monthly_cost"] == "52560.00"
    assert _row(results, "l40s")["currency"] == "EUR"
    assert _row(results, "h100_sxm")["monthly_cost"] is None
    assert _row(results, "h100_sxm")["currency"] is None
    assert (results["priced"], results["currency"]) == (True, "EUR")


def test_a_price_given_takes_precedence_over_the_rate_card(l40s_rate_card):
    """60 L40S × 1.00 (given) × 730 h = 43,800.00, in the rate card's currency."""
    _, results = sizing_preview(raw={**QWEN_72B, "prices": {"l40s": "1.00"}})

    assert _row(results, "l40s")["monthly_cost"] == "43800.00"
    assert results["currency"] == "EUR"


def test_a_price_gives_the_monthly_cost_and_no_price_gives_none(fleet):
    _, results = sizing_preview(raw={**QWEN_72B, "prices": {"l40s": "1.20"}})

    assert _row(results, "l40s")["price_per_card_hour"] == "1.20"
    assert _row(results, "l40s")["monthly_cost"] == "52560.00"  # 60 × 1.20 × 730 h
    assert _row(results, "h100_sxm")["monthly_cost"] is None
    assert results["priced"] is True
    assert results["currency"] is None  # no rate card: the given price's currency is unknown
    # Priced models rank before unpriced ones, so the page says the comparison is partial.
    assert results["recommended"] == "l40s" and results["pricing"] == "partial"


def test_only_free_capacity_keeps_the_models_an_inference_pool_has_free(fleet):
    _, results = sizing_preview(raw={**QWEN_72B, "only_free_capacity": True})

    assert {row["gpu_model"] for row in results["rows"]} == {"l40s", "a100_80g_pcie"}


def test_progress_is_reported_per_gpu_model(fleet):
    inputs = sizing_inputs_clean({**QWEN_72B, "gpu_models": ["l40s", "h100_sxm", "l4"]})
    calls = []

    sizing_results(inputs=inputs, on_progress=lambda done, total: calls.append((done, total)))

    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_a_custom_architecture_counts_its_parameters_like_the_preset(fleet):
    custom = {
        "num_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_kv_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_context_tokens": 131072,
    }
    raw = {**QWEN_72B, "model": "custom", "custom_model": custom, "precision": "BF16"}

    _, results = sizing_preview(raw=raw)

    assert results["model"]["total_params"] == 8_030_261_248  # Llama-3.1-8B by the same rule
    assert results["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 1


# ---------------------------------------------------------------------------------------------
# Bad input: field errors, nothing written


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"input_len": 0}, "input_len", "at least 1"),
        ({"output_len": -200}, "output_len", "at least 1"),
        ({"input_len": 32_000, "output_len": 1_000}, "input_len", "maximum context of 32,768"),
        ({"output_tok_s": 0}, "output_tok_s", "(0, 1e+12]"),
        ({"output_tok_s": 1e11}, "output_tok_s", "beyond any real deployment"),
        (
            {"demand_kind": "traffic", "requests_per_day": 10**12},
            "requests_per_day",
            "beyond any real deployment",
        ),
        ({"demand_kind": "concurrency", "concurrency": 0}, "concurrency", "at least 1"),
        ({"prompt_cache_hit_rate": 1}, "prompt_cache_hit_rate", "[0, 1)"),
        ({"model": "gpt-5"}, "model", "Unknown model"),
        ({"precision": "FP3"}, "precision", "unknown precision"),
        ({"engine": "ollama"}, "engine", "unknown engine"),
        ({"gpu_models": ["z999"]}, "gpu_models", "Unknown GPU models: z999"),
        ({"prices": {"l40s": "-1"}}, "prices.l40s", "price per card-hour"),
        ({"input_len": "lots"}, "input_len", "whole number"),
        ({"tpot_target_ms": 0}, "tpot_target_ms", "(0,"),
    ],
)
def test_bad_inputs_are_field_errors_and_write_nothing(fleet, member, change, field, words):
    before = (SizingEstimate.objects.count(), AuditEvent.objects.count())

    with pytest.raises(InvalidInput) as caught:
        sizing_estimate_create(actor=member, inputs={**QWEN_72B, **change})

    assert words in caught.value.data["errors"][field]
    assert (SizingEstimate.objects.count(), AuditEvent.objects.count()) == before


def test_every_bad_field_is_named_at_once(fleet):
    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, "input_len": 0, "output_len": 0, "engine": "x"})

    assert set(caught.value.data["errors"]) == {"input_len", "output_len", "engine"}


def test_required_inputs_have_no_default(fleet):
    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({})

    assert set(caught.value.data["errors"]) == {"model", "input_len", "output_len", "output_tok_s"}


def test_an_inconsistent_custom_architecture_names_the_field(fleet):
    custom = {
        "num_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_kv_heads": 7,
        "head_dim": 128,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_context_tokens": 8192,
    }
    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": custom})

    assert (
        "do not divide the 32 attention heads"
        in (caught.value.data["errors"]["custom_model.num_kv_heads"])
    )


def test_sharing_with_a_team_the_actor_is_not_in_is_refused(fleet, team, other_member):
    with pytest.raises(PermissionDenied):
        sizing_estimate_create(actor=other_member, inputs=QWEN_72B, team=team)

    assert not SizingEstimate.objects.exists()


# ---------------------------------------------------------------------------------------------
# The job


def test_create_stores_clean_inputs_and_queues_the_job_on_commit(
    fleet, team_member, team, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        estimate = sizing_estimate_create(actor=team_member, inputs=QWEN_72B, team=team)

    assert estimate.status == EstimateStatus.PENDING and estimate.progress == 0
    assert estimate.inputs["input_len"] == 1000 and estimate.inputs["gpu_models"] == []
    assert estimate.inputs["tpot_target_ms"] == 50.0
    assert len(callbacks) == 1
    callbacks[0]()  # the eager task, as with no broker
    estimate.refresh_from_db()
    assert estimate.status == EstimateStatus.DONE and estimate.progress == 100
    # 50 A100 PCIe needed, the pool holds 8: capacity to add
    assert estimate.results["request"]["kind"] == "growth"
    assert estimate.results["request_lacks"].startswith("no inference pool has B200 SXM 180GB")
    assert estimate.finished_at is not None
    assert list(
        AuditEvent.objects.filter(object_id=str(estimate.pk)).values_list("action", flat=True)
    ) == ["sizing_estimate.done", "sizing_estimate.created"]


def test_running_twice_changes_nothing_the_second_time(fleet, member):
    estimate = SizingEstimate.objects.create(
        inputs=sizing_inputs_clean(QWEN_72B), created_by=member
    )

    first = sizing_estimate_run(estimate_id=estimate.pk)
    second_status = sizing_estimate_task(estimate.pk)
    second = SizingEstimate.objects.get(pk=estimate.pk)

    assert first.status == second_status == EstimateStatus.DONE
    assert (second.results, second.finished_at) == (first.results, first.finished_at)
    assert AuditEvent.objects.filter(action="sizing_estimate.done").count() == 1


def test_an_interrupted_run_is_run_again(fleet, member):
    estimate = SizingEstimate.objects.create(
        inputs=sizing_inputs_clean(QWEN_72B),
        created_by=member,
        status=EstimateStatus.RUNNING,
        progress=40,
    )

    assert sizing_estimate_run(estimate_id=estimate.pk).status == EstimateStatus.DONE


def test_inputs_the_arithmetic_refuses_fail_with_the_reason(fleet, member):
    inputs = {**sizing_inputs_clean(QWEN_72B), "precision": "FP3"}  # written around the service
    estimate = SizingEstimate.objects.create(inputs=inputs, created_by=member)

    failed = sizing_estimate_run(estimate_id=estimate.pk)

    assert failed.status == EstimateStatus.FAILED and failed.results is None
    assert failed.error.startswith("The inputs cannot be estimated: unknown precision 'FP3'")
    assert sizing_estimate_run(estimate_id=estimate.pk).status == EstimateStatus.FAILED


def test_an_unexpected_error_fails_the_estimate_instead_of_leaving_it_running(
    fleet, member, monkeypatch
):
    estimate = SizingEstimate.objects.create(
        inputs=sizing_inputs_clean(QWEN_72B), created_by=member
    )

    def broken(**kwargs):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr("pools.sizing.services.sizing_results", broken)

    failed = sizing_estimate_run(estimate_id=estimate.pk)

    assert failed.status == EstimateStatus.FAILED
    assert "internal error (ZeroDivisionError)" in failed.error


def test_a_deleted_estimate_is_nothing_to_do_for_the_task(db):
    assert sizing_estimate_task(987654) == "missing"


def test_gpu_specs_come_from_the_database_rows(fleet):
    GpuModel.objects.filter(slug="l40s").update(memory_bandwidth_gbps=Decimal("1728"))

    _, results = sizing_preview(raw=QWEN_72B)

    assert _row(results, "l40s")["memory_bandwidth_gbps"] == 1728.0


def test_an_empty_fleet_still_sizes_every_catalogue_model(db):
    _, results = sizing_preview(raw=QWEN_72B)

    assert len(results["rows"]) == GpuModel.objects.count()
    assert results["recommended_in_free_capacity"] is None
    assert not Pool.objects.exists()
    # no pool at all: a request for capacity to add, saying what it lacks
    best = _row(results, results["recommended"])
    assert (results["request"]["kind"], results["request"]["gpu_model"]) == (
        "growth", best["gpu_model"],
    )  # fmt: skip
    assert results["request"]["card_count"] == best["cards"]
    assert results["request_lacks"] == (
        f"no inference pool has {best['gpu_name']} cards: ask a pool admin to host "
        f"{best['cards']:,} of them"
    )


def test_a_team_member_can_share_an_estimate(fleet, team, team_member):
    MembershipFactory(team=team, user__username="zoe")

    estimate = sizing_estimate_create(actor=team_member, inputs=QWEN_72B, team=team)

    assert estimate.team == team


def test_absent_targets_take_the_defaults_and_null_targets_are_not_checked(fleet):
    absent = {k: v for k, v in QWEN_72B.items() if not k.endswith("_target_ms")}

    defaults = sizing_inputs_clean(absent)
    none = sizing_inputs_clean({**absent, "tpot_target_ms": None, "ttft_target_ms": ""})
    _, results = sizing_preview(raw={**absent, "tpot_target_ms": None, "ttft_target_ms": None})

    # seeds/000 4.2: TTFT within 1 s, TPOT under 50 ms
    assert (defaults["tpot_target_ms"], defaults["ttft_target_ms"]) == (50.0, 1000.0)
    assert (none["tpot_target_ms"], none["ttft_target_ms"]) == (None, None)
    # Without a TPOT target the L40S replicas fill their KV cache: fewer cards than at 50 ms.
    assert _row(results, "l40s")["cards"] < 28


@pytest.mark.parametrize(
    ("change", "errors"),
    [
        # a custom model without its architecture, and one field of it missing
        ({"model": "custom"}, {"custom_model": "Give the custom architecture's fields."}),
        ({"model": "custom", "custom_model": "big"},
         {"custom_model": "Give the custom architecture's fields."}),
        # an unknown slug is the field's error, a bad price the price's
        ({"prices": {"z999": "3"}}, {"prices": "Unknown GPU model 'z999' in prices."}),
        ({"prices": {"l40s": "lots"}}, {"prices.l40s": "A price per card-hour is 0 to 100,000."}),
        ({"prices": [1]}, {"prices": "Give prices as {GPU model slug: price per card-hour}."}),
        ({"gpu_models": "h100_sxm, z999"}, {"gpu_models": "Unknown GPU models: z999."}),
        ({"only_free_capacity": "perhaps"}, {"only_free_capacity": "Must be a valid boolean."}),
        ({"demand_kind": "vibes"},
         {"demand_kind": "Choose one of output_rate, traffic, concurrency."}),
        ({"input_len": "1.5"}, {"input_len": "Enter a whole number."}),
        ({"input_len": 10_000_001}, {"input_len": "Must be at most 10,000,000."}),
        ({"peak_share": "1.01"}, {"peak_share": "Must be in (0, 1]."}),
        # a kind that is no string is refused as a kind (it was a 500: an unhashable key)
        ({"demand_kind": ["traffic"]},
         {"demand_kind": "Choose one of output_rate, traffic, concurrency."}),
        ({"model": ["qwen2_5_72b"]}, {"model": "Not a valid string."}),
        ({"precision": 8}, {"precision": "Choose one of " + ", ".join(WEIGHT_PRECISIONS) + "."}),
        # the first unknown slug and every bad price at once
        ({"prices": {"l40s": -1, "z1": 1, "z2": 2}},
         {"prices": "Unknown GPU model 'z1' in prices.",
          "prices.l40s": "A price per card-hour is 0 to 100,000."}),
        # a bad layer count and, in the same answer, the seven other required fields missing
        ({"model": "custom", "custom_model": {"num_layers": "x"}},
         {"custom_model.num_layers": "Enter a whole number.",
          **dict.fromkeys(
              ("custom_model.hidden_size", "custom_model.num_attention_heads",
               "custom_model.num_kv_heads", "custom_model.head_dim",
               "custom_model.intermediate_size", "custom_model.vocab_size",
               "custom_model.max_context_tokens"),
              "Required for a custom architecture (or give its config.json).")}),
        # with a config.json none is "required"; the config's own fault (it lacks five of the
        # keys it must give, whatever is typed) comes beside the bad field (issue 34)
        ({"model": "custom", "custom_model": {"config": {"num_hidden_layers": 2},
                                              "num_layers": "x"}},
         {"custom_model.num_layers": "Enter a whole number.",
          "custom_model.config": "the config.json lacks hidden_size (hidden_size / n_embd / "
          "d_model); num_attention_heads (num_attention_heads / n_head); vocab_size "
          "(vocab_size); max_context_tokens (max_position_embeddings / max_sequence_length); "
          "intermediate_size (intermediate_size / ffn_dim / n_inner)"}),
    ],
)  # fmt: skip
def test_each_kind_of_bad_input_has_its_message(fleet, change, errors):
    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, **change})

    assert caught.value.data["errors"] == errors


def test_clean_inputs_are_complete_and_ignore_the_other_kinds_figures(fleet):
    clean = sizing_inputs_clean(
        {**QWEN_72B, "requests_per_day": "garbage", "concurrency": -1, "tpot_target_ms": "",
         "input_len": "1,000", "gpu_models": "l40s h100_sxm l40s", "prices": {"l40s": " "},
         "custom_model": {"num_layers": "x"}}
    )  # fmt: skip

    # the output-rate kind reads output_tok_s only; a blank TPOT target is "not checked"
    assert (clean["requests_per_day"], clean["concurrency"]) == (None, None)
    assert clean["tpot_target_ms"] is None and clean["ttft_target_ms"] == 2000.0
    assert clean["input_len"] == 1000 and clean["custom_model"] is None
    assert clean["gpu_models"] == ["h100_sxm", "l40s"] and clean["prices"] == {}
    assert set(clean) == set(DEFAULT_INPUTS)


def test_the_custom_fields_the_page_lists_are_the_inputs():
    from pools.sizing.inputs import CUSTOM_MODEL, CUSTOM_MODEL_FIELDS

    names = [n for n in CUSTOM_MODEL.parts if n not in ("name", "config")]
    assert names == [n for n, _ in CUSTOM_MODEL_FIELDS]
    # without a config.json the first eight are required (checked by the group itself)
    assert [n for n, required in CUSTOM_MODEL_FIELDS if required] == names[:8]


def test_a_custom_model_from_a_pasted_config_json_with_blank_fields(fleet):
    """The page sends every architecture field blank and the config.json pasted: the config's
    architecture is sized. Qwen3-30B-A3B by hand: per layer attention 2,048 x 4,096 (q) + 2 x
    2,048 x 512 (k, v) + 4,096 x 2,048 (o) = 18,874,368, norms 4,096, router 2,048 x 128 =
    262,144, experts 128 x 3 x 2,048 x 768 = 603,979,776: 623,120,384 x 48 layers =
    29,909,778,432; + embeddings 2 x 151,936 x 2,048 = 622,329,856 + final norm 2,048 =
    30,532,110,336 (the model card: 30.5 B)."""
    import json
    from pathlib import Path

    text = (
        Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs" / "qwen3_30b_a3b.json"
    ).read_text()
    custom = {name: "" for name in DEFAULT_CUSTOM_FIELDS} | {"name": "", "config": text}
    inputs, results = sizing_preview(raw={**QWEN_72B, "model": "custom", "custom_model": custom})

    assert results["model"]["total_params"] == 30_532_110_336
    assert json.loads(text)["num_experts"] == 128


def test_a_contradictory_config_json_is_refused_field_by_field(fleet):
    import json
    from pathlib import Path

    config = json.loads(
        (
            Path(__file__).resolve().parents[2] / "fixtures" / "hf_configs" / "qwen3_30b_a3b.json"
        ).read_text()
    )
    config |= {"num_experts_per_tok": 129, "num_key_value_heads": 5}
    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": {"config": config}})

    errors = caught.value.data["errors"]
    assert errors["custom_model.experts_per_token"] == (
        "129 experts per token is more than the 128 experts."
    )
    assert errors["custom_model.num_kv_heads"] == (
        "5 KV heads do not divide the 32 attention heads evenly."
    )


def test_a_fixed_tp_and_pipeline_stages_make_a_replica_tp_x_pp_cards(fleet):
    """Qwen2.5-72B at TP 2 x PP 2: every sized row runs that layout (no other TP is tried), a
    replica is 4 cards, so the cards are 4 x the replicas and each card holds the stage's
    half of its TP share of the weights: ceil(ceil(W / 2) x 40 / 80)."""
    inputs, results = sizing_preview(raw={**QWEN_72B, "tp": 2, "pp": 2})

    sized = [row for row in results["rows"] if row["replicas"] is not None]
    assert inputs["tp"] == 2 and inputs["pp"] == 2
    assert sized
    for row in sized:
        assert (row["tp"], row["pp"]) == (2, 2)
        assert row["cards"] == 4 * row["replicas"]
        whole = row["weights_bytes"]
        tp_share = -(-whole // 2)
        assert row["weights_bytes_per_gpu"] == -(-tp_share * 40 // 80)


def test_a_tp_that_does_not_divide_the_heads_or_ep_on_a_dense_model_is_a_field_error():
    with pytest.raises(InvalidInput) as error:
        sizing_inputs_clean({**QWEN_72B, "tp": 3, "ep": 2})
    with pytest.raises(InvalidInput) as stages:
        sizing_inputs_clean({**QWEN_72B, "model": "llama3_8b", "pp": 33})

    errors = error.value.data["errors"]
    assert set(errors) == {"tp", "ep"}
    assert "does not divide" in errors["tp"] and "dense" in errors["ep"]
    assert set(stages.value.data["errors"]) == {"pp"}  # Llama-3-8B has 32 layers


#: Llama-3-8B's config.json (meta-llama/Meta-Llama-3-8B), the keys the reader takes.
LLAMA3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}


@pytest.mark.parametrize(
    ("override", "key", "given"),
    [
        ({"intermediate_size": [1, 2]}, "intermediate_size", "[1, 2]"),
        ({"num_hidden_layers": "32"}, "num_hidden_layers", '"32"'),
        ({"hidden_size": "4096"}, "hidden_size", '"4096"'),
        ({"hidden_size": 4096.5}, "hidden_size", "4096.5"),
        ({"vocab_size": True}, "vocab_size", "true"),
        (
            {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": "128"},
            "qk_nope_head_dim",
            '"128"',
        ),
        (
            {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "q_lora_rank": {"x": 1}},
            "q_lora_rank",
            '{"x": 1}',
        ),
    ],
)
def test_a_config_json_count_that_is_not_a_whole_number_is_refused_by_its_key(override, key, given):
    """Found by hand (newcomer probe of /sizing/): a pasted config.json whose count was a list
    or a string reached the parameter count (``3 * hidden * [1, 2]``, ``"32" * layer``), whose
    TypeError was the page's 500; a string hidden size was reported as a missing head_dim. The
    config's one count rule names the key and what it holds, as the config.json spells it
    (``true``, ``"4096"``; it was Python's ``True``, ``'4096'``), and nothing else is reported."""
    config = {**LLAMA3_8B_CONFIG, **override}

    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": {"config": config}})

    assert caught.value.data["errors"] == {
        "custom_model.config": f"the config.json's {key} is {given}: each must be a whole "
        "number from 0 to 10,000,000,000,000"
    }


def test_pasted_json_counts_are_quoted_as_the_user_wrote_them():
    """The same rule on the text the page posts: ``true`` and ``"4096"`` as pasted, two keys
    at fault named in one message, in the order the reader checks them."""
    text = json.dumps({**LLAMA3_8B_CONFIG, "num_hidden_layers": True, "hidden_size": "4096"})

    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": {"config": text}})

    assert caught.value.data["errors"] == {
        "custom_model.config": "the config.json's num_hidden_layers is true; hidden_size is "
        '"4096": each must be a whole number from 0 to 10,000,000,000,000'
    }


NOT_AN_OBJECT = (
    "a config.json must be a JSON object of the model's fields "
    '({"num_hidden_layers": …, "hidden_size": …, …}), not '
)


@pytest.mark.parametrize(
    ("pasted", "shown"),
    [("null", "null"), (" [1, 2] ", "[1, 2]"), ('"config"', '"config"'), ("4096", "4096"),
     ("false", "false")],
)  # fmt: skip
def test_pasted_json_that_is_no_object_is_refused_in_users_words(pasted, shown):
    """A pasted ``null`` was read as no config at all: eight refusals naming the form's
    internal fields ("num_layers is required for a custom architecture ..."). Any JSON that is
    no object now gets one refusal of the config.json, saying what it must be."""
    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": {"config": pasted}})

    assert caught.value.data["errors"] == {"custom_model.config": NOT_AN_OBJECT + shown}


def test_an_api_config_that_is_no_object_is_refused_alike_and_null_means_none():
    """Through the API the config may be the object itself: a list is refused with the same
    words; ``null`` there is "no config given", so the custom fields are asked for."""
    with pytest.raises(InvalidInput) as listed:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": {"config": [1, 2]}})
    with pytest.raises(InvalidInput) as absent:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": {"config": None}})

    assert listed.value.data["errors"] == {"custom_model.config": NOT_AN_OBJECT + "[1, 2]"}
    assert "custom_model.num_layers" in absent.value.data["errors"]


def test_a_config_json_with_zero_kv_heads_is_refused_not_read_as_multi_head():
    """Found by hand (newcomer probe of /sizing/): ``"num_key_value_heads": 0`` was read as
    absent and sized as 32 KV heads (4x Llama-3-8B's 8: four times the KV cache per token)."""
    config = {**LLAMA3_8B_CONFIG, "num_key_value_heads": 0}

    with pytest.raises(InvalidInput) as caught:
        sizing_inputs_clean({**QWEN_72B, "model": "custom", "custom_model": {"config": config}})

    assert caught.value.data["errors"] == {
        "custom_model.num_kv_heads": "num_kv_heads must be a positive integer, got 0"
    }
