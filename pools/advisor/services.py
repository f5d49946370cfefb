"""The advisor's writes: the pass that judges every running allocation and opens, updates and
closes findings; acknowledging and muting a finding (audited); the weekly digest.

A pass is safe to run twice for the same instant: at most one live finding per (allocation,
rule) is a database constraint, and a second pass updates what the first opened.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from pools.advisor import rules
from pools.advisor.choices import SEVERITY_RANK, FindingStatus
from pools.advisor.models import AdvisorDigestOptIn, AdvisorFinding, AdvisorRun
from pools.advisor.rules import (
    RULE_TITLES,
    DecaySignals,
    FabricSignals,
    Finding,
    NeighbourSignals,
    Outcome,
    PromptBloatSignals,
    Rule,
    ScalingSignals,
    Thresholds,
    Undecided,
    WindowSignals,
)
from pools.advisor.selectors import (
    advisor_buckets,
    advisor_days,
    advisor_live_allocations,
    advisor_placement,
    advisor_scaling,
    fabric_of,
    live_findings,
    neighbours_of,
)
from pools.audit.services import audit_event_record
from pools.common.errors import InvalidInput, InvalidTransition, PermissionDenied
from pools.serving.models import ServedModel
from pools.tenancy.permissions import may_get_advisor_digest, require_manager
from pools.tenancy.selectors import managed_team_list
from pools.tokenflow.selectors import prompt_bloat_signals_of

MAX_REASON_CHARS = 1000
STALE_AFTER = timedelta(minutes=15)  # as pools.serving.selectors.STALE_AFTER: three missed passes


def advisor_thresholds() -> Thresholds:
    """:class:`Thresholds` with the overrides of ``settings.ADVISOR_THRESHOLDS`` (a dict of
    field name -> number); an unknown name is a configuration error (``ValueError``)."""
    overrides = dict(getattr(settings, "ADVISOR_THRESHOLDS", {}) or {})
    unknown = set(overrides) - Thresholds.names()
    if unknown:
        raise ValueError(f"ADVISOR_THRESHOLDS names no threshold: {', '.join(sorted(unknown))}")
    return Thresholds(**overrides)


@dataclass(frozen=True)
class Gathered:
    """What one pass read for every allocation it judges (see :func:`advisor_gather`)."""

    buckets: dict
    neighbours: dict
    placement: dict
    fabric: dict
    scaling: dict
    days: dict
    bloat: dict = field(default_factory=dict)


def advisor_gather(*, allocation_ids: list[int], now: datetime) -> Gathered:
    """Every signal the rules read for ``allocation_ids`` in seven queries: the window's
    5-minute rollups (``ADVISOR_WINDOW_HOURS``), placement, node labels, elastic policies and
    scale events, and per-day summaries over ``ADVISOR_DECAY_DAYS``."""
    start = now - timedelta(hours=settings.ADVISOR_WINDOW_HOURS)
    placement = advisor_placement(allocation_ids=allocation_ids)
    return Gathered(
        buckets=advisor_buckets(allocation_ids=allocation_ids, start=start, end=now),
        neighbours=neighbours_of(placement),
        placement=placement,
        fabric=fabric_of(node for nodes in placement.values() for node, _ in nodes),
        scaling=advisor_scaling(allocation_ids=allocation_ids, start=start, end=now),
        days=advisor_days(
            allocation_ids=allocation_ids,
            start=now - timedelta(days=settings.ADVISOR_DECAY_DAYS),
            end=now,
        ),
        bloat=_bloat_signals(allocation_ids=allocation_ids, start=start, end=now),
    )


def _model_key(name: str) -> str:
    """A served model's name with case and punctuation dropped: the gateway's
    ``qwen2.5-14b-instruct`` and the sizing id ``qwen2_5_14b`` become ``qwen2514binstruct`` and
    ``qwen2514b``."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _bloat_signals(*, allocation_ids: list[int], start: datetime, end: datetime) -> dict:
    """Rule 5's signals per allocation: allocation id -> the token flow
    (:func:`pools.tokenflow.selectors.prompt_bloat_signals`) of its team's agent tasks on the
    model it serves (``ServedModel``) whose first call is in the window, or a reason why there
    are none. The gateway names models its own way, so a task's model matches when its name
    without case and punctuation starts with the sizing id's (``qwen2.5-14b-instruct`` serves
    ``qwen2_5_14b``); two or more matching names are ambiguous and stay undecided. Two
    queries for any number of allocations: what they serve, and every team's token flow per
    model (:func:`pools.tokenflow.selectors.prompt_bloat_signals_of`)."""
    served = ServedModel.objects.filter(allocation_id__in=allocation_ids).values_list(
        "allocation_id", "model_id", "allocation__team_id"
    )
    served = [(a, m, t) for a, m, t in served]
    flows = prompt_bloat_signals_of(team_ids={t for _, _, t in served}, since=start, until=end)
    names: dict[int, list[str]] = defaultdict(list)
    for team_id, name in sorted(flows):
        names[team_id].append(name)
    result: dict = {}
    for allocation_id, model_id, team_id in served:
        matching = [n for n in names[team_id] if _model_key(n).startswith(_model_key(model_id))]
        if len(matching) != 1:
            result[allocation_id] = (
                f"{len(matching)} gateway models match {model_id}"
                if matching
                else f"no per-call token data for {model_id}"
            )
            continue
        signals = flows[team_id, matching[0]]
        result[allocation_id] = (
            PromptBloatSignals(**signals) if signals else f"no agent tasks on {matching[0]}"
        )
    return result


