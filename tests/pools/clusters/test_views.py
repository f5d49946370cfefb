"""The clusters page: health columns, filters, CSV, empty state, and a pool admin's check."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from django.test import override_settings
from factories import ClusterFactory, PoolFactory

from pools.clusters.models import Cluster
from pools.common.choices import ClusterStatus

pytestmark = pytest.mark.django_db

URL = "/clusters/"


@pytest.fixture
def two():
    down = ClusterFactory(
        slug="legacy",
        name="Legacy",
        retiring=True,
        status=ClusterStatus.UNREACHABLE,
        status_reason="scheduler_unavailable: connection refused",
        checked_at=datetime(2026, 12, 5, 1, 0, tzinfo=UTC),
    )
    up = ClusterFactory(slug="modern", name="Modern", status=ClusterStatus.REACHABLE)
    PoolFactory(slug="train", cluster=up)
    return down, up


def test_the_page_shows_a_pool_admin_each_cluster_with_its_reason(admin_page, two):
    body = admin_page.get(URL).content.decode()

    assert "Legacy" in body and "retiring" in body
    assert "scheduler_unavailable: connection refused" in body


def test_filters_and_csv(admin_page, two):
    response = admin_page.get(URL, {"status": "unreachable", "export": "csv"})

    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["slug"], r["status"], r["retiring"], r["pools"]) for r in rows] == [
        ("legacy", "unreachable", "True", "0")
    ]


def test_the_empty_state_says_what_is_used_instead(member_page):
    assert "the scheduler connections of the environment variables are used" in (
        member_page.get(URL).content.decode()
    )


def test_a_pool_admin_checks_now_and_a_member_cannot(
    admin_page, member_page, django_capture_on_commit_callbacks
):
    ClusterFactory(slug="c", credential_path="/nonexistent/key")

    with django_capture_on_commit_callbacks(execute=True) as refused:
        assert member_page.post("/clusters/c/check/").status_code == 403
    assert Cluster.objects.get(slug="c").status == ClusterStatus.UNKNOWN and refused == []

    with django_capture_on_commit_callbacks(execute=True) as queued:
        response = admin_page.post("/clusters/c/check/")

    assert (response.status_code, len(queued)) == (302, 1)
    assert Cluster.objects.get(slug="c").status == ClusterStatus.UNREACHABLE


@pytest.mark.django_db(transaction=True)
@override_settings(SCHEDULERS={})
def test_check_now_of_an_environment_cluster_with_no_connection_says_portal_only(admin_page):
    """No broker (tasks eager) and committed as a request commits: the check runs at commit,
    in the request, and the message says what it found. No variables configure Slurm: the
    portal keeps records only (the message said the cluster "answered")."""
    ClusterFactory(slug="env-slurm", name="Env", credential_kind="environment", api_url="",
                   credential_path="")  # fmt: skip

    page = _text(admin_page.post("/clusters/env-slurm/check/", follow=True))

    assert (
        "Env: the environment variables configure no slurm connection: the portal keeps "
        "records only." in page
    )
    assert "Env answered." not in page and "checking…" not in page
    assert Cluster.objects.get(slug="env-slurm").check_requested_at is None


def _text(response) -> str:
    return " ".join(response.content.decode().split())
