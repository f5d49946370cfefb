"""The pools page in Chromium at a laptop's width (QA defect 7): the pools table fits its card
with the demo's long descriptions and node selectors, and each pool × GPU model opens its
capacity calendar."""

from __future__ import annotations

import pytest
from factories import PoolFactory, node_with_gpus

from pools.common.choices import Scheduler

pytestmark = pytest.mark.browser


def test_the_pools_table_fits_at_1366_and_links_calendars(signed_in, live_server):
    burst = PoolFactory(
        slug="burst-cloud",
        name="Burst (rented cloud)",
        scheduler=Scheduler.KUBERNETES,
        slurm_partition="",
        description="Rented L40S in a cloud's Kubernetes: elastic peaks when Inference is full, "
        "at the burst price plus storage and egress.",
        k8s_node_selector={"gpu-pool.example.com/pool": "burst"},
    )
    node_with_gpus(4, gpu_model="l40s", hostname="burst-01", pool=burst)
    infer = PoolFactory(
        slug="infer-k8s",
        name="Inference (Kubernetes)",
        scheduler=Scheduler.KUBERNETES,
        slurm_partition="",
        description="L40S and A100 PCIe node group for model serving.",
        k8s_node_selector={"gpu-pool.example.com/pool": "inference"},
    )
    node_with_gpus(4, gpu_model="l40s", hostname="inf-01", pool=infer)
    node_with_gpus(2, hostname="inf-02", pool=infer, driver_version="535.129.03")
    page = signed_in
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}/pools/")
    wrap = page.locator(".table-wrap").first
    scroll, client = wrap.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert scroll <= client, (scroll, client)  # was 1632 px in 1321 px
    page.get_by_role("link", name="L40S").last.click()
    page.wait_for_url(f"{live_server.url}/pools/infer-k8s/l40s/calendar/")
