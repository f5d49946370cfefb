"""POST /api/v1/auth/token/: username and password for a token usable as ``Token ...``."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

URL = "/api/v1/auth/token/"


@pytest.fixture(autouse=True)
def fresh_throttle():
    """The token endpoint is throttled per client address; start every test with no history."""
    cache.clear()
    yield
    cache.clear()


def test_a_token_for_the_right_password_authenticates_later_requests(member):
    anonymous = APIClient()

    response = anonymous.post(URL, {"username": "member", "password": "pw"}, format="json")

    assert response.status_code == 200, response.content
    token = response.json()["token"]
    assert len(token) == 40
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/nodes/").status_code == 200
    assert client.get("/api/v1/gpu-models/h100_sxm/").json()["slug"] == "h100_sxm"


def test_asking_twice_returns_the_same_token(member):
    first = APIClient().post(URL, {"username": "member", "password": "pw"}).json()["token"]
    second = APIClient().post(URL, {"username": "member", "password": "pw"}).json()["token"]

    assert first == second


@pytest.mark.parametrize(
    "credentials",
    [
        {"username": "member", "password": "wrong"},
        {"username": "nobody", "password": "pw"},
        {"username": "member"},
    ],
)
def test_wrong_or_missing_credentials_are_400(member, credentials):
    response = APIClient().post(URL, credentials, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "token" not in response.json()


def test_a_bad_token_is_refused(member):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)

    response = client.get("/api/v1/nodes/")

    # 403 rather than 401: session authentication, listed first, sends no WWW-Authenticate.
    assert response.status_code in (401, 403)
    assert response.json()["code"] == "authentication_failed"


def test_the_token_endpoint_is_throttled(member):
    client = APIClient()
    # A new username each time, so the sign-in lockout (per username and address) stays out.
    codes = [
        client.post(URL, {"username": f"user-{n}", "password": "wrong"}).status_code
        for n in range(21)
    ]

    # 20 a minute (DEFAULT_THROTTLE_RATES["token"]), then 429.
    assert codes == [400] * 20 + [429]
