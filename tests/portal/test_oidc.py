"""Single sign-on is off by default and, when configured, sends the browser to the provider."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import django, os
os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings.base"
django.setup()
from django.conf import settings
settings.SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"  # no tables needed
from django.test import Client
response = Client(SERVER_NAME="localhost").get("/oidc/authenticate/")
print(response.status_code, response.headers.get("Location", ""))
"""


def _run(extra_env: dict) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OIDC_")}
    env.update({"DEBUG": "1", "DATABASE_URL": "sqlite:///:memory:", **extra_env})
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_oidc_is_off_without_a_client_id():
    status, _, _ = _run({}).partition(" ")
    assert status == "404"  # no SSO route is mounted


def test_oidc_redirects_to_the_provider_when_configured():
    status, _, location = _run(
        {
            "OIDC_RP_CLIENT_ID": "portal",
            "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://sso.example.com/authorize",
            "OIDC_OP_TOKEN_ENDPOINT": "https://sso.example.com/token",
            "OIDC_OP_USER_ENDPOINT": "https://sso.example.com/userinfo",
        }
    ).partition(" ")
    assert status == "302"
    assert location.startswith("https://sso.example.com/authorize?")
    assert "client_id=portal" in location
