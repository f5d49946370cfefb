"""Elastic inference allocations: policy writes, the scaling loop, applying decisions, and
handing burst cards back when a guaranteed approval needs them.

The loop (:func:`elastic_scan`, a Celery beat task every minute):

1. one :meth:`~scheduler_adapters.prometheus.PrometheusAdapter.inference_signals` call per
   Prometheus for every enabled elastic allocation whose window is open (each reads its pool's
   cluster's Prometheus, blank or no cluster = ``PROMETHEUS_URL``; four range queries:
   utilisation, the cards it was read from, mean latency and request rate by namespace, over
   the longest rule window plus 5 minutes; utilisation read from fewer cards than the
   allocation holds is unknown);
2. per pool x GPU model, with the pool row locked (the invariant's owner, pools/capacity/locks):
   hand-backs whose notice has run out are carried out; the cards free over the next hour
   (floors of every holding allocation already counted) less the burst elastic allocations
   hold is what may still be borrowed; each allocation's decision
   (:func:`pools.elastic.policy.evaluate`, with the pre-scale level of its stored hourly plan)
   is capped to it (reason ``no_free_cards`` when nothing is left);
3. a change updates ``cards_held``, records a :class:`ScaleEvent` and an audit event with the
   decision's numbers; a hold is recorded (event and audit) only when its reason differs from
   the last recorded decision's; every allocation's reading of the pass (its newest sample, or
   an unknown one) is a :class:`SignalReading`, one bulk INSERT per group, so the what-if and
   the chart have the portal's own history when Prometheus is not there;
4. after commit a task applies the change in Kubernetes (:func:`elastic_apply`): the team's
   ResourceQuota through :func:`~pools.capacity.services.scheduler_binding.kubernetes_quota_sync`
   (which counts an elastic allocation's ``cards_held``, and for a Kueue pool writes the
   team's ClusterQueue in the cohort in the same pass), plus the Kueue lender, or the Volcano /
   Koordinator objects of :mod:`scheduler_adapters.kubernetes_elastic`.

Missing Prometheus or missing series are *unknown*: nothing scales (reason ``unknown``).
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from pools.audit.services import audit_event_record
from pools.capacity.availability import pool_free_cards
from pools.capacity.budget_gate import WARN, budget_verdict
from pools.capacity.lifecycle import APPLIED_STATUSES, HOLDING_STATUSES
from pools.capacity.locks import pool_lock
from pools.capacity.models import Allocation, at_q, holding_q, overlap_q
from pools.capacity.services.scheduler_binding import (
    LEND_HORIZON,
    k8s_product_label,
    kubernetes_quota_sync,
    kueue_lender_sync,
)
from pools.clusters.adapters import by_metrics_url, metrics_adapter, pool_adapter
from pools.common.choices import QuotaBackend, Scheduler, WorkloadKind
from pools.common.errors import InvalidInput, PermissionDenied
from pools.elastic.burst import Burst, HandBack, hand_back_plan
from pools.elastic.burst_pool import Placement, burst_split, place
from pools.elastic.choices import ScaleAction, ScaleSource
from pools.elastic.forecast import Prescale, build_profile, plan_ahead, prescale_from_plan
from pools.elastic.models import (
    READING_RETENTION_DAYS,
    BurstOptIn,
    ElasticPolicy,
    ElasticWhatIf,
    ScaleEvent,
    SignalReading,
)
from pools.elastic.policy import (
    Action,
    Decision,
    MetricSample,
    PolicyError,
    Reason,
    ScalingPolicy,
    evaluate,
)
from pools.elastic.selectors import elastic_ceiling_bound, recorded_samples
from pools.elastic.signals import SCAN_METRICS, demand_samples, metric_samples, newest_reading
from pools.elastic.whatif import WhatIf, replay
from pools.inventory.models import GpuModel, Pool
from pools.jobs import ELASTIC_APPLY, ELASTIC_WHATIF, enqueue_on_commit
from pools.jobs.runs import (
    RunFailed,
    days_refusal,
    params_json,
    queued_run_create,
    queued_run_execute,
    queued_runs_sweep,
)
from pools.tenancy.permissions import may_manage_elastic
from pools.web.numbers import CARD_HOUR_PLACES
from scheduler_adapters.errors import SchedulerError
from scheduler_adapters.kubernetes_elastic import (
    ElasticBounds,
    ElasticQuotaWriter,
    HpaSpec,
    hpa_manifest,
)
from scheduler_adapters.kubernetes_manifests import render_yaml

logger = logging.getLogger(__name__)

STEP_S = 60
FORECAST_SLOT_S = 900  # pools.elastic.forecast: 15-minute slots of the week
FORECAST_WEEKS = 4

EDITABLE_FIELDS = (
    "ceiling_cards",
    "step_cards",
    "cards_per_replica",
    "min_replicas",
    "up_util_pct",
    "up_latency_ms",
    "up_window_minutes",
    "down_util_pct",
    "down_window_minutes",
    "cooldown_minutes",
    "prescale_lead_minutes",
    "per_card_tok_s",
    "deployment",
    "enabled",
)


def scaling_policy(policy: ElasticPolicy) -> ScalingPolicy:
    """The pure policy of ``policy``: the floor is the allocation's ``card_count``."""
    return ScalingPolicy(
        floor_cards=policy.allocation.card_count,
        ceiling_cards=policy.ceiling_cards,
        step_cards=policy.step_cards,
        cards_per_replica=policy.cards_per_replica,
        min_replicas=policy.min_replicas,
        up_util_pct=float(policy.up_util_pct),
        up_latency_ms=float(policy.up_latency_ms),
        up_window_s=policy.up_window_minutes * 60,
        down_util_pct=float(policy.down_util_pct),
        down_window_s=policy.down_window_minutes * 60,
        cooldown_s=policy.cooldown_minutes * 60,
    )


def policy_snapshot(policy: ElasticPolicy) -> dict[str, Any]:
    data: dict[str, Any] = {"floor_cards": policy.allocation.card_count}
    for name in (*EDITABLE_FIELDS, "cards_held"):
        value = getattr(policy, name)
        data[name] = str(value) if isinstance(value, Decimal) else value
    return data


def _require_manager_or_admin(actor: Any, allocation: Allocation) -> None:
    if not may_manage_elastic(actor, allocation.team):
        raise PermissionDenied("Only the team's managers and pool admins edit elastic policies.")


# the pure policy's names (seconds, floor) -> the model's (minutes, the allocation's cards)
_MODEL_FIELD = {
    "floor_cards": "ceiling_cards",
    "up_window_s": "up_window_minutes",
    "down_window_s": "down_window_minutes",
    "cooldown_s": "cooldown_minutes",
}


def _check(policy: ElasticPolicy, *, ceiling_set: bool) -> None:
    """Validate the numbers together (the pure policy's rules) and the model's own; with
    ``ceiling_set`` (a new policy, or its ceiling changed) a ceiling above the floor is at most
    :func:`~pools.elastic.selectors.elastic_ceiling_bound`, the cards there are to borrow."""
    errors: dict[str, str] = {}
    try:
        scaling_policy(policy)
    except PolicyError as exc:
        errors[_MODEL_FIELD.get(exc.field, exc.field)] = exc.message
    allocation = policy.allocation
    floor = allocation.card_count
    if ceiling_set and "ceiling_cards" not in errors and policy.ceiling_cards > floor:
        most = max(elastic_ceiling_bound(allocation=allocation), floor)
        if policy.ceiling_cards > most:
            errors["ceiling_cards"] = (
                f"At most {most}: the {allocation.gpu_model.name} cards of "
                f"{allocation.pool.name} and the burst pools."
            )
    try:
        policy.full_clean(exclude=["allocation", "cards_held", "last_decision"])
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, "; ".join(messages))
    if errors:
        raise InvalidInput("The elastic policy has invalid fields.", errors=errors)


