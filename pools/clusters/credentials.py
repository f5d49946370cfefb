"""When a cluster's credentials stop working, read from them without keeping them (pure: no
models, no Django).

- a bearer token (a Slurm ``SLURM_JWT`` / token file, a Kubernetes ServiceAccount token): its
  JWT ``exp`` claim (seconds since the epoch, RFC 7519 §4.1.4), read without verifying the
  signature — the date is all that is wanted, and the token itself is never returned or stored;
- a kubeconfig: the ``notAfter`` of the context's user client certificate
  (``client-certificate-data``, base64 PEM, or ``client-certificate``, a path relative to the
  kubeconfig's folder), else its ``token``'s JWT ``exp``;
- a Slurm JWT key (the portal mints short tokens itself) or an opaque token: ``None``, none known.

Anything unreadable or malformed is ``None`` ("unknown"): the connection check, not this module,
reports credentials that cannot be read.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509


def jwt_expiry(token: str) -> datetime | None:
    """The ``exp`` of a JWT (``header.payload.signature``) as an aware UTC datetime; ``None``
    for a token that is not a JWT or has no numeric ``exp``."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        return None
    try:
        return datetime.fromtimestamp(exp, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def certificate_expiry(pem: bytes) -> datetime | None:
    """The ``notAfter`` of the first certificate of a PEM bundle (aware UTC); ``None`` when it
    does not parse."""
    try:
        return x509.load_pem_x509_certificate(pem).not_valid_after_utc
    except ValueError:
        return None


def kubeconfig_expiry(path: str, context: str | None = None) -> datetime | None:
    """When the user of ``context`` (default: the kubeconfig's ``current-context``) in the
    kubeconfig at ``path`` stops working: its client certificate's ``notAfter``, else its
    token's ``exp``; ``None`` when neither is known. Raises ``OSError`` when the file cannot be
    read."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(config, dict):
        return None
    user = _user_of(config, context or config.get("current-context"))
    if user is None:
        return None
    if isinstance(user.get("client-certificate-data"), str):
        try:
            pem = base64.b64decode(user["client-certificate-data"])
        except (binascii.Error, ValueError):
            return None
        return certificate_expiry(pem)
    if isinstance(user.get("client-certificate"), str):
        cert = Path(path).parent / user["client-certificate"]
        return certificate_expiry(cert.read_bytes())
    if isinstance(user.get("token"), str):
        return jwt_expiry(user["token"])
    return None


def _user_of(config: dict, context_name: Any) -> dict | None:
    contexts = {
        c.get("name"): c.get("context") or {}
        for c in config.get("contexts") or []
        if isinstance(c, dict)
    }
    context = contexts.get(context_name)
    if not isinstance(context, dict):
        return None
    users = {
        u.get("name"): u.get("user") or {} for u in config.get("users") or [] if isinstance(u, dict)
    }
    user = users.get(context.get("user"))
    return user if isinstance(user, dict) else None


def credential_expiry(settings: Mapping[str, Any] | None) -> datetime | None:
    """When the credentials of an adapter's settings
    (:func:`pools.clusters.adapters.cluster_settings`) expire: a ``TOKEN``'s JWT ``exp`` or a
    ``KUBECONFIG``'s user's; ``None`` otherwise. Raises ``OSError`` for an unreadable
    kubeconfig."""
    if not settings:
        return None
    if isinstance(settings.get("TOKEN"), str):
        return jwt_expiry(settings["TOKEN"])
    if settings.get("KUBECONFIG"):
        return kubeconfig_expiry(str(settings["KUBECONFIG"]), settings.get("CONTEXT") or None)
    return None
