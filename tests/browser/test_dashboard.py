"""From the capacity dashboard, a pool admin clicks through to a node and to its allocations."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory

from pools.choices import AllocationStatus
from pools.models import GpuModel

pytestmark = pytest.mark.browser


def test_dashboard_drills_down_to_node_and_allocation(signed_in, live_server):
    page = signed_in
    l40s = GpuModel.objects.get(slug="l40s")
    pool = PoolFactory(slug="infer", name="Inference")
    node = NodeFactory(hostname="inf-07", pool=pool)
    for i in range(2):
        GpuFactory(node=node, index=i, gpu_model=l40s)
    AllocationFactory(team=TeamFactory(slug="nlp"), pool=pool, gpu_model=l40s, card_count=2,
                      status=AllocationStatus.ACTIVE,
                      starts_at=timezone.now() - timedelta(hours=1))  # fmt: skip

    page.goto(f"{live_server.url}/dashboard/")
    page.get_by_role("link", name="inf-07").click()  # in the heatmap, loaded by htmx
    page.wait_for_url(f"{live_server.url}/nodes/inf-07/")
    assert "inf-07" in page.title() or page.get_by_text("inf-07").first.is_visible()

    page.goto(f"{live_server.url}/dashboard/")
    page.locator("a.hm-alloc").first.click()
    page.wait_for_url("**/allocations/?pool=infer*")
    assert page.get_by_role("cell", name="nlp").first.is_visible() or "nlp" in page.content()