def _busy_cards(buckets: list) -> dict[datetime, float | None]:
    """Bucket start -> busy cards (utilisation x cards held; ``None`` unknown)."""
    return {
        b.at: None if b.gpu_util_pct is None else b.gpu_util_pct / 100 * b.cards_held
        for b in buckets
    }


def _neighbour_signals(allocation_id: int, own: tuple, g: Gathered, busy: dict) -> NeighbourSignals:
    """Rule 2's signals: the neighbours' busy cards summed per bucket of ``own`` (unknown
    when any neighbour's is). ``busy``: allocation id -> :func:`_busy_cards`, filled as
    needed (each allocation's computed once per pass)."""
    if allocation_id not in g.neighbours:
        return NeighbourSignals(own, tuple(None for _ in own), None, "node", ())
    ids, shared, hosts = g.neighbours[allocation_id]
    per_neighbour = []
    for other in ids:
        if other not in busy:
            busy[other] = _busy_cards(g.buckets.get(other, []))
        per_neighbour.append(busy[other])
    loads = []
    for b in own:
        total = 0.0
        for cards in per_neighbour:
            value = cards.get(b.at)
            if value is None:
                total = None
                break
            total += value
        loads.append(total if per_neighbour else None)
    return NeighbourSignals(
        buckets=own,
        neighbour_busy_cards=tuple(loads),
        neighbours=len(ids),
        shared=shared,
        hosts=hosts,
    )


def _fabric_signals(allocation_id: int, own: tuple, g: Gathered) -> FabricSignals:
    placed = (node for node, _ in g.placement.get(allocation_id, []))
    nodes = sorted(placed, key=lambda node: (node[1], node[0] or 0))  # by name, then cluster
    hosts = tuple(host for _, host in nodes)
    known = [g.fabric.get(node) for node in nodes]
    fast = False if False in known else (None if None in known or not known else True)
    return FabricSignals(nodes=len(hosts), hosts=hosts, fast_fabric=fast, buckets=own)


