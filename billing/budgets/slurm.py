"""Card-hour budgets in Slurm: the team's account gets ``GrpTRESMins=gres/gpu[:<type>]=<m>``
so that slurmctld itself holds new jobs (``AssocGrpGRESMinutes``) once the budget is spent.

``m`` = the budget's remaining card-hours × 60 (its period's limit with rollover, minus what
the statements charge so far: :func:`billing.budgets.selectors.budget_statuses`), floored at
0, **plus** what Slurm already counts against the limit (``sshare``'s decayed usage,
:meth:`get_gpu_minutes_used`): slurmctld compares its own accrued usage with GrpTRESMins, so
without it usage would count twice. Each write therefore lets the account run exactly the
remaining budget from now on; the hourly beat and every budget change recompute it (at a
period start the remaining budget is the new period's whole limit). Where Slurm cannot
report usage (22.05) it counts from 0, and Slurm may stop the team early, never late.

One entry per TRES: a team-wide budget writes ``gres/gpu``, one for a GPU model its GRES
type (``gres/gpu:a100``); several budgets on one TRES (monthly and yearly) write the smallest.
Budgets for one pool are left to the portal (Slurm has no per-partition account limits),
as are money-only budgets. The portal owns the GPU GrpTRESMins of team accounts: an entry no
budget asks for any more is removed.

A Slurm that refuses (unknown TRES, 22.05 without the sacctmgr fallback, down) changes
nothing in the portal: the budget stays enforced at request and approval, and the refusal is
kept in ``Budget.slurm_note`` for the budget page.
"""

from __future__ import annotations

import math
from datetime import datetime

from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import budget_statuses
from pools.adapters import scheduler_adapter
from pools.capacity.models import Allocation
from pools.capacity.services.scheduler_binding import slurm_gres_type
from pools.choices import Scheduler
from pools.tenancy.models import Team
from scheduler_adapters.errors import NotFound, SchedulerError

PORTAL = "The portal enforces it."
NOTE_POOL = "Slurm has no per-partition account limits: the portal enforces this pool's budget."
NOTE_MONEY = "A money-only budget: the portal enforces it (Slurm counts card-minutes)."
NOTE_NO_SLURM = "The team has no allocation in a Slurm pool: the portal enforces it."
NOTE_NO_ACCOUNT = "The team has no Slurm account yet: the portal enforces it until it has one."


def _tres(budget: Budget) -> str:
    if budget.gpu_model_id is None:
        return "gres/gpu"
    return f"gres/gpu:{slurm_gres_type(budget.gpu_model)}"


def _record(budget: Budget, *, tres: str, minutes: int | None, note: str, now: datetime) -> None:
    Budget.objects.filter(pk=budget.pk).update(
        slurm_tres=tres, slurm_minutes=minutes, slurm_note=note[:500], slurm_synced_at=now
    )


def budget_minutes_sync(*, team, now: datetime | None = None, adapter=None) -> dict[str, int]:
    """Write the team's GrpTRESMins from its card-hour budgets; returns ``{TRES: card-minutes}``
    written (empty when Slurm enforces none). Scheduler errors are not raised: they are kept in
    each budget's ``slurm_note`` and the portal goes on enforcing."""
    now = now or timezone.now()
    budgets = list(
        Budget.objects.filter(team=team).select_related("team", "pool", "gpu_model").order_by("pk")
    )
    in_slurm = Allocation.objects.filter(team=team, pool__scheduler=Scheduler.SLURM).exists()
    adapter = adapter if adapter is not None else scheduler_adapter(Scheduler.SLURM)
    if adapter is None or not in_slurm:
        for budget in budgets:
            _record(budget, tres="", minutes=None, note=NOTE_NO_SLURM, now=now)
        return {}
    statuses = budget_statuses(budgets, now=now) if budgets else {}
    wanted: dict[str, tuple[int, list[Budget]]] = {}
    for budget in budgets:
        dimension = statuses[budget.pk].card_hours
        if budget.pool_id is not None or dimension is None or dimension.used is None:
            note = NOTE_POOL if budget.pool_id is not None else NOTE_MONEY
            _record(budget, tres="", minutes=None, note=note, now=now)
            continue
        remaining = max(0, math.floor(dimension.remaining * 60))
        tres = _tres(budget)
        least, group = wanted.get(tres, (remaining, []))
        wanted[tres] = (min(least, remaining), [*group, budget])
    account = team.slug
    try:
        current = adapter.get_gpu_minutes(account)
        used = adapter.get_gpu_minutes_used(account) or {}
        for tres in sorted(set(current) - set(wanted)):
            adapter.set_gpu_minutes(account, _gres_type(tres), None)
    except NotFound:
        _record_all(wanted, note=NOTE_NO_ACCOUNT, now=now)
        return {}
    except SchedulerError as error:
        _record_all(wanted, note=f"Slurm could not be asked: {error}. {PORTAL}", now=now)
        return {}
    written: dict[str, int] = {}
    for tres, (remaining, group) in sorted(wanted.items()):
        minutes, note = remaining + math.floor(used.get(tres, 0.0)), ""
        try:  # each TRES on its own: one refused leaves the others written
            adapter.set_gpu_minutes(account, _gres_type(tres), minutes)
            written[tres] = minutes
        except SchedulerError as error:
            minutes, note = None, f"Slurm refused GrpTRESMins {tres}: {error}. {PORTAL}"
        for budget in group:
            _record(budget, tres=tres, minutes=minutes, note=note, now=now)
    return written


def _record_all(wanted: dict[str, tuple[int, list[Budget]]], *, note: str, now) -> None:
    for tres, (_, group) in wanted.items():
        for budget in group:
            _record(budget, tres=tres, minutes=None, note=note, now=now)


def _gres_type(tres: str) -> str | None:
    return None if tres == "gres/gpu" else tres.removeprefix("gres/gpu:")


def budget_minutes_sync_all(*, now: datetime | None = None, adapter=None) -> dict[int, dict]:
    """:func:`budget_minutes_sync` for every team with a budget (the hourly beat); returns
    ``{team id: {TRES: card-minutes}}``."""
    teams = Team.objects.filter(budgets__isnull=False).distinct().order_by("pk")
    return {t.pk: budget_minutes_sync(team=t, now=now, adapter=adapter) for t in teams}