def elastic_policy_create(*, allocation: Allocation, actor: Any, **fields: Any) -> ElasticPolicy:
    """Make ``allocation`` elastic: its ``card_count`` stays the guaranteed floor, the policy
    adds the ceiling. Only inference allocations of whole cards on Kubernetes pools that still
    hold cards. Raises :class:`InvalidInput` (nothing written) or :class:`PermissionDenied`.

    Any pricing method may be elastic: billing charges each card taken once either way
    (:func:`billing.services.usage_import.usage_import_elastic_burst`) — reserved, the cards
    above the floor as burst and the usage on them included; on use, the usage on them as used
    and no home burst; by tokens, the tokens, the usage on every card it holds included and no
    home burst; cards placed in a burst pool at that pool's price, the usage on them
    included — so there is nothing to refuse for it."""
    _require_manager_or_admin(actor, allocation)
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput("Unknown fields.", errors={name: "Unknown field." for name in unknown})
    if allocation.pool.scheduler != Scheduler.KUBERNETES:
        raise InvalidInput(
            "Only allocations on Kubernetes pools can be elastic.",
            errors={"allocation": "Not a Kubernetes pool."},
        )
    if allocation.request.workload_kind != WorkloadKind.INFERENCE:
        raise InvalidInput(
            "Only inference allocations can be elastic.",
            errors={"allocation": "Not an inference allocation."},
        )
    if allocation.mig_profile:  # burst lends whole cards; a slice floor would mix the two
        raise InvalidInput(
            "Only allocations of whole cards can be elastic.",
            errors={"allocation": f"It holds MIG {allocation.mig_profile} slices."},
        )
    if allocation.status not in HOLDING_STATUSES:
        raise InvalidInput(
            f"An allocation that is {allocation.status} holds no cards.",
            errors={"allocation": "The allocation holds no cards."},
        )
    if ElasticPolicy.objects.filter(allocation=allocation).exists():
        raise InvalidInput(
            "The allocation is already elastic.", errors={"allocation": "Already elastic."}
        )
    fields.setdefault("ceiling_cards", allocation.card_count)
    policy = ElasticPolicy(allocation=allocation, cards_held=allocation.card_count, **fields)
    _check(policy, ceiling_set=True)
    with transaction.atomic():
        policy.save()
        audit_event_record(
            actor=actor, action="elastic_policy.created", obj=policy, after=policy_snapshot(policy)
        )
    return policy


def elastic_policy_update(*, policy: ElasticPolicy, actor: Any, **fields: Any) -> ElasticPolicy:
    """Change a policy's numbers (bounded like the reclamation policy). A ceiling lowered under
    the cards held is obeyed by the next loop pass (reason ``above_ceiling``)."""
    _require_manager_or_admin(actor, policy.allocation)
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput("Unknown fields.", errors={name: "Unknown field." for name in unknown})
    with transaction.atomic():
        locked = (
            ElasticPolicy.objects.select_for_update(of=("self",))
            .select_related("allocation")
            .get(pk=policy.pk)
        )
        before = policy_snapshot(locked)
        for name, value in fields.items():
            setattr(locked, name, value)
        if locked.cards_held > locked.ceiling_cards:
            # burst-pool cards go back first (pools.elastic.burst_pool)
            cut = locked.cards_held - locked.ceiling_cards
            locked.burst_cards = max(0, locked.burst_cards - cut)
            locked.cards_held = locked.ceiling_cards
        _check(locked, ceiling_set=locked.ceiling_cards != before["ceiling_cards"])
        locked.save()
        audit_event_record(
            actor=actor,
            action="elastic_policy.updated",
            obj=locked,
            before=before,
            after=policy_snapshot(locked),
        )
    if locked.cards_held != before["cards_held"]:
        enqueue_on_commit(ELASTIC_APPLY, locked.pk)
    return locked


# ------------------------------------------------------------------------------ the loop


@dataclass
class ScanReport:
    """One pass: ``policies`` judged, ``changed`` (ups + downs), ``events`` recorded,
    ``queries`` to Prometheus, ``error`` when the metrics could not be read."""

    at: datetime
    policies: int = 0
    ups: int = 0
    downs: int = 0
    holds: int = 0
    events: int = 0
    unknown: int = 0
    error: str = ""
    changed_ids: list[int] = field(default_factory=list)


def open_policies(now: datetime):
    return ElasticPolicy.objects.filter(
        at_q(now, via="allocation"), enabled=True, allocation__status__in=APPLIED_STATUSES
    ).select_related("allocation__team", "allocation__pool__cluster", "allocation__gpu_model")


def namespace_of(policy: ElasticPolicy) -> str:
    return f"team-{policy.allocation.team.slug}"


def _cluster_of(policy: ElasticPolicy) -> Any:
    return policy.allocation.pool.cluster


def _per_prometheus(
    policies: list[ElasticPolicy], metrics: Any
) -> list[tuple[str, list[ElasticPolicy], Any]]:
    """``[(url, group, adapter)]``: ``policies`` grouped by their pool's cluster's Prometheus
    (:func:`~pools.clusters.adapters.by_metrics_url`), each with the adapter that reads it
    (``None``: no URL); ``metrics`` (tests) stands for every group's, as one group."""
    if metrics is not None:
        return [("", policies, metrics)]
    return [
        (url, group, metrics_adapter(url=url) if url else None)
        for url, group in by_metrics_url(policies, _cluster_of).items()
    ]


def _close(adapter: Any, given: Any) -> None:
    """Close ``adapter`` unless it is ``given`` (the caller's, which the caller closes)."""
    if adapter is not None and adapter is not given:
        adapter.close()


def elastic_scan(*, now: datetime | None = None, metrics: Any = None) -> ScanReport:
    """One pass of the loop over every open elastic allocation (module docstring).

    Each Prometheus is read once per pass: the allocations are grouped by their pool's
    cluster's Prometheus (``Cluster.prometheus_url``, blank or no cluster =
    ``PROMETHEUS_URL``) and each URL gets one ``inference_signals`` call for its group's
    namespaces; ``metrics`` (tests) stands for every allocation's. A group whose Prometheus
    is not set or cannot be read has unknown metrics (nothing of it scales up or down;
    ``report.error`` names the URL), the other groups proceed.
    """
    now = now or timezone.now()
    report = ScanReport(at=now)
    policies = list(open_policies(now))
    report.policies = len(policies)
    if not policies:
        return report
    found, recorded, report.error = _scan_signals(policies, now, metrics)
    groups: dict[tuple[int, int], list[ElasticPolicy]] = defaultdict(list)
    for policy in policies:
        groups[(policy.allocation.pool_id, policy.allocation.gpu_model_id)].append(policy)
    for (pool_id, model_id), members in sorted(groups.items()):
        with transaction.atomic():
            bursts = _burst_candidates(members, model_id)
            # pools locked in id order (the home pool and the burst pools its teams may use)
            locked_pools = {pid: pool_lock(pid) for pid in sorted({pool_id, *bursts})}
            room = _BurstRoom(bursts, locked_pools, model_id, now)
            _judge_group(locked_pools[pool_id], members, found, now, report,
                         recorded=recorded, burst=room)  # fmt: skip
    for policy_id in report.changed_ids:
        enqueue_on_commit(ELASTIC_APPLY, policy_id)
    return report


def _scan_signals(
    policies: list[ElasticPolicy], now: datetime, metrics: Any
) -> tuple[dict[int, Any], set[int], str]:
    """Step 1 of the loop: ``(found, recorded, error)``: policy id -> its namespace's series
    read from its Prometheus (absent: unknown), the ids whose Prometheus is set (their readings
    are stored, unknown ones too), and why some groups were not read (``""``: all were)."""
    longest = max(max(p.up_window_minutes, p.down_window_minutes) for p in policies)
    found: dict[int, Any] = {}  # policy id -> its namespace's series in its Prometheus
    recorded: set[int] = set()  # policies whose Prometheus is set: their readings are stored
    errors: list[str] = []
    groups_by_url = _per_prometheus(policies, metrics)
    for _url, group, adapter in groups_by_url:
        if adapter is None:
            errors.append(
                "PROMETHEUS_URL is not set: every allocation's metrics are unknown."
                if len(groups_by_url) == 1
                else f"PROMETHEUS_URL is not set: the metrics of {len(group)} allocation(s) "
                "whose cluster names no Prometheus are unknown."
            )
            continue
        recorded.update(p.pk for p in group)
        try:
            signals = adapter.inference_signals(
                start=now - timedelta(minutes=longest + 5),
                end=now,
                step_s=STEP_S,
                namespaces={namespace_of(p) for p in group},
                metrics=SCAN_METRICS,
            )
        except SchedulerError as exc:  # unreadable metrics are unknown: nothing scales
            errors.append(f"Prometheus could not be read: {exc}")
            continue
        finally:
            _close(adapter, metrics)
        found.update({p.pk: signals.get(namespace_of(p)) for p in group})
    return found, recorded, "; ".join(errors)


def _lock_policies(ids: list[int]) -> dict[int, ElasticPolicy]:
    """The policies of ``ids`` by id, locked (``SELECT … FOR UPDATE`` of the policy rows) with
    their allocation's team, pool and GPU model."""
    return {
        p.pk: p
        for p in ElasticPolicy.objects.select_for_update(of=("self",))
        .select_related("allocation__team", "allocation__pool", "allocation__gpu_model")
        .filter(pk__in=ids)
    }


def _evaluated(policy: ElasticPolicy, found: Any, now: datetime) -> Decision:
    """The scaling :class:`Decision` for ``policy`` at ``now`` from its namespace's signal
    series ``found`` (``None``: no samples), its cards held, last scaling and prescale
    (:func:`pools.elastic.policy.evaluate`)."""
    samples: list[MetricSample] = (
        metric_samples(found, cards_held=policy.cards_held) if found is not None else []
    )
    last = policy.last_scaled_at.timestamp() if policy.last_scaled_at else None
    return evaluate(
        scaling_policy(policy),
        samples,
        cards_now=policy.cards_held,
        now=now.timestamp(),
        last_scaled_at=last,
        prescale_cards=prescale_now(policy, now).cards,
    )


