"""What issue #37's last items look like in Chromium, at 1366 and 390 px: the elastic pages'
money (each decision's card-hours added or released and their cost, the week's totals), the
finance month's idle-cost CSV link, and the request form's GPU models no pool has (disabled for
cards, enabled for capacity no pool has yet). No page is wider than the screen. Screenshots go
to ``BROWSER_SHOTS`` when set."""

from __future__ import annotations

import os
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from browser_support import count_htmx_requests, log_in, settled
from django.utils import timezone
from factories import AllocationFactory

from billing.choices import RateKind
from billing.services.rates import rate_card_create
from pools.common.choices import AllocationStatus
from pools.elastic.models import ElasticPolicy, ScaleEvent
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.browser

WIDTHS = [1366, 390]


def _shot(page, tmp_path, name):
    shots = Path(os.environ.get("BROWSER_SHOTS") or tmp_path)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def _fits(page, width):
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.fixture
def elastic(team, infer_pool):
    """Floor 2 L40S over a window that ended 2 h ago (so every figure is fixed): up 2 -> 6 at
    +1 h, down to 4 at +3 h, down to 2 at +5 h, window end at +10 h; L40S 8.00 EUR."""
    l40s = GpuModel.objects.get(slug="l40s")
    rate_card_create(name="demo", currency="EUR", effective_from=date(2026, 1, 1),
                     gpu_prices={(l40s.pk, RateKind.GPU_RESERVED): Decimal("8.00")})  # fmt: skip
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=12)
    allocation = AllocationFactory(team=team, pool=infer_pool, gpu_model=l40s, card_count=2,
                                   starts_at=start, ends_at=start + timedelta(hours=10),
                                   status=AllocationStatus.ENDED)  # fmt: skip
    policy = ElasticPolicy.objects.create(allocation=allocation, ceiling_cards=6, cards_held=2)
    for hours, action, before, after in [(1, "up", 2, 6), (3, "down", 6, 4), (5, "down", 4, 2)]:
        at = start + timedelta(hours=hours)
        ScaleEvent.objects.create(policy=policy, decided_at=at, effective_at=at, action=action,
                                  reason="test", cards_from=before, cards_to=after,
                                  applied=True)  # fmt: skip
    return policy


@pytest.mark.parametrize("width", WIDTHS)
def test_elastic_pages_show_what_scaling_cost(signed_in, live_server, elastic, tmp_path, width):
    """By hand: burst (6-2) x 2 h + (4-2) x 2 h = 12 card-hours x 8.00 = 96.00 EUR; released
    2 x 2 h (+3 h to +5 h) + 2 x 5 h (+5 h to the window's end) = 14 card-hours = 112.00 EUR.
    Per decision: +4 cards x 2 h = 8 card-hours (64.00), -2 x 2 h = 4 (32.00), -2 x 5 h = 10
    (80.00)."""
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/elastic/")
    total = page.locator("[data-scale-total]")
    assert total.is_visible()
    text = " ".join(total.inner_text().split())
    assert "cost 96.00 EUR for 12.000 card-hours borrowed" in text
    assert "released 14.000 card-hours worth 112.00 EUR" in text
    _fits(page, width)
    _shot(page, tmp_path, f"elastic-list-{width}")

    page.goto(f"{live_server.url}/elastic/{elastic.pk}/")
    week = " ".join(page.locator("[data-scale-money]").inner_text().split())
    assert "12.000 card-hours borrowed above the floor cost 96.00 EUR" in week
    assert "released 14.000 card-hours worth 112.00 EUR" in week
    history = page.locator("table", has=page.locator("[data-decision-money]"))
    money = history.locator("[data-decision-money]")
    cells = [" ".join(c.split()) for c in money.all_inner_texts()]
    assert cells == ["−10.000 card-h released · 80.00 EUR", "−4.000 card-h released · 32.00 EUR",
                     "+8.000 card-h added · 64.00 EUR"]  # fmt: skip
    money.first.scroll_into_view_if_needed()
    assert money.first.is_visible()  # in the Cards column, kept on a phone
    box = money.first.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    _fits(page, width)
    history.scroll_into_view_if_needed()
    _shot(page, tmp_path, f"elastic-detail-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_finance_idle_cost_has_its_csv(signed_in, live_server, train_pool, tmp_path, width):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/costs/finance/2026-12/")
    link = page.locator("[data-idle-csv]")
    link.scroll_into_view_if_needed()
    assert link.is_visible()
    with page.expect_download() as download:
        link.click()
    body = Path(download.value.path()).read_text()
    assert body.splitlines()[0].startswith("month,pool,capacity_cost,allocated_cost,")
    assert body.splitlines()[1].startswith("2026-12,train,")
    _fits(page, width)
    _shot(page, tmp_path, f"finance-idle-csv-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_request_form_offers_models_a_pool_has(
    signed_in, live_server, team, infer_pool, tmp_path, width
):
    """``infer`` holds L40S; no pool has an H100: disabled for cards, enabled for growth."""
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/requests/new/")
    h100 = page.locator("select[name=gpu_model] option[value=h100_sxm]")
    l40s = page.locator("select[name=gpu_model] option[value=l40s]")
    assert h100.is_disabled() and "no pool has this card" in h100.inner_text()
    assert not l40s.is_disabled()
    page.get_by_role("radio", name="Capacity no pool has yet").check()
    assert not h100.is_disabled()
    page.select_option("select[name=gpu_model]", "h100_sxm")
    page.get_by_role("radio", name="Cards a pool has").check()
    assert h100.is_disabled()
    assert page.locator("select[name=gpu_model]").input_value() == ""
    _fits(page, width)
    _shot(page, tmp_path, f"request-models-{width}")


