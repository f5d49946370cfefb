"""Changes to who may do what, each one audited in its own transaction: API tokens made and
revoked, staff and superuser rights granted and removed. The token endpoint and the Django admin
both call these (no signals)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from pools.access.models import ApiToken
from pools.audit.services import audit_event_record, audit_snapshot
from pools.tenancy.roles import RIGHTS


def _token_snapshot(token: ApiToken) -> dict[str, Any]:
    # Never the token, its digest or its first characters: who, for what, until when.
    return audit_snapshot(token, "client", "created", "expiry", user="user.username")


def api_token_create(*, user: Any, client: str = "", request_id: str = "") -> tuple[ApiToken, str]:
    """A new token for ``user`` (signed in as themselves), named for ``client``; expires after
    ``REST_KNOX["TOKEN_TTL"]``. Returns the row and the token, which is shown this once."""
    with transaction.atomic():
        token, key = ApiToken.objects.create(user=user, client=client)
        audit_event_record(
            actor=user,
            action="api_token.created",
            obj=token,
            after=_token_snapshot(token),
            request_id=request_id,
        )
    return token, key


def api_token_revoke(*, token: ApiToken, actor: Any, reason: str = "") -> None:
    """Revoke ``token`` (it stops authenticating at once): the row is deleted, the event kept."""
    with transaction.atomic():
        audit_event_record(
            actor=actor,
            action="api_token.revoked",
            obj=token,
            before=_token_snapshot(token),
            reason=reason,
        )
        token.delete()


def user_rights_set(
    *, user: Any, actor: Any, is_staff: bool, is_superuser: bool, reason: str = ""
) -> bool:
    """Grant or remove pool-admin (staff) and superuser rights; audited as
    ``user.rights_changed`` with before/after. Returns whether anything changed."""
    wanted = {"is_staff": bool(is_staff), "is_superuser": bool(is_superuser)}
    with transaction.atomic():
        current = type(user).objects.select_for_update().get(pk=user.pk)
        before = {name: getattr(current, name) for name in RIGHTS}
        if before == wanted:
            return False
        type(user).objects.filter(pk=user.pk).update(**wanted)
        for name, value in wanted.items():
            setattr(user, name, value)
        audit_event_record(
            actor=actor,
            action="user.rights_changed",
            obj=user,
            before=before,
            after=wanted,
            reason=reason,
        )
    return True
