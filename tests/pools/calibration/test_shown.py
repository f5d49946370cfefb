"""Measured against sized where people look: the Serving panel, the sizing rows, ``estimate
--json`` and the API. Records are written by the pass from rollups built here (250 and 400
tok/s per card on two days, worked out in test_services.py), never by the request."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from factories import AllocationFactory

from pools.calibration.services import calibration_refresh
from pools.common.choices import AllocationStatus
from pools.serving.models import ServedModel, ServingCalibrationDay, ServingRollup
from pools.sizing.services import sizing_preview

pytestmark = pytest.mark.django_db

LLAMA = {
    "model": "llama3_8b",
    "precision": "FP16",
    "kv_cache_dtype": "FP16",
    "engine": "vllm",
    "input_len": 200,
    "output_len": 600,
}


@pytest.fixture
def calibrated(team):
    """Team's 2 L40S serve Llama 3 8B FP16, TP 1, vLLM; yesterday 240,000 output tokens in one
    5-minute bucket = 240,000 / (2 x 300) = 400 tok/s per card, the day before (300,000 over
    two buckets) 250: the record's median is (250 + 400) / 2 = 325 over 2 days."""
    now = timezone.now()
    allocation = AllocationFactory(
        team=team,
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=3),
        ends_at=now + timedelta(days=3),
    )
    ServedModel.objects.create(
        allocation=allocation, model_id="llama3_8b", precision="fp16", tp=1, engine="vllm"
    )
    today = datetime.combine(now.date(), datetime.min.time(), UTC)
    for start, generation, running, prompt, finished in (
        (today - timedelta(hours=36), 180_000, 8, 60_000, 300),
        (today - timedelta(hours=36) + timedelta(minutes=5), 120_000, 4, 40_000, 200),
        (today - timedelta(hours=12), 240_000, 6, 80_000, 400),
    ):
        ServingRollup.objects.create(
            allocation=allocation,
            bucket_start=start,
            cards_held=2,
            engine="vllm",
            generation_tokens=generation,
            requests_running=running,
            prompt_tokens=prompt,
            requests_finished=finished,
        )
    calibration_refresh(now=now)
    return allocation


def run_estimate(payload) -> dict:
    out = io.StringIO()
    stdin = io.StringIO(json.dumps(payload))
    call_command("estimate", "--json", "-", stdout=out, stderr=io.StringIO(), stdin=stdin)
    return json.loads(out.getvalue())


def test_estimate_json_returns_measured_on_fleet(calibrated):
    fields = LLAMA | {"gpu": "l40s", "gpu_count": 1, "tp": 1, "concurrency": 3}
    result = run_estimate(fields)
    fleet = result["measured_on_fleet"]
    assert (fleet["tok_s_per_card"], fleet["days"], fleet["allocations"]) == (325.0, 2, 1)
    assert fleet["driver_groups"] == 1


def test_estimate_json_says_null_when_nothing_was_measured(calibrated):
    """Another GPU model, or another precision: unknown (null), never 0."""
    assert run_estimate(LLAMA | {"gpu": "h100_sxm", "tp": 1})["measured_on_fleet"] is None
    assert (
        run_estimate(LLAMA | {"gpu": "l40s", "tp": 1, "precision": "FP8"})["measured_on_fleet"]
        is None
    )


def test_the_sizing_row_of_the_same_gpu_model_carries_it(calibrated):
    _, results = sizing_preview(raw=LLAMA | {"demand_kind": "output_rate", "output_tok_s": 500})
    rows = {row["gpu_model"]: row for row in results["rows"]}
    assert rows["l40s"]["measured_on_fleet"]["tok_s_per_card"] == 325.0
    assert rows["l40s"]["measured_on_fleet"]["days"] == 2
    assert all(r["measured_on_fleet"] is None for slug, r in rows.items() if slug != "l40s")


def test_the_serving_panel_shows_the_newest_day(calibrated, client, team_member):
    """Newest day: 400 tok/s per card at 6 running / 2 replicas = 3.0 sequences per replica."""
    client.force_login(team_member)
    html = client.get(f"/allocations/{calibrated.pk}/serving/").content.decode()
    day = ServingCalibrationDay.objects.order_by("-day").first()
    assert "Measured against sized" in html
    assert "400 output tok/s per card at 3.0 sequences per replica" in html
    assert f"ratio {day.ratio:.2f}" in html
    assert "2 days measured" in html


def test_the_api_lists_the_days_newest_first(calibrated, api_as, team_member):
    body = api_as(team_member).get(f"/api/v1/serving/{calibrated.pk}/calibration/").json()
    assert body["served"] == {"model_id": "llama3_8b", "precision": "fp16", "tp": 1,
                              "engine": "vllm", "kv_cache_dtype": "", "estimate": None}  # fmt: skip
    assert [d["measured_tok_s_per_card"] for d in body["days"]] == [400.0, 250.0]
    assert [d["concurrency"] for d in body["days"]] == [3.0, 3.0]


def test_the_api_says_served_null_for_an_allocation_that_declares_nothing(
    calibrated, api_as, team_member
):
    ServedModel.objects.all().delete()
    body = api_as(team_member).get(f"/api/v1/serving/{calibrated.pk}/calibration/").json()
    assert body == {"allocation": calibrated.pk, "served": None, "days": []}
