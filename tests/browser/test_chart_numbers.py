"""Chart.js axes and tooltips group thousands as the pages' text does: "1 200" with a narrow
no-break space (U+202F, the ``|grouped`` filter), not the browser locale's "1,200"; one
formatter in static/js/portal.js, set as Chart.js' default for linear axes and tooltips."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, PoolFactory, TeamFactory

from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.browser

NNBSP = "\u202f"

# The chart on a canvas: its value axis's tick labels, and the tooltip's lines for the first
# dataset at a day, as Chart.js draws them (the tooltip made active as a hover would).
READ = """([id, axis, index]) => {
  const chart = Chart.getChart(document.getElementById(id));
  chart.tooltip.setActiveElements([{datasetIndex: 0, index: index}], {x: 0, y: 0});
  chart.update();
  return {ticks: chart.scales[axis].ticks.map((t) => t.label),
          tooltip: chart.tooltip.body.flatMap((b) => b.lines)};
}"""


def _drawn(page, canvas_id: str, timeout_s: float = 10.0) -> None:
    expression = f"!!(window.Chart && Chart.getChart(document.getElementById({canvas_id!r})))"
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"{canvas_id} not drawn in {timeout_s} s"
        page.wait_for_timeout(100)


@pytest.fixture
def twelve_hundred(db):
    """nlp holds 1,200 L40S of pool infer from an hour ago for two days (no card in the pool:
    the plan and the timeline draw allocations whatever the inventory)."""
    pool = PoolFactory(slug="infer", name="Inference")
    AllocationFactory(team=TeamFactory(slug="nlp", name="NLP"), pool=pool,
                      gpu_model=GpuModel.objects.get(slug="l40s"), card_count=1200,
                      status=AllocationStatus.ACTIVE, starts_at=timezone.now() - timedelta(hours=1),
                      ends_at=timezone.now() + timedelta(days=2))  # fmt: skip
    return pool


def test_the_dashboard_plan_and_the_timeline_group_thousands(
    signed_in, live_server, twelve_hundred
):
    """Today 1,200 cards are held: the plan's y axis (Chart.js steps of 200 up to 1,200) reads
    "1 200" at its top, and today's tooltip "allocated (approved and later): 1 200"; the
    timeline's bar of NLP the same."""
    page = signed_in
    page.goto(f"{live_server.url}/dashboard/")
    _drawn(page, "plan-chart")
    plan = page.evaluate(READ, ["plan-chart", "y", 0])
    assert f"1{NNBSP}200" in plan["ticks"]
    assert not any("," in label for label in plan["ticks"])
    assert plan["tooltip"] == [f"allocated (approved and later): 1{NNBSP}200"]

    page.goto(f"{live_server.url}/timeline/")
    canvas = page.locator("canvas[id^=tl-]").first.get_attribute("id")
    _drawn(page, canvas)
    timeline = page.evaluate(READ, [canvas, "y", 0])
    assert f"1{NNBSP}200" in timeline["ticks"]
    assert timeline["tooltip"] == [f"NLP: 1{NNBSP}200"]  # the team by name
