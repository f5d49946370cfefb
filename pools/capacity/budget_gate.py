"""The budget check step of submission and approval (and so of extensions, which are requests).

Budgets are money and card-hours priced by the rate card, so they live in billing, a floor above
this one; pools asks through the one function ``settings.BUDGET_CHECK`` names (a dotted path,
``billing.budgets.enforcement.budget_check``; empty: no budgets, every request passes). It
answers ``None`` (within every budget) or the :class:`BudgetVerdict` of the most severe budget
the request would pass: *warn* (go on, the reason is shown), *needs_admin* (no auto-approval;
a pool admin may still approve) or *refuse* (:class:`~pools.common.errors.BudgetExceeded`, 409).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from pools.capacity.slices import card_share
from pools.common.choices import RequestKind
from pools.common.errors import BudgetExceeded

WARN, NEEDS_ADMIN, REFUSE = "warn", "needs_admin", "refuse"
SEVERITY = {WARN: 1, NEEDS_ADMIN: 2, REFUSE: 3}


@dataclass(frozen=True)
class BudgetVerdict:
    """What a budget says of a request: ``enforcement`` (warn / needs_admin / refuse), a
    ``reason`` for people and ``data`` for machines (see :class:`BudgetExceeded`)."""

    enforcement: str
    reason: str
    data: dict[str, Any] = field(default_factory=dict)


def budget_verdict(
    *, team, pool, gpu_model, cards: int, starts_at: datetime, ends_at: datetime
) -> BudgetVerdict | None:
    """The configured check's verdict on ``cards`` over ``[starts_at, ends_at)``."""
    path = getattr(settings, "BUDGET_CHECK", "")
    if not path:
        return None
    check = import_string(path)
    return check(team=team, pool=pool, gpu_model=gpu_model, cards=cards,
                 starts_at=starts_at, ends_at=ends_at)  # fmt: skip


def budget_verdicts(*, requests, now: datetime | None = None) -> dict[int, BudgetVerdict | None]:
    """Request id -> the verdict of the budgets in force ``now`` on each saved request of cards
    as asked (what submitting it would be told now; capacity to add grants no cards and is not
    asked). The check named by ``settings.BUDGET_CHECK_MANY`` judges them all at once, in a
    fixed number of queries (the approval queue's page, the API's list); without it each is
    asked of ``BUDGET_CHECK`` in turn."""
    cards = [r for r in requests if r.kind == RequestKind.CARDS]
    if not getattr(settings, "BUDGET_CHECK", "") or not cards:
        return {}
    asks = [
        dict(team=r.team, pool=r.pool, gpu_model=r.gpu_model, starts_at=r.starts_at,
             ends_at=r.ends_at, cards=card_equivalents(r.card_count, r.mig_profile, r.gpu_model))
        for r in cards
    ]  # fmt: skip
    many = getattr(settings, "BUDGET_CHECK_MANY", "")
    if many:
        found = import_string(many)(asks, now=now)
    else:
        found = [budget_verdict(**ask) for ask in asks]
    return {r.pk: verdict for r, verdict in zip(cards, found, strict=True)}


def card_equivalents(units: int, profile: str, model) -> int | Decimal:
    """``units`` as cards: ``units`` whole cards, or ``units`` slices × their share of a card
    (:func:`pools.capacity.slices.card_share`, 3 × ``1g.10gb`` = 3/7 of a card) as a Decimal
    (what a budget prices)."""
    if not profile:
        return units
    share = card_share(profile, model_key=model.slug)
    return Decimal(units * share.numerator) / share.denominator


def budget_check_step(
    *, request, cards: int, ends_at: datetime, pool, gpu_model, system: bool
) -> BudgetVerdict | None:
    """Check a request (as granted: ``cards`` until ``ends_at`` in ``pool`` × ``gpu_model``)
    against the team's budgets. Raises :class:`BudgetExceeded` on *refuse*, and on
    *needs_admin* when ``system`` (a rule, not a person, would approve); returns the verdict
    otherwise, for the caller to show."""
    verdict = budget_verdict(
        team=request.team, pool=pool, gpu_model=gpu_model, cards=cards,
        starts_at=request.starts_at, ends_at=ends_at,
    )  # fmt: skip
    if verdict is None:
        return None
    if verdict.enforcement == REFUSE or (system and verdict.enforcement == NEEDS_ADMIN):
        raise BudgetExceeded(verdict.reason, **verdict.data, errors={"card_count": verdict.reason})
    return verdict
