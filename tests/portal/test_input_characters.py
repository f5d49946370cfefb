"""Control characters at the edge (portal.middleware.InputCharactersMiddleware): a path with NUL
or another C0 control character is no resource (404), NUL in a query parameter or a body is a 400;
never a 500 from PostgreSQL refusing NUL in a text parameter, and nothing is written."""

from __future__ import annotations

import json

import pytest

from pools.audit.models import AuditEvent
from pools.capacity.models import CapacityRequest
from pools.inventory.models import Pool

pytestmark = pytest.mark.django_db

API_DETAIL_PATHS = [
    "/api/v1/nodes/a%00b/",
    "/api/v1/pools/a%00b/",
    "/api/v1/teams/a%00b/",
    "/api/v1/gpu-models/a%00b/",
    "/api/v1/nodes/a%0Ab/",
    "/api/v1/pools/a%7Fb/",
]


@pytest.mark.parametrize("path", API_DETAIL_PATHS)
@pytest.mark.parametrize("role", ["admin_api", "member_api"])
def test_a_control_character_in_an_api_path_is_a_json_404(request, role, path):
    response = request.getfixturevalue(role).get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize("path", ["/nodes/a%00b/", "/pools/a%00b/", "/nodes/a%09b/"])
def test_a_control_character_in_a_page_path_is_the_portal_404_page(admin_page, path):
    response = admin_page.get(path)
    assert response.status_code == 404
    assert b"Not found" in response.content


def test_nul_in_a_query_parameter_is_a_400(admin_api, admin_page):
    response = admin_api.get("/api/v1/nodes/?pool=a%00b")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert admin_page.get("/nodes/?pool=a%00b").status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {"slug": "a\x00b", "name": "A", "scheduler": "slurm"},
        {"slug": "ab", "name": "A", "scheduler": "slurm", "description": "x\x00"},
    ],
)
def test_nul_in_a_json_body_is_a_400_and_writes_nothing(admin_api, body):
    response = admin_api.post("/api/v1/pools/", json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert not Pool.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/v1/reclamation-policies/", {"pool": "a\x00b"}),
        (
            "/api/v1/exemptions/",
            {"team": "a\x00b", "reason": "x", "expires_at": "2030-01-01T00:00Z"},
        ),
        ("/api/v1/requests/", {"pool": "a\x00b", "gpu_model": "l40s", "cards": 1}),
    ],
)
def test_nul_in_a_slug_that_names_another_object_is_a_400(admin_api, url, body):
    """A slug in a body that the serializer looks up (SlugRelatedField) reached PostgreSQL."""
    response = admin_api.post(url, body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert not CapacityRequest.objects.exists()
    assert not AuditEvent.objects.exists()


def test_nul_in_a_form_body_is_a_400(admin_api):
    response = admin_api.post("/api/v1/pools/", {"slug": "a\x00b", "name": "A"})
    assert response.status_code == 400
    assert not Pool.objects.exists()


def test_an_escaped_backslash_before_u0000_is_text_not_nul(admin_api):
    r"""``"\\u0000"`` in JSON is the six characters ``\u0000``: the body is let through (and the
    description kept as written)."""
    body = '{"slug": "ab", "name": "A", "scheduler": "slurm", "description": "a\\\\u0000"}'
    response = admin_api.post("/api/v1/pools/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert Pool.objects.get(slug="ab").description == "a\\u0000"
