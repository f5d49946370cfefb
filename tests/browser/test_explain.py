"""bob's 40 A100 in a real browser, at a phone's and a laptop's width: the request form's live
panel warns that it cannot be approved as asked, says when and who holds the cards (counts, no
names), and one click on the H800 alternative fills the form in with it, which can be."""

from __future__ import annotations

from datetime import timedelta

import pytest
from browser_support import log_in
from django.utils import timezone
from playwright.sync_api import expect

from pools.capacity.models import Allocation, CapacityRequest
from pools.common.choices import NodeState
from pools.inventory.models import Gpu, GpuModel, Node, Pool
from pools.tenancy.models import Membership, Team

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = "/tmp/explain-{width}.png"


def _fleet(start):
    """train-slurm: 6 × 8 A100 up, 8 down, 8 drained, 5 × 8 H800 up; vision holds 8 A100 until
    start + 2 d and speech 12 until start + 3 d (28 of 48 free next week)."""
    pool = Pool.objects.create(slug="train-slurm", name="Training", scheduler="slurm",
                               slurm_partition="train")  # fmt: skip
    a100, h800 = GpuModel.objects.get(slug="a100_80g_sxm"), GpuModel.objects.get(slug="h800_sxm")
    layout = [(f"a100-{i}", a100, NodeState.UP) for i in range(6)]
    layout += [("a100-down", a100, NodeState.DOWN), ("a100-drain", a100, NodeState.DRAIN)]
    layout += [(f"h800-{i}", h800, NodeState.UP) for i in range(5)]
    for name, model, state in layout:
        node = Node.objects.create(hostname=name, pool=pool, scheduler="slurm", state=state)
        Gpu.objects.bulk_create(
            Gpu(node=node, index=i, gpu_model=model, raw_model_name=model.vendor_name,
                health="ok") for i in range(8)
        )  # fmt: skip
    for slug, cards, days in (("vision", 8, 2), ("speech", 12, 3)):
        team = Team.objects.create(slug=slug, name=slug.title())
        req = CapacityRequest.objects.create(
            team=team, requested_by=_user(f"{slug}-lead"), workload_kind="training", pool=pool,
            gpu_model=a100, card_count=cards, starts_at=start - timedelta(days=3),
            ends_at=start + timedelta(days=days), justification="x", status="approved",
        )  # fmt: skip
        Allocation.objects.create(
            request=req, team=team, pool=pool, gpu_model=a100, card_count=cards,
            starts_at=req.starts_at, ends_at=req.ends_at,
        )  # fmt: skip


def _user(name):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(name, password="pw-123456")


@pytest.mark.parametrize("width,height", [(390, 844), (1366, 900)])
def test_bob_sees_why_not_and_takes_the_h800(browser, live_server, width, height):
    start = (timezone.localtime() + timedelta(days=7)).replace(hour=9, minute=0, second=0,
                                                               microsecond=0)  # fmt: skip
    _fleet(start)
    bob = _user("bob")
    Membership.objects.create(team=Team.objects.create(slug="nlp", name="NLP"), user=bob)
    page = browser.new_page(viewport={"width": width, "height": height})
    log_in(page, live_server.url, "bob", "pw-123456")

    page.goto(f"{live_server.url}/requests/new/")
    page.check("input[value=training]")
    page.select_option("select[name=pool]", "train-slurm")
    page.select_option("select[name=gpu_model]", "a100_80g_sxm")
    page.fill("input[name=card_count]", "40")
    page.fill("input[name=starts_at]", start.strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=ends_at]", (start + timedelta(days=7)).strftime("%Y-%m-%dT%H:%M"))
    panel = page.locator("#explain-panel")
    expect(panel).to_contain_text("cannot be approved as asked")
    expect(panel).to_contain_text("only 28 of 48")
    expect(panel).to_contain_text("16 down or drained")
    expect(panel).to_contain_text("held by 2 other teams")
    expect(panel).not_to_contain_text("Vision")
    expect(panel).not_to_contain_text("speech")
    panel.scroll_into_view_if_needed()
    page.screenshot(path=SCREENSHOTS.format(width=width), full_page=True)
    sideways = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert sideways is False

    panel.locator("a.explain-apply[data-kind=other_model]").first.click()
    expect(page.locator("select[name=gpu_model]")).to_have_value("h800_sxm")
    expect(page.locator("input[name=card_count]")).to_have_value("40")
    expect(page.locator("#explain-panel")).to_contain_text("can be approved now")
