"""The pages still work under the Content-Security-Policy (issue 27, item 10): Chromium reports
no violation on pages with charts, htmx fragments and confirm buttons, the charts draw, and a
data-confirm button asks before it submits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import (
    AllocationFactory,
    CapacityRequestFactory,
    GpuFactory,
    NodeFactory,
    PoolFactory,
    TeamFactory,
)

from pools.common.choices import AllocationStatus, RequestStatus
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.browser


def _violations(page) -> list[str]:
    messages: list[str] = []
    page.on(
        "console",
        lambda m: messages.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.on("pageerror", lambda e: messages.append(str(e)))
    return messages


def test_pages_with_charts_htmx_and_confirm_buttons_run_under_the_policy(signed_in, live_server):
    page = signed_in
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", name="Inference")
    node = NodeFactory(hostname="inf-07", pool=pool)
    GpuFactory(node=node, index=0, gpu_model=l40s)
    allocation = AllocationFactory(team=TeamFactory(slug="nlp"), pool=pool, gpu_model=l40s,
                                   status=AllocationStatus.ACTIVE,
                                   starts_at=timezone.now() - timedelta(hours=1))  # fmt: skip
    violations = _violations(page)

    page.goto(f"{live_server.url}/dashboard/")
    page.get_by_role("link", name="inf-07").wait_for()  # the heatmap, loaded by htmx
    assert page.evaluate("() => typeof window.Chart") == "function"  # chart.js ran
    for url in ("/", "/timeline/", "/idle/", "/api/docs/"):
        page.goto(f"{live_server.url}{url}")
        page.wait_for_load_state("networkidle")
    assert page.locator("#swagger-ui .info").count() == 1  # Swagger UI drew itself

    request = CapacityRequestFactory(team=allocation.team, pool=pool)
    page.goto(f"{live_server.url}/requests/{request.pk}/")
    page.fill("input[name=reason][required]", "no budget")
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_role("button", name="Reject").click()
    assert asked == [f"Reject request #{request.pk}?"]
    request.refresh_from_db()
    assert request.status == RequestStatus.SUBMITTED  # dismissed: nothing submitted
    assert violations == []