def _lent_up(
    policy: ElasticPolicy, decision: Decision, lendable: int, lent: int, now: datetime
) -> tuple[Decision, int]:
    """``(decision, lent)`` after granting an up ``decision`` in the home pool: at most
    ``lendable`` (the group's free cards not yet lent) above the allocation's floor, plus any
    cards it is under its floor by; none to grant holds (``no_free_cards``), else the budget
    check, and a granted up adds its cards above the floor to ``lent``."""
    own_floor = policy.allocation.card_count
    already_floor = max(0, own_floor - decision.cards_from)  # under the floor: not burst
    room = lendable + already_floor
    granted = min(decision.cards_to, decision.cards_from + room)
    if granted <= decision.cards_from:
        return _no_free_cards(decision, lendable), lent
    decision = _budget_checked(policy, decision, granted, now)
    if decision.action is not Action.HOLD:
        lent += max(0, granted - max(own_floor, decision.cards_from))
        decision = _capped(decision, granted)
    return decision, lent


def _judge_group(
    pool: Pool,
    members: list[ElasticPolicy],
    found_of: dict[int, Any],
    now: datetime,
    report: ScanReport,
    *,
    recorded: set[int],
    burst: _BurstRoom | None = None,
) -> None:
    """Judge, cap and record ``members`` (one pool x GPU model) with ``found_of`` (policy id
    -> its namespace's series; missing: unknown); a reading is stored for the policies in
    ``recorded`` (their Prometheus is set)."""
    ids = [p.pk for p in members]
    locked = _lock_policies(ids)
    _due_hand_backs(members, locked, now)
    model = members[0].allocation.gpu_model
    # Lend only what stays free for the next hour: a guaranteed allocation starting within it
    # is not lent to (ones further out take their cards back with notice when approved).
    free = pool_free_cards(pool=pool, gpu_model=model, start=now, end=now + LEND_HORIZON)
    lent = sum(_home_burst(p) for p in _group_policies(pool, model, now))
    readings: list[SignalReading] = []
    for policy_id in ids:
        policy = locked[policy_id]
        found = found_of.get(policy_id)
        decision = _evaluated(policy, found, now)
        asked, spilled = decision, None
        home_before = _home_burst(policy)
        if decision.action is Action.UP and decision.cards_to > decision.cards_from:
            decision, lent = _lent_up(policy, decision, max(0, free - lent), lent, now)
            if burst is not None and decision.reason != "budget_exceeded":
                decision, spilled = burst.spill(policy, asked, decision, now)
        placement = spilled or _placed(policy, decision)
        if decision.action is Action.DOWN:
            lent -= home_before - max(0, placement.home_cards - policy.allocation.card_count)
        _record(policy, decision, now, report, placement)
        if policy_id in recorded:
            readings.append(_reading(policy, found, now))
    # one INSERT for the group; a retried pass meets the same samples and stores nothing new
    SignalReading.objects.bulk_create(readings, ignore_conflicts=True)


def _reading(policy: ElasticPolicy, found: Any, now: datetime) -> SignalReading:
    """The pass's reading of ``policy``: the namespace's newest sample, or an unknown one at
    ``now`` when Prometheus had none (so the record shows the hole as unknown, not as 0)."""
    newest = newest_reading(found, cards_held=policy.cards_held) if found is not None else None
    if newest is None:
        return SignalReading(policy=policy, read_at=now, cards_held=policy.cards_held)
    return SignalReading(
        policy=policy,
        read_at=datetime.fromtimestamp(newest.at, tz=now.tzinfo),
        util_pct=newest.util_pct,
        latency_ms=newest.latency_ms,
        request_s=newest.request_s,
        cards_held=policy.cards_held,
    )


def prescale_now(policy: ElasticPolicy, now: datetime) -> Prescale:
    """The pre-scale level at ``now`` from the policy's stored plan (``cards`` ``None`` without
    a per-card throughput or a plan that reaches ``now``)."""
    if not policy.per_card_tok_s or not policy.prescale_plan:
        return Prescale(now.timestamp(), now.timestamp(), None, None, None, 0.0)
    return prescale_from_plan(
        [(float(t), None if level is None else float(level)) for t, level in policy.prescale_plan],
        now=now.timestamp(),
        per_card_rate=float(policy.per_card_tok_s),
        slot_s=FORECAST_SLOT_S,
        lead_s=policy.prescale_lead_minutes * 60,
        cards_per_replica=policy.cards_per_replica,
    )


def next_prescale(policy: ElasticPolicy, now: datetime) -> Prescale | None:
    """The first moment in the stored plan when pre-scaling asks for more than the cards
    held (for the live page), or ``None``."""
    if not policy.per_card_tok_s or not policy.prescale_plan:
        return None
    lead = policy.prescale_lead_minutes * 60
    moments = [now] + [
        datetime.fromtimestamp(float(t) - lead, tz=now.tzinfo)
        for t, _ in policy.prescale_plan
        if float(t) - lead > now.timestamp()
    ]
    for moment in moments:
        found = prescale_now(policy, moment)
        if found.cards is not None and found.cards > policy.cards_held:
            return found
    return None


def elastic_forecast(
    *, now: datetime | None = None, metrics: Any = None, weeks: int = FORECAST_WEEKS
) -> int:
    """Hourly: for every open elastic allocation with a per-card throughput, the time-of-week
    profile of its namespace's output-equivalent token rate over the last ``weeks`` weeks
    (two range queries per Prometheus for all of its allocations, 15-minute steps), stored as
    the plan of the next two hours. Each allocation reads its pool's cluster's Prometheus
    (blank or no cluster = ``PROMETHEUS_URL``; ``metrics``, tests, stands for all). Returns
    how many plans were stored; allocations without a Prometheus, or whose Prometheus cannot
    be read (logged with its URL), keep their plan (plans age out), the others proceed."""
    now = now or timezone.now()
    policies = list(open_policies(now).filter(per_card_tok_s__isnull=False))
    stored = 0
    for url, group, adapter in _per_prometheus(policies, metrics) if policies else []:
        if adapter is None:
            continue
        try:
            found = adapter.inference_signals(
                start=now - timedelta(weeks=weeks),
                end=now,
                step_s=FORECAST_SLOT_S,
                rate_window_s=FORECAST_SLOT_S,
                namespaces={namespace_of(p) for p in group},
                metrics=("generation_tok_s", "prompt_tok_s"),
            )
        except SchedulerError as exc:
            logger.warning("elastic plans of %s not refreshed: %s", url or "metrics", exc)
            continue
        finally:
            _close(adapter, metrics)
        stored += _store_plans(group, found, now, weeks)
    return stored


def _store_plans(policies: list[ElasticPolicy], found: dict, now: datetime, weeks: int) -> int:
    """Store each policy's plan from its namespace's token-rate series in ``found``; returns
    how many plans are not empty."""
    stored = 0
    for policy in policies:
        signals = found.get(namespace_of(policy))
        plan: list = []
        if signals is not None:
            profile = build_profile(
                demand_samples(signals), now=now.timestamp(), weeks=weeks, slot_s=FORECAST_SLOT_S
            )
            plan = [[t, level] for t, level in plan_ahead(profile, now=now.timestamp())]
        ElasticPolicy.objects.filter(pk=policy.pk).update(
            prescale_plan=plan, prescale_updated_at=now
        )
        stored += bool(plan)
    return stored


def _group_policies(pool: Pool, model: GpuModel, now: datetime):
    return ElasticPolicy.objects.filter(
        holding_q(via="allocation"),
        allocation__pool=pool,
        allocation__gpu_model=model,
        allocation__ends_at__gt=now,
    ).select_related("allocation")


def _no_free_cards(decision: Decision, lendable: int) -> Decision:
    return replace(
        decision,
        action=Action.HOLD,
        reason="no_free_cards",  # type: ignore[arg-type]
        cards_to=decision.cards_from,
        message=f"{decision.message}; but the pool has {lendable} card(s) free to lend",
    )


