"""Card-hour budgets in Slurm: the team's account gets ``GrpTRESMins=gres/gpu[:<type>]=<m>``
in each Slurm cluster it works in, so that slurmctld itself holds new jobs
(``AssocGrpGRESMinutes``) once the budget is spent.

``m`` = the cluster's share of the budget's remaining card-hours × 60 (its period's limit with
rollover, minus what the statements charge so far, in every cluster:
:func:`billing.budgets.selectors.budget_statuses`), floored at 0, **plus** what that cluster's
Slurm already counts against the limit (``sshare``'s decayed usage,
:meth:`get_gpu_minutes_used`): slurmctld compares its own accrued usage with GrpTRESMins, so
without it usage would count twice. Each write therefore lets the account run exactly its share
of the remaining budget from now on; the hourly beat and every budget change recompute it (at a
period start the remaining budget is the new period's whole limit). Where Slurm cannot report
usage (22.05) it counts from 0, and Slurm may stop the team early, never late.

**Several clusters** (issue 35). Each Slurm cluster keeps its own GrpTRESMins and knows nothing
of the others', so writing the whole remainder into each would let the team spend it once per
cluster. The remainder of a team-wide budget is therefore split across the team's Slurm
clusters (those of the Slurm pools it has allocations in) in proportion to the team's card cap
there — its ``GrpTRES`` read back from each cluster (:func:`split_minutes`): for ``gres/gpu``
the untyped cap, else the sum of the typed ones; for ``gres/gpu:<type>`` that type's cap, else
the untyped one. Shares are whole minutes rounded down, the remainder going to the largest cap
(1,000 min with caps 3 and 1: 750 and 250). A cluster where the team has no account gets
nothing (it cannot run there); when a cap is not set in some cluster (no limit) or all are 0,
the shares are equal. The split is made again at each sync, from the caps as they stand. When a
cluster of the team cannot be asked (down, refused), nothing is re-split for that team: every
cluster keeps what it holds — each limit was one share of an earlier remainder and Slurm counts
usage against it since, so together they still never exceed the budget.

A budget for one pool goes to that pool's cluster only, whole, when that pool is the team's
only Slurm pool there (the account limit is then the pool's); if the team has other pools in
that cluster, the portal enforces it (Slurm has no per-partition account limits). One entry per
TRES per cluster: a team-wide budget writes ``gres/gpu``, one for a GPU model its GRES type
(``gres/gpu:a100``); several budgets on one TRES (monthly and yearly, team-wide and pool) write
the smallest. Money-only budgets are left to the portal. The portal owns the GPU GrpTRESMins of
team accounts: an entry no budget asks for any more is removed.

A Slurm that refuses (unknown TRES, 22.05 without the sacctmgr fallback, down) changes
nothing in the portal: the budget stays enforced at request and approval, and the refusal is
kept in ``Budget.slurm_note`` for the budget page. ``Budget.slurm_clusters`` keeps what each
cluster holds (``{cluster slug: card-minutes}``), ``slurm_minutes`` their sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from billing.budgets.models import Budget
from billing.budgets.selectors import budget_statuses
from pools.capacity.models import Allocation
from pools.capacity.services.scheduler_binding import slurm_gres_type
from pools.clusters.adapters import cluster_adapter, scheduler_adapter
from pools.clusters.models import Cluster
from pools.clusters.services import cluster_of
from pools.common.choices import Scheduler
from pools.tenancy.models import Team
from scheduler_adapters.errors import NotFound, SchedulerError

PORTAL = "The portal enforces it."
NOTE_POOL = (
    "The team has other Slurm pools in this pool's cluster and Slurm has no per-partition "
    "account limits: the portal enforces this pool's budget."
)
NOTE_POOL_OTHER = "The team has no allocation in this pool: the portal enforces it."
NOTE_MONEY = "A money-only budget: the portal enforces it (Slurm counts card-minutes)."
NOTE_NO_SLURM = "The team has no allocation in a Slurm pool: the portal enforces it."
NOTE_NO_CONNECTION = (
    "No connection to the team's Slurm cluster ({clusters}) is configured here: the portal "
    "enforces it."
)
NOTE_NO_ACCOUNT = "The team has no Slurm account yet: the portal enforces it until it has one."

ENVIRONMENT = "environment"
"""The key of the cluster the environment variables define when it has no row (tests, a
deployment migrated before clusters were data)."""


def split_minutes(total: int, caps: Mapping[Any, int | None]) -> dict[Any, int]:
    """``total`` card-minutes (an integer ≥ 0) shared across the keys of ``caps`` (in their
    order) in proportion to each cap (cards, ``None``: no cap set): each share rounded down,
    the remainder to the largest cap (the first of equal ones). Equal shares when any cap is
    ``None`` or all are 0. ``{}`` for no keys.

    >>> split_minutes(1000, {"a": 3, "b": 1})
    {'a': 750, 'b': 250}
    >>> split_minutes(1000, {"a": 1, "b": 2})
    {'a': 333, 'b': 667}
    """
    if not caps:
        return {}
    weights = dict(caps)
    if any(w is None for w in weights.values()) or sum(weights.values()) == 0:
        weights = dict.fromkeys(caps, 1)
    whole = sum(weights.values())
    shares = {key: total * w // whole for key, w in weights.items()}
    largest = max(weights, key=lambda key: weights[key])  # max keeps the first of equals
    shares[largest] += total - sum(shares.values())
    return shares


def _cap(limits: dict[str | None, int], tres: str) -> int | None:
    """The team's card cap for ``tres`` from its caps by GRES type (``None`` key: untyped)."""
    gres_type = _gres_type(tres)
    if gres_type is None:
        if None in limits:
            return limits[None]
        return sum(limits.values()) if limits else None
    return limits.get(gres_type, limits.get(None))


