"""A cluster known to be down makes its pools read-only with the reason: an approval into one
is refused (409, nothing written), an auto-approval leaves the request for a pool admin; when
the cluster answers again the same approval goes through."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import ClusterFactory, next_week_9am

from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.common.choices import ClusterStatus, RequestStatus, Scheduler
from pools.common.errors import ClusterUnreachable

pytestmark = pytest.mark.django_db

CHECKED = datetime(2026, 12, 5, 1, 0, tzinfo=UTC)


@pytest.fixture
def down(infer_pool):
    """``infer``'s cluster, unreachable at its last check."""
    cluster = ClusterFactory(
        slug="site-b",
        kind=Scheduler.KUBERNETES,
        api_url="https://k8s-b.example.com:6443",
        credential_kind="token-file",
        credential_path="/t",
        status=ClusterStatus.UNREACHABLE,
        status_reason="scheduler_unavailable: list_nodes: connection refused",
        checked_at=CHECKED,
    )
    infer_pool.cluster = cluster
    infer_pool.save(update_fields=["cluster"])
    return cluster


def request_for(team_member, team, infer_pool, l40s):
    start = next_week_9am()
    return capacity_request_create(
        actor=team_member,
        fields=RequestFields(
            team=team,
            workload_kind="inference",
            pool=infer_pool,
            gpu_model=l40s,
            card_count=2,
            starts_at=start,
            ends_at=start + timedelta(days=2),
            justification="serve",
        ),
    )


def test_an_approval_into_a_down_cluster_is_refused_with_the_reason(
    down, team_member, team, infer_pool, l40s, pool_admin, request_state
):
    submitted = request_for(team_member, team, infer_pool, l40s)
    before = request_state()

    with pytest.raises(ClusterUnreachable) as refused:
        capacity_request_approve(request=submitted, actor=pool_admin)

    assert refused.value.status == 409
    assert refused.value.data == {
        "cluster": "site-b",
        "reason": "scheduler_unavailable: list_nodes: connection refused",
        "checked_at": "2026-12-05T01:00:00+00:00",
    }
    assert request_state() == before


def test_the_approval_goes_through_once_the_cluster_answers(
    down, team_member, team, infer_pool, l40s, pool_admin
):
    submitted = request_for(team_member, team, infer_pool, l40s)
    down.status = ClusterStatus.REACHABLE
    down.save(update_fields=["status"])

    allocation = capacity_request_approve(request=submitted, actor=pool_admin)

    assert (allocation.pool, allocation.card_count) == (infer_pool, 2)


def test_an_auto_approval_waits_for_a_pool_admin_while_the_cluster_is_down(
    down, team_member, team, infer_pool, l40s
):
    infer_pool.auto_approve_max_cards = 4
    infer_pool.auto_approve_max_days = 7
    infer_pool.save()

    submitted = request_for(team_member, team, infer_pool, l40s)

    assert submitted.status == RequestStatus.SUBMITTED


REASON = "scheduler_unavailable: list_nodes: connection refused (k8s-b.example.com:6443)"


@pytest.fixture
def down_at_a_host(down):
    """``down`` with a reason that names the API server's host, as a refused connection's
    does."""
    down.status_reason = REASON
    down.save(update_fields=["status_reason"])
    return down


def test_a_pool_admin_is_told_the_reason_on_the_api_and_the_page(
    down_at_a_host, team_member, team, infer_pool, l40s, admin_api, admin_page, request_state
):
    submitted = request_for(team_member, team, infer_pool, l40s)
    before = request_state()

    answer = admin_api.post(f"/api/v1/requests/{submitted.pk}/approve/", {}, format="json")

    assert answer.status_code == 409
    body = answer.json()
    assert body["code"] == "cluster_unreachable"
    assert body["data"] == {
        "cluster": "site-b",
        "reason": REASON,
        "checked_at": "2026-12-05T01:00:00+00:00",
    }
    assert "k8s-b.example.com:6443" in body["detail"]
    url = f"/requests/{submitted.pk}/approve/"
    page = admin_page.post(url, {}, follow=True).content.decode()
    assert "site-b is unreachable (scheduler_unavailable: list_nodes: connection refused" in page
    assert request_state() == before


@pytest.mark.parametrize("who", ["member", "system"])
def test_anyone_else_is_told_the_cluster_is_down_without_its_hosts(
    who, down_at_a_host, team_member
):
    """A member (or a system rule, ``None``) refused by the guard hears the cluster's slug and
    when it was checked, never the reason: it names the API server."""
    from pools.clusters.services import cluster_require_reachable

    actor = team_member if who == "member" else None
    with pytest.raises(ClusterUnreachable) as refused:
        cluster_require_reachable(cluster_id=down_at_a_host.pk, actor=actor)

    assert refused.value.message == (
        "Cluster site-b is unreachable; its pools are read-only until it answers again."
    )
    assert refused.value.data == {"cluster": "site-b", "checked_at": "2026-12-05T01:00:00+00:00"}
    assert "example.com" not in str(refused.value)