def _budget_checked(
    policy: ElasticPolicy, decision: Decision, granted: int, now: datetime
) -> Decision:
    """The budget check of a scale-up to ``granted`` cards: the burst cards it adds (above the
    floor and what is held), held for the lending horizon, against the team's budgets. A
    budget that refuses or needs a pool admin (no person decides in the loop) holds at
    ``budget_exceeded``; a warning lets it scale and says why; within budget: unchanged."""
    allocation = policy.allocation
    extra = granted - max(allocation.card_count, decision.cards_from)
    verdict = None
    if extra > 0:
        verdict = budget_verdict(
            team=allocation.team, pool=allocation.pool, gpu_model=allocation.gpu_model,
            cards=extra, starts_at=now, ends_at=now + LEND_HORIZON,
        )  # fmt: skip
    if verdict is None:
        return decision
    if verdict.enforcement == WARN:
        return replace(decision, message=f"{decision.message}; {verdict.reason}")
    return replace(
        decision,
        action=Action.HOLD,
        reason="budget_exceeded",  # type: ignore[arg-type]
        cards_to=decision.cards_from,
        message=f"{decision.message}; but {verdict.reason}",
    )


def _capped(decision: Decision, granted: int) -> Decision:
    if granted == decision.cards_to:
        return decision
    return replace(
        decision,
        cards_to=granted,
        message=f"{decision.message}; capped at {granted} by the pool's free cards",
    )


def _tally(report: ScanReport, policy: ElasticPolicy, decision: Decision, changed: bool) -> bool:
    """Count the decision in the scan's report; ``False`` for a hold with the same reason as
    the policy's last decision (nothing new to record)."""
    if decision.reason == Reason.UNKNOWN:
        report.unknown += 1
    if not changed:
        report.holds += 1
        return policy.last_decision.get("reason") != str(decision.reason)
    report.ups += decision.action is Action.UP
    report.downs += decision.action is Action.DOWN
    return True


def _policy_scaled(
    policy: ElasticPolicy,
    decision: Decision,
    now: datetime,
    placement: Placement | None,
    numbers: dict[str, Any],
) -> None:
    """The policy's cards set to the decision's: borrowing since now when it first goes above
    the floor, not borrowing at or below it; a burst pool's cards from ``placement``, named in
    ``numbers`` when there are some. Not saved."""
    floor = policy.allocation.card_count
    if decision.cards_to > floor and policy.cards_held <= floor:
        policy.borrowed_since = now
    elif decision.cards_to <= floor:
        policy.borrowed_since = None
    policy.cards_held = decision.cards_to
    policy.last_scaled_at = now
    if placement is not None:
        policy.burst_cards = placement.burst_cards
        if placement.burst_cards:
            numbers["burst_cards"] = placement.burst_cards
            numbers["burst_pool"] = policy.burst_pool.slug


def _scale_event_create(
    policy: ElasticPolicy, decision: Decision, now: datetime, numbers: dict, *, changed: bool
) -> bool:
    """The loop's scale event of this instant; ``False`` if the instant was judged already (a
    retried task: the event's unique key)."""
    try:
        with transaction.atomic():
            ScaleEvent.objects.create(
                policy=policy,
                decided_at=now,
                source=ScaleSource.LOOP,
                action=str(decision.action) if changed else ScaleAction.HOLD,
                reason=str(decision.reason),
                cards_from=decision.cards_from,
                cards_to=decision.cards_to,
                burst_pool=policy.burst_pool if policy.burst_cards else None,
                burst_cards_to=policy.burst_cards,
                effective_at=now,
                message=decision.message,
                numbers=numbers,
            )
    except IntegrityError:
        return False
    return True


def _record(
    policy: ElasticPolicy,
    decision: Decision,
    now: datetime,
    report: ScanReport,
    placement: Placement | None = None,
) -> None:
    """Record one policy's decision of the scan: counted (:func:`_tally`), the policy scaled
    (:func:`_policy_scaled`) and saved with its last decision, the scale event
    (:func:`_scale_event_create`) and the audit record; a changed policy's id is kept for the
    apply step."""
    changed = decision.action is not Action.HOLD and decision.cards_to != decision.cards_from
    if not _tally(report, policy, decision, changed):
        return  # the same hold as last time: nothing new to record
    numbers = decision.numbers()
    before = {"cards_held": policy.cards_held}
    if changed:
        _policy_scaled(policy, decision, now, placement, numbers)
    policy.last_decision = {**numbers, "decided_at": now.isoformat()}
    policy.save(
        update_fields=[
            "cards_held", "last_scaled_at", "borrowed_since", "last_decision", "burst_pool",
            "burst_cards",
        ]
    )  # fmt: skip
    if not _scale_event_create(policy, decision, now, numbers, changed=changed):
        return  # this instant was judged already (a retried task)
    report.events += 1
    audit_event_record(
        actor=None,
        action=f"elastic.{'scale_' + str(decision.action) if changed else 'hold'}",
        obj=policy.allocation,
        before=before,
        after={"cards_held": policy.cards_held, "burst_cards": policy.burst_cards, **numbers},
        reason=decision.message,
    )
    if changed:
        report.changed_ids.append(policy.pk)


# ------------------------------------------------------------------------------ burst pools


def burst_opt_in_set(*, team: Any, pool: Pool, actor: Any, opted: bool) -> bool:
    """Let ``team``'s elastic allocations spill into burst pool ``pool`` (``opted``), or stop
    them (cards already placed there stay until the loop hands them back). The team's managers
    and pool admins; audited. Returns whether anything changed. Raises
    :class:`PermissionDenied`, or :class:`InvalidInput` for a pool not marked burst."""
    if not may_manage_elastic(actor, team):
        raise PermissionDenied("Only the team's managers and pool admins choose burst pools.")
    if not pool.burst:
        raise InvalidInput(
            f"{pool.name} is not a burst pool.", errors={"pool": "Not a burst pool."}
        )
    with transaction.atomic():
        if opted:
            _, changed = BurstOptIn.objects.get_or_create(team=team, pool=pool)
        else:
            changed = BurstOptIn.objects.filter(team=team, pool=pool).delete()[0] > 0
        if changed:
            audit_event_record(
                actor=actor,
                action="elastic.burst_opt_in" if opted else "elastic.burst_opt_out",
                obj=team,
                before={"burst_pool": pool.slug, "opted": not opted},
                after={"burst_pool": pool.slug, "opted": opted},
            )
    return bool(changed)


def _home_burst(policy: ElasticPolicy) -> int:
    """Cards ``policy`` borrows from its home pool: held above the floor, less the cards
    placed in a burst pool."""
    return max(0, policy.cards_held - policy.burst_cards - policy.allocation.card_count)


def _placed(policy: ElasticPolicy, decision: Decision) -> Placement:
    """Where the cards of ``decision`` sit when no burst pool took any: on the way down the
    burst pool's go first (:func:`pools.elastic.burst_pool.place`); an up from the home pool
    keeps the burst cards held."""
    held = Placement(policy.cards_held, policy.burst_cards)
    if decision.action is Action.HOLD or decision.cards_to == decision.cards_from:
        return held
    if decision.action is Action.DOWN:
        return place(
            floor_cards=policy.allocation.card_count,
            ceiling_cards=max(policy.ceiling_cards, decision.cards_to),
            held=held,
            wanted_cards=decision.cards_to,
            home_room=0,
            burst_room=0,
        )
    return Placement(decision.cards_to, policy.burst_cards)


def _burst_candidates(members: list[ElasticPolicy], gpu_model_id: int) -> list[int]:
    """The burst pools the group's allocations may use: pools marked burst its teams opted
    into, of the group's GPU model's scheduler (Kubernetes), plus any a member still holds
    cards in. One query."""
    teams = {p.allocation.team_id for p in members}
    held = {p.burst_pool_id for p in members if p.burst_cards and p.burst_pool_id}
    opted = set(
        BurstOptIn.objects.filter(
            team_id__in=teams, pool__burst=True, pool__scheduler=Scheduler.KUBERNETES
        ).values_list("pool_id", flat=True)
    )
    return sorted(opted | held)


