"""The allocation page's *In the scheduler* panel and cost so far in Chromium (issue #37): a
member of nlp opens the request of an allocation in a Slurm pool approved for tomorrow (the
demo: no scheduler connection, so a preview) and sees the account, association, GrpTRES and
reservation names, and the cost so far unknown with its reason (no rate card); the page stays
within the screen at 1366 and 390 px. Screenshots go to ``BROWSER_SHOTS`` when set."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from browser_support import log_in
from django.utils import timezone
from factories import (
    AllocationFactory,
    GpuFactory,
    MembershipFactory,
    NodeFactory,
    PoolFactory,
    TeamFactory,
)

from pools.common.choices import AllocationStatus, Scheduler
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1366, 390])
def test_the_panel_previews_the_slurm_names_and_fits(
    page, live_server, django_user_model, tmp_path, width
):
    """Account ``nlp`` (the slug), cap ``gres/gpu:a100_80g_sxm=4`` (no alias: the model's slug
    is its GRES type; 0 applied + its own 4 cards), reservation ``portal-alloc-<id>`` of its
    whole node."""
    team = TeamFactory(slug="nlp", name="NLP")
    user = django_user_model.objects.create_user("alice", password="pw-alice-123")
    MembershipFactory(team=team, user=user)
    a100 = GpuModel.objects.get(slug="a100_80g_sxm")
    pool = PoolFactory(slug="train", scheduler=Scheduler.SLURM, slurm_partition="gpu")
    node = NodeFactory(pool=pool, hostname="gpu-a100-01")
    for index in range(4):
        GpuFactory(node=node, index=index, gpu_model=a100)
    start = timezone.now() + timedelta(days=1)
    allocation = AllocationFactory(
        team=team, pool=pool, gpu_model=a100, card_count=4, status=AllocationStatus.APPROVED,
        starts_at=start, ends_at=start + timedelta(days=3),
        placement=[{"node": "gpu-a100-01", "gpus": [0, 1, 2, 3]}],
    )  # fmt: skip
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server.url, "alice", "pw-alice-123")

    page.goto(f"{live_server.url}/requests/{allocation.request_id}/")
    panel = page.get_by_test_id("scheduler-panel")
    assert panel.get_by_text("will write").is_visible()
    for name in (
        "gres/gpu:a100_80g_sxm=4",
        f"portal-alloc-{allocation.pk}",
        "nlp × 1 user(s) on gpu",
    ):
        assert panel.locator("code", has_text=name).is_visible(), name
    cost = page.get_by_test_id("cost-so-far")
    assert "unknown" in cost.inner_text() and "no rate card is in force now" in cost.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shots = Path(os.environ.get("BROWSER_SHOTS") or tmp_path)
    panel.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"scheduler-panel-{width}.png"), full_page=True)
