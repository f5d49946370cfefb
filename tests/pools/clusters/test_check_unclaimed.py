"""A connection check that no worker picks up (no Celery worker, or none reaching the broker):
after a minute the clusters page says so instead of an endless *checking…*, and asks for its
table every 30 s instead of every 3 s. A worker that begins a check marks it
(``check_started_at``), so a check that is merely slow is never called unclaimed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import ClusterFactory

from pools.clusters import services
from pools.clusters.models import Cluster
from pools.clusters.selectors import PendingChecks, cluster_checks_pending
from pools.common.choices import ClusterStatus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_adapters")]

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def test_pending_checks_count_those_waiting_over_a_minute_for_a_worker():
    """At 12:00:00: a asked 11:58:00 (120 s > 60, no worker began it): unclaimed; b asked
    11:59:30 (30 s): still fresh; c asked 11:57:00 and begun by a worker at 11:57:05: slow, not
    unclaimed; d asked 11:59:00, exactly 60 s (not over): fresh; e has no request. Four
    pending, one unclaimed, the oldest 11:57:00: the page keeps asking every 3 s."""
    ClusterFactory(slug="a", check_requested_at=NOW - timedelta(seconds=120))
    ClusterFactory(slug="b", check_requested_at=NOW - timedelta(seconds=30))
    ClusterFactory(slug="c", check_requested_at=NOW - timedelta(seconds=180),
                   check_started_at=NOW - timedelta(seconds=175))  # fmt: skip
    ClusterFactory(slug="d", check_requested_at=NOW - timedelta(seconds=60))
    ClusterFactory(slug="e")

    checks = cluster_checks_pending(now=NOW)

    assert checks == PendingChecks(pending=4, unclaimed=1, oldest=NOW - timedelta(seconds=180))
    assert checks.poll_s == 3


def test_the_poll_slows_to_30_s_once_every_pending_check_waits_for_a_worker():
    """Only a (120 s, not begun) pending: 1 of 1 unclaimed, every 30 s; none pending: no
    poll."""
    assert cluster_checks_pending(now=NOW).poll_s is None
    ClusterFactory(slug="a", check_requested_at=NOW - timedelta(seconds=120))
    checks = cluster_checks_pending(now=NOW)
    assert (checks.pending, checks.unclaimed, checks.poll_s) == (1, 1, 30)


def test_the_property_reads_the_same_minute():
    """Asked 61 s ago and not begun: unclaimed; 50 s ago: not yet; begun: never."""
    from django.utils import timezone

    now = timezone.now()
    assert Cluster(check_requested_at=now - timedelta(seconds=61)).check_unclaimed is True
    assert Cluster(check_requested_at=now - timedelta(seconds=50)).check_unclaimed is False
    begun = Cluster(check_requested_at=now - timedelta(seconds=61), check_started_at=now)
    assert begun.check_unclaimed is False
    assert Cluster().check_unclaimed is False


def test_a_check_marks_its_request_begun_then_clears_both(monkeypatch):
    """While the scheduler is asked the row says begun (its request still pending); the result
    clears request and mark together. A new request clears a mark left by an earlier check."""
    cluster = ClusterFactory(slug="c", check_requested_at=NOW, check_started_at=None)
    seen = {}

    def probe(checked):
        seen.update(Cluster.objects.values("check_requested_at", "check_started_at").get())
        raise OSError("no key")

    monkeypatch.setattr(services, "_probe", probe)
    services.cluster_check(cluster=Cluster.objects.get(pk=cluster.pk))

    assert seen["check_requested_at"] == NOW and seen["check_started_at"] is not None
    after = Cluster.objects.get(pk=cluster.pk)
    assert (after.status, after.check_requested_at, after.check_started_at) == (
        ClusterStatus.UNREACHABLE, None, None,
    )  # fmt: skip

    Cluster.objects.filter(pk=cluster.pk).update(check_started_at=NOW)  # a mark left behind
    asked = services.cluster_check_request(cluster=after)  # the test never commits: queued
    assert asked.check_requested_at is not None and asked.check_started_at is None


def test_a_request_made_while_a_check_runs_is_not_marked_begun_by_it(monkeypatch):
    """The check read request r1; r2 comes while the scheduler is asked. The check answers r1
    only: r2 stays pending and not begun (no worker has begun r2's check yet)."""
    cluster = ClusterFactory(slug="c", check_requested_at=NOW)
    r2 = NOW + timedelta(seconds=5)

    def probe(checked):
        Cluster.objects.filter(pk=checked.pk).update(check_requested_at=r2, check_started_at=None)
        raise OSError("no key")

    monkeypatch.setattr(services, "_probe", probe)
    services.cluster_check(cluster=Cluster.objects.get(pk=cluster.pk))

    after = Cluster.objects.get(pk=cluster.pk)
    assert (after.check_requested_at, after.check_started_at) == (r2, None)


def test_the_page_says_no_worker_has_picked_it_up_and_asks_every_30_s(admin_page):
    """Asked 2 min 5 s ago (Django's timesince: "2 minutes"), no worker begun: the cluster's
    status and the notice above the table say so, no *checking…* spinner, the poll 30 s."""
    from django.utils import timezone

    ClusterFactory(slug="c", name="Legacy", status=ClusterStatus.REACHABLE,
                   checked_at=NOW - timedelta(days=1),
                   check_requested_at=timezone.now() - timedelta(seconds=125))  # fmt: skip

    body = admin_page.get("/clusters/").content.decode()

    assert "queued 2\xa0minutes ago, no worker has picked it up yet" in body
    assert "<strong>No worker has picked up the connection check</strong> queued 2\xa0minutes" in (
        body
    )
    assert 'hx-trigger="load delay:30s"' in body
    assert "checking…" not in body and 'aria-busy="true"' not in body
    assert 'last check:</span> <span class="badge up">reachable</span>' in body