def allocation_outcomes(
    *, allocation, g: Gathered, now: datetime, t: Thresholds, busy: dict | None = None
) -> dict[Rule, Outcome]:
    """Every rule's outcome for one allocation from the gathered signals. Rule 5 (prompt
    bloat) reads the token flow of the team's agent tasks on the model it serves."""
    own = tuple(g.buckets.get(allocation.pk, ()))
    fresh = bool(own) and now - own[-1].at <= STALE_AFTER + timedelta(seconds=rules.BUCKET_S)
    window = WindowSignals(buckets=own, fresh=fresh)
    cooldown_s, events = g.scaling.get(allocation.pk, (None, []))
    start = now - timedelta(hours=settings.ADVISOR_WINDOW_HOURS)
    deploys = (allocation.starts_at,) if allocation.starts_at >= start else ()
    scaling = ScalingSignals(
        cooldown_s=cooldown_s, events=tuple(events), buckets=own, deploys=deploys
    )
    return {
        Rule.BATCHING: rules.rule_batching(window, t),
        Rule.NOISY_NEIGHBOUR: rules.rule_noisy_neighbour(
            _neighbour_signals(allocation.pk, own, g, {} if busy is None else busy), t
        ),
        Rule.MEMORY_PRESSURE: rules.rule_memory_pressure(window, t),
        Rule.INTERCONNECT: rules.rule_interconnect(_fabric_signals(allocation.pk, own, g), t),
        Rule.PROMPT_BLOAT: _prompt_bloat(g.bloat.get(allocation.pk), t, start),
        Rule.SCALING_CHURN: rules.rule_scaling_churn(scaling, t),
        Rule.COLD_START: rules.rule_cold_start(scaling, t),
        Rule.QUEUE_AVALANCHE: rules.rule_queue_avalanche(window, t),
        Rule.MEMORY_DECAY: rules.rule_memory_decay(
            DecaySignals(days=tuple(g.days.get(allocation.pk, ()))), t
        ),
        Rule.OUTSIDE_GPU: rules.rule_outside_gpu(window, t),
        Rule.SATURATION: rules.rule_saturation(window, t),
    }


def _prompt_bloat(signals, t: Thresholds, since: datetime) -> Outcome:
    if isinstance(signals, PromptBloatSignals):
        return rules.rule_prompt_bloat(signals, t, since=since)
    return Undecided(Rule.PROMPT_BLOAT, signals or "no per-call token data")


def allocation_undecided(*, allocation, now: datetime) -> list[tuple[str, str]]:
    """The rules that cannot judge ``allocation`` at ``now``, as (title, what is missing),
    for its findings panel: the same gathering and rules as a pass, for one allocation."""
    gathered = advisor_gather(allocation_ids=[allocation.pk], now=now)
    outcomes = allocation_outcomes(
        allocation=allocation, g=gathered, now=now, t=advisor_thresholds()
    )
    return [
        (RULE_TITLES[rule.value], outcome.reason)
        for rule, outcome in outcomes.items()
        if isinstance(outcome, Undecided)
    ]


def _finding_fields(outcome: Finding) -> dict:
    return {
        "severity": outcome.severity.value,
        "severity_rank": SEVERITY_RANK[outcome.severity],
        "summary": outcome.summary[:300],
        "fix": outcome.fix,
        "evidence": outcome.numbers,
    }


def _new_finding(allocation, rule: Rule, outcome: Finding, now: datetime) -> AdvisorFinding:
    """An unsaved open :class:`AdvisorFinding` of ``rule`` on ``allocation`` (and its team)
    from ``outcome``, opened and last seen at ``now``."""
    return AdvisorFinding(
        allocation=allocation,
        team_id=allocation.team_id,
        rule=rule.value,
        since=outcome.since,
        opened_at=now,
        last_seen_at=now,
        **_finding_fields(outcome),
    )


def _refreshed(existing: AdvisorFinding, outcome: Finding, now: datetime) -> bool:
    """Whether the live ``existing`` finding changed: if ``outcome``'s severity, summary, fix
    or evidence differ, they are set on it (unsaved) with ``last_seen_at = now`` and ``True``
    is returned; the same ones leave it untouched (``False``)."""
    fields = _finding_fields(outcome)
    if all(getattr(existing, k) == v for k, v in fields.items()):
        return False
    for name, value in fields.items():
        setattr(existing, name, value)
    existing.last_seen_at = now
    return True


