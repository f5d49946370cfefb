"""The workload classes page in Chromium (issue 36 item 5), at a laptop's and a phone's width:
the rules table and the held-cards table stay within the screen with their essential columns in
view, and the admin dashboard loads the held-cards table."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from factories import AllocationFactory, PoolFactory, TeamFactory, node_with_gpus

from pools.classes.models import WorkloadClass
from pools.classes.seed import seed_classes
from pools.common.choices import AllocationStatus, Scheduler
from pools.inventory.models import GpuModel

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1366, 390])
def test_classes_page_fits_and_the_dashboard_shows_cards_per_class(signed_in, live_server, width):
    seed_classes(WorkloadClass)  # transactional tests flush the migration's rows
    pool = PoolFactory(slug="mixed", scheduler=Scheduler.KUBERNETES, slurm_partition="")
    k8s = {"pool": pool, "scheduler": Scheduler.KUBERNETES}
    node_with_gpus(4, gpu_model="l40s", hostname="dc-01", **k8s)
    node_with_gpus(4, gpu_model="rtx4090", hostname="gc-01", **k8s)
    now = timezone.now()
    window = {"pool": pool, "status": AllocationStatus.ACTIVE, "starts_at": now - timedelta(1),
              "ends_at": now + timedelta(1)}  # fmt: skip
    # production 3 L40S (data-centre), batch 2 RTX 4090 (consumer)
    AllocationFactory(team=TeamFactory(slug="svc"), gpu_model=GpuModel.objects.get(slug="l40s"),
                      card_count=3, workload_class=WorkloadClass.objects.get(slug="production"),
                      **window)  # fmt: skip
    AllocationFactory(team=TeamFactory(slug="etl"), gpu_model=GpuModel.objects.get(slug="rtx4090"),
                      card_count=2, workload_class=WorkloadClass.objects.get(slug="batch"),
                      **window)  # fmt: skip
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/classes/")
    page.screenshot(path=f"/tmp/hclasses-classes-{width}.png", full_page=True)

    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator("#class-rules tbody tr").count() == 4
    held = page.locator("#class-held tbody tr")
    # Production: consumer 0, data-centre 3, total 3
    assert [held.nth(0).locator("td").nth(i).inner_text() for i in range(4)] == [
        "Production", "0", "3", "3",
    ]  # fmt: skip
    for table, header in (("#class-rules", "Class"), ("#class-held", "Total")):
        cell = page.locator(f"{table} thead th", has_text=header).first
        box = cell.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1

    page.goto(f"{live_server.url}/dashboard/")
    page.locator("#class-held").wait_for()
    page.locator("#class-holdings").scroll_into_view_if_needed()
    page.screenshot(path=f"/tmp/hclasses-dashboard-{width}.png")
    assert page.locator("#class-held tfoot td").last.inner_text() == "5"  # 3 + 2
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", [1366, 390])
def test_a_class_qos_problem_shows_on_the_clusters_page(signed_in, live_server, width):
    from pools.clusters.models import Cluster
    from pools.common.choices import ClusterStatus, CredentialKind

    problem = (
        "account QOS cannot be written: API v0.0.38 does not apply association QOS changes "
        "reliably over REST (22.05 drops them); enable the sacctmgr fallback; "
        "portal-batch missing"
    )
    Cluster.objects.create(
        slug="old-slurm", name="Old Slurm", kind=Scheduler.SLURM,
        credential_kind=CredentialKind.ENVIRONMENT, status=ClusterStatus.REACHABLE,
        class_qos_problem=problem,
    )  # fmt: skip
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/clusters/")
    page.screenshot(path=f"/tmp/hclasses-clusters-{width}.png", full_page=True)
    assert page.get_by_text("portal-batch missing").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
