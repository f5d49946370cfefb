"""API edges: oversized bodies, unusable query parameters. Each answers a JSON 4xx with a code
and writes nothing."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.test import override_settings

from pools.audit.models import AuditEvent
from pools.inventory.models import Pool

pytestmark = pytest.mark.django_db

LIMIT = 64 * 1024  # DATA_UPLOAD_MAX_MEMORY_SIZE for these tests, bytes


def pool_body(description_bytes: int) -> dict:
    return {
        "slug": "big",
        "name": "Big",
        "description": "x" * description_bytes,
        "scheduler": "slurm",
    }


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
@pytest.mark.parametrize("encoding", ["json", "form", "multipart"])
def test_an_api_body_over_the_limit_is_a_json_413_and_writes_nothing(admin_api, encoding):
    body = pool_body(LIMIT + 1)
    if encoding == "json":
        response = admin_api.post(
            "/api/v1/pools/", json.dumps(body), content_type="application/json"
        )
    elif encoding == "form":
        response = admin_api.post(
            "/api/v1/pools/", urlencode(body), content_type="application/x-www-form-urlencoded"
        )
    else:
        # Multipart may also carry an inventory file: the limit adds INVENTORY_UPLOAD_MAX_BYTES.
        with override_settings(INVENTORY_UPLOAD_MAX_BYTES=LIMIT):
            response = admin_api.post("/api/v1/pools/", pool_body(2 * LIMIT + 1))

    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    expected = LIMIT * 2 if encoding == "multipart" else LIMIT
    assert response.json() == {
        "code": "request_too_large",
        "detail": f"The request body is larger than {expected} bytes.",
        "data": {"limit_bytes": expected},
    }
    assert not Pool.objects.exists()
    assert not AuditEvent.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
def test_a_body_just_under_the_limit_is_read(admin_api):
    body = json.dumps(pool_body(LIMIT - 80))
    assert LIMIT - 100 < len(body) < LIMIT

    response = admin_api.post("/api/v1/pools/", body, content_type="application/json")

    assert response.status_code == 201, response.content
    assert Pool.objects.get().slug == "big"


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
def test_a_page_form_over_the_limit_gets_a_page_not_a_traceback(admin_page):
    response = admin_page.post(
        "/login/", urlencode({"username": "x" * (LIMIT + 1)}), "application/x-www-form-urlencoded"
    )

    assert response.status_code == 400
    assert b"could not be used" in response.content


@pytest.mark.parametrize(
    "month", ["garbage", "2026-13", "2026-00", "2026-1", "26-10", "2026-10-01"]
)
def test_a_statement_month_that_is_not_yyyy_mm_is_400(admin_api, month):
    response = admin_api.get("/api/v1/statements/", {"month": month})

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input"
    assert list(body["errors"]) == ["month"]


def test_a_good_statement_month_filters(admin_api):
    response = admin_api.get("/api/v1/statements/", {"month": "2026-10"})

    assert response.status_code == 200
    assert response.json()["count"] == 0


@pytest.mark.parametrize("size", ["501", "0", "-1", "ten", "1e3", "100000"])
def test_a_page_size_outside_1_to_500_is_400_not_silently_clamped(member_api, size):
    response = member_api.get("/api/v1/gpu-models/", {"page_size": size})

    assert response.status_code == 400
    assert response.json() == {
        "code": "invalid_input",
        "detail": "Invalid input.",
        "errors": {"page_size": ["A whole number from 1 to 500."]},
    }


@pytest.mark.parametrize("size", ["1", "500"])
def test_page_sizes_at_the_bounds_are_honoured(member_api, size):
    response = member_api.get("/api/v1/gpu-models/", {"page_size": size})

    assert response.status_code == 200
    body = response.json()
    assert len(body["results"]) == min(int(size), body["count"])


@pytest.mark.parametrize("value", ["banana", "null", "yes"])
def test_a_boolean_filter_it_cannot_read_is_400_not_ignored(member_api, value):
    """django-filter reads ``?nvlink=banana`` as "any" and answered every model (schemathesis'
    negative_data_rejection)."""
    response = member_api.get("/api/v1/gpu-models/", {"nvlink": value})

    assert response.status_code == 400
    assert response.json()["errors"] == {"nvlink": ["true or false."]}


def test_a_readable_boolean_filter_still_filters(member_api):
    everything = member_api.get("/api/v1/gpu-models/", {"page_size": 500}).json()["results"]
    with_nvlink = member_api.get("/api/v1/gpu-models/", {"nvlink": "true", "page_size": 500})

    assert with_nvlink.status_code == 200
    slugs = {m["slug"] for m in with_nvlink.json()["results"]}
    assert slugs == {m["slug"] for m in everything if m["nvlink_gbps"] is not None}
    assert 0 < len(slugs) < len(everything)


@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=50)
def test_a_multipart_body_with_more_fields_than_django_reads_is_a_json_400(admin_api):
    """Found by schemathesis: a multipart body repeating a list field past Django's field limit
    got the portal's HTML 400 page from an API operation."""
    body = {**pool_body(10), "extra": [str(n) for n in range(60)]}  # 64 fields > 50

    response = admin_api.post("/api/v1/pools/", body)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "bad_request"
    assert not Pool.objects.exists()
    assert not AuditEvent.objects.exists()


def nested(depth: int, leaf: str = "1") -> str:
    """A JSON value ``depth`` objects deep: ``{"a": {"a": ... leaf ...}}``."""
    return '{"a": ' * depth + leaf + "}" * depth


@pytest.mark.parametrize(
    "body",
    [
        "[" * 5000,  # unterminated: the decoder recursed before it could say so
        "[" * 5000 + "]" * 5000,  # well-formed, 5000 levels
        nested(5000),
        json.dumps({"slug": "big", "description": nested(10)})[:-1] + ', "x": ' + nested(65) + "}",
    ],
    ids=["open-arrays", "closed-arrays", "objects", "deep-field"],
)
def test_a_json_body_nested_past_64_levels_is_a_400_parse_error_not_a_500(admin_api, body):
    """Found by hand (newcomer probe): 5000 ``[`` posted to any API operation raised
    RecursionError in the JSON decoder, a 500."""
    response = admin_api.post("/api/v1/pools/", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {
        "code": "parse_error",
        "detail": "JSON parse error - the body is nested deeper than 64 levels.",
    }
    assert not Pool.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_body_64_levels_deep_reaches_the_serializer(admin_api):
    """The bound refuses only past 64 levels: a 64-deep body is parsed, and the serializer
    judges it (here: the fields a pool needs are missing)."""
    response = admin_api.post("/api/v1/pools/", nested(64), content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "slug" in response.json()["errors"]


def test_brackets_inside_json_strings_are_not_counted_as_depth(admin_api):
    description = "[" * 200 + "{" * 200
    body = json.dumps({**pool_body(0), "description": description})

    response = admin_api.post("/api/v1/pools/", body, content_type="application/json")

    assert response.status_code == 201, response.content
    assert Pool.objects.get().description == description
