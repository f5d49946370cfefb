"""The calibration pass on PostgreSQL: per allocation-day measured against sized, and the
records per (model, GPU model, engine, precision, driver group)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from factories import AllocationFactory, NodeFactory

from pools.calibration.services import calibration_refresh
from pools.capacity.models import PlacedCards
from pools.common.choices import AllocationStatus
from pools.serving.models import ServedModel, ServingCalibrationDay, ServingRollup
from pools.sizing.gpus import gpu_spec
from pools.sizing.models import CalibrationRecord
from pools.sizing.plan import estimate_replica
from pools.sizing.presets import model_preset

NOW = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


def rollup(allocation, start, *, generation, running, prompt, finished):
    return ServingRollup.objects.create(
        allocation=allocation,
        bucket_start=start,
        cards_held=2,
        engine="vllm",
        generation_tokens=generation,
        requests_running=running,
        prompt_tokens=prompt,
        requests_finished=finished,
    )


@pytest.fixture
def served():
    """2 L40S cards on one node of driver branch 550, serving Llama 3 8B in FP16 at TP 1
    with vLLM (2 replicas), with rollups on two days."""
    allocation = AllocationFactory(
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=NOW - timedelta(days=3),
        ends_at=NOW + timedelta(days=3),
    )
    node = NodeFactory(pool=allocation.pool, driver_version="550.54.15")
    PlacedCards.objects.create(allocation=allocation, hostname=node.hostname, gpu_mask=0b11)
    ServedModel.objects.create(
        allocation=allocation, model_id="llama3_8b", precision="fp16", tp=1, engine="vllm"
    )
    day1 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    rollup(allocation, day1, generation=180_000, running=8, prompt=60_000, finished=300)
    rollup(allocation, day1 + timedelta(minutes=5), generation=120_000, running=4, prompt=40_000,
           finished=200)  # fmt: skip
    day2 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    rollup(allocation, day2, generation=240_000, running=6, prompt=80_000, finished=400)
    return allocation


def sized_per_card(*, concurrency, input_tokens, output_tokens):
    estimate = estimate_replica(
        model=model_preset("llama3_8b"),
        gpu=gpu_spec("l40s"),
        precision="fp16",
        kv_cache_dtype=None,
        tp=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        concurrency=concurrency,
        engine="vllm",
    )
    return estimate.output_tok_s_total, estimate.band


def test_days_and_record_by_hand(served):
    """Day 1: 300,000 tokens / (2 cards x 600 s) = 250 tok/s per card at (8 x 300 / 2 +
    4 x 300 / 2) / 600 = 3 sequences per replica, 200 in / 600 out tokens.
    Day 2: 240,000 / (2 x 300) = 400 tok/s per card at 6 / 2 = 3 sequences, 200 in / 600 out.
    Sized per bucket, weighted by card-seconds: day 1 ran 600 card-s at 4 sequences and 600 at
    2, so sized = (sized(4) + sized(2)) / 2 (not sized(3)); day 2 all at 3: sized(3).
    Record: 2 days, median tok/s per card (250 + 400) / 2 = 325; median ratio of the days."""
    assert calibration_refresh(now=NOW) == {"days": 2, "records": 1}
    at_2, band = sized_per_card(concurrency=2, input_tokens=200, output_tokens=600)
    at_4, _ = sized_per_card(concurrency=4, input_tokens=200, output_tokens=600)
    sized, _ = sized_per_card(concurrency=3, input_tokens=200, output_tokens=600)
    d1, d2 = ServingCalibrationDay.objects.order_by("day")
    assert (d1.day, d2.day) == (date(2026, 12, 2), date(2026, 12, 3))
    assert (d1.measured_tok_s_per_card, d2.measured_tok_s_per_card) == (250, 400)
    assert (d1.concurrency, d2.concurrency) == (3.0, 3.0)
    assert d1.sized_tok_s_per_card == pytest.approx((at_4 + at_2) / 2)
    assert d2.sized_tok_s_per_card == pytest.approx(sized)
    assert d1.ratio == pytest.approx(250 / ((at_4 + at_2) / 2))
    assert d2.ratio == pytest.approx(400 / sized)
    assert (d1.band_low_factor, d1.band_high_factor) == (band.low_factor, band.high_factor)
    # The engine sizes ~130 tok/s per card here, band regime throughput|16-bit|Ada 0.761-1.15
    # (error_bands.json): 250 / 130 = 1.9 and 400 / 130 = 3.1 are both above it.
    assert band.regime == "throughput|16-bit|Ada"
    assert (d1.position, d2.position) == ("above", "above")
    record = CalibrationRecord.objects.get()
    assert (record.model_id, record.gpu_model.slug, record.engine, record.precision) == (
        "llama3_8b",
        "l40s",
        "vllm",
        "FP16",  # as the sizing engine names it, so estimates find the record
    )
    assert record.driver_branch == 550
    assert (record.days, record.allocations, record.median_tok_s_per_card) == (2, 1, 325)
    assert record.median_ratio == pytest.approx((d1.ratio + d2.ratio) / 2)


def test_a_pass_twice_gives_the_same_rows(served):
    calibration_refresh(now=NOW)
    calibration_refresh(now=NOW)
    assert ServingCalibrationDay.objects.count() == 2
    assert CalibrationRecord.objects.count() == 1


def test_no_token_series_is_no_record_and_unknown_lengths_leave_sized_unknown(served):
    """Without finished requests the mean lengths are unknown: measured is kept, sized and the
    ratio are None with a note; without token series there is no day at all (never 0)."""
    ServingRollup.objects.filter(bucket_start__date=date(2026, 12, 3)).update(requests_finished=0)
    ServingRollup.objects.filter(bucket_start__date=date(2026, 12, 2)).update(
        generation_tokens=None
    )
    calibration_refresh(now=NOW)
    day = ServingCalibrationDay.objects.get()
    assert day.measured_tok_s_per_card == 400
    assert (day.sized_tok_s_per_card, day.ratio, day.position) == (None, None, "")
    assert "finished" in day.note
    record = CalibrationRecord.objects.get()
    assert (record.days, record.median_tok_s_per_card, record.median_ratio) == (1, 400, None)


def test_unknown_model_id_is_noted_not_raised(served):
    ServedModel.objects.update(model_id="no_such_model")
    calibration_refresh(now=NOW)
    assert all("unknown model" in d.note for d in ServingCalibrationDay.objects.all())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model_id": "no_such_model"}, "model_id"),
        ({"precision": "fp3"}, "precision"),
        ({"engine": "nope"}, "engine"),
        ({"tp": 3}, "tp"),  # Llama 3 8B has 32 attention heads
    ],
)
def test_the_admin_form_refuses_what_the_sizing_engine_would(served, change, field):
    from pools.calibration.forms import ServedModelForm

    ServedModel.objects.all().delete()
    data = {"allocation": served.pk, "model_id": "llama3_8b", "precision": "fp16", "tp": 1,
            "engine": "vllm"} | change  # fmt: skip
    form = ServedModelForm(data=data)
    assert not form.is_valid()
    assert list(form.errors) == [field]
    assert ServedModel.objects.count() == 0
    good = {"allocation": served.pk, "model_id": "llama3_8b", "precision": "fp16", "tp": 2,
            "engine": "vllm"}  # fmt: skip
    assert ServedModelForm(data=good).is_valid()


def test_the_driver_branch_is_the_placed_nodes_in_the_allocations_cluster(served):
    """Another cluster has a node of the same name on branch 570: the record keeps the branch
    of the node in the allocation's pool's cluster (550), not a mix of the two (``None``)."""
    from factories import ClusterFactory, PoolFactory

    from pools.calibration.services import _driver_branches

    hostname = served.placed_cards.get().hostname
    other = PoolFactory(slug="elsewhere", cluster=ClusterFactory(slug="elsewhere"))
    NodeFactory(hostname=hostname, pool=other, driver_version="570.86.10")
    assert _driver_branches([served.pk]) == {served.pk: 550}
    calibration_refresh(now=NOW)
    assert CalibrationRecord.objects.get().driver_branch == 550
