"""A team links one of its saved sizing estimates to its allocation (page and API, managers,
audited), and the calibration pass then sizes what the estimate sized: its precision and
KV-cache dtype, and the TP it chose for the allocation's GPU model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import AllocationFactory, SizingEstimateFactory, TeamFactory

from pools.audit.models import AuditEvent
from pools.calibration.services import calibration_refresh
from pools.common.choices import AllocationStatus, EstimateStatus
from pools.serving.models import ServedModel, ServingCalibrationDay, ServingRollup
from pools.sizing.gpus import gpu_spec
from pools.sizing.plan import estimate_replica
from pools.sizing.presets import model_preset
from pools.sizing.services import sizing_preview

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
LLAMA_FP8 = {
    "model": "llama3_8b",
    "precision": "FP8",
    "kv_cache_dtype": "FP8",
    "engine": "vllm",
    "input_len": 200,
    "output_len": 600,
    "demand_kind": "concurrency",
    "concurrency": 3,
    "gpu_models": ["l40s", "h100_sxm"],
}


def saved(user, team=None, **changes) -> object:
    """A finished estimate as the sizing job stores it (the real arithmetic, no fake rows)."""
    inputs, results = sizing_preview(raw={**LLAMA_FP8, **changes})
    return SizingEstimateFactory(
        inputs=inputs, results=results, status=EstimateStatus.DONE, created_by=user, team=team
    )


@pytest.fixture
def allocation(team):
    return AllocationFactory(
        team=team,
        card_count=2,
        gpu_model__slug="l40s",
        status=AllocationStatus.ACTIVE,
        starts_at=NOW - timedelta(days=3),
        ends_at=NOW + timedelta(days=3),
    )


def row_tp(estimate, slug):
    return next(r["tp"] for r in estimate.results["rows"] if r["gpu_model"] == slug)


def test_a_manager_links_a_shared_estimate_and_it_is_audited(
    api_as, team, team_manager, allocation
):
    estimate = saved(team_manager, team=team)

    response = api_as(team_manager).post(
        f"/api/v1/served-models/{allocation.pk}/estimate/", {"estimate": estimate.pk}, format="json"
    )

    assert response.status_code == 200, response.json()
    tp = row_tp(estimate, "l40s")
    assert response.json() == {
        "model_id": "llama3_8b",
        "precision": "FP8",
        "tp": tp,
        "engine": "vllm",
        "kv_cache_dtype": "FP8",
        "estimate": estimate.pk,
    }
    served = ServedModel.objects.get(allocation=allocation)
    assert (served.precision, served.kv_cache_dtype, served.estimate_id) == (
        "FP8", "FP8", estimate.pk
    )  # fmt: skip
    event = AuditEvent.objects.get(action="served_model.linked")
    assert event.object_id == str(allocation.pk) and event.actor == team_manager
    assert event.before is None and event.after["estimate_id"] == estimate.pk


def test_relinking_replaces_an_admin_set_model_with_before_and_after(
    api_as, team, team_manager, allocation
):
    ServedModel.objects.create(
        allocation=allocation, model_id="llama3_8b", precision="fp16", tp=1, engine="vllm"
    )
    estimate = saved(team_manager, team=team)
    api_as(team_manager).post(
        f"/api/v1/served-models/{allocation.pk}/estimate/", {"estimate": estimate.pk}, format="json"
    )
    event = AuditEvent.objects.get(action="served_model.linked")
    assert event.before["precision"] == "fp16" and event.before["estimate_id"] is None
    assert event.after["precision"] == "FP8"
    assert ServedModel.objects.count() == 1

    unlinked = api_as(team_manager).delete(f"/api/v1/served-models/{allocation.pk}/estimate/")
    assert unlinked.status_code == 204
    assert ServedModel.objects.get().estimate_id is None
    assert ServedModel.objects.get().precision == "FP8"  # the fields stay
    assert api_as(team_manager).delete(
        f"/api/v1/served-models/{allocation.pk}/estimate/"
    ).status_code == (404)


def test_a_member_may_not_link_and_nothing_is_written(api_as, team, team_member, allocation):
    estimate = saved(team_member, team=team)
    response = api_as(team_member).post(
        f"/api/v1/served-models/{allocation.pk}/estimate/", {"estimate": estimate.pk}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert not ServedModel.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.parametrize("case", ["other_team", "unfinished", "no_row", "missing", "not_a_number"])
def test_an_estimate_that_cannot_be_linked_is_a_400_naming_it(
    case, api_as, team, team_manager, allocation
):
    if case == "other_team":
        estimate_id = saved(team_manager, team=TeamFactory(slug="cv")).pk
    elif case == "unfinished":
        estimate_id = SizingEstimateFactory(created_by=team_manager, team=team).pk
    elif case == "no_row":  # sized for H100 only: nothing about the allocation's L40S
        estimate_id = saved(team_manager, team=team, gpu_models=["h100_sxm"]).pk
    elif case == "missing":
        estimate_id = 999_999
    else:
        estimate_id = "twelve"
    response = api_as(team_manager).post(
        f"/api/v1/served-models/{allocation.pk}/estimate/", {"estimate": estimate_id}, format="json"
    )
    assert response.status_code == 400
    assert "estimate" in response.json()["errors"]
    assert not ServedModel.objects.exists() and not AuditEvent.objects.exists()


def test_calibration_sizes_what_the_linked_estimate_sized(team, team_manager, allocation):
    """One bucket: 240,000 output tokens over 2 cards x 300 s = 400 tok/s per card, 6 running
    on 2 replicas (TP 1) = 3 sequences each, 80,000 / 400 = 200 in, 240,000 / 400 = 600 out.
    An admin said FP16; the team's estimate says FP8 weights and FP8 KV cache: sized is the
    sizing engine's FP8/FP8 figure at 3 sequences, per card (÷ TP)."""
    ServedModel.objects.create(
        allocation=allocation, model_id="llama3_8b", precision="fp16", tp=1, engine="vllm"
    )
    ServingRollup.objects.create(
        allocation=allocation, bucket_start=NOW - timedelta(hours=12), cards_held=2,
        engine="vllm", generation_tokens=240_000, requests_running=6, prompt_tokens=80_000,
        requests_finished=400,
    )  # fmt: skip
    calibration_refresh(now=NOW)
    admin_sized = ServingCalibrationDay.objects.get().sized_tok_s_per_card

    estimate = saved(team_manager, team=team)
    tp = row_tp(estimate, "l40s")
    from pools.calibration.served import served_model_link_estimate

    served_model_link_estimate(actor=team_manager, allocation=allocation, estimate_id=estimate.pk)
    calibration_refresh(now=NOW)

    day = ServingCalibrationDay.objects.get()
    expected = estimate_replica(
        model=model_preset("llama3_8b"), gpu=gpu_spec("l40s"), precision="FP8",
        kv_cache_dtype="FP8", tp=tp, input_tokens=200, output_tokens=600,
        concurrency=max(1, round(3 * tp)), engine="vllm",
    ).output_tok_s_total / tp  # fmt: skip
    assert day.measured_tok_s_per_card == pytest.approx(400.0)
    assert day.sized_tok_s_per_card == pytest.approx(expected)
    assert day.sized_tok_s_per_card != pytest.approx(admin_sized)  # FP8 is not FP16
    assert day.ratio == pytest.approx(400.0 / expected)


