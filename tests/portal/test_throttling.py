"""Throttles and sign-in lockouts key on the real client address (``NUM_PROXIES`` trusted
proxies), so a forged ``X-Forwarded-For`` cannot reset them; a lockout holds one username at one
address, so an attacker elsewhere cannot lock the real user out, and it expires."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client, override_settings
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

TOKEN_URL = "/api/v1/auth/token/"


def with_proxies(count: int):
    return override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "NUM_PROXIES": count})


def token_attempt(client, n: int, **headers) -> int:
    # A new username each time: the lockout (per username and address) never trips, only the
    # per-address throttle of 20 a minute does.
    return client.post(
        TOKEN_URL, {"username": f"nobody-{n}", "password": "x"}, format="json", **headers
    ).status_code


def test_a_forged_x_forwarded_for_does_not_reset_the_token_throttle():
    client = APIClient(REMOTE_ADDR="203.0.113.9")

    codes = [token_attempt(client, n, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}") for n in range(21)]

    assert codes == [400] * 20 + [429]


@with_proxies(1)
def test_behind_one_proxy_the_address_it_saw_is_the_client():
    proxy = APIClient(REMOTE_ADDR="10.0.0.2")  # the ingress; every request comes from it

    # What a client writes on the left is ignored; the proxy appends the address it saw.
    forged = [
        token_attempt(proxy, n, HTTP_X_FORWARDED_FOR=f"1.2.3.{n}, 203.0.113.9") for n in range(21)
    ]
    other_client = token_attempt(proxy, 99, HTTP_X_FORWARDED_FOR="203.0.113.10")

    assert forged == [400] * 20 + [429]
    assert other_client == 400  # a different real client has its own budget


def sign_in(client: Client, username: str, password: str):
    return client.post("/login/", {"username": username, "password": password})


def test_the_login_form_locks_one_username_at_one_address_and_the_user_elsewhere_signs_in(
    django_user_model,
):
    django_user_model.objects.create_user("alice", password="right-pw")
    attacker = Client(REMOTE_ADDR="203.0.113.66")

    failures = [sign_in(attacker, "alice", f"guess-{n}").status_code for n in range(5)]
    # Now even the right password is refused for alice from the attacker's address.
    locked = sign_in(attacker, "alice", "right-pw")
    # The real user, from her own address, is not locked out by the attacker.
    alice = sign_in(Client(REMOTE_ADDR="192.0.2.10"), "alice", "right-pw")

    # The form re-renders with its error four times; the fifth failure locks (LOGIN_FAILURE_LIMIT).
    assert failures == [200] * 4 + [429]
    assert locked.status_code == 429
    assert locked["Retry-After"] == str(15 * 60)
    assert b"Too many failed sign-ins" in locked.content
    assert "_auth_user_id" not in attacker.session
    assert alice.status_code == 302
    assert alice["Location"] == "/start/"  # the landing page by role


@with_proxies(0)
def test_a_forged_x_forwarded_for_does_not_escape_the_lockout(django_user_model):
    django_user_model.objects.create_user("alice", password="right-pw")
    attacker = Client(REMOTE_ADDR="203.0.113.66")

    for n in range(5):
        sign_in(attacker, "alice", f"guess-{n}")
    escaped = attacker.post(
        "/login/",
        {"username": "alice", "password": "right-pw"},
        HTTP_X_FORWARDED_FOR="192.0.2.10",
    )

    assert escaped.status_code == 429


@override_settings(AXES_COOLOFF_TIME=timedelta(seconds=1))
def test_the_lockout_expires_after_the_cool_off(django_user_model):
    django_user_model.objects.create_user("alice", password="right-pw")
    client = Client(REMOTE_ADDR="203.0.113.66")
    for n in range(5):
        sign_in(client, "alice", f"guess-{n}")
    assert sign_in(client, "alice", "right-pw").status_code == 429

    time.sleep(1.2)

    assert sign_in(client, "alice", "right-pw").status_code == 302


def test_the_token_endpoint_shares_the_lockout_and_answers_json(django_user_model):
    django_user_model.objects.create_user("alice", password="right-pw")
    client = APIClient(REMOTE_ADDR="203.0.113.66")

    failures = [
        client.post(TOKEN_URL, {"username": "alice", "password": f"g{n}"}).status_code
        for n in range(5)
    ]
    locked = client.post(TOKEN_URL, {"username": "alice", "password": "right-pw"})

    assert failures == [400] * 4 + [429]
    assert locked.status_code == 429
    assert locked.json() == {
        "code": "locked_out",
        "detail": "Too many failed sign-ins from this address; try again later.",
        "data": {"retry_after_s": 900},
    }
    assert "token" not in locked.json()


def test_the_login_form_caps_attempts_per_address_whatever_the_username(django_user_model):
    django_user_model.objects.create_user("alice", password="right-pw")
    sprayer = Client(REMOTE_ADDR="203.0.113.77")

    # One password tried against 30 usernames: no username reaches its lockout ...
    sprayed = [sign_in(sprayer, f"user-{n}", "Winter2026!").status_code for n in range(30)]
    capped = sign_in(sprayer, "alice", "right-pw")
    elsewhere = sign_in(Client(REMOTE_ADDR="192.0.2.10"), "alice", "right-pw")

    # ... but the address has used its 30 a minute (LOGIN_THROTTLE_RATE).
    assert sprayed == [200] * 30
    assert capped.status_code == 429
    assert b"Too many sign-in attempts from your address" in capped.content
    assert 0 < int(capped["Retry-After"]) <= 60
    assert elsewhere.status_code == 302
