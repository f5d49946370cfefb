"""POST /api/v1/auth/token/: username and password for a token usable as ``Token ...``; each
client its own token, stored hashed, expiring, revocable (DELETE), every change audited."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from pools.access.models import ApiToken
from pools.audit.models import AuditEvent

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
    assert len(token) == 64  # knox: 32 random bytes, hex
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/nodes/").status_code == 200
    assert client.get("/api/v1/gpu-models/h100_sxm/").json()["slug"] == "h100_sxm"


def test_each_client_gets_its_own_token_and_revoking_one_leaves_the_other(member):
    """Before, every caller of one user got the same token, so revoking it cut off all of them."""
    body = {"username": "member", "password": "pw"}
    first = APIClient().post(URL, {**body, "client": "ci"}).json()["token"]
    second = APIClient().post(URL, {**body, "client": "gateway"}).json()["token"]
    assert first != second
    ci, gateway = APIClient(), APIClient()
    ci.credentials(HTTP_AUTHORIZATION=f"Token {first}")
    gateway.credentials(HTTP_AUTHORIZATION=f"Token {second}")

    assert ci.delete(URL).status_code == 204

    assert ci.get("/api/v1/nodes/").status_code == 401
    assert gateway.get("/api/v1/nodes/").status_code == 200
    assert list(ApiToken.objects.values_list("client", flat=True)) == ["gateway"]
    created = AuditEvent.objects.filter(action="api_token.created").order_by("id")
    assert [(e.actor.username, e.after["client"]) for e in created] == [
        ("member", "ci"),
        ("member", "gateway"),
    ]
    revoked = AuditEvent.objects.get(action="api_token.revoked")
    assert (revoked.actor.username, revoked.before["client"]) == ("member", "ci")


def test_the_token_is_stored_hashed_and_expires(member, settings):
    """knox keeps a SHA-512 digest (128 hex characters) and the first 15 characters; the token
    ends API_TOKEN_TTL_DAYS (90) after it is made, and then no longer authenticates."""
    response = APIClient().post(URL, {"username": "member", "password": "pw"})
    token = response.json()["token"]
    stored = ApiToken.objects.get()
    assert stored.digest == hashlib.sha512(token.encode()).hexdigest()
    assert token not in {stored.digest, stored.token_key} and stored.token_key == token[:15]
    assert timedelta(days=90) - (stored.expiry - stored.created) < timedelta(seconds=5)
    assert response.json()["expiry"] is not None
    assert not AuditEvent.objects.filter(after__icontains=token[:15]).exists()

    ApiToken.objects.filter(pk=stored.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/nodes/").status_code == 401


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
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 64)

    response = client.get("/api/v1/nodes/")

    # 401: knox's token authentication, listed first, names its scheme (WWW-Authenticate: Token).
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
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
