"""A team's secret calendar feed token (issue 32 item 2), pure: how a token is made from a salt
and how it is looked up.

``token = base64url(HMAC-SHA256(SECRET_KEY, salt))`` (43 characters, 256 bits) from a random
salt of 32 bytes; the database keeps the salt and ``sha256(token)`` (hex), and a request's token
is found by its SHA-256 (an index lookup; the token has the entropy of a key, so a plain hash
suffices, as GitHub's tokens are kept). Changing ``SECRET_KEY`` changes every team's link: the
old ones answer 404 and the team pages show the new ones.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

from django.utils.crypto import salted_hmac

_PURPOSE = "pools.calendar.feed"
TOKEN_LENGTH = 43  # base64url of 32 bytes, without padding


def new_salt() -> str:
    return secrets.token_hex(32)


def feed_token(salt: str) -> str:
    digest = salted_hmac(_PURPOSE, salt, algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
