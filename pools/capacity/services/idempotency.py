"""The API's ``Idempotency-Key``: a retried ``POST /api/v1/requests/`` creates one request.

The key rides on the form's double-submit guard (``CapacityRequest.form_token``, unique per
requester: :func:`pools.capacity.services.requests.capacity_request_create_once`), not a
second mechanism: the key is mapped to a name-based UUID (RFC 9562 version 5, under
:data:`KEY_NAMESPACE`) and stored as the request's ``form_token``. A form's token is a random
UUID (version 4), so a key never names a form's request. The convention (the IETF HTTPAPI
draft *The Idempotency-Key HTTP Header Field*, and the 24 hours payment APIs keep a key): the
same key from the same user within :data:`KEY_WINDOW` answers the first request again; with a
body asking for something else it is refused (:class:`IdempotencyKeyReused`, 422); older, the
key is forgotten and names a new request.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.utils import timezone

from pools.capacity.models import CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import (
    capacity_request_create_once,
    request_class,
    request_record_values,
)
from pools.common.errors import IdempotencyKeyReused, InvalidInput

KEY_HEADER = "Idempotency-Key"
KEY_MAX_LENGTH = 255
KEY_WINDOW = timedelta(hours=24)
# Fixed once for this portal (a random UUID): the namespace of uuid5(key). Never change it, or
# keys sent before the change would name new requests.
KEY_NAMESPACE = uuid.UUID("8f0b6c1e-5d2a-4c7b-9e43-2a6f1d9b7c05")


def idempotency_token(key: str) -> uuid.UUID:
    """The ``form_token`` a key is stored as: ``uuid5(KEY_NAMESPACE, key)``. Raises
    :class:`InvalidInput` (``errors`` naming ``Idempotency-Key``) for a key that is empty,
    longer than :data:`KEY_MAX_LENGTH` characters or not printable ASCII (``0x20``-``0x7E``,
    what an HTTP header carries as text)."""
    if not key or len(key) > KEY_MAX_LENGTH or not all(" " <= c <= "~" for c in key):
        raise InvalidInput(
            "The Idempotency-Key header is not usable.",
            errors={
                KEY_HEADER: f"1 to {KEY_MAX_LENGTH} printable ASCII characters (a UUID will do)."
            },
        )
    return uuid.uuid5(KEY_NAMESPACE, key)


def capacity_request_create_idempotent(
    *, actor: Any, fields: RequestFields, key: str, submit: bool = True, now: datetime | None = None
) -> tuple[CapacityRequest, bool]:
    """Create the request ``fields`` asks for once per ``key`` and ``actor``: ``(request,
    False)`` when it wrote one, ``(the request the key's first POST wrote, True)`` when the key
    was used by ``actor`` less than :data:`KEY_WINDOW` before ``now`` with the same fields (a
    replay; nothing written). Two POSTs at once: the ``form_token`` unique index answers the
    later with the earlier's request. A key older than the window is forgotten first (its
    request's ``form_token`` emptied), so it names a new request. ``submit`` is not compared.

    Raises :class:`IdempotencyKeyReused` (422; data: ``request`` its id, ``fields`` the names
    that differ) when the key's request asked for something else, :class:`InvalidInput` for an
    unusable key, and what :func:`pools.capacity.services.requests.capacity_request_create`
    raises (nothing is written then, and the key stays free)."""
    now = now or timezone.now()
    token = idempotency_token(key)
    CapacityRequest.objects.filter(
        requested_by=actor, form_token=token, created_at__lt=now - KEY_WINDOW
    ).update(form_token=None)
    request, new = capacity_request_create_once(
        actor=actor, fields=replace(fields, form_token=token), submit=submit
    )
    if new:
        return request, False
    differ = request_fields_differing(request, fields)
    if differ:
        raise IdempotencyKeyReused(
            f"The Idempotency-Key was used for request #{request.pk}, which asked for other "
            f"{', '.join(differ)}: send a new key for a new request.",
            request=request.pk,
            fields=differ,
        )
    return request, True


def request_fields_differing(request: CapacityRequest, fields: RequestFields) -> list[str]:
    """The names of the columns (sorted) where ``request`` differs from what creating
    ``fields`` would write (``request_record_values``: the class defaulted as a create does,
    the justification stripped, no memory with a model named); related objects are compared
    by id, without a query. ``[]``: the same request."""
    fields = replace(
        fields,
        workload_class=request_class(
            team=fields.team, workload_class=fields.workload_class, extends=fields.extends
        ),
    )
    differ = []
    for name, value in request_record_values(fields).items():
        if name in ("requested_by", "form_token"):
            continue
        column = CapacityRequest._meta.get_field(name)
        wanted = value.pk if isinstance(value, models.Model) else value
        if getattr(request, column.attname) != wanted:
            differ.append(name)
    return sorted(differ)