def _tres(budget: Budget) -> str:
    if budget.gpu_model_id is None:
        return "gres/gpu"
    return f"gres/gpu:{slurm_gres_type(budget.gpu_model)}"


def _gres_type(tres: str) -> str | None:
    return None if tres == "gres/gpu" else tres.removeprefix("gres/gpu:")


@dataclass
class _Cluster:
    """What one Slurm cluster of the team holds: ``current`` GrpTRESMins, ``used`` minutes
    counted against them, ``caps`` by GRES type; ``account`` False when the team has none."""

    label: str
    adapter: Any
    pools: set[int] = field(default_factory=set)
    account: bool = True
    current: dict[str, int] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    caps: dict[str | None, int] = field(default_factory=dict)


def _record(
    budget: Budget,
    *,
    tres: str,
    minutes: dict[str, int] | None,
    note: str,
    now: datetime,
) -> None:
    Budget.objects.filter(pk=budget.pk).update(
        slurm_tres=tres,
        slurm_minutes=None if minutes is None else sum(minutes.values()),
        slurm_clusters=minutes or {},
        slurm_note=note[:500],
        slurm_synced_at=now,
    )


def _team_clusters(team, adapters: Mapping[Any, Any] | None) -> dict[Any, _Cluster]:
    """The team's Slurm clusters, keyed by cluster id (``None``: the environment's without a
    row), each with the team's pools there and its adapter (``None``: not configured)."""
    pools = (
        Allocation.objects.filter(team=team, pool__scheduler=Scheduler.SLURM)
        .values_list("pool_id", "pool__cluster_id")
        .distinct()
    )
    environment = cluster_of(kind=Scheduler.SLURM, cluster=None)
    clusters: dict[Any, _Cluster] = {}
    for pool_id, cluster_id in pools:
        key = cluster_id if cluster_id is not None else getattr(environment, "pk", None)
        if key not in clusters:
            clusters[key] = _Cluster(label="", adapter=None)
        clusters[key].pools.add(pool_id)
    rows = Cluster.objects.in_bulk([k for k in clusters if k is not None])
    for key, found in sorted(clusters.items(), key=lambda item: (item[0] is not None, item[0])):
        found.label = rows[key].slug if key is not None else ENVIRONMENT
        from_environment = key is None or rows[key].from_environment
        if adapters is not None:
            found.adapter = adapters.get(None if from_environment else key)
        elif from_environment:
            found.adapter = scheduler_adapter(Scheduler.SLURM)
        else:
            try:
                found.adapter = cluster_adapter(rows[key])
            except (OSError, ValueError):  # credentials unreadable: its health says so
                found.adapter = None
    return dict(sorted(clusters.items(), key=lambda item: (item[0] is not None, item[0])))


