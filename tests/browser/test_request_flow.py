"""The issue's path in a real browser: alice asks for 2 L40S for inference next week, admin
approves, and the allocation shows on alice's page, on the timeline and in the API."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from browser_support import log_in
from django.utils import timezone
from playwright.sync_api import expect

from pools.capacity.models import Allocation, CapacityRequest
from pools.common.choices import TeamRole
from pools.inventory.models import Pool
from pools.inventory.services.import_files import inventory_import_file
from pools.tenancy.models import Membership, Team
from scheduler_adapters.types import InventorySource

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _inference_fleet() -> bytes:
    labels = {
        "gpu-pool.example.com/pool": "inference",
        "nvidia.com/gpu.product": "NVIDIA-L40S",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/cuda.driver-version.full": "550.54.15",
    }
    nodes = [
        {
            "kind": "Node",
            "metadata": {"name": f"inf-{i}", "labels": labels},
            "status": {
                "allocatable": {"nvidia.com/gpu": "4"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(2)
    ]
    return json.dumps({"kind": "NodeList", "items": nodes}).encode()


def _sign_in(page, live_server, username):
    log_in(page, live_server.url, username, "pw-123456")
    # sign-in lands by role: a pool admin on Fleet, a member on My teams
    assert page.url == f"{live_server.url}{'/' if username == 'admin' else '/teams/mine/'}"


def test_alice_requests_admin_approves_and_it_shows_everywhere(
    page, live_server, django_user_model
):
    Pool.objects.create(
        slug="infer",
        name="Inference",
        scheduler="kubernetes",
        k8s_node_selector={"gpu-pool.example.com/pool": "inference"},
    )
    inventory_import_file(data=_inference_fleet(), source=InventorySource.KUBERNETES)
    alice = django_user_model.objects.create_user("alice", password="pw-123456")
    django_user_model.objects.create_user("admin", password="pw-123456", is_staff=True)
    nlp = Team.objects.create(slug="nlp", name="NLP")
    Membership.objects.create(team=nlp, user=alice, role=TeamRole.MEMBER)
    start = (timezone.localtime() + timedelta(days=7)).replace(hour=9, minute=0)

    _sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/requests/new/")
    page.check("input[value=inference]")
    page.select_option("select[name=gpu_model]", "l40s")
    page.fill("input[name=card_count]", "2")
    page.fill("input[name=starts_at]", start.strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=ends_at]", (start + timedelta(days=5)).strftime("%Y-%m-%dT%H:%M"))
    # The eligibility panel updates over htmx: 8 L40S in the pool, all free next week.
    options = page.locator("#options")
    expect(options).to_contain_text("Inference")
    expect(options).to_contain_text("eligible")
    expect(options.locator("tbody tr").first).to_contain_text("8")
    page.fill("textarea[name=justification]", "Serve the new retriever")
    page.click("button[name=submit_request]")
    expect(page.locator("h2")).to_contain_text("Submitted")

    page.context.clear_cookies()
    _sign_in(page, live_server, "admin")
    page.goto(f"{live_server.url}/requests/queue/")
    expect(page.locator("tbody tr")).to_have_count(1)
    page.click("button:has-text('Approve')")
    expect(page.locator(".messages")).to_contain_text("Approved: allocation")

    allocation = Allocation.objects.get()
    assert (allocation.card_count, allocation.gpu_model.slug, allocation.team.slug) == (
        2,
        "l40s",
        "nlp",
    )

    page.context.clear_cookies()
    _sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/teams/mine/")
    expect(page.locator("main")).to_contain_text(f"#{allocation.pk}")
    expect(page.locator("main")).to_contain_text("starts in")
    page.goto(f"{live_server.url}/timeline/")
    expect(page.locator("main")).to_contain_text("Inference · L40S")
    body = page.goto(f"{live_server.url}/api/v1/allocations/?format=json").json()
    assert body["count"] == 1
    assert body["results"][0]["card_count"] == 2
    assert body["results"][0]["status"] == "approved"


def test_back_and_submit_again_answers_the_first_request(page, live_server, django_user_model):
    """The request page is no-store: Back fetches it afresh (a fresh form token) while Chromium
    puts the typed fields back, so an unchanged second Submit wrote a second request. It sends
    the first token again and is answered with the first request; a changed form is a new one."""
    Pool.objects.create(
        slug="infer",
        name="Inference",
        scheduler="kubernetes",
        k8s_node_selector={"gpu-pool.example.com/pool": "inference"},
    )
    inventory_import_file(data=_inference_fleet(), source=InventorySource.KUBERNETES)
    alice = django_user_model.objects.create_user("alice", password="pw-123456")
    nlp = Team.objects.create(slug="nlp", name="NLP")
    Membership.objects.create(team=nlp, user=alice, role=TeamRole.MEMBER)

    _sign_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/requests/new/")
    page.check("input[value=inference]")
    page.select_option("select[name=gpu_model]", "l40s")
    page.fill("input[name=card_count]", "2")
    page.fill("textarea[name=justification]", "Serve the new retriever")
    page.click("button[name=submit_request]")
    expect(page.locator("h2")).to_contain_text("Submitted")
    first = CapacityRequest.objects.get()

    page.go_back()
    expect(page.locator("input[name=card_count]")).to_have_value("2")
    page.click("button[name=submit_request]")
    expect(page.locator(".messages")).to_contain_text(f"Request #{first.pk} was already sent")
    assert CapacityRequest.objects.count() == 1

    page.go_back()
    expect(page.locator("input[name=card_count]")).to_have_value("2")
    page.fill("input[name=card_count]", "3")
    page.click("button[name=submit_request]")
    expect(page.locator("h2")).to_contain_text("Submitted")
    assert sorted(CapacityRequest.objects.values_list("card_count", flat=True)) == [2, 3]