class _BurstRoom:
    """The free cards of each burst pool over the lending horizon, less the cards elastic
    allocations already placed there, read once per group (locked) and spent as it grants."""

    def __init__(self, pool_ids: list[int], pools: dict[int, Pool], gpu_model_id: int,
                 now: datetime) -> None:  # fmt: skip
        self.pools = {pid: pools[pid] for pid in pool_ids}
        self.gpu_model_id = gpu_model_id
        self.now = now
        self._free: dict[int, int] = {}
        self._opted: dict[int, set[int]] | None = None

    def opted(self, team_id: int) -> set[int]:
        if self._opted is None:
            self._opted = defaultdict(set)
            for team, pool in BurstOptIn.objects.filter(pool_id__in=list(self.pools)).values_list(
                "team_id", "pool_id"
            ):
                self._opted[team].add(pool)
        return self._opted.get(team_id, set())

    def free(self, pool_id: int, gpu_model: GpuModel) -> int:
        if pool_id not in self._free:
            pool = self.pools[pool_id]
            free = pool_free_cards(
                pool=pool, gpu_model=gpu_model, start=self.now, end=self.now + LEND_HORIZON
            )
            placed = sum(
                ElasticPolicy.objects.filter(
                    holding_q(via="allocation"),
                    burst_pool_id=pool_id,
                    allocation__gpu_model_id=self.gpu_model_id,
                    allocation__ends_at__gt=self.now,
                ).values_list("burst_cards", flat=True)
            )
            self._free[pool_id] = max(0, free - placed)
        return self._free[pool_id]

    def spill(
        self, policy: ElasticPolicy, asked: Decision, decision: Decision, now: datetime
    ) -> tuple[Decision, Placement | None]:
        """``decision`` after the home pool's share of ``asked`` (an up): the cards still
        wanted placed in a burst pool the team opted into (the one it already holds cards in,
        else the first by id with room), after the budget check at that pool, with where the
        cards now sit; else ``decision`` unchanged and ``None``. Sets ``policy.burst_pool``."""
        got = decision.cards_to if decision.action is not Action.HOLD else decision.cards_from
        if asked.action is not Action.UP or asked.cards_to <= got:
            return decision, None
        allocation = policy.allocation
        if policy.burst_cards and policy.burst_pool_id:
            choices = [policy.burst_pool_id]
        else:
            choices = sorted(self.opted(allocation.team_id) & set(self.pools))
        for pool_id in choices:
            room = self.free(pool_id, allocation.gpu_model)
            placement = place(
                floor_cards=allocation.card_count,
                ceiling_cards=policy.ceiling_cards,
                held=Placement(got, policy.burst_cards),
                wanted_cards=asked.cards_to,
                home_room=0,
                burst_room=room,
            )
            extra = placement.burst_cards - policy.burst_cards
            if extra <= 0:
                continue
            pool = self.pools[pool_id]
            verdict = budget_verdict(
                team=allocation.team, pool=pool, gpu_model=allocation.gpu_model,
                cards=extra, starts_at=now, ends_at=now + LEND_HORIZON,
            )  # fmt: skip
            if verdict is not None and verdict.enforcement != WARN:
                return replace(decision, message=f"{decision.message}; burst pool {pool.name} "
                               f"not used: {verdict.reason}"), None  # fmt: skip
            self._free[pool_id] = room - extra
            policy.burst_pool = pool
            return _spilled(asked, placement, pool, verdict), placement
        return decision, None


def _spilled(asked: Decision, placement: Placement, pool: Pool, verdict: Any) -> Decision:
    """``asked`` (an up) as granted with ``placement``'s cards, part of them in burst ``pool``:
    its message says where the cards sit, and the budget ``verdict``'s warning (``None``:
    none)."""
    return replace(
        asked,
        cards_to=placement.cards,
        message=(
            f"{asked.message}; {placement.home_cards} card(s) in the home pool, "
            f"{placement.burst_cards} in burst pool {pool.name} at its price"
            + (f"; {verdict.reason}" if verdict is not None else "")
        ),
    )


# ------------------------------------------------------------------------------ applying


def team_elastic_bounds(*, policy: ElasticPolicy, now: datetime) -> ElasticBounds:
    """The team's floor / ceiling / cards of this GPU model in this pool, summed over its open
    elastic allocations (one namespace holds them all). Cards placed in a burst pool count in
    neither the ceiling nor the cards: the burst pool's cluster holds them (issue 35), so a
    ceiling of 6 with 2 placed there is a home ceiling of 4 (Volcano ``capability``,
    Koordinator ``max``, Kueue ``borrowingLimit`` + ``nominalQuota``)."""
    allocation = policy.allocation
    floor = ceiling = cards = 0
    for other in open_policies(now).filter(
        allocation__team=allocation.team,
        allocation__pool=allocation.pool,
        allocation__gpu_model=allocation.gpu_model,
    ):
        floor += other.allocation.card_count
        ceiling += other.ceiling_cards - other.burst_cards
        cards += other.cards_held - other.burst_cards
    return ElasticBounds(
        team=allocation.team.slug,
        product=k8s_product_label(allocation.gpu_model),
        floor_cards=floor,
        ceiling_cards=max(ceiling, cards),
        cards=max(floor, cards),
        cohort=allocation.pool.quota_cohort or None,
    )


def _backend_apply(
    adapter: Any, pool: Pool, binding: dict[str, Any], bounds: ElasticBounds, now: datetime
) -> str:
    """Write what ``pool``'s quota backend needs beyond the quota sync's ``binding`` (the
    team's namespace, updated) for ``bounds`` and return the note saying what it holds:
    nothing for ``resourcequota``; the lender queue for ``kueue`` (``binding["kueue_lender"]``);
    the Volcano Queue or Koordinator ElasticQuota (:class:`ElasticQuotaWriter`) otherwise.
    Raises the adapter's errors."""
    namespace = binding["namespace"]
    backend = pool.quota_backend
    if backend == QuotaBackend.RESOURCE_QUOTA:
        return f"ResourceQuota of {namespace}: {binding['total']} nvidia.com/gpu"
    if backend == QuotaBackend.KUEUE:
        binding["kueue_lender"] = kueue_lender_sync(adapter=adapter, pool=pool, now=now)
        return (
            f"ClusterQueue {namespace} in cohort {pool.quota_cohort}: nominalQuota "
            f"{bounds.floor_cards}, borrowingLimit {bounds.ceiling_cards - bounds.floor_cards}; "
            "Kueue admits within them"
        )
    ElasticQuotaWriter(adapter).set_elastic_quota(backend, bounds, with_quota=False)
    return (
        f"Volcano Queue {namespace}: deserved {bounds.cards}, capability {bounds.ceiling_cards}"
        if backend == QuotaBackend.VOLCANO
        else f"ElasticQuota {namespace}: min {bounds.floor_cards}, max "
        f"{bounds.ceiling_cards}; Koordinator admits within them"
    )


def elastic_apply(*, policy_id: int, now: datetime | None = None) -> dict[str, Any]:
    """Make the cluster hold what the policy decided (outside any lock; a task calls it), and
    say on the pending scale events what holding it meant for the pool's quota backend
    (``apply_note``):

    - ``resourcequota``: the namespace's ResourceQuota is the cards decided (the portal's own
      loop does the borrowing);
    - ``kueue``: the team's ClusterQueue holds floor and burst in the pool's cohort and the
      lender holds the pool's free cards, written by the quota sync in one pass; Kueue admits
      within them, so a decision inside [floor, ceiling] writes nothing;
    - ``volcano`` / ``koordinator``: the Queue (``deserved`` = the cards decided) or the
      ElasticQuota, after the quota sync's ResourceQuota (the ceiling).

    Without a Kubernetes connection (the demo) the cards are held in the portal only; the
    events say so and stay unapplied."""
    now = now or timezone.now()
    policy = ElasticPolicy.objects.select_related(
        "allocation__team", "allocation__pool", "allocation__gpu_model", "burst_pool__cluster"
    ).get(pk=policy_id)
    pending = ScaleEvent.objects.filter(
        policy=policy, applied=False, effective_at__lte=now
    ).exclude(action=ScaleAction.HOLD)
    pool = policy.allocation.pool
    adapter = pool_adapter(pool)
    if adapter is None:
        note = "Portal only: no Kubernetes connection is configured."
        pending.filter(apply_note="").update(apply_note=note)
        return {"applied": False, "note": note}
    binding = kubernetes_quota_sync(
        adapter=adapter, team=policy.allocation.team, cluster=pool.cluster, now=now
    )
    bounds = team_elastic_bounds(policy=policy, now=now)
    backend = pool.quota_backend
    note = _backend_apply(adapter, pool, binding, bounds, now)
    binding["elastic"] = {
        "backend": backend,
        "floor": bounds.floor_cards,
        "ceiling": bounds.ceiling_cards,
        "cards": bounds.cards,
    }
    if policy.burst_pool_id is not None:
        binding["burst_pool"] = _burst_pool_apply(policy, now)
        note = f"{note}; {binding['burst_pool']['note']}"
    pending.update(applied=True, apply_note=note[:300])
    return binding


def _burst_pool_apply(policy: ElasticPolicy, now: datetime) -> dict[str, Any]:
    """The team's namespace quota in the burst pool's cluster, which counts the cards placed
    there (:func:`~pools.capacity.services.scheduler_binding.burst_cards_placed`), through
    that cluster's adapter; its serving Deployment there scales within it."""
    burst_pool = policy.burst_pool
    adapter = pool_adapter(burst_pool)
    if adapter is None:
        return {"applied": False, "note": f"burst pool {burst_pool.name}: portal only"}
    binding = kubernetes_quota_sync(
        adapter=adapter, team=policy.allocation.team, cluster=burst_pool.cluster, now=now
    )
    where = burst_pool.cluster.name if burst_pool.cluster_id else "the environment's cluster"
    binding["note"] = (
        f"burst pool {burst_pool.name} ({where}): ResourceQuota of {binding['namespace']}: "
        f"{binding['total']} nvidia.com/gpu"
    )
    return binding


# ------------------------------------------------------------------------------ hand back


