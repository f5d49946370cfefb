"""Users who are not pool admins see a cluster's name, kind, site / provider and ok / degraded
only, on /clusters/ (page and CSV) and /api/v1/clusters/: no credential file paths, API URLs,
ClusterNames or check reasons naming hosts. Pool admins see everything."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from django.utils import timezone
from factories import ClusterFactory

from pools.clusters.models import ClusterError
from pools.common.choices import ClusterOperation, ClusterStatus

pytestmark = pytest.mark.django_db

SECRETS = ("/etc/portal/legacy.jwt", "slurm-ctl.internal", "legacy-ctl", "connection refused")


@pytest.fixture
def three():
    """Legacy unreachable (degraded); Modern reachable but a reconcile failed 5 minutes ago
    (degraded); Quiet reachable, no errors (ok)."""
    ClusterFactory(
        slug="legacy", name="Legacy", site="Garching", provider="LRZ",
        api_url="http://slurm-ctl.internal:6820", slurm_cluster_name="legacy-ctl",
        credential_path="/etc/portal/legacy.jwt", status=ClusterStatus.UNREACHABLE,
        status_reason="scheduler_unavailable: slurm-ctl.internal:6820 connection refused",
        checked_at=datetime(2026, 12, 5, 1, 0, tzinfo=UTC),
    )  # fmt: skip
    modern = ClusterFactory(slug="modern", name="Modern", status=ClusterStatus.REACHABLE)
    ClusterError.objects.create(
        cluster=modern, operation=ClusterOperation.RECONCILE, at=timezone.now(),
        message="slurm-ctl.internal: 500",
    )  # fmt: skip
    ClusterFactory(slug="quiet", name="Quiet", status=ClusterStatus.REACHABLE)


def test_the_page_shows_a_member_name_kind_site_and_ok_or_degraded(member_page, three):
    body = member_page.get("/clusters/").content.decode()

    assert "Garching" in body and "LRZ" in body
    assert body.count('<span class="badge down">degraded</span>') == 2
    assert body.count('<span class="badge up">ok</span>') == 1
    for secret in SECRETS:
        assert secret not in body
    assert "Check now" not in body


def test_the_csv_of_a_member_has_the_same_few_columns(member_page, three):
    response = member_page.get("/clusters/", {"export": "csv"})
    text = b"".join(response.streaming_content).decode()

    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [
        ["slug", "name", "kind", "site", "provider", "status"],
        ["legacy", "Legacy", "slurm", "Garching", "LRZ", "degraded"],
        ["modern", "Modern", "slurm", "", "", "degraded"],
        ["quiet", "Quiet", "slurm", "", "", "ok"],
    ]


def test_a_pool_admin_still_sees_everything(admin_page, admin_api, three):
    body = admin_page.get("/clusters/").content.decode()
    assert "slurm-ctl.internal:6820" in body and "Check now" in body
    legacy = admin_api.get("/api/v1/clusters/legacy/").json()
    assert legacy["credential_path"] == "/etc/portal/legacy.jwt"
    assert legacy["status"] == "unreachable"


def test_the_api_answers_a_member_with_the_member_fields(member_api, three):
    listed = member_api.get("/api/v1/clusters/").json()
    one = member_api.get("/api/v1/clusters/legacy/").json()

    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [(r["slug"], r["status"]) for r in rows] == [
        ("legacy", "degraded"),
        ("modern", "degraded"),
        ("quiet", "ok"),
    ]
    assert one == {"slug": "legacy", "name": "Legacy", "kind": "slurm", "site": "Garching",
                   "provider": "LRZ", "status": "degraded"}  # fmt: skip
    for secret in SECRETS:
        assert secret not in str(listed)


def test_the_schema_documents_both_shapes(admin_api):
    schema = admin_api.get("/api/schema/?format=json").json()
    member = schema["components"]["schemas"]["ClusterMember"]
    assert set(member["properties"]) == {"slug", "name", "kind", "site", "provider", "status"}
    (status_ref,) = member["properties"]["status"]["allOf"]
    status_enum = schema["components"]["schemas"][status_ref["$ref"].rsplit("/", 1)[1]]
    assert status_enum["enum"] == ["ok", "degraded"]
    read = schema["paths"]["/api/v1/clusters/{slug}/"]["get"]["responses"]["200"]
    assert read["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ClusterRead"
    }
    assert schema["components"]["schemas"]["ClusterRead"] == {
        "oneOf": [
            {"$ref": "#/components/schemas/Cluster"},
            {"$ref": "#/components/schemas/ClusterMember"},
        ]
    }


def test_a_member_filters_by_the_ok_or_degraded_the_rows_show(member_page, member_api, three):
    """The three: Legacy unreachable and Modern with an error 5 minutes ago read *degraded*,
    Quiet *ok*. A member's status filter offers and takes those two, on the page, its CSV and
    the API alike; the last check's own states (``unreachable`` gave Legacy alone, reading
    *degraded*, beside a degraded Modern it left out) are a 400 naming ``status``."""
    page = member_page.get("/clusters/").content.decode()
    assert '<option value="degraded">' in page and '<option value="unreachable">' not in page

    def page_slugs(status):
        response = member_page.get("/clusters/", {"status": status, "export": "csv"})
        assert response.status_code == 200
        text = b"".join(response.streaming_content).decode()
        return [row["slug"] for row in csv.DictReader(io.StringIO(text))]

    def api_slugs(status):
        response = member_api.get("/api/v1/clusters/", {"status": status})
        assert response.status_code == 200, response.content
        return [row["slug"] for row in response.json()["results"]]

    for slugs in (page_slugs, api_slugs):
        assert slugs("degraded") == ["legacy", "modern"]
        assert slugs("ok") == ["quiet"]
    assert member_page.get("/clusters/", {"status": "unreachable"}).status_code == 400
    refused = member_api.get("/api/v1/clusters/", {"status": "unreachable"})
    assert refused.status_code == 400 and "status" in refused.json()["errors"]


def test_a_pool_admin_filters_by_the_last_check_or_by_ok_or_degraded(admin_api, three):
    def slugs(status):
        return [
            r["slug"]
            for r in admin_api.get("/api/v1/clusters/", {"status": status}).json()["results"]
        ]

    assert slugs("unreachable") == ["legacy"]
    assert slugs("reachable") == ["modern", "quiet"]
    assert slugs("degraded") == ["legacy", "modern"]
    assert slugs("ok") == ["quiet"]
