"""A team manager links a saved sizing estimate from the Serving panel (the form it loads with
htmx), at desktop and phone widths, with no sideways scroll."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from browser_support import log_in
from django.utils import timezone
from factories import AllocationFactory, MembershipFactory, SizingEstimateFactory, TeamFactory
from playwright.sync_api import expect

from pools.common.choices import AllocationStatus, EstimateStatus, TeamRole
from pools.inventory.models import GpuModel
from pools.serving.models import ServingRollup
from pools.serving.services import bucket_floor, serving_coverage_note
from pools.sizing.services import sizing_preview

pytestmark = pytest.mark.browser
SHOTS = os.environ.get("SCREENSHOT_DIR", "")


@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_a_manager_links_a_saved_estimate_from_the_serving_panel(
    page, live_server, django_user_model, width, height
):
    team = TeamFactory(slug="nlp", name="NLP")
    user = django_user_model.objects.create_user("mia", password="pw-mia-123")
    MembershipFactory(team=team, user=user, role=TeamRole.MANAGER)
    now = timezone.now()
    allocation = AllocationFactory(
        team=team, card_count=2, gpu_model=GpuModel.objects.get(slug="l40s"),
        status=AllocationStatus.ACTIVE, starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=1),
    )  # fmt: skip
    rows = [
        ServingRollup.objects.create(
            allocation=allocation, bucket_start=bucket_floor(now) - timedelta(minutes=5 * i),
            cards_held=2, engine="vllm", requests_running=6, generation_tokens=90_000,
        )
        for i in range(1, 4)
    ]  # fmt: skip
    serving_coverage_note(rows)
    inputs, results = sizing_preview(
        raw={
            "model": "llama3_8b",
            "precision": "FP8",
            "engine": "vllm",
            "input_len": 200,
            "output_len": 600,
            "demand_kind": "concurrency",
            "concurrency": 3,
            "gpu_models": ["l40s"],
        }  # fmt: skip
    )
    estimate = SizingEstimateFactory(
        inputs=inputs, results=results, status=EstimateStatus.DONE, created_by=user, team=team
    )

    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size({"width": width, "height": height})
    log_in(page, live_server.url, "mia", "pw-mia-123")
    page.goto(f"{live_server.url}/allocations/{allocation.pk}/serving/")
    form = page.locator("#served-estimate")
    expect(form).to_be_visible()  # loaded into the panel by htmx
    expect(form.locator("select")).to_have_value(str(estimate.pk))
    # the estimate form settling inside the panel draws no chart twice (Chart.js throws
    # "Canvas is already in use" on a second chart on one canvas)
    canvases = page.locator("[data-serving-panel] canvas[data-chart-index]")
    assert canvases.count() > 0
    drawn = "[...document.querySelectorAll('[data-serving-panel] canvas')]"
    assert page.evaluate(f"{drawn}.every(c => Chart.getChart(c))")
    assert errors == []
    form.get_by_role("button", name="Link").click()
    expect(page.locator("#measured-vs-sized")).to_contain_text(f"estimate #{estimate.pk}")
    expect(form.get_by_role("button", name="Unlink")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/serving-estimate-{width}.png", full_page=True)
