"""Pools: create, edit and delete, each in one transaction with its audit event.

A pool's binding to its scheduler (``scheduler``, ``slug`` — the Kubernetes namespace/queue names
and URLs — and ``slurm_partition``) cannot change while allocations hold cards in it, since the
Slurm associations and ResourceQuotas already applied name them; a pool with any allocation or
request cannot be deleted (they are the billing and audit history).

What refers to a pool is read through its reverse relations (``allocations``, ``requests``: the
capacity sub-domain's rows point at the pool), so inventory imports nothing of capacity; the
pool's row lock is the one capacity's services take first (:mod:`pools.capacity.locks`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import ProtectedError

from pools.audit.services import audit_event_record
from pools.common.errors import PoolInUse
from pools.inventory.models import Pool

# Fields the scheduler bindings of holding allocations depend on (the quota backend and cohort
# name the objects elastic allocations hold their cards with: pools/elastic/; the cluster is
# where they were applied).
POOL_BINDING_FIELDS = (
    "scheduler",
    "cluster",
    "slug",
    "slurm_partition",
    "quota_backend",
    "quota_cohort",
)


def pool_usage(pool: Pool) -> dict[str, int]:
    """What refers to ``pool``: holding allocations, all allocations, requests (counts)."""
    return {
        "holding_allocations": pool.allocations.holding().count(),
        "allocations": pool.allocations.count(),
        "requests": pool.requests.count(),
    }


def _pool_lock(pool: Pool) -> Pool:
    """``pool``'s row read again under ``SELECT … FOR UPDATE`` (call inside ``atomic()``): the
    lock approvals, extensions and releases in the pool take first
    (:func:`pools.capacity.locks.pool_lock`), so a change waits for them and they for it."""
    return Pool.objects.select_for_update().get(pk=pool.pk)


def pool_create(*, fields: dict[str, Any], actor: Any, render: Any) -> Pool:
    """Create a pool from validated ``fields`` and audit it, in one transaction.

    ``render(pool)`` is the caller's representation of the new pool (the audit event's
    ``after``). A unique-slug clash raises ``IntegrityError`` before anything is written.
    """
    with transaction.atomic():
        pool = Pool.objects.create(**fields)
        audit_event_record(actor=actor, action="pool.created", obj=pool, after=render(pool))
    return pool


def pool_update(
    *, pool: Pool, changes: dict[str, Any], actor: Any, before: dict, render: Any
) -> Pool:
    """Apply validated ``changes`` to ``pool`` with its row locked and audit them.

    Raises :class:`PoolInUse` (409) naming the fields when a binding field would change while
    allocations hold cards. ``before`` is the caller's representation before the change and
    ``render(pool)`` its representation after (the audit event's before/after).
    """
    with transaction.atomic():
        locked = _pool_lock(pool)
        moved = [
            f for f in POOL_BINDING_FIELDS if f in changes and changes[f] != getattr(locked, f)
        ]
        if moved:
            usage = pool_usage(locked)
            if usage["holding_allocations"]:
                raise PoolInUse(
                    f"Pool {locked.slug} holds {usage['holding_allocations']} allocation(s): "
                    f"{', '.join(moved)} cannot change until they end or are released.",
                    fields=moved,
                    **usage,
                )
        for field, value in changes.items():
            setattr(pool, field, value)
        pool.save()
        audit_event_record(
            actor=actor, action="pool.updated", obj=pool, before=before, after=render(pool)
        )
    return pool


def pool_delete(*, pool: Pool, actor: Any, before: dict) -> None:
    """Delete an unused pool and audit it; :class:`PoolInUse` (409) when anything refers to it:
    allocations or requests (counted), or any other row that protects it — a maintenance window,
    a temporary override, usage or statement lines of a burst pool (``referred_by``: their
    names); nothing is written then."""
    with transaction.atomic():
        locked = _pool_lock(pool)
        usage = pool_usage(locked)
        if usage["allocations"] or usage["requests"]:
            raise PoolInUse(
                f"Pool {locked.slug} has {usage['allocations']} allocation(s) and "
                f"{usage['requests']} request(s); it cannot be deleted.",
                **usage,
            )
        audit_event_record(actor=actor, action="pool.deleted", obj=locked, before=before)
        try:
            locked.delete()
        except ProtectedError as exc:  # e.g. a maintenance window, an override, a burst line
            referred_by = sorted(
                {str(obj._meta.verbose_name_plural) for obj in exc.protected_objects}
            )
            raise PoolInUse(
                f"Pool {locked.slug} is still named by {', '.join(referred_by)}; "
                "it cannot be deleted.",
                **usage,
                referred_by=referred_by,
            ) from exc