def _apply(
    allocations: list, outcomes: dict[int, dict[Rule, Outcome]], now: datetime
) -> tuple[int, int, int]:
    """Open, update and close findings from ``outcomes``; returns (opened, updated, closed).
    A finding whose rule is undecided now stays as it is (unknown is not cleared); one of an
    allocation that is no longer running closes. A live finding seen again with the same
    severity, summary, fix and evidence only gets its ``last_seen_at``, in one ``UPDATE`` for
    all of them (``bulk_update``'s per-row ``CASE`` took seconds at 2,000 allocations)."""
    by_id = {a.pk: a for a in allocations}
    live = {(f.allocation_id, f.rule): f for f in live_findings(allocation_ids=None)}
    new, changed, seen, closed = [], [], [], []
    for allocation_id, per_rule in outcomes.items():
        for rule, outcome in per_rule.items():
            existing = live.pop((allocation_id, rule.value), None)
            if isinstance(outcome, Finding):
                if existing is None:
                    new.append(_new_finding(by_id[allocation_id], rule, outcome, now))
                elif _refreshed(existing, outcome, now):
                    changed.append(existing)
                else:
                    seen.append(existing.pk)
            elif outcome is None and existing is not None:
                closed.append(existing)
    # live findings of allocations not judged (ended, or not running any more) close too
    closed.extend(f for (a, _), f in live.items() if a is not None and a not in outcomes)
    for f in closed:
        f.status, f.closed_at = FindingStatus.CLOSED, now
    AdvisorFinding.objects.bulk_create(new, batch_size=1000)
    AdvisorFinding.objects.bulk_update(
        changed,
        ["severity", "severity_rank", "summary", "fix", "evidence", "last_seen_at"],
        batch_size=1000,
    )
    AdvisorFinding.objects.bulk_update(closed, ["status", "closed_at"], batch_size=1000)
    AdvisorFinding.objects.filter(pk__in=seen).update(last_seen_at=now)
    return len(new), len(changed) + len(seen), len(closed)


def advisor_pass(*, now: datetime) -> AdvisorRun:
    """Judge every running allocation at ``now`` with every rule, and open / update / close
    findings in one transaction; returns the :class:`AdvisorRun` with its counts (its
    ``undecided``: rule -> allocations that rule could not judge)."""
    run = AdvisorRun.objects.create(started_at=timezone.now(), evaluated_at=now)
    thresholds = advisor_thresholds()
    allocations = list(advisor_live_allocations())
    ids = [a.pk for a in allocations]
    gathered = advisor_gather(allocation_ids=ids, now=now)
    busy: dict = {}
    outcomes = {
        a.pk: allocation_outcomes(allocation=a, g=gathered, now=now, t=thresholds, busy=busy)
        for a in allocations
    }
    undecided = Counter(
        rule.value
        for per_rule in outcomes.values()
        for rule, outcome in per_rule.items()
        if isinstance(outcome, Undecided)
    )
    with transaction.atomic():
        opened, updated, closed = _apply(allocations, outcomes, now)
        run.allocations = len(allocations)
        run.opened, run.updated, run.closed = opened, updated, closed
        run.undecided = dict(sorted(undecided.items()))
        run.finished_at = timezone.now()
        run.save()
    return run


# ------------------------------------------------------------------------ acknowledge / mute


def _clean_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("Say why (a reason is required).", field="reason")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"The reason is at most {MAX_REASON_CHARS} characters.", field="reason")
    return reason


TRIAGE = {
    # action: (status it sets, statuses it may start from)
    "acknowledge": (FindingStatus.ACKNOWLEDGED, (FindingStatus.OPEN,)),
    "mute": (FindingStatus.MUTED, (FindingStatus.OPEN, FindingStatus.ACKNOWLEDGED)),
    "unmute": (FindingStatus.OPEN, (FindingStatus.MUTED, FindingStatus.ACKNOWLEDGED)),
}