def budget_minutes_sync(
    *, team, now: datetime | None = None, adapters: Mapping[Any, Any] | None = None
) -> dict[str, dict[str, int]]:
    """Write the team's GrpTRESMins in each of its Slurm clusters from its card-hour budgets
    (the module docstring's rules); returns ``{cluster slug: {TRES: card-minutes}}`` written
    (``"environment"`` for the environment's cluster without a row; empty when Slurm enforces
    none). ``adapters`` (tests) replaces the adapters by cluster id (``None``: the
    environment's cluster, with or without a row). Scheduler errors are not raised: they are
    kept in each budget's ``slurm_note`` and the portal goes on enforcing."""
    now = now or timezone.now()
    budgets = list(
        Budget.objects.filter(team=team).select_related("team", "pool", "gpu_model").order_by("pk")
    )
    team_clusters = _team_clusters(team, adapters)
    clusters = {k: c for k, c in team_clusters.items() if c.adapter is not None}
    if not clusters:
        # Slurm pools but no adapter (no SLURM_REST_URL, unreadable credentials) is not "no
        # Slurm pool": the note names the clusters that could not be asked
        labels = ", ".join(c.label for c in team_clusters.values())
        note = NOTE_NO_CONNECTION.format(clusters=labels) if labels else NOTE_NO_SLURM
        for budget in budgets:
            _record(budget, tres="", minutes=None, note=note, now=now)
        return {}
    unasked = _read(clusters, team.slug)
    if unasked:
        for budget in budgets:
            _record(budget, tres="", minutes=None, note=f"{unasked} {PORTAL}", now=now)
        return {}
    wanted, kept = _wanted(budgets, clusters, now=now)
    written, outcomes = _write(clusters, wanted, team.slug)
    for budget in budgets:
        if budget.pk in kept:
            _record(budget, tres="", minutes=None, note=kept[budget.pk], now=now)
        elif budget.pk in outcomes:
            tres, done, problems = outcomes[budget.pk]
            note = " ".join([*problems, PORTAL]) if problems else ""
            _record(budget, tres=tres, minutes=done or None, note=note, now=now)
        else:  # the team has no account in any of its clusters yet
            _record(budget, tres=_tres(budget), minutes=None, note=NOTE_NO_ACCOUNT, now=now)
    return written


def _wanted(
    budgets: list[Budget], clusters: Mapping[Any, _Cluster], *, now: datetime
) -> tuple[dict[Any, dict[str, tuple[int, list[Budget]]]], dict[int, str]]:
    """Each cluster's card-minutes per TRES — the smallest share any budget gives it, with the
    budgets giving it — and the budgets the portal alone enforces, with why."""
    statuses = budget_statuses(budgets, now=now) if budgets else {}
    wanted: dict[Any, dict[str, tuple[int, list[Budget]]]] = {key: {} for key in clusters}
    kept: dict[int, str] = {}
    for budget in budgets:
        dimension = statuses[budget.pk].card_hours
        if dimension is None or dimension.used is None:
            kept[budget.pk] = NOTE_MONEY
            continue
        remaining = max(0, math.floor(dimension.remaining * 60))
        tres = _tres(budget)
        if budget.pool_id is None:
            caps = {k: _cap(c.caps, tres) for k, c in clusters.items() if c.account}
            shares = split_minutes(remaining, caps)
        else:
            home = [k for k, c in clusters.items() if budget.pool_id in c.pools]
            if not home:
                kept[budget.pk] = NOTE_POOL_OTHER
                continue
            if clusters[home[0]].pools != {budget.pool_id}:
                kept[budget.pk] = NOTE_POOL
                continue
            shares = {home[0]: remaining}
        for key, share in shares.items():
            least, group = wanted[key].get(tres, (share, []))
            wanted[key][tres] = (min(least, share), [*group, budget])
    return wanted, kept