def test_the_panel_offers_managers_the_teams_estimates(
    client, api_as, team, team_manager, allocation
):
    estimate = saved(team_manager, team=team)
    client.force_login(team_manager)
    panel = client.get(f"/allocations/{allocation.pk}/serving/").content.decode()
    assert f'hx-get="/allocations/{allocation.pk}/serving/estimate/"' in panel
    form = client.get(
        f"/allocations/{allocation.pk}/serving/estimate/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="served-estimate"' in form and f'value="{estimate.pk}"' in form

    response = client.post(
        f"/allocations/{allocation.pk}/serving/estimate/",
        {"estimate": estimate.pk},
        HTTP_HX_REQUEST="true",
    )
    assert (response.status_code, response["HX-Refresh"]) == (204, "true")
    panel = client.get(f"/allocations/{allocation.pk}/serving/").content.decode()
    assert "as the team sized it in" in panel and f"estimate #{estimate.pk}" in panel
    assert (
        api_as(team_manager).get(f"/api/v1/served-models/{allocation.pk}/").json()["estimate"]
        == estimate.pk
    )


def test_a_refused_link_on_the_page_names_the_reason(client, team, team_manager, allocation):
    client.force_login(team_manager)
    response = client.post(
        f"/allocations/{allocation.pk}/serving/estimate/", {"estimate": 999_999},
        HTTP_HX_REQUEST="true",
    )  # fmt: skip
    assert response.status_code == 200
    assert "No such estimate." in response.content.decode()
    assert not ServedModel.objects.exists()


def test_the_panel_shows_a_member_no_form(client, team, team_member, allocation):
    client.force_login(team_member)
    page = client.get(f"/allocations/{allocation.pk}/serving/estimate/").content.decode()
    assert 'id="served-estimate"' not in page
    response = client.post(f"/allocations/{allocation.pk}/serving/estimate/", {"estimate": 1})
    assert response.status_code == 403