def advisor_finding_triage(
    *, finding: AdvisorFinding, action: str, actor, reason: str, request_id: str = ""
) -> AdvisorFinding:
    """Acknowledge, mute or unmute ``finding`` (:data:`TRIAGE`) with ``reason``: the team's
    managers and pool admins; audited with the status before and after. Raises
    :class:`InvalidInput` (no or too long reason, unknown action),
    :class:`~pools.common.errors.PermissionDenied`, :class:`InvalidTransition` (closed, or already
    in that status)."""
    if action not in TRIAGE:
        raise InvalidInput(f"Unknown action {action!r}.", field="action")
    require_manager(actor, finding.team)
    reason = _clean_reason(reason)
    target, sources = TRIAGE[action]
    with transaction.atomic():
        locked = AdvisorFinding.objects.select_for_update().get(pk=finding.pk)
        if locked.status not in sources:
            raise InvalidTransition(
                f"A finding that is {locked.status} cannot be {action}d.",
                status=locked.status,
                action=action,
            )
        before = {"status": locked.status, "reason": locked.reason}
        locked.status = target
        locked.reason = reason
        locked.status_by = actor
        locked.status_at = timezone.now()
        locked.save(update_fields=["status", "reason", "status_by", "status_at"])
        audit_event_record(
            actor=actor,
            action=f"advisor_finding.{action}",
            obj=locked,
            before=before,
            after={"status": locked.status, "reason": reason},
            reason=reason,
            request_id=request_id,
        )
    return locked


# ---------------------------------------------------------------------------------- digest


def advisor_digest_set(*, user, wanted: bool) -> bool:
    """Opt ``user`` in to (or out of) the weekly digest; returns whether they are now in.
    Opting in is for managers of a team (:func:`~pools.tenancy.permissions.
    may_get_advisor_digest`), else :class:`~pools.common.errors.PermissionDenied` and nothing
    written; anyone may opt out."""
    if wanted and not may_get_advisor_digest(user):
        raise PermissionDenied(
            "The weekly digest is of the teams you manage, and you manage none.", action="digest"
        )
    if wanted:
        AdvisorDigestOptIn.objects.get_or_create(user=user)
    else:
        AdvisorDigestOptIn.objects.filter(user=user).delete()
    return wanted


def _digest_lines(findings: list[AdvisorFinding]) -> list[str]:
    """The lines of a digest of ``findings`` (ordered by team name): per team a heading with
    its count, then per finding its severity, rule title, allocation (or "team"), local start
    time and summary, and its fix on a line of its own."""
    by_team: dict[str, list] = defaultdict(list)
    for f in findings:
        by_team[f.team.name].append(f)
    lines = []
    for team, items in by_team.items():
        lines.append(f"{team}: {len(items)} finding(s)")
        for f in items:
            subject = f"allocation #{f.allocation_id}" if f.allocation_id else "team"
            lines.append(
                f"  [{f.severity}] {RULE_TITLES[f.rule]} - {subject}, since "
                f"{timezone.localtime(f.since):%Y-%m-%d %H:%M}: {f.summary}"
            )
            lines.append(f"    Fix: {f.fix}")
    return lines


def advisor_digest_send(*, now: datetime) -> dict[str, int]:
    """E-mail each opted-in user the live findings (not muted) of the teams they manage, once
    a week (skipped when their last digest is under 6 days old, so beat may run it daily);
    returns ``{"sent", "skipped"}``. Users with no finding get nothing (skipped)."""
    sent = skipped = 0
    opt_ins = AdvisorDigestOptIn.objects.select_related("user")
    for opt_in in opt_ins:
        user = opt_in.user
        if opt_in.last_sent_at and now - opt_in.last_sent_at < timedelta(days=6):
            skipped += 1
            continue
        findings = list(
            AdvisorFinding.objects.filter(
                team__in=managed_team_list(user=user),
                status__in=[FindingStatus.OPEN, FindingStatus.ACKNOWLEDGED],
            )
            .select_related("team")
            .order_by("team__name", "severity_rank", "-last_seen_at")[:200]
        )
        if not findings or not user.email:
            skipped += 1
            continue
        send_mail(
            subject=f"[gpu-pool] Advisor: {len(findings)} finding(s) this week",
            message="\n".join(_digest_lines(findings)),
            from_email=None,
            recipient_list=[user.email],
            fail_silently=True,
        )
        opt_in.last_sent_at = now
        opt_in.save(update_fields=["last_sent_at"])
        sent += 1
    return {"sent": sent, "skipped": skipped}