def _write(
    clusters: Mapping[Any, _Cluster],
    wanted: Mapping[Any, dict[str, tuple[int, list[Budget]]]],
    account: str,
) -> tuple[dict[str, dict[str, int]], dict[int, tuple[str, dict[str, int], list[str]]]]:
    """Write ``wanted`` plus each cluster's counted usage, and remove the GPU GrpTRESMins no
    budget asks for; returns what was written by cluster and, per budget, its TRES, the
    minutes written by cluster and the refusals."""
    written: dict[str, dict[str, int]] = {}
    outcomes: dict[int, tuple[str, dict[str, int], list[str]]] = {}
    for key, cluster in clusters.items():
        if not cluster.account:
            continue
        for tres, (share, group) in sorted(wanted[key].items()):
            minutes, problem = share + math.floor(cluster.used.get(tres, 0.0)), ""
            try:  # each TRES on its own: one refused leaves the others written
                cluster.adapter.set_gpu_minutes(account, _gres_type(tres), minutes)
                written.setdefault(cluster.label, {})[tres] = minutes
            except SchedulerError as error:
                problem = f"Slurm refused GrpTRESMins {tres}{_in(cluster, clusters)}: {error}."
            for budget in group:
                _, done, problems = outcomes.setdefault(budget.pk, (tres, {}, []))
                if problem:
                    problems.append(problem)
                else:
                    done[cluster.label] = minutes
        for tres in sorted(set(cluster.current) - set(wanted[key])):
            try:
                cluster.adapter.set_gpu_minutes(account, _gres_type(tres), None)
            except SchedulerError:
                pass  # asked again at the next sync; nothing of a budget depends on it
    return written, outcomes


def _in(cluster: _Cluster, clusters: Mapping[Any, _Cluster]) -> str:
    return f" in {cluster.label}" if len(clusters) > 1 else ""


def _read(clusters: Mapping[Any, _Cluster], account: str) -> str:
    """Read each cluster's GrpTRESMins, usage and caps of ``account`` into ``clusters``;
    returns why a cluster could not be asked ("" when all answered; a cluster without the
    account is not a failure)."""
    for cluster in clusters.values():
        try:
            cluster.current = cluster.adapter.get_gpu_minutes(account)
            cluster.used = cluster.adapter.get_gpu_minutes_used(account) or {}
            if len(clusters) > 1:
                limits = cluster.adapter.get_gpu_limits(account)
                cluster.caps = {lim.gres_type: lim.cards for lim in limits}
        except NotFound:
            cluster.account = False
        except SchedulerError as error:
            return f"Slurm{_in(cluster, clusters)} could not be asked: {error}."
    return ""


def budget_minutes_sync_all(
    *, now: datetime | None = None, adapters: Mapping[Any, Any] | None = None
) -> dict[int, dict]:
    """:func:`budget_minutes_sync` for every team with a budget (the hourly beat); returns
    ``{team id: {cluster slug: {TRES: card-minutes}}}``."""
    teams = Team.objects.filter(budgets__isnull=False).distinct().order_by("pk")
    return {t.pk: budget_minutes_sync(team=t, now=now, adapters=adapters) for t in teams}
