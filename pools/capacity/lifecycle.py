"""The allocation lifecycle in one table: which statuses hold cards, which are applied in the
scheduler, which are running, which have run, which are charged, and the allowed transitions.

Every module reads these names; none restates a status set. ``approved → provisioning →
active → expiring → ended`` is the happy path; ``failed`` (the scheduler refused),
``cancelled`` (released before the window opened) and ``reclaimed`` (idle cards taken back,
undone back to where it was) are the others.
"""

from __future__ import annotations

from pools.common.choices import AllocationStatus as S

# Hold cards against the pool's capacity (the approval invariant counts these).
HOLDING_STATUSES = (S.APPROVED, S.PROVISIONING, S.ACTIVE, S.EXPIRING)
# Held cards over their window ``[starts_at, ends_at)``, once or now: the holding ones, and an
# ended or reclaimed one, whose ends_at its end wrote (expiry at the window's end, a release or a
# reclamation's end at that moment: min(ends_at, now)). What a past hour counts
# (Allocation.objects.held_during): an allocation ended at 06:00 held its cards until 06:00.
HELD_STATUSES = (*HOLDING_STATUSES, S.ENDED, S.RECLAIMED)
# Applied in the scheduler: the team's GrpTRES / ResourceQuota includes these cards.
APPLIED_STATUSES = (S.PROVISIONING, S.ACTIVE, S.EXPIRING)
# Running now: what the idle scan looks at.
RUNNING_STATUSES = (S.ACTIVE, S.EXPIRING)
# Ran at some point: what a reclamation what-if replays over history.
RAN_STATUSES = (S.ACTIVE, S.EXPIRING, S.ENDED, S.RECLAIMED)
# Held cards over their (possibly shortened) window, so charged when priced "reserved". A
# released allocation has its ends_at moved to the release time.
CHARGED_STATUSES = (S.APPROVED, S.PROVISIONING, S.ACTIVE, S.EXPIRING, S.ENDED, S.RECLAIMED)
# What a budget counts as committed (billing.budgets.enforcement): the holding ones' hours not
# yet accrued by the reservation import, and an ended or reclaimed one's last hours before the
# import reaches its end (so the figure does not drop when the lifecycle or the idle scan ends
# it between imports): every status the import charges.
COMMITTED_STATUSES = (*HOLDING_STATUSES, S.ENDED, S.RECLAIMED)

TRANSITIONS: dict[str, frozenset[str]] = {
    S.APPROVED: frozenset({S.PROVISIONING, S.CANCELLED, S.ENDED}),
    S.PROVISIONING: frozenset({S.ACTIVE, S.FAILED, S.CANCELLED, S.ENDED}),
    S.ACTIVE: frozenset({S.EXPIRING, S.ENDED, S.RECLAIMED, S.CANCELLED}),
    S.EXPIRING: frozenset({S.ACTIVE, S.ENDED, S.RECLAIMED, S.CANCELLED}),
    S.RECLAIMED: frozenset({S.ACTIVE, S.EXPIRING}),  # undo puts it back where it was
    S.ENDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


def transition_allowed(current: str, to: str) -> bool:
    """Whether an allocation in status ``current`` may move to ``to`` (see :data:`TRANSITIONS`)."""
    return to in TRANSITIONS.get(current, frozenset())
