"""What a pool admin does about idle cards by hand (issue 7): exempt a team or an allocation
from reclamation for a while, revoke an exemption, and reclaim an open finding at once.

Reclaim-now skips the grace period and the cooldown but nothing else: it goes through the
scan's own locked path (:func:`pools.reclamation.services.scan.allocation_reclaim`), is
refused while an exemption is in force and under a dry-run policy, and can be undone like
any reclamation.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from pools.audit.services import audit_event_record, audit_snapshot
from pools.capacity.models import Allocation
from pools.common.choices import IdleFindingState
from pools.common.errors import InvalidInput, InvalidTransition
from pools.inventory.models import Pool
from pools.reclamation.models import POLICY_FIELDS, Exemption, IdleFinding, ReclamationPolicy
from pools.reclamation.services.scan import allocation_reclaim, exemption_in_force
from pools.tenancy.models import Team
from pools.tenancy.permissions import require_pool_admin

MAX_REASON_CHARS = 1000
MAX_EXEMPTION = timedelta(days=365)


def _invalid(field: str, message: str, **data: Any) -> InvalidInput:
    return InvalidInput(message, field=field, errors={field: [message]}, **data)


def _require_admin(actor: Any, what: str) -> None:
    require_pool_admin(actor, f"Only pool admins can {what}.")


def _exemption_snapshot(exemption: Exemption) -> dict:
    return audit_snapshot(
        exemption, "reason", "expires_at", team="team_id", allocation="allocation_id"
    )


def _exemption_reason(reason: str | None) -> str:
    """``reason`` stripped; raises :class:`InvalidInput` (field ``reason``) when it is empty or
    longer than :data:`MAX_REASON_CHARS`."""
    reason = (reason or "").strip()
    if not reason:
        raise _invalid("reason", "Give a reason for the exemption.")
    if len(reason) > MAX_REASON_CHARS:
        raise _invalid(
            "reason",
            f"The reason must be at most {MAX_REASON_CHARS} characters.",
            max_length=MAX_REASON_CHARS,
            length=len(reason),
        )
    return reason


def _check_expiry(expires_at: datetime | None, now: datetime) -> None:
    """Raise :class:`InvalidInput` (field ``expires_at``) unless ``expires_at`` is aware, after
    ``now`` and at most :data:`MAX_EXEMPTION` (365 days) after it."""
    if expires_at is None or timezone.is_naive(expires_at):
        raise _invalid("expires_at", "The expiry needs a time zone (an aware date and time).")
    if expires_at <= now:
        raise _invalid(
            "expires_at",
            "The expiry must be in the future.",
            expires_at=expires_at.isoformat(),
        )
    if expires_at > now + MAX_EXEMPTION:
        raise _invalid(
            "expires_at",
            "An exemption can last at most 365 days.",
            expires_at=expires_at.isoformat(),
            max_days=MAX_EXEMPTION.days,
        )


def exemption_grant(
    *,
    actor: Any,
    reason: str,
    expires_at: datetime,
    team: Team | None = None,
    allocation: Allocation | None = None,
) -> Exemption:
    """Exempt exactly one of ``team`` / ``allocation`` from reclamation until ``expires_at``
    (aware, in the future, at most 365 days ahead), for a non-empty ``reason`` of at most
    1000 characters (pool admins only). Raises :class:`PermissionDenied` or
    :class:`InvalidInput` (data: ``field``); a refused grant changes nothing.
    """
    _require_admin(actor, "grant an exemption")
    if (team is None) == (allocation is None):
        raise _invalid("team", "Exempt either a team or an allocation, not both or neither.")
    reason = _exemption_reason(reason)
    _check_expiry(expires_at, timezone.now())
    with transaction.atomic():
        exemption = Exemption.objects.create(
            team=team,
            allocation=allocation,
            reason=reason,
            expires_at=expires_at,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )
        audit_event_record(
            actor=actor,
            action="exemption.granted",
            obj=exemption,
            after=_exemption_snapshot(exemption),
            reason=reason,
        )
    return exemption


def exemption_revoke(*, exemption: Exemption, actor: Any) -> Exemption:
    """End an exemption now (pool admins only). Raises :class:`PermissionDenied`, or
    :class:`InvalidTransition` when it has already expired (nothing changes)."""
    _require_admin(actor, "revoke an exemption")
    now = timezone.now()
    with transaction.atomic():
        exemption = Exemption.objects.select_for_update().get(pk=exemption.pk)
        if exemption.expires_at <= now:
            raise InvalidTransition(
                "This exemption has already expired.",
                status="expired",
                action="revoke",
                expires_at=exemption.expires_at.isoformat(),
            )
        before = _exemption_snapshot(exemption)
        exemption.expires_at = now
        exemption.save(update_fields=["expires_at"])
        audit_event_record(
            actor=actor,
            action="exemption.revoked",
            obj=exemption,
            before=before,
            after=_exemption_snapshot(exemption),
        )
    return exemption


def _check_reclaim_allowed(finding: IdleFinding, allocation: Allocation, now: datetime) -> None:
    """Raise :class:`InvalidTransition` (action ``reclaim_now``) when ``allocation``'s pool has
    no reclamation policy, the policy or ``finding`` is dry-run (data: ``dry_run``), or an
    exemption of the team or the allocation is in force at ``now`` (data: ``exemption``,
    ``expires_at``)."""
    policy = ReclamationPolicy.objects.filter(pool_id=allocation.pool_id).first()
    if policy is None:
        raise InvalidTransition(
            "The pool has no reclamation policy.", status=finding.state, action="reclaim_now"
        )
    if policy.dry_run or finding.dry_run:
        # a dry-run finding never warned the team; the next scan under a live policy does
        raise InvalidTransition(
            "The finding was made under a dry-run policy: switch off dry run first.",
            status=finding.state,
            action="reclaim_now",
            dry_run=True,
        )
    exemption = exemption_in_force(team_id=allocation.team_id, allocation_id=allocation.pk, now=now)
    if exemption is not None:
        subject = "team" if exemption.team_id else "allocation"
        raise InvalidTransition(
            f"The {subject} is exempt until {exemption.expires_at:%Y-%m-%d %H:%M %Z}: "
            f"{exemption.reason}",
            status=finding.state,
            action="reclaim_now",
            exemption=exemption.pk,
            expires_at=exemption.expires_at.isoformat(),
        )


def idle_finding_reclaim_now(
    *, finding: IdleFinding, actor: Any, now: datetime | None = None
) -> IdleFinding:
    """Reclaim an open finding at once (pool admins only): the allocation shrinks to the
    finding's ``cards_in_use`` cards, or ends when none is in use, skipping the grace period and
    the cooldown.

    Raises :class:`PermissionDenied`, or :class:`InvalidTransition` when the finding is not
    open, its allocation no longer active or expiring, the pool's policy or the finding is
    dry-run (or the policy is gone),
    or an exemption of the team or the allocation is in force (data: ``exemption``,
    ``expires_at``); a refused reclaim changes nothing.
    """
    _require_admin(actor, "reclaim cards")
    now = now or timezone.now()
    finding = IdleFinding.objects.select_related("allocation").get(pk=finding.pk)
    allocation = finding.allocation
    if finding.state != IdleFindingState.OPEN:
        raise InvalidTransition(
            f"Only an open finding can be reclaimed; finding #{finding.pk} is {finding.state}.",
            status=finding.state,
            action="reclaim_now",
        )
    _check_reclaim_allowed(finding, allocation, now)
    why = (
        f"reclaimed now by {actor}: idle since {finding.first_seen_at:%Y-%m-%d %H:%M %Z}, "
        f"mean {finding.mean_util_pct} %"
    )
    done = allocation_reclaim(
        finding,
        allocation,
        keep=min(finding.cards_in_use, allocation.card_count),
        why=why,
        now=now,
        actor=actor,
    )
    if done is None:
        finding.refresh_from_db()
        allocation.refresh_from_db()
        raise InvalidTransition(
            f"Nothing to reclaim: the finding is {finding.state}, the allocation "
            f"{allocation.status}.",
            status=finding.state,
            action="reclaim_now",
            allocation_status=allocation.status,
        )
    return done


def _policy_snapshot(policy: ReclamationPolicy) -> dict:
    return audit_snapshot(policy, *POLICY_FIELDS, as_text=True)


def reclamation_policy_save(*, actor: Any, pool: Pool, **values: Any) -> ReclamationPolicy:
    """Create the pool's reclamation policy (defaults for what ``values`` leaves out) or change
    the given fields of the existing one (pool admins only), audited as
    ``reclamation_policy.saved`` with before and after.

    Raises :class:`PermissionDenied`, or :class:`InvalidInput` with ``errors`` by field (the
    model's validators and check constraints; ``non_field_errors`` for those spanning fields);
    a refused save changes nothing.
    """
    _require_admin(actor, "change a reclamation policy")
    unknown = set(values) - set(POLICY_FIELDS)
    if unknown:
        raise _invalid(sorted(unknown)[0], "Not a reclamation policy setting.")
    with transaction.atomic():
        policy = ReclamationPolicy.objects.select_for_update().filter(pool=pool).first()
        before = _policy_snapshot(policy) if policy else None
        policy = policy or ReclamationPolicy(pool=pool)
        for name, value in values.items():
            setattr(policy, name, value)
        try:
            policy.full_clean()
        except ValidationError as exc:
            errors = {
                ("non_field_errors" if field == "__all__" else field): messages
                for field, messages in exc.message_dict.items()
            }
            raise InvalidInput(
                "The reclamation policy is not valid.", errors=errors, pool=pool.slug
            ) from exc
        policy.save()
        audit_event_record(
            actor=actor,
            action="reclamation_policy.saved",
            obj=policy,
            before=before,
            after=_policy_snapshot(policy),
        )
    return policy