def _cut_to(policy: ElasticPolicy, cards: int, now: datetime) -> None:
    policy.cards_held = min(policy.cards_held, cards)
    policy.last_scaled_at = now
    if policy.cards_held <= policy.allocation.card_count:
        policy.borrowed_since = None
    policy.save(update_fields=["cards_held", "last_scaled_at", "borrowed_since"])


def elastic_hand_back_run(
    *, pool_id: int, gpu_model_id: int, starts_at: datetime, ends_at: datetime
) -> list[ScaleEvent]:
    """The task's entry after an approval commits: lock the pool, then :func:`elastic_hand_back`."""
    with transaction.atomic():
        pool = pool_lock(pool_id)
        return elastic_hand_back(
            pool=pool,
            gpu_model=GpuModel.objects.get(pk=gpu_model_id),
            starts_at=starts_at,
            ends_at=ends_at,
            actor=None,
        )


def _due_hand_backs(members: list[ElasticPolicy], locked: dict, now: datetime) -> None:
    """Carry out hand-backs whose notice has run out (the loop, under the pool lock)."""
    due = ScaleEvent.objects.filter(
        policy_id__in=[p.pk for p in members],
        source=ScaleSource.HAND_BACK,
        applied=False,
        effective_at__lte=now,
    ).order_by("effective_at")
    for event in due:
        policy = locked[event.policy_id]
        if policy.cards_held > event.cards_to:
            _cut_to(policy, event.cards_to, now)
            enqueue_on_commit(ELASTIC_APPLY, policy.pk)
        else:
            ScaleEvent.objects.filter(pk=event.pk).update(applied=True)


def _hand_back_holders(
    pool: Pool, gpu_model: GpuModel, starts_at: datetime, ends_at: datetime
) -> list[ElasticPolicy]:
    """The policies of the allocations of ``pool`` and ``gpu_model`` holding cards in
    ``[starts_at, ends_at)``, locked (``FOR UPDATE`` of the policy rows only)."""
    return list(
        ElasticPolicy.objects.select_for_update(of=("self",))
        .select_related("allocation__team")
        .filter(
            holding_q(via="allocation"),
            overlap_q(starts_at, ends_at, via="allocation"),
            allocation__pool=pool,
            allocation__gpu_model=gpu_model,
        )
    )


def _home_bursts(policies: list[ElasticPolicy]) -> list[Burst]:
    """What each policy borrows from its home pool (pure): cards placed in a burst pool stay
    there, so they are left out of the totals the hand-back plan cuts."""
    return [
        Burst(
            allocation_id=p.pk,
            floor_cards=p.allocation.card_count,
            cards_held=p.cards_held - p.burst_cards,
            borrowed_since=(p.borrowed_since or p.updated_at).timestamp(),
        )
        for p in policies
        if _home_burst(p) > 0
    ]


@dataclass(frozen=True)
class _HandBackNote:
    """One hand-back as the policy, the event and the audit record say it: the cut in the
    policy's totals (burst-pool cards included), when it takes effect (aware), the sentence,
    and the figures behind it."""

    cut: HandBack
    effective: datetime
    message: str
    numbers: dict[str, Any]


def _hand_back_note(
    home_cut: HandBack, policy: ElasticPolicy, *, pool: Pool, free: int, now: datetime
) -> _HandBackNote:
    """The plan's cut of the home-pool cards moved to the policy's totals and said (pure)."""
    offset = policy.burst_cards  # the totals held, burst-pool cards included
    cut = replace(
        home_cut, cards_from=home_cut.cards_from + offset, cards_to=home_cut.cards_to + offset
    )
    effective = datetime.fromtimestamp(cut.effective_at, tz=now.tzinfo)
    message = (
        f"{cut.cards_from - cut.cards_to} burst card(s) handed back for a guaranteed "
        f"allocation in {pool.name}: {cut.cards_from} -> {cut.cards_to} cards from "
        f"{effective:%Y-%m-%d %H:%M %Z} (notice {cut.notice_s / 60:.0f} min)"
    )
    numbers = {
        "cards_from": cut.cards_from,
        "cards_to": cut.cards_to,
        "effective_at": effective.isoformat(),
        "notice_s": cut.notice_s,
        "free_cards": free,
    }
    return _HandBackNote(cut=cut, effective=effective, message=message, numbers=numbers)


def _hand_back_record(
    policy: ElasticPolicy, note: _HandBackNote, *, now: datetime, actor: Any
) -> ScaleEvent:
    """Carry out one hand-back: cut now when it is due within the loop's step (and apply it
    after commit), else leave it to :func:`_due_hand_backs`; the policy's last decision, the
    scale event and the audit record say it either way."""
    cut = note.cut
    due = cut.effective_at <= now.timestamp() + STEP_S
    if due:
        _cut_to(policy, cut.cards_to, now)
    policy.last_decision = {
        "reason": "hand_back",
        "message": note.message,
        **note.numbers,
        "decided_at": now.isoformat(),
    }
    policy.save(update_fields=["last_decision"])
    event = ScaleEvent.objects.create(
        policy=policy,
        decided_at=now,
        source=ScaleSource.HAND_BACK,
        action=ScaleAction.DOWN,
        reason="hand_back",
        cards_from=cut.cards_from,
        cards_to=cut.cards_to,
        burst_pool=policy.burst_pool if policy.burst_cards else None,
        burst_cards_to=policy.burst_cards,
        effective_at=note.effective,
        message=note.message,
        numbers=note.numbers,
    )
    audit_event_record(
        actor=actor,
        action="elastic.hand_back",
        obj=policy.allocation,
        before={"cards_held": cut.cards_from},
        after={"cards_held": cut.cards_to, **note.numbers},
        reason=note.message,
    )
    if due:
        enqueue_on_commit(ELASTIC_APPLY, policy.pk)
    return event


def elastic_hand_back(
    *, pool: Pool, gpu_model: GpuModel, starts_at: datetime, ends_at: datetime, actor: Any
) -> list[ScaleEvent]:
    """After a guaranteed approval in ``pool`` (whose row the caller holds locked): take burst
    cards back, newest first, until floors plus burst fit the cards usable over the new
    allocation's window. The cut takes effect when that allocation starts (at once if it has,
    else the loop carries it out then: :func:`_due_hand_backs`); the team is told now (the
    event, the live page and the audit record say how many cards go and when).

    Steps: the holders locked (:func:`_hand_back_holders`), what they borrow from this pool
    (:func:`_home_bursts`), the plan (:func:`pools.elastic.burst.hand_back_plan`), then each
    cut said (:func:`_hand_back_note`) and carried out (:func:`_hand_back_record`)."""
    now = timezone.now()
    policies = _hand_back_holders(pool, gpu_model, starts_at, ends_at)
    bursts = _home_bursts(policies)
    if not bursts:
        return []
    free = pool_free_cards(pool=pool, gpu_model=gpu_model, start=starts_at, end=ends_at)
    plan = hand_back_plan(
        capacity_cards=free,
        guaranteed_cards=0,
        bursts=bursts,
        now=now.timestamp(),
        guaranteed_starts_at=starts_at.timestamp(),
    )
    by_id = {p.pk: p for p in policies}
    return [
        _hand_back_record(
            by_id[home_cut.allocation_id],
            _hand_back_note(home_cut, by_id[home_cut.allocation_id], pool=pool, free=free, now=now),
            now=now,
            actor=actor,
        )
        for home_cut in plan
    ]


# ------------------------------------------------------------------------------ the HPA


def elastic_hpa_yaml(*, policy: ElasticPolicy) -> str | None:
    """The team's serving Deployment's ``autoscaling/v2`` HPA for this policy, as YAML for
    ``kubectl apply``; ``None`` without a Deployment name. Raises :class:`InvalidInput` when the
    policy cannot be one (a cooldown over an HPA policy period's 1,800 s cannot happen: the
    model caps it at 30 minutes)."""
    if not policy.deployment:
        return None
    spec = HpaSpec(
        deployment=policy.deployment,
        floor_cards=policy.allocation.card_count,
        ceiling_cards=policy.ceiling_cards,
        cards_per_replica=policy.cards_per_replica,
        min_replicas=policy.min_replicas,
        step_cards=policy.step_cards,
        util_pct=float(policy.up_util_pct),
        latency_ms=float(policy.up_latency_ms),
        up_window_s=policy.up_window_minutes * 60,
        down_window_s=policy.down_window_minutes * 60,
        cooldown_s=policy.cooldown_minutes * 60,
    )
    team = policy.allocation.team.slug
    try:
        hpa = hpa_manifest(team, namespace_of(policy), spec)
    except ValueError as exc:
        raise InvalidInput(str(exc), errors={"deployment": str(exc)}) from exc
    return render_yaml(
        [hpa],
        comment=f"gpu-pool-portal: HPA of team {team}'s Deployment {policy.deployment} "
        f"(elastic allocation #{policy.allocation_id})",
    )


