"""Redis down (broker and cache), Django and PostgreSQL up: every write answers 2xx/4xx with
JSON under /api/, its job waits in the outbox, and sign-in still works (QA round 2, item 2:
approve, release, estimate and sign-in answered 500 after committing, and their jobs were lost).

The outage is a closed port (broker_support), never a stopped Redis: others share it. The
database is transactional here, so the jobs' on-commit sends really run inside the request.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from broker_support import CLOSED_BROKER, CLOSED_CACHE, catalogue_loaded, celery_broker
from django.contrib.messages import get_messages
from django.test import Client, override_settings
from django.utils import timezone
from factories import AllocationFactory, CapacityRequestFactory, inference_fleet

from pools import jobs
from pools.capacity.models import Allocation
from pools.common.choices import AllocationStatus
from pools.jobs.models import QueuedJob
from pools.sizing.models import SizingEstimate

pytestmark = pytest.mark.django_db(transaction=True)

CACHE_DOWN = {
    "default": {
        "BACKEND": "portal.cache.RedisCacheWithLocalFallback",
        "LOCATION": CLOSED_CACHE,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }
}
DEFERRED = "Saved. Its background work is queued and will run when the broker is back."


@pytest.fixture(autouse=True)
def _catalogue():
    catalogue_loaded()


@pytest.fixture
def fresh_fallback(monkeypatch):
    """Each test finds Redis not yet known to be down, and the fallback's memory (one per
    process and location, shared by every LocMemCache of its name) empty."""
    from django.core.cache.backends.locmem import LocMemCache

    from portal import cache

    monkeypatch.setattr(cache, "_down_until", {})
    LocMemCache(f"fallback:{CLOSED_CACHE}", {}).clear()


def _queued() -> list[tuple[str, list, int]]:
    return list(QueuedJob.objects.values_list("task_name", "args", "attempts"))


def test_approve_answers_200_with_the_allocation_and_its_jobs_wait(api_as, pool_admin, team):
    pool = inference_fleet()
    request = CapacityRequestFactory(team=team, pool=pool, card_count=2)

    with celery_broker(CLOSED_BROKER):
        response = api_as(pool_admin).post(f"/api/v1/requests/{request.pk}/approve/", {})

    assert response.status_code == 200, response.content
    assert response["X-Queue-Status"] == "deferred"
    body = response.json()
    assert body["queue"] == {"status": "deferred", "detail": DEFERRED, "jobs": 2}
    allocation = Allocation.objects.get(request=request)
    assert allocation.status == AllocationStatus.APPROVED
    # The elastic hand-back (a Kubernetes pool), tried once; the provisioning not tried again
    # in the same request once the broker had refused.
    assert [(name, attempts) for name, _args, attempts in _queued()] == [
        (jobs.ELASTIC_HAND_BACK, 1),
        (jobs.ALLOCATION_PROVISION, 0),
    ]
    assert _queued()[1][1] == [allocation.pk]


def test_release_answers_200_ended_and_the_unbind_waits(api_as, team_manager, team):
    now = timezone.now()
    allocation = AllocationFactory(
        team=team,
        pool=inference_fleet(),
        card_count=2,
        status=AllocationStatus.ACTIVE,
        starts_at=now - timedelta(days=1),
        ends_at=now + timedelta(days=5),
    )

    with celery_broker(CLOSED_BROKER):
        response = api_as(team_manager).post(f"/api/v1/allocations/{allocation.pk}/release/")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "ended"
    assert response.json()["queue"]["status"] == "deferred"
    assert _queued() == [(jobs.ALLOCATION_UNBIND, [allocation.pk], 1)]


def test_an_estimate_answers_202_pending_and_its_job_waits(api_as, team_member):
    inference_fleet()
    body = {
        "model": "qwen2_5_72b",
        "precision": "FP8",
        "input_len": 1000,
        "output_len": 200,
        "demand_kind": "output_rate",
        "output_tok_s": 2000,
    }

    with celery_broker(CLOSED_BROKER):
        response = api_as(team_member).post("/api/v1/estimates/", body, format="json")

    assert response.status_code == 202, response.content
    estimate = SizingEstimate.objects.get()
    assert (response.json()["status"], response.json()["queue"]["jobs"]) == ("pending", 1)
    assert _queued() == [(jobs.SIZING_ESTIMATE, [estimate.pk], 1)]


def test_a_page_write_redirects_and_says_its_work_waits_for_the_broker(team):
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_user("root-admin", password="pw", is_staff=True)
    request = CapacityRequestFactory(team=team, pool=inference_fleet(), card_count=1)
    page = Client()
    page.force_login(admin)

    with celery_broker(CLOSED_BROKER):
        response = page.post(f"/requests/{request.pk}/approve/")

    assert response.status_code == 302
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert shown[-1] == DEFERRED
    assert shown[0].startswith("Approved: allocation #")
    assert len(_queued()) == 2


@override_settings(CACHES=CACHE_DOWN)
def test_sign_in_page_works_with_the_cache_down_and_says_so_in_the_log(
    pool_admin, fresh_fallback, caplog
):
    response = Client().post("/login/", {"username": "root-admin", "password": "pw"})

    assert response.status_code == 302
    assert response["Location"] == "/start/"  # the landing page by role
    assert "cache unreachable (ConnectionError)" in caplog.text


@override_settings(CACHES=CACHE_DOWN)
def test_the_lockout_still_holds_per_process_with_the_cache_down(pool_admin, fresh_fallback):
    """AXES_FAILURE_LIMIT 5: failures 1-4 re-show the form (200), the 5th locks the pair out
    (429), and so is the right password after it."""
    client = Client()
    wrong = {"username": "root-admin", "password": "no"}
    answers = [client.post("/login/", wrong).status_code for _ in range(5)]

    response = client.post("/login/", {"username": "root-admin", "password": "pw"})

    assert answers == [200, 200, 200, 200, 429]
    assert response.status_code == 429


@override_settings(CACHES=CACHE_DOWN)
def test_token_sign_in_works_with_the_cache_down(pool_admin, fresh_fallback):
    response = Client().post("/api/v1/auth/token/", {"username": "root-admin", "password": "pw"})

    assert response.status_code == 200
    token = response.json()["token"]
    assert Client().get("/api/v1/pools/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 200
