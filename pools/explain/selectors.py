"""Read side of the explainer: the facts :func:`pools.explain.core.explain` works on, read in a
fixed number of statements whatever the fleet's size, and the explanation of a request or of a
draft's fields for one user.

Statements: pools, GPU models, cards by pool × model × node state × driver (one grouped read
of the inventory), the holding allocations of the workload's scheduler that overlap the
horizon (one read, team slug and name joined), the team's budget verdict (the budget gate's
hook, :mod:`pools.capacity.budget_gate`; billing's budgets are read there) and the rate card's
reserved prices (the hook ``settings.SIZING_CARD_HOUR_PRICES`` names, the sizing page's). With
a shape: the placed cards of those allocations and each eligible pool × model's nodes
(:func:`pools.capacity.node_kinds.pool_nodes`, cached per inventory generation).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.module_loading import import_string

from pools.capacity.availability import SCHEDULER_OF_KIND
from pools.capacity.budget_gate import budget_verdict, budget_verdicts
from pools.capacity.lifecycle import HOLDING_STATUSES
from pools.capacity.models import Allocation, CapacityRequest, PlacedCards
from pools.capacity.node_kinds import pool_nodes
from pools.capacity.placement import NodeGroup, Shape
from pools.capacity.window import ALL_CARDS, maintenance_windows_by_pool_model
from pools.classes.models import WorkloadClass
from pools.classes.selectors import class_permitted_models
from pools.common.choices import NodeState
from pools.explain.core import (
    HORIZON,
    MAINTENANCE_HOLD,
    Ask,
    BudgetFacts,
    CardCounts,
    Explanation,
    HoldFacts,
    ModelFacts,
    OptionFacts,
    Viewer,
    explain,
    relevant_model,
)
from pools.inventory.driver_versions import driver_supports, parse_cuda_version
from pools.inventory.models import Gpu, GpuModel, Pool
from pools.inventory.selectors import inventory_census, inventory_generation
from pools.overrides.models import TemporaryOverride
from pools.overrides.selectors import override_summary
from pools.recurring.models import RecurringReservation
from pools.recurring.recurrence import occurrences
from pools.sizing.selectors import sizing_estimate_list
from pools.tenancy import permissions
from pools.tenancy.models import Team

_STATE_FIELD = {
    NodeState.DOWN: "down",
    NodeState.UNKNOWN: "down",  # a node no source has seen up is not counted either
    NodeState.DRAIN: "drained",
    NodeState.MAINTENANCE: "maintenance",
}


def explanation_for_request(*, user: Any, request: CapacityRequest) -> Explanation:
    """The explanation of a saved request (the caller found it with
    :func:`pools.capacity.selectors.capacity_request_list`, so the user may see it)."""
    return explanation_for_fields(user=user, exclude_request=request, **_request_fields(request))


def explanations_for_requests(
    *, user: Any, requests: list[CapacityRequest], budgets: dict | None = None
) -> dict[int, Explanation]:
    """The explanations of many saved requests (the approval queue's page) by request id, from
    one read of the facts for all of them (:class:`Facts`): a fixed number of statements
    whatever their number. The budget is what the budgets in force now say of each
    (:func:`pools.capacity.budget_gate.budget_verdicts`, all at once; ``budgets``: the
    caller's, read already), as the approval would find."""
    may_use: dict[int, tuple[str, ...]] = {}  # one read per class, not per request
    for r in requests:
        if r.workload_class_id is not None and r.workload_class_id not in may_use:
            may_use[r.workload_class_id] = _may_use(r.workload_class)
    asks = {
        r.pk: ask_of(**_request_fields(r), class_may_use=may_use.get(r.workload_class_id))
        for r in requests
    }
    if not asks:
        return {}
    facts = Facts.load(list(asks.values()))
    in_force = _overrides_in_force({r.team_id for r in requests})
    if budgets is None:
        budgets = budget_verdicts(requests=requests)
    answers = {}
    for req in requests:
        now = budgets.get(req.pk)
        answers[req.pk] = explain(
            asks[req.pk], facts.options(asks[req.pk]), viewer=_viewer(user, req.team),
            budget=BudgetFacts(now.enforcement, now.reason) if now else None,
        )  # fmt: skip
        answers[req.pk].overrides = _overrides_text(in_force, req.team, req.pool, req.gpu_model)
    return answers


def _overrides_in_force(team_ids: set[int]) -> list[TemporaryOverride]:
    """The teams' temporary overrides in force now, soonest to end first (one query)."""
    return list(
        TemporaryOverride.objects.in_force(timezone.now())
        .filter(team_id__in=team_ids)
        .select_related("gpu_model", "workload_class", "class_before", "created_by")
        .order_by("until", "pk")
    )


def _overrides_text(in_force, team: Team, pool: Pool | None, gpu_model: GpuModel | None):
    """Those of ``in_force`` that concern the ask — the team's, in its pool (any, when open),
    of its GPU model (any, when open) or a priority — in words."""
    return [
        override_summary(o, team_name=team.name)
        for o in in_force
        if o.team_id == team.pk
        and (pool is None or o.pool_id == pool.pk)
        and (gpu_model is None or o.gpu_model_id in (None, gpu_model.pk))
    ]


def _request_fields(request: CapacityRequest) -> dict[str, Any]:
    return dict(
        team=request.team,
        workload_kind=request.workload_kind,
        card_count=request.card_count,
        starts_at=request.starts_at,
        ends_at=request.ends_at,
        pool=request.pool,
        gpu_model=request.gpu_model,
        min_memory_gib=request.min_memory_gib,
        cuda_version=request.cuda_version,
        cards_per_node=request.cards_per_node,
        node_count=request.node_count,
        one_nvlink_domain=request.one_nvlink_domain,
        shared_nodes=request.shared_nodes,
        workload_class=request.workload_class,
    )


def explanation_for_fields(
    *,
    user: Any,
    team: Team,
    workload_kind: str,
    card_count: int,
    starts_at: datetime,
    ends_at: datetime,
    pool: Pool | None = None,
    gpu_model: GpuModel | None = None,
    min_memory_gib: Decimal | None = None,
    cuda_version: str = "",
    cards_per_node: int | None = None,
    node_count: int | None = None,
    one_nvlink_domain: bool = False,
    shared_nodes: bool = False,
    sizing_cards: dict[str, int] | None = None,
    exclude_request: CapacityRequest | None = None,
    workload_class: WorkloadClass | None = None,
) -> Explanation:
    """The explanation of a request's fields (validated by the caller, as for a create) for
    ``user``, who may see ``team``. An approved ``exclude_request`` does not compete with
    itself: its own allocation is left out."""
    ask = ask_of(
        team=team, workload_kind=workload_kind, card_count=card_count, starts_at=starts_at,
        ends_at=ends_at, pool=pool, gpu_model=gpu_model, min_memory_gib=min_memory_gib,
        cuda_version=cuda_version, cards_per_node=cards_per_node, node_count=node_count,
        one_nvlink_domain=one_nvlink_domain, shared_nodes=shared_nodes, sizing_cards=sizing_cards,
        workload_class=workload_class,
    )  # fmt: skip
    exclude = getattr(getattr(exclude_request, "allocation", None), "pk", None)
    options = Facts.load([ask], exclude_allocation=exclude).options(ask)
    verdict = budget_verdict(
        team=team, pool=pool, gpu_model=gpu_model, cards=card_count,
        starts_at=starts_at, ends_at=ends_at,
    )  # fmt: skip
    answer = explain(
        ask,
        options,
        viewer=_viewer(user, team),
        budget=BudgetFacts(verdict.enforcement, verdict.reason) if verdict else None,
    )
    answer.overrides = _overrides_text(_overrides_in_force({team.pk}), team, pool, gpu_model)
    return answer


def _viewer(user: Any, team: Team) -> Viewer:
    return Viewer(
        pool_admin=permissions.may_see_all_holders(user),
        member_of_team=permissions.may_see_team(user, team),
    )


def ask_of(
    *,
    team: Team,
    workload_kind: str,
    card_count: int,
    starts_at: datetime,
    ends_at: datetime,
    pool: Pool | None = None,
    gpu_model: GpuModel | None = None,
    min_memory_gib: Decimal | None = None,
    cuda_version: str = "",
    cards_per_node: int | None = None,
    node_count: int | None = None,
    one_nvlink_domain: bool = False,
    shared_nodes: bool = False,
    sizing_cards: dict[str, int] | None = None,
    workload_class: WorkloadClass | None = None,
    class_may_use: tuple[str, ...] | None = None,
) -> Ask:
    """A request's fields as the core's :class:`pools.explain.core.Ask` (``workload_class``:
    the class the request states, already resolved from the team's default;
    ``class_may_use``: the fleet's models it permits, read here when not given)."""
    if workload_class is not None and class_may_use is None:
        class_may_use = _may_use(workload_class)
    shape = (
        Shape(
            cards_per_node=cards_per_node,
            nodes=node_count,
            one_nvlink_domain=one_nvlink_domain,
            shared_nodes=shared_nodes,
        )
        if cards_per_node is not None and node_count is not None
        else None
    )
    return Ask(
        team_slug=team.slug,
        workload_kind=workload_kind,
        scheduler=SCHEDULER_OF_KIND[workload_kind],
        cards=card_count,
        start=starts_at,
        end=ends_at,
        pool_slug=pool.slug if pool else None,
        pool_name=pool.name if pool else None,
        pool_scheduler=pool.scheduler if pool else None,
        model_slug=gpu_model.slug if gpu_model else None,
        model_name=gpu_model.name if gpu_model else None,
        model_memory_gib=gpu_model.memory_gib if gpu_model else None,
        model_card_class=gpu_model.card_class if gpu_model else None,
        min_memory_gib=None if gpu_model else min_memory_gib,
        cuda=cuda_version or None,
        shape=shape,
        sizing_cards=sizing_cards,
        workload_class=workload_class.rule() if workload_class is not None else None,
        class_may_use=class_may_use or (),
    )


def _may_use(workload_class: WorkloadClass) -> tuple[str, ...]:
    return tuple(m.name for m in class_permitted_models(workload_class.rule()))


def sizing_cards_of(*, user: Any, estimate_id: int) -> dict[str, int] | None:
    """An inference sizing estimate's card count per GPU model slug (rows that meet the
    targets), when ``user`` may see the estimate and it is done; ``None`` otherwise."""
    estimate = sizing_estimate_list(user=user).filter(pk=estimate_id).first()
    if estimate is None or not estimate.results:
        return None
    return {
        row["gpu_model"]: int(row["cards"])
        for row in estimate.results.get("rows", [])
        if row.get("meets_targets") and row.get("cards")
    }


@dataclass
class Facts:
    """What :func:`pools.explain.core.explain` reads, loaded once for one or many asks: pools,
    models, card counts, the holding allocations of every pool × model relevant to any of them
    over all their horizons, prices, and (for shapes) nodes. :meth:`options` gives one ask's
    options; an option is built once per (pool, model, CUDA, shape or not) and shared, so its
    step function of held cards is too."""

    pools: dict[int, Pool]
    models: dict[int, GpuModel]
    facts: dict[int, ModelFacts]
    holds: dict[tuple[int, int], list[HoldFacts]]
    currency: str | None
    prices: dict[str, Decimal]
    generation: int | None
    card_rows: dict[tuple[int, int], list[tuple]]
    built: dict[tuple, OptionFacts] = field(default_factory=dict)
    counts: dict[str | None, dict[tuple[int, int], CardCounts]] = field(default_factory=dict)

    @classmethod
    def load(cls, asks: list[Ask], *, exclude_allocation: int | None = None) -> Facts:
        pools = {p.pk: p for p in Pool.objects.all()}
        models = {m.pk: m for m in GpuModel.objects.all()}
        facts = {pk: ModelFacts(m.slug, m.name, m.memory_gib, m.card_class)
                 for pk, m in models.items()}  # fmt: skip
        card_rows = _card_rows()
        pairs = {
            key for key in card_rows if any(relevant_model(ask, facts[key[1]]) for ask in asks)
        }
        start = min(ask.start for ask in asks)
        end = max(ask.start + HORIZON + ask.length for ask in asks)
        placed = any(ask.shape is not None for ask in asks)
        holds = _holds(pairs, start, end, exclude_allocation, placed=placed)
        currency, prices = _prices(sorted({models[m].slug for _, m in pairs}))
        generation = inventory_generation() if placed else None
        return cls(pools, models, facts, holds, currency, prices, generation, card_rows)

    def options(self, ask: Ask) -> list[OptionFacts]:
        """Every pool × GPU model with a card whose model can be part of the answer to ``ask``
        (:func:`pools.explain.core.relevant_model`)."""
        if ask.cuda not in self.counts:
            self.counts[ask.cuda] = _card_counts(self.card_rows, ask.cuda)
        options = []
        for (pool_id, model_id), cards in sorted(self.counts[ask.cuda].items()):
            if not relevant_model(ask, self.facts[model_id]):
                continue
            shaped = ask.shape is not None
            key = (pool_id, model_id, ask.cuda, shaped)
            if key not in self.built:
                self.built[key] = self._option(pool_id, model_id, cards, ask, shaped)
            options.append(self.built[key])
        return options

    def _option(self, pool_id, model_id, cards, ask: Ask, shaped: bool) -> OptionFacts:
        pool, model = self.pools[pool_id], self.models[model_id]
        eligible = pool.scheduler == ask.scheduler and cards.on_driver > 0
        return OptionFacts(
            pool_slug=pool.slug,
            pool_name=pool.name,
            scheduler=pool.scheduler,
            overcommit_ratio=pool.overcommit_ratio,
            model=self.facts[model_id],
            cards=cards,
            holds=tuple(self.holds.get((pool_id, model_id), ())),
            groups=_groups(pool, model, ask.cuda, self.generation) if shaped and eligible else None,
            price_per_card_hour=self.prices.get(model.slug),
            currency=self.currency if model.slug in self.prices else None,
            burst=pool.burst,
        )


def _card_rows() -> dict[tuple[int, int], list[tuple]]:
    """Cards by (pool id, model id): ``(node state, driver's max CUDA, cards, whole, MIG,
    error)`` rows, from the inventory census kept per inventory generation
    (:func:`pools.inventory.selectors.inventory_census`): a keystroke of the live panel reads
    one row instead of every card."""
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for group in inventory_census().cards:
        if group.pool_id is None or group.gpu_model_id is None:
            continue
        key = (group.pool_id, group.gpu_model_id, group.node_state, group.max_cuda)
        row = counts[key]
        row[0] += group.cards
        row[1] += group.cards if group.whole else 0
        row[2] += group.cards if group.mig and not group.error else 0
        row[3] += group.cards if group.error else 0
    by_pair: dict[tuple[int, int], list[tuple]] = defaultdict(list)
    for (pool_id, model_id, state, max_cuda), (n, whole, mig, error) in counts.items():
        by_pair[(pool_id, model_id)].append((state, max_cuda, n, whole, mig, error))
    return by_pair


def _card_counts(
    card_rows: dict[tuple[int, int], list[tuple]], cuda: str | None
) -> dict[tuple[int, int], CardCounts]:
    """Cards by (pool id, model id) and state (:class:`pools.explain.core.CardCounts`) from
    :func:`_card_rows`, cards on drivers supporting CUDA ``cuda`` as ``on_driver``."""
    wanted = parse_cuda_version(cuda) if cuda else None
    result = {}
    for pair, rows in card_rows.items():
        c: dict[str, int] = defaultdict(int)
        for state, max_cuda, n, whole, mig, error in rows:
            if state == NodeState.UP:
                c["schedulable"] += whole
                if driver_supports(max_cuda, wanted):
                    c["on_driver"] += whole
                c["mig"] += mig
                c["error"] += error
            else:
                c[_STATE_FIELD.get(state, "down")] += n
        result[pair] = CardCounts(
            schedulable=c["schedulable"], on_driver=c["on_driver"], down=c["down"],
            drained=c["drained"], maintenance=c["maintenance"], error=c["error"], mig=c["mig"],
        )  # fmt: skip
    return result


# Holding allocations of some pools × models overlapping a window, times as Unix seconds
# (reading 5,000 timestamps as text costs more than the rest of an explanation); the overlap
# as ranges, for the GiST index on tstzrange(starts_at, ends_at) (migration 0017).
_HOLDS_WHERE = """
 WHERE a.status = ANY(%(statuses)s) AND a.id <> %(exclude)s
   AND a.pool_id = ANY(%(pools)s) AND a.gpu_model_id = ANY(%(models)s)
   AND tstzrange(a.starts_at, a.ends_at, '[)') && tstzrange(%(start)s, %(end)s, '[)')"""
# with their teams' slugs and names joined: a read of the teams by id afterwards was a
# statement only when some allocation was found, so the count varied with the data
_HOLDS_SQL = f"""
SELECT a.id, a.pool_id, a.gpu_model_id, t.slug, t.name, a.card_count,
       EXTRACT(EPOCH FROM a.starts_at)::float8, EXTRACT(EPOCH FROM a.ends_at)::float8
  FROM {Allocation._meta.db_table} a JOIN {Team._meta.db_table} t ON t.id = a.team_id
 {_HOLDS_WHERE}"""
# their placed cards (the same allocations, joined rather than listed by id)
_PLACED_SQL = f"""
SELECT p.allocation_id, p.hostname, p.gpu_mask
  FROM {PlacedCards._meta.db_table} p
  JOIN {Allocation._meta.db_table} a ON a.id = p.allocation_id {_HOLDS_WHERE}"""


def _holds(
    pairs: set[tuple[int, int]], start: datetime, end: datetime, exclude: int | None,
    *, placed: bool,
) -> dict[tuple[int, int], list[HoldFacts]]:  # fmt: skip
    """Holding allocations of ``pairs`` (pool id, model id) overlapping ``[start, end)``, by
    pair, each with its team's slug and name; with ``placed``, their placed cards too; and the
    occurrences of recurring reservations there (:func:`_occurrence_holds`) and the cards
    maintenance windows take away (:func:`_maintenance_holds`). Four statements, five when a
    window overlaps."""
    if not pairs:
        return {}
    rows, spots = _hold_rows(pairs, start, end, exclude, placed=placed)
    holds: dict[tuple[int, int], list[HoldFacts]] = defaultdict(list)
    for pk, pool_id, model_id, slug, name, cards, begins, stop in rows:
        holds[(pool_id, model_id)].append(
            HoldFacts(pk, slug, name, cards, begins, stop, tuple(spots.get(pk, ())))
        )
    for key, hold in _occurrence_holds(pairs, start, end):
        holds[key].append(hold)
    for key, hold in _maintenance_holds(pairs, start, end):
        holds[key].append(hold)
    return holds


def _maintenance_holds(
    pairs: set[tuple[int, int]], start: datetime, end: datetime
) -> list[tuple[tuple[int, int], HoldFacts]]:
    """The cards planned maintenance windows take away in ``[start, end)`` from ``pairs``, as
    holds without a team (:func:`pools.capacity.window.maintenance_intervals` for the
    approval), each with the window's nodes that have schedulable cards of the pair's model as
    placed cards holding every card (:data:`pools.capacity.window.ALL_CARDS`): a window names
    its nodes, so the shape check takes them out whole, as the approval's does, and the
    reasons name them. One statement, two when a window overlaps."""
    found = []
    away = {key: rows for key, rows in maintenance_windows_by_pool_model(start, end).items()
            if key in pairs}  # fmt: skip
    hosts: dict[tuple[int, int, int], set[str]] = defaultdict(set)  # (window, pool, model)
    if away:
        ids = {row[0] for rows in away.values() for row in rows}
        cards = Gpu.objects.schedulable().filter(node__maintenance_windows__in=ids)
        for window_id, pool_id, model_id, host in cards.values_list(
            "node__maintenance_windows", "node__pool", "gpu_model", "node__hostname"
        ).distinct():
            hosts[(window_id, pool_id, model_id)].add(host)
    for key, windows in away.items():
        for window_id, title, s, e, cards in windows:
            nodes = tuple((host, ALL_CARDS) for host in sorted(hosts[(window_id, *key)]))
            hold = HoldFacts(0, "", f"{MAINTENANCE_HOLD}{title}", cards, s, e, nodes,
                             maintenance_id=window_id)  # fmt: skip
            found.append((key, hold))
    return found


def _occurrence_holds(
    pairs: set[tuple[int, int]], start: datetime, end: datetime
) -> list[tuple[tuple[int, int], HoldFacts]]:
    """The occurrences in ``[start, end)`` of the active recurring reservations of ``pairs``,
    as unplaced holds (issue 32; :func:`pools.capacity.window.recurring_intervals` for the
    approval). One statement."""
    found = []
    rules = RecurringReservation.objects.overlapping_dates(start, end).filter(
        pool_id__in={p for p, _ in pairs}, gpu_model_id__in={m for _, m in pairs}
    )
    for reservation in rules.select_related("team"):
        key = (reservation.pool_id, reservation.gpu_model_id)
        if key not in pairs:
            continue
        team = reservation.team
        for s, e in occurrences(reservation.rule, start, end):
            hold = HoldFacts(0, team.slug, team.name, reservation.card_count, s, e, (),
                             reservation.pk)  # fmt: skip
            found.append((key, hold))
    return found


def _hold_rows(
    pairs, start: datetime, end: datetime, exclude: int | None, *, placed: bool
) -> tuple[list[tuple], dict[int, list[tuple[str, int]]]]:
    """``(id, pool id, model id, team slug, team name, cards, starts_at, ends_at)`` of the holding
    allocations of ``pairs`` overlapping ``[start, end)``, and with ``placed`` their placed
    cards by allocation id (``(hostname, mask)``)."""
    pool_ids = sorted({p for p, _ in pairs})
    model_ids = sorted({m for _, m in pairs})
    spots: dict[int, list[tuple[str, int]]] = defaultdict(list)
    if connection.vendor == "postgresql":
        params = {
            "statuses": sorted(str(s) for s in HOLDING_STATUSES),
            "exclude": exclude or 0,
            "pools": pool_ids,
            "models": model_ids,
            "start": start,
            "end": end,
        }
        with connection.cursor() as cursor:
            cursor.execute(_HOLDS_SQL, params)
            raw = cursor.fetchall()
            if placed:
                cursor.execute(_PLACED_SQL, params)
                for allocation_id, host, mask in cursor.fetchall():
                    spots[allocation_id].append((host, mask))
        at = datetime.fromtimestamp
        rows = [(*r[:6], at(r[6], UTC), at(r[7], UTC)) for r in raw]
    else:
        qs = Allocation.objects.holding().overlapping(start, end)
        qs = qs.filter(pool_id__in=pool_ids, gpu_model_id__in=model_ids).exclude(pk=exclude or 0)
        rows = list(
            qs.order_by().values_list(
                "pk",
                "pool",
                "gpu_model",
                "team__slug",
                "team__name",
                "card_count",
                "starts_at",
                "ends_at",
            )
        )
        if placed:
            for allocation_id, host, mask in PlacedCards.objects.filter(
                allocation__in=qs.values("pk")
            ).values_list("allocation_id", "hostname", "gpu_mask"):
                spots[allocation_id].append((host, mask))
    return [r for r in rows if (r[1], r[2]) in pairs], spots


def _groups(
    pool: Pool, model: GpuModel, cuda: str | None, generation: int | None
) -> tuple[NodeGroup, ...]:
    """The pool × model's schedulable nodes on a driver supporting ``cuda``, every card free,
    as :class:`NodeGroup` s (alike nodes together)."""
    nodes = pool_nodes(pool=pool, gpu_model=model, generation=generation)
    return tuple(
        NodeGroup(kind.hostnames, kind.placeable, kind.domains)
        for _, kind in nodes.kinds_for(cuda)
        if kind.placeable
    )


def _prices(slugs: list[str]) -> tuple[str | None, dict[str, Decimal]]:
    """The rate card's reserved price per card-hour by model slug and its currency, from the
    function ``settings.SIZING_CARD_HOUR_PRICES`` names (billing hands prices down by name);
    ``(None, {})`` without one: unknown, never 0."""
    provider = getattr(settings, "SIZING_CARD_HOUR_PRICES", "")
    if not provider or not slugs:
        return None, {}
    return import_string(provider)(gpu_slugs=slugs)