# ------------------------------------------------------------------------------ what-if


WHATIF_MAX_DAYS = 30  # the readings are kept 31 days (models.READING_RETENTION_DAYS)
WHATIF_READ_PERCENT = 60  # a queued what-if's progress once its history is read
WHATIF_REPLAYED_PERCENT = 90  # ... and once replayed (the burst split and money remain)


class WhatIfSource(StrEnum):
    PROMETHEUS = "prometheus"  # the namespace's history in Prometheus
    RECORDED = "recorded"  # the readings the portal's own loop recorded (SignalReading)


@dataclass(frozen=True)
class WhatIfRun:
    """A what-if and where its history came from: ``samples`` readings of ``source``, the
    first at ``start`` and the last at ``end`` (the span the replay covers, what its totals are
    "over"), out of the window asked for, from ``asked_start``."""

    result: WhatIf
    source: WhatIfSource
    start: datetime
    end: datetime
    samples: int
    asked_start: datetime | None = None

    @property
    def short(self) -> bool:
        """The readings begin more than a reading's step after the window asked for: the
        totals cover less than the days asked (the loop had not recorded them yet)."""
        return self.asked_start is not None and self.start - self.asked_start > timedelta(
            seconds=STEP_S
        )

    @property
    def covered_text(self) -> str:
        """The span the readings cover in words (:func:`covered_text`)."""
        return covered_text((self.end - self.start).total_seconds())


