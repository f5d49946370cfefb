"""The OpenAPI schema is served and describes the inventory API."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_the_openapi_schema_is_served(member_api):
    response = member_api.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "gpu-pool-portal API"
    for path in (
        "/api/v1/nodes/",
        "/api/v1/nodes/{hostname}/",
        "/api/v1/gpus/",
        "/api/v1/gpu-models/{slug}/",
        "/api/v1/pools/cuda-support/",
        "/api/v1/inventory/imports/",
        "/api/v1/unrecognised-models/",
        "/api/v1/auth/token/",
    ):
        assert path in schema["paths"], path


def test_the_api_docs_page_is_served(member_page):
    assert member_page.get("/api/docs/").status_code == 200
