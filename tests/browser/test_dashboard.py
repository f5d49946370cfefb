"""From the capacity dashboard, a pool admin clicks through to a node and to its allocations."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, GpuFactory, NodeFactory, PoolFactory, TeamFactory
from playwright.sync_api import expect

from pools.common.choices import AllocationStatus
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.browser


def _until(page, expression: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout_s} s: {expression}"
        page.wait_for_timeout(100)


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


def test_utilisation_chart_range_and_heatmap_colour_survive_filters_and_refresh(
    signed_in, live_server, monkeypatch, settings
):
    from pools.dashboards import utilisation as dashboard_utilisation
    from scheduler_adapters.prometheus import GR_ENGINE_ACTIVE, Sample, Series
    from scheduler_adapters.prometheus_fake import FakePrometheus

    page = signed_in
    l40s = GpuModel.objects.get(slug="l40s")
    for slug in ("infer", "train"):
        node = NodeFactory(hostname=f"{slug}-01", pool=PoolFactory(slug=slug, name=slug.title()))
        GpuFactory(node=node, index=0, gpu_model=l40s, raw_model_name="NVIDIA L40S")
    end = timezone.now().timestamp()
    series = [
        Series(GR_ENGINE_ACTIVE, (("Hostname", host), ("gpu", "0"), ("modelName", "NVIDIA L40S")),
               tuple(Sample(end - age, 0.6) for age in range(7200, -1, -60)))
        for host in ("infer-01", "train-01")
    ]  # fmt: skip
    # a configured Prometheus, answered by the fake; the reads run eagerly (no broker in tests)
    settings.PROMETHEUS_URL = "http://prometheus.example.org:9090"
    monkeypatch.setattr(dashboard_utilisation, "dashboard_metrics",
                        lambda url=None: FakePrometheus(series=series))  # fmt: skip

    page.goto(f"{live_server.url}/dashboard/")
    page.wait_for_selector("#util-chart")
    page.click("label:has(input[name=range][value='7d'])")
    page.wait_for_selector("text=one point per 30 min")
    page.click("label:has(input[name=heat][value='util'])")
    page.wait_for_selector(".heatmap .cell.u3")  # 60 % → the 60–90 % band
    page.select_option("select[name=pool]", "train")
    page.wait_for_url("**pool=train**")
    assert "range=7d" in page.url and "heat=util" in page.url
    expect(page.locator(".hm-row")).to_have_count(1)
    # polled from here: wait_for_function evaluates its string with eval(), which the page's
    # Content-Security-Policy (script-src without 'unsafe-eval') refuses
    _until(page, "JSON.parse(document.getElementById('util-chart-data').textContent)"
                 ".datasets.length === 1")  # fmt: skip
    page.evaluate(
        "htmx.ajax('GET', '/dashboard/', {source: '#dashboard-body', target: '#dashboard-body'})"
    )
    page.wait_for_timeout(1000)
    checked = page.evaluate(
        "[...document.querySelectorAll('input[type=radio]:checked')]"
        ".map(e => e.name + '=' + e.value)"
    )
    assert sorted(checked) == ["heat=util", "range=7d"]
    assert page.locator("#util-chart").is_visible()