def covered_text(seconds: float) -> str:
    """A span of ``seconds`` in words: ``9 minutes``, ``5.5 hours``, ``3.0 days``."""
    if seconds < 2 * 3600:
        minutes = round(seconds / 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


def _prometheus_samples(
    metrics: Any, policy: ElasticPolicy, rules: ScalingPolicy, start: datetime, now: datetime
) -> list[MetricSample]:
    """The samples of ``policy``'s namespace over ``[start, now)`` at :data:`STEP_S` from
    Prometheus (``metrics``: utilisation, cards reporting, latency; ``[]`` when it has none),
    read as from ``rules``' lower bound of cards (the cards held then are not in Prometheus;
    the lower bound was always held). Raises the adapter's errors."""
    namespace = namespace_of(policy)
    found = metrics.inference_signals(
        start=start,
        end=now,
        step_s=STEP_S,
        namespaces=[namespace],
        metrics=("util_pct", "cards_reporting", "latency_s"),
    )
    if namespace not in found:
        return []
    return metric_samples(found[namespace], cards_held=rules.lower_bound_cards)


def elastic_whatif(
    *,
    policy: ElasticPolicy,
    days: int = 30,
    metrics: Any = None,
    now: datetime | None = None,
    source: WhatIfSource | str | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> WhatIfRun | None:
    """Replay ``policy`` over the last ``days`` of its namespace's history: Prometheus' (three
    range queries in chunks; utilisation read from fewer cards than the policy's lower bound is
    unknown) when it is configured (the allocation's cluster's ``prometheus_url``, else
    ``PROMETHEUS_URL``), else the readings the loop recorded
    (one query); ``source`` picks one. ``None`` when the source picked is not available
    (Prometheus not configured, or no readings recorded) or, left to choose, neither is.
    ``on_progress(percent)`` is told :data:`WHATIF_READ_PERCENT` once the history is read (the
    range queries are most of a what-if's time). ``metrics`` given is the caller's to close; one
    built here is closed once read, also when reading fails. Raises
    :class:`~scheduler_adapters.errors.SchedulerError` when Prometheus cannot be read."""
    now = now or timezone.now()
    progress = on_progress or (lambda percent: None)
    start = now - timedelta(days=days)
    source = WhatIfSource(source) if source else None
    if source is not WhatIfSource.RECORDED:
        owned = metrics is None  # built here, closed here; a caller's is the caller's
        if owned:  # the allocation's cluster's own Prometheus, if it has one
            metrics = metrics_adapter(cluster=policy.allocation.pool.cluster)
        if metrics is not None:
            try:
                rules = scaling_policy(policy)
                samples = _prometheus_samples(metrics, policy, rules, start, now)
            finally:
                if owned:
                    metrics.close()
            progress(WHATIF_READ_PERCENT)
            result = replay(rules, samples)
            return _run(result, WhatIfSource.PROMETHEUS, samples, start, now)
        if source is WhatIfSource.PROMETHEUS:
            return None
    samples = recorded_samples(policy_id=policy.pk, start=start, end=now)
    if not samples:
        return None
    progress(WHATIF_READ_PERCENT)
    result = replay(scaling_policy(policy), samples)
    return _run(result, WhatIfSource.RECORDED, samples, start, now)


def _run(result, source, samples, start: datetime, now: datetime) -> WhatIfRun:
    """The run over the readings actually replayed: from the first sample to the last (the
    whole window asked when there were none)."""
    if not samples:
        return WhatIfRun(result, source, start, now, 0, start)
    first = datetime.fromtimestamp(samples[0].at, tz=now.tzinfo)
    last = datetime.fromtimestamp(samples[-1].at, tz=now.tzinfo)
    return WhatIfRun(result, source, first, last, len(samples), start)


def _whatif_burst_pool(policy: ElasticPolicy) -> Pool | None:
    """The burst pool ``policy``'s allocation would spill to: the one it holds cards in, else
    the first Kubernetes burst pool (by id) its team opted into; ``None`` without one."""
    if policy.burst_cards and policy.burst_pool_id:
        return policy.burst_pool
    return (
        Pool.objects.filter(
            burst=True, scheduler=Scheduler.KUBERNETES,
            burst_opt_ins__team_id=policy.allocation.team_id,
        ).order_by("pk").first()
    )  # fmt: skip


def _whatif_home_cards(policy: ElasticPolicy, now: datetime) -> int:
    """The cards ``policy``'s allocation can hold in its home pool now: its floor, its own home
    burst, and what the pool can still lend (its free cards over the lending horizon less every
    elastic allocation's home burst there, this one's included)."""
    allocation = policy.allocation
    free = pool_free_cards(
        pool=allocation.pool, gpu_model=allocation.gpu_model, start=now, end=now + LEND_HORIZON
    )
    others = sum(
        _home_burst(p)
        for p in _group_policies(allocation.pool, allocation.gpu_model, now)
        if p.pk != policy.pk
    )
    # as the loop lends (:func:`_judge_group`): ``free`` counts guaranteed cards only, so
    # what is left to lend is ``free`` less every allocation's home burst, this one's too
    own = _home_burst(policy)
    return allocation.card_count + own + max(0, free - others - own)


def elastic_burst_whatif(*, policy: ElasticPolicy, run: WhatIfRun, now: datetime | None = None):
    """The what-if's load with and without a burst pool (issue 35), or ``None`` when the team
    may use no burst pool for it. The home pool holds the floor plus this allocation's own
    home burst plus what it can still lend now (its free cards over the lending horizon, which
    count guaranteed cards only, less the home burst of every elastic allocation there, this
    one's included); the replayed cards above that go to the burst pool the allocation holds
    cards in, else the first the team opted into — or, without burst, are not served. Card-
    hours from :func:`pools.elastic.burst_pool.burst_split`, priced by the function
    ``settings.ELASTIC_BURST_WHATIF_MONEY`` names (billing's; ``None`` without one), told the
    allocation's pricing method: the home card-hours cost what its statement would charge for
    them (burst price, on-use price, or nothing when its tokens pay)."""
    from django.utils.module_loading import import_string

    from pools.capacity.arithmetic import card_seconds_hours

    now = now or timezone.now()
    allocation = policy.allocation
    burst_pool = _whatif_burst_pool(policy)
    if burst_pool is None:
        return None
    home_cards = _whatif_home_cards(policy, now)
    home_s, burst_s = burst_split(
        run.result.timeline,
        floor_cards=allocation.card_count,
        home_cards=home_cards,
        start=run.start.timestamp(),
        end=run.end.timestamp(),
    )
    # to the places every page and the API show card-hours with, half-up, before pricing:
    # the block's amounts are then its shown card-hours × its prices
    places = Decimal(1).scaleb(-CARD_HOUR_PLACES)
    home_hours = card_seconds_hours(Decimal(int(home_s))).quantize(places, ROUND_HALF_UP)
    burst_hours = card_seconds_hours(Decimal(int(burst_s))).quantize(places, ROUND_HALF_UP)
    pricer = getattr(settings, "ELASTIC_BURST_WHATIF_MONEY", "")
    money = (
        import_string(pricer)(
            gpu_model_id=allocation.gpu_model_id, burst_pool_id=burst_pool.pk,
            home_card_hours=home_hours, burst_card_hours=burst_hours, now=now,
            pricing_method=allocation.pricing_method,
        )
        if pricer
        else None
    )  # fmt: skip
    return {
        "burst_pool": burst_pool.slug,
        "burst_pool_name": burst_pool.name,
        "home_cards": home_cards,
        "money": money,
    }


def whatif_unavailable_reason(source: WhatIfSource | str | None) -> str:
    """Why :func:`elastic_whatif` had no history to replay, in words."""
    if source == WhatIfSource.PROMETHEUS:
        return "PROMETHEUS_URL is not set."
    return (
        "PROMETHEUS_URL is not set and the loop has recorded no readings for this allocation "
        "in that time."
    )


def _whatif_card_hours(value: float) -> Decimal:
    """A replay's card-hours (a float sum of cards × seconds ÷ 3,600) to
    :data:`pools.web.numbers.CARD_HOUR_PLACES` places, half-up, from the float's shortest
    repr (``2.025`` -> ``2.025``, ``10 / 60`` -> ``0.167``)."""
    return Decimal(repr(value)).quantize(Decimal(1).scaleb(-CARD_HOUR_PLACES), ROUND_HALF_UP)


def whatif_answer(run: WhatIfRun, *, days: int, burst: dict | None) -> dict[str, Any]:
    """A what-if as JSON (what the API answers and a queued what-if stores): the span the
    readings cover (``start``/``end`` ISO 8601, ``covered_hours`` to 2 places, ``short``: less
    than the ``days`` asked), the totals -- card-hours as decimal strings to 3 places, as every
    page shows them (``"2.025"``; ``saved_card_hours`` is the two rounded totals' difference,
    so ``card_hours + saved_card_hours == fixed_card_hours`` as shown), minutes to 1 -- the
    card ``timeline`` ``[[unix s, cards], ...]`` and ``burst`` (:func:`whatif_burst_json`).
    What-ifs stored before kept card-hours as numbers to 2 places; the pages read both."""
    result = run.result
    used = _whatif_card_hours(result.card_hours)
    fixed = _whatif_card_hours(result.fixed_card_hours)
    return {
        "source": run.source.value,
        "samples": run.samples,
        "start": run.start.isoformat(),
        "end": run.end.isoformat(),
        "days": days,
        "covered_hours": round((run.end - run.start).total_seconds() / 3600, 2),
        "short": run.short,
        "scale_ups": result.scale_ups,
        "scale_downs": result.scale_downs,
        "min_cards": result.min_cards,
        "max_cards": result.max_cards,
        "card_hours": str(used),
        "fixed_cards": result.fixed_cards,
        "fixed_card_hours": str(fixed),
        "saved_card_hours": str(fixed - used),
        "breach_minutes": round(result.breach_minutes, 1),
        "unknown_minutes": round(result.unknown_minutes, 1),
        "timeline": [list(point) for point in result.timeline],
        "burst": whatif_burst_json(burst),
    }


def whatif_burst_json(found: dict | None) -> dict | None:
    """The what-if's ``burst`` block (issue 35) from :func:`elastic_burst_whatif`: the same
    load with and without the burst pool, card-hours to 3 places, half-up (``"1.003"``, as the
    what-if's totals and every page show them) and amounts as strings in ``currency``; ``None``
    when the team may use no burst pool. ``home_price_basis`` (``gpu-burst``, ``gpu-used``,
    ``tokens``) and ``home_price_label`` say which price the home card-hours got, by the
    allocation's pricing method. What-ifs stored before kept 6 places and had no basis (the
    burst price); the pages read both."""
    if found is None:
        return None
    money = found["money"] or {}

    def text(value):
        return None if value is None else str(value)

    def side(name: str) -> dict:
        part = money.get(name) or {}
        return {key: text(value) for key, value in part.items()}

    return {
        "burst_pool": found["burst_pool"],
        "burst_pool_name": found["burst_pool_name"],
        "home_cards": found["home_cards"],
        "currency": money.get("currency"),
        "home_price_per_card_hour": text(money.get("home_price")),
        "home_price_basis": money.get("home_price_basis"),
        "home_price_label": money.get("home_price_label"),
        "burst_pool_price_per_card_hour": text(money.get("burst_pool_price")),
        "with_burst": side("with_burst"),
        "without_burst": side("without_burst"),
        "reason": money.get("reason", "no pricing is configured"),
        # as pages show them (``2.90 EUR``); None without pricing
        "texts": money.get("texts"),
    }


def _trial(policy: ElasticPolicy, fields: dict[str, Any]) -> ElasticPolicy:
    """An unsaved copy of ``policy`` with the trial ``fields`` (JSON values) in place."""
    trial = copy.copy(policy)
    for name, value in fields.items():
        setattr(trial, name, ElasticPolicy._meta.get_field(name).to_python(value))
    return trial


def elastic_whatif_queue(
    *,
    policy: ElasticPolicy,
    actor: Any,
    days: int = WHATIF_MAX_DAYS,
    source: WhatIfSource | str | None = None,
    fields: dict[str, Any] | None = None,
) -> ElasticWhatIf:
    """Store a what-if of ``policy`` (pending) and queue its task when the transaction commits
    (:func:`elastic_whatif_run`): the web request never reads Prometheus (issue 29).

    ``fields`` are trial values of :data:`EDITABLE_FIELDS` replayed instead of the saved ones
    (none: the saved policy); they are checked together as a save would check them. Raises
    :class:`InvalidInput` with ``errors`` ``{field: message}`` for ``days`` outside 1-30, an
    unknown ``source``, unknown fields or trial values a save would refuse; nothing is written
    then. Anyone who sees the policy may ask (it changes nothing)."""
    fields = dict(fields or {})
    errors: dict[str, str] = {}
    if refusal := days_refusal(days, most=WHATIF_MAX_DAYS):
        errors["days"] = refusal
    if source and source not in set(WhatIfSource):
        errors["source"] = "prometheus or recorded."
    errors.update({name: "Unknown field." for name in set(fields) - set(EDITABLE_FIELDS)})
    if errors:
        raise InvalidInput("The what-if cannot run with these values.", errors=errors)
    trial_ceiling = fields.get("ceiling_cards", policy.ceiling_cards)
    _check(_trial(policy, fields), ceiling_set=trial_ceiling != policy.ceiling_cards)
    return queued_run_create(
        ElasticWhatIf,
        task_name=ELASTIC_WHATIF,
        actor=actor,
        policy=policy,
        params={"days": days, "source": str(source or ""), "fields": params_json(fields)},
    )


def elastic_whatif_run(*, whatif_id: int, metrics: Any = None) -> ElasticWhatIf:
    """Run a queued what-if (:func:`~pools.jobs.runs.queued_run_execute`): :func:`elastic_whatif`
    over its params, then the burst split and money; done with :func:`whatif_answer` as
    ``result``, or failed with ``error_code`` ``unavailable`` (no history source),
    ``prometheus_unavailable`` (Prometheus could not be read) or ``internal``. ``progress``: 0
    started, :data:`WHATIF_READ_PERCENT` history read, :data:`WHATIF_REPLAYED_PERCENT`
    replayed, 100. :class:`NotFound` when the row is gone (the policy was deleted)."""

    def compute(whatif: ElasticWhatIf, progress: Callable[[int], None]) -> dict[str, Any]:
        params = whatif.params
        policy = ElasticPolicy.objects.select_related(
            "allocation__team", "allocation__pool", "burst_pool"
        ).get(pk=whatif.policy_id)
        trial = _trial(policy, params.get("fields") or {})
        source = params.get("source") or None
        try:
            run = elastic_whatif(
                policy=trial, days=params["days"], source=source, metrics=metrics,
                on_progress=progress,
            )  # fmt: skip
        except SchedulerError as exc:
            code = "prometheus_unavailable"
            raise RunFailed(f"Prometheus could not be read: {exc}", code=code) from exc
        if run is None:
            raise RunFailed(whatif_unavailable_reason(source), code="unavailable")
        progress(WHATIF_REPLAYED_PERCENT)
        burst = elastic_burst_whatif(policy=trial, run=run)
        return whatif_answer(run, days=params["days"], burst=burst)

    return queued_run_execute(ElasticWhatIf, run_id=whatif_id, compute=compute)


def elastic_whatifs_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Beat's housekeeping of queued what-ifs (:func:`~pools.jobs.runs.queued_runs_sweep`):
    lost ones queued again, those finished more than :data:`READING_RETENTION_DAYS` days ago
    deleted. Returns ``{"requeued", "deleted"}``."""
    return queued_runs_sweep(
        ElasticWhatIf, task_name=ELASTIC_WHATIF, keep_days=READING_RETENTION_DAYS, now=now
    )


def elastic_readings_prune(*, now: datetime | None = None) -> int:
    """Delete readings older than the what-if's longest replay; returns how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=READING_RETENTION_DAYS)
    deleted, _ = SignalReading.objects.filter(read_at__lt=cutoff).delete()
    return deleted