CARDS_CLIPPED = """() => [...document.querySelectorAll("main .cards .value")]
  .filter((el) => el.scrollWidth > el.clientWidth + 1)
  .map((el) => [el.textContent.trim(), el.scrollWidth, el.clientWidth])"""
AMOUNTS_OUT = """() => { const width = document.documentElement.clientWidth;
  return [...document.querySelectorAll("main table.lines .amount")].filter((el) => {
    const r = el.getBoundingClientRect();
    return !(r.width > 0 && r.left >= -1 && r.right <= width + 1);
  }).map((el) => el.textContent); }"""
# Statement lines whose cell before the pinned Amount runs under it: the table is wider than
# its card, so Amount, stuck at the card's edge, covers the end of the Rate period.
UNDER_AMOUNT = """() => [...document.querySelectorAll("main table.lines td.amount")]
  .filter((el) => el.previousElementSibling.getBoundingClientRect().right
    > el.getBoundingClientRect().left + 1)
  .map((el) => el.previousElementSibling.textContent.trim())"""
# A horizontal bar chart's value ticks that run into each other (half of each label's width
# plus 4 px between neighbours) and bar labels wider than their axis (cut off at the left).
CHART_CROWDED = """(id) => { const chart = Chart.getChart(id), ctx = chart.ctx, out = [];
  for (const key of ["x", "y"]) { const s = chart.scales[key];
    ctx.save(); ctx.font = Chart.helpers.toFont(s.options.ticks.font).string;
    const ticks = s.ticks.map((t, i) => ({label: String(t.label),
      w: ctx.measureText(String(t.label)).width, at: s.getPixelForTick(i)}));
    ctx.restore();
    for (let i = 1; key === "x" && i < ticks.length; i++)
      if (ticks[i].at - ticks[i - 1].at < (ticks[i].w + ticks[i - 1].w) / 2 + 4)
        out.push(["run together", ticks[i - 1].label, ticks[i].label]);
    for (const t of key === "y" ? ticks : []) if (t.w > s.width) out.push(["cut", t.label]);
  }
  return out; }"""


def test_money_pages_keep_amounts_in_view(browser, live_server, tmp_path):
    """QA defects 2, 3, 6 on the demo, at 1366, 1280, 1024 and 390 px: the team dashboard's
    money cards are not cut off ("21 255.78 EUR" in a 178 px card at 1366); the statement lines'
    Amount lies inside the window although a shared card's note is long (team and finance
    pages), and at these widths no column runs under it (the finance month's Rate period did,
    by 20 px at 1024 px, where its 11 columns made a table 999 px wide in a 979 px card);
    on a phone each line's label says its basis (reserved and burst lines of one model read
    apart), and the "Cost by GPU" chart's value ticks do not run together nor its bar labels
    get cut off."""
    from django.core.management import call_command

    from billing.pricing import previous_month

    call_command("load_demo", verbosity=0)
    call_command("load_demo_billing", verbosity=0)
    now = timezone.now()
    current = date(now.year, now.month, 1)
    last = previous_month(current)
    for width in (1366, 1280, 1024, 390):
        for user, paths in (
            ("bob", ["/teams/vision/dashboard/", f"/costs/vision/{last:%Y-%m}/",
                     f"/costs/vision/{current:%Y-%m}/"]),
            ("admin", [f"/costs/finance/{last:%Y-%m}/", f"/costs/nlp/{last:%Y-%m}/",
                       f"/costs/finance/{current:%Y-%m}/"]),  # every team's lines so far
        ):  # fmt: skip
            context = browser.new_context(viewport={"width": width, "height": 900})
            count_htmx_requests(context)
            page = context.new_page()
            log_in(page, live_server.url, user)
            for path in paths:
                page.goto(f"{live_server.url}{path}")
                settled(page)
                assert page.evaluate(CARDS_CLIPPED) == [], (width, path)
                assert page.evaluate(AMOUNTS_OUT) == [], (width, path)
                # (below 1024 px, down to the phone layout, they scroll under it by design)
                assert page.evaluate(UNDER_AMOUNT) == [], (width, path)
                if page.locator("#model-chart").count():
                    assert page.evaluate(CHART_CROWDED, "model-chart") == [], (width, path)
                _fits(page, width)
                _shot(page, tmp_path, f"money-{path.strip('/').replace('/', '-')}-{width}")
                if width == 390 and path.startswith("/costs/vision/"):
                    labels = page.locator("table.lines td.line-label")
                    assert page.locator("table.lines [data-basis-on-phone]").first.is_visible()
                    texts = [" ".join(t.split()) for t in labels.all_inner_texts()]
                    assert len(set(texts)) == len(texts), texts  # no two lines read alike
            context.close()
