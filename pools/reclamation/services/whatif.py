"""What-if over past data (issue 7): replay a pool's reclamation policy over the metrics of
the last days and say what it *would* have done. Read-only: no findings, no audit events, no
scheduler calls, no e-mail.

One Prometheus range query (60 s steps) covers the whole period plus one window; then, every
``step_minutes``, each allocation that held cards at that moment (started at least one window
before, not yet ended) is evaluated with :func:`pools.reclamation.evaluate.evaluate_group` and
the policy's thresholds (optionally overridden), grouped and mapped to series exactly as
:func:`pools.reclamation.services.scan.idle_scan` does. A finding "opens" at the first idle step,
closes on a busy step, and waits on an unknown one (unknown never counts as idle); it "reclaims"
at the first step at or after first idle + grace where the cards are certainly idle and no
exemption covers it. The grace is counted from the first idle step (as in dry run: a live
policy warns at that same scan). Each step counts the cards each allocation held at that moment
(:func:`pools.reclamation.card_timeline.card_pieces`, from its reclamations and undos, as billing
charges them): one shrunk from 4 cards to 1 at 06:00 is replayed with 4 before 06:00 and 1
after, and one that held none then (ended by a reclamation, later undone) is not evaluated.
The card-hours a reclaim would have freed follow the same pieces. Limit of a replay: the
cooldown is not applied.

A page or the API never runs it in the request: :func:`reclamation_whatif_queue` stores a
:class:`~pools.reclamation.models.ReclamationWhatIf` and a task runs
:func:`reclamation_whatif_run` (issue 29).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from pools.capacity.arithmetic import card_hours
from pools.capacity.lifecycle import RAN_STATUSES
from pools.capacity.models import Allocation
from pools.clusters.adapters import metrics_url
from pools.common.choices import Scheduler
from pools.common.errors import InvalidInput
from pools.inventory.models import Node, Pool
from pools.jobs import RECLAMATION_WHATIF
from pools.jobs.runs import (
    RunFailed,
    days_refusal,
    params_json,
    queued_run_create,
    queued_run_execute,
    queued_runs_sweep,
)
from pools.reclamation.card_timeline import CardPiece, allocations_card_pieces
from pools.reclamation.evaluate import (
    AllocationShare,
    GroupEvaluation,
    Verdict,
    evaluate_group,
    split_group,
)
from pools.reclamation.models import (
    WHATIF_FIELDS,
    Exemption,
    ReclamationPolicy,
    ReclamationWhatIf,
)
from pools.reclamation.services.scan import (
    STEP_S,
    devices_by_namespace,
    devices_for_group,
    devices_on_inventory,
    metrics_adapter,
    policy_thresholds,
)
from pools.web.numbers import CARD_HOUR_PLACES
from scheduler_adapters.errors import SchedulerError

OVERRIDABLE = WHATIF_FIELDS
MAX_DAYS = 30
KEEP_DAYS = 30  # a finished what-if is kept this long (its link keeps working)
READ_PERCENT = 40  # a queued what-if once Prometheus answered; the steps fill the rest


@dataclass
class WhatIfRow:
    """One allocation: ``card_count`` the most cards it held at any time from one window before
    the replayed period to its end (:func:`most_held`; its cards now until the replay reads its
    card pieces), ``first_idle`` (the first step a finding would have opened),
    ``would_reclaim_at`` (``None``: never), ``cards_reclaimed`` (of the cards it held at that
    step, which a later reclamation may have lowered since) and ``card_hours_freed`` (the cards
    held above those kept × hours, from the reclaim to the allocation's end or ``now``,
    whichever first, a ``Decimal`` to :data:`pools.web.numbers.CARD_HOUR_PLACES` places,
    half-up)."""

    allocation: Allocation
    team: str
    card_count: int
    first_idle: datetime | None = None
    would_reclaim_at: datetime | None = None
    cards_reclaimed: int = 0
    card_hours_freed: Decimal = Decimal(0)
    findings: int = 0
    note: str = ""


@dataclass
class WhatIfReport:
    pool: Pool
    start: datetime
    end: datetime
    step_minutes: int
    policy: dict[str, Any]
    error: str | None = None
    # "unavailable" (no Prometheus configured) or "prometheus_unavailable" with ``error``
    error_code: str = ""
    rows: list[WhatIfRow] = field(default_factory=list)

    @property
    def findings(self) -> int:
        return sum(r.findings for r in self.rows)

    @property
    def reclaimed(self) -> int:
        return sum(1 for r in self.rows if r.would_reclaim_at is not None)

    @property
    def cards_reclaimed(self) -> int:
        return sum(r.cards_reclaimed for r in self.rows)

    @property
    def card_hours_freed(self) -> Decimal:
        """Σ of the rows' (each already to 3 places): the total the table's rows add up to."""
        return sum((r.card_hours_freed for r in self.rows), Decimal(0))


NO_PROMETHEUS = (
    "It replays each card's dcgm-exporter readings from Prometheus, and no Prometheus is "
    "configured for this pool (its cluster's Prometheus URL, or PROMETHEUS_URL): the portal "
    "keeps no per-card history of its own to replay."
)


def reclamation_whatif_unavailable(*, pool: Pool) -> str | None:
    """Why a what-if of ``pool`` would fail before it is queued (:data:`NO_PROMETHEUS`: neither
    its cluster's ``prometheus_url`` nor ``PROMETHEUS_URL`` is set), so the page can say so
    instead of offering a run that ends ``unavailable``; ``None`` when it can read Prometheus
    (which may still not answer)."""
    return None if metrics_url(pool.cluster) else NO_PROMETHEUS


def _policy(pool: Pool, overrides: dict | None) -> ReclamationPolicy:
    saved = ReclamationPolicy.objects.filter(pool=pool).first()
    policy = ReclamationPolicy(pool=pool)  # unsaved copy: never written
    if saved is not None:
        for name in OVERRIDABLE + ("cooldown_minutes", "dry_run"):
            setattr(policy, name, getattr(saved, name))
    for name, value in (overrides or {}).items():
        if name not in OVERRIDABLE:
            raise ValueError(f"cannot override {name!r}")
        if value is not None:
            setattr(policy, name, value)
    return policy


def _exempt_at(exemptions: list[Exemption], allocation: Allocation, t: datetime) -> bool:
    """Whether an exemption of the allocation or its team is in force at ``t``."""
    return any(
        (e.team_id == allocation.team_id or e.allocation_id == allocation.pk)
        and e.created_at <= t < e.expires_at
        for e in exemptions
    )


def held_at(pieces: list[CardPiece], t: datetime) -> int:
    """The cards held at ``t`` by an allocation whose :func:`~pools.reclamation.card_timeline.
    card_pieces` are ``pieces``; 0 outside its window."""
    return next((p.cards for p in pieces if p.start <= t < p.end), 0)


def most_held(pieces: list[CardPiece], start: datetime, end: datetime) -> int:
    """The most cards held at any instant of ``[start, end)`` by an allocation whose
    :func:`~pools.reclamation.card_timeline.card_pieces` are ``pieces`` (0 when none overlaps):
    what the what-if's "Cards" column shows, so that the cards it says were reclaimed at a step
    never exceed it. Shrunk from 4 cards to 1 12 h ago, a replay of the last 3 days says 4,
    not the 1 of its ``card_count`` now."""
    return max((p.cards for p in pieces if p.start < end and p.end > start), default=0)


def _freed_card_hours(pieces: list[CardPiece], keep: int, start: datetime, end: datetime):
    """Card-hours of the cards held above ``keep`` over ``[start, end)``, piece by piece: a
    reclaim to 0 cards at 03:00 of one shrunk from 4 to 1 at 06:00 and ending at 08:00 frees
    4 × 3 + 1 × 2 = 14, not 4 × 5."""
    return sum(
        (
            card_hours(max(p.cards - keep, 0), max(p.start, start), min(p.end, end))
            for p in pieces
            if p.start < end and p.end > start
        ),
        Decimal(0),
    )


def _groups_at(
    allocations: list[Allocation],
    done: set[int],
    t: datetime,
    window: timedelta,
    cards: dict[int, int],
) -> dict[int, list[Allocation]]:
    """Per team, the allocations not yet reclaimed that held a whole window by ``t`` and still
    run at ``t``, holding cards then (``cards``: by id, those held at ``t``)."""
    groups: dict[int, list[Allocation]] = defaultdict(list)
    for a in allocations:
        if a.pk not in done and a.starts_at <= t - window and t < a.ends_at and cards[a.pk]:
            groups[a.team_id].append(a)
    return groups


def _group_at(
    pool: Pool,
    members: list[Allocation],
    by_namespace: Any,
    hosts: set[str],
    thresholds: Any,
    t: datetime,
    *,
    shared_slurm: bool,
    cards: dict[int, int],
) -> GroupEvaluation:
    """One team's allocations evaluated at ``t`` on their devices, holding ``cards`` (by id,
    those held at ``t``); unknown in a Slurm pool two teams share at ``t`` (accounting keeps
    no past card placement)."""
    if shared_slurm:
        reason = "shared Slurm pool: accounting keeps no past card placement"
        return GroupEvaluation(Verdict.UNKNOWN, (), 0, False, None, reason)
    mine = devices_for_group(
        by_namespace, scheduler=pool.scheduler, team_slug=members[0].team.slug, pool_hosts=hosts
    )
    held = sum(cards[a.pk] for a in members)
    return evaluate_group(mine, held=held, end=t.timestamp(), t=thresholds)


def _reclaimed_at(
    row: WhatIfRow,
    a: Allocation,
    share: AllocationShare,
    t: datetime,
    open_at: dict[int, datetime],
    *,
    grace: timedelta,
    exempt: list[Exemption],
    now: datetime,
    certainly_idle: bool,
    pieces: list[CardPiece],
) -> bool:
    """One allocation's verdict at ``t`` applied to its row: busy closes its finding, idle
    opens one (``open_at``); once the grace has passed on a certainly idle group, unless an
    exemption is in force, the row says what would have been reclaimed then (``True``): the
    cards it held at ``t`` (its ``pieces``) less those in use, and the card-hours held above
    those kept from ``t`` on."""
    if share.verdict == Verdict.UNKNOWN:
        return False  # no evidence: the finding waits, its grace does not advance
    if share.verdict == Verdict.BUSY:
        open_at.pop(a.pk, None)
        return False
    if a.pk not in open_at:
        open_at[a.pk] = t
        row.findings += 1
        row.first_idle = row.first_idle or t
    if t < open_at[a.pk] + grace or not certainly_idle:
        return False
    if _exempt_at(exempt, a, t):
        row.note = "exempt when the grace ended"
        return False
    held = held_at(pieces, t)
    keep = min(share.cards_in_use, held)
    row.first_idle = open_at[a.pk]
    row.would_reclaim_at = t
    row.cards_reclaimed = held - keep
    freed = _freed_card_hours(pieces, keep, t, min(a.ends_at, now))
    row.card_hours_freed = freed.quantize(Decimal(1).scaleb(-CARD_HOUR_PLACES), ROUND_HALF_UP)
    return True


def _ran_allocations(pool: Pool, start: datetime, end: datetime) -> list[Allocation]:
    """The pool's allocations that ran (or run) in ``[start, end)``, of whole cards only (idle
    cards are whole cards; MIG slices are not reclaimed), in start order."""
    return list(
        Allocation.objects.filter(pool=pool, status__in=RAN_STATUSES)
        .whole_cards()
        .overlapping(start, end)
        .select_related("team")
        .order_by("starts_at", "id")
    )


def _exemptions_for(allocations: list[Allocation], *, expiring_after: datetime) -> list:
    """The exemptions of the allocations' teams or of the allocations themselves that had
    not expired by ``expiring_after``."""
    return list(
        Exemption.objects.filter(
            Q(team_id__in={a.team_id for a in allocations})
            | Q(allocation_id__in=[a.pk for a in allocations]),
            expires_at__gt=expiring_after,
        )
    )


def _devices_read(
    report: WhatIfReport, metrics: Any, *, start: datetime, end: datetime, cluster: Any = None
) -> list | None:
    """The cards' usage samples over ``[start, end]`` (Prometheus, every :data:`STEP_S`), on
    the inventory's cards; ``None`` with ``report.error`` and ``error_code`` set when there is
    no Prometheus or it does not answer. ``metrics`` defaults to ``cluster``'s own Prometheus
    (``Cluster.prometheus_url``; blank or no cluster: ``PROMETHEUS_URL``), closed after."""
    own = metrics is None
    metrics = metrics_adapter(cluster=cluster) if own else metrics
    if metrics is None:
        report.error = "no Prometheus configured (PROMETHEUS_URL)"
        report.error_code = "unavailable"
        return None
    try:
        return devices_on_inventory(list(metrics.gpu_usage(start=start, end=end, step_s=STEP_S)))
    except SchedulerError as exc:
        report.error = f"Prometheus unavailable: {exc}"
        report.error_code = "prometheus_unavailable"
        return None
    finally:
        if own:
            metrics.close()


def _progress(
    on_progress: Callable[[int], None] | None, step: int, steps: int, reported: int
) -> int:
    """Tell ``on_progress`` the per cent of ``step`` of ``steps`` (from :data:`READ_PERCENT` up
    to 99) when it is at least 5 past the ``reported`` one; the per cent last reported."""
    percent = READ_PERCENT + (99 - READ_PERCENT) * step // steps
    if on_progress is None or percent < reported + 5:
        return reported
    on_progress(percent)
    return percent


def _replay(
    report: WhatIfReport,
    pool: Pool,
    allocations: list[Allocation],
    devices: list,
    policy: Any,
    *,
    rows: dict[int, WhatIfRow],
    pieces: dict[int, list[CardPiece]],
    step_minutes: int,
    on_progress: Callable[[int], None] | None,
) -> None:
    """Evaluate the policy every ``step_minutes`` from the report's start to its end, as the
    scan would have (each allocation's share of its group's idle cards, grace, exemptions),
    each allocation with the cards it held at the step (``pieces``: its
    :func:`~pools.reclamation.card_timeline.card_pieces` by id); the rows record what it would
    have reclaimed and when. ``on_progress`` from :data:`READ_PERCENT` up to 99, in steps of at
    least 5."""
    start, now = report.start, report.end
    window, grace = timedelta(minutes=policy.window_minutes), timedelta(hours=policy.grace_hours)
    thresholds = policy_thresholds(policy)
    hosts = set(Node.objects.filter(pool=pool).values_list("hostname", flat=True))
    by_namespace = devices_by_namespace(devices)
    exemptions = _exemptions_for(allocations, expiring_after=start)
    open_at: dict[int, datetime] = {}
    done: set[int] = set()
    steps = int((now - start) / timedelta(minutes=step_minutes)) + 1
    reported = 0
    for step in range(steps):
        reported = _progress(on_progress, step, steps, reported)
        t = start + step * timedelta(minutes=step_minutes)
        cards = {a.pk: held_at(pieces[a.pk], t) for a in allocations}
        groups = _groups_at(allocations, done, t, window, cards)
        for members in groups.values():
            group = _group_at(
                pool, members, by_namespace, hosts, thresholds, t,
                shared_slurm=pool.scheduler == Scheduler.SLURM and len(groups) > 1, cards=cards,
            )  # fmt: skip
            shares = split_group(group, [(a.pk, cards[a.pk]) for a in members])
            for a, share in zip(members, shares, strict=True):
                if _reclaimed_at(
                    rows[a.pk], a, share, t, open_at, grace=grace, exempt=exemptions, now=now,
                    certainly_idle=group.certainly_idle, pieces=pieces[a.pk],
                ):  # fmt: skip
                    done.add(a.pk)


def reclamation_what_if(
    *,
    pool: Pool,
    policy_overrides: dict | None = None,
    days: int = 7,
    step_minutes: int = 60,
    now: datetime | None = None,
    metrics: Any = None,
    on_progress: Callable[[int], None] | None = None,
) -> WhatIfReport:
    """What the pool's policy (with ``policy_overrides``) would have done over the last
    ``days``, evaluated every ``step_minutes`` with the cards each allocation held at each step
    (see the module docstring). Writes nothing. Six queries (the policy, the allocations, the
    inventory's card places, their card changes, the pool's hosts, the exemptions) and one
    Prometheus read.
    ``on_progress(percent)`` is told :data:`READ_PERCENT` once Prometheus has answered, then up
    to 99 as the steps are replayed."""
    # whole seconds: Prometheus keeps query times to the millisecond, and a window
    # start finer than its first sample would drop that sample (coverage 5/6)
    now = (now or timezone.now()).replace(microsecond=0)
    start = now - timedelta(days=days)
    policy = _policy(pool, policy_overrides)
    window = timedelta(minutes=policy.window_minutes)
    report = WhatIfReport(
        pool=pool,
        start=start,
        end=now,
        step_minutes=step_minutes,
        policy={name: getattr(policy, name) for name in OVERRIDABLE},
    )
    allocations = _ran_allocations(pool, start - window, now)
    rows = {a.pk: WhatIfRow(a, a.team.slug, a.card_count) for a in allocations}
    report.rows = list(rows.values())
    if not allocations:
        return report
    devices = _devices_read(report, metrics, start=start - window, end=now, cluster=pool.cluster)
    if devices is None:
        return report
    pieces = allocations_card_pieces(allocations=allocations)
    for a in allocations:  # the allocations that ran from the first window on
        rows[a.pk].card_count = most_held(pieces[a.pk], start - window, now)
    _replay(
        report, pool, allocations, devices, policy,
        rows=rows, pieces=pieces, step_minutes=step_minutes, on_progress=on_progress,
    )  # fmt: skip
    return report


def report_json(report: WhatIfReport) -> dict[str, Any]:
    """The report as JSON (what a queued what-if stores and the API answers): ``start``/``end``
    ISO 8601, ``step_minutes``, the ``policy`` replayed (decimals as strings), the totals, and
    per allocation its ``first_idle`` / ``would_reclaim_at`` (ISO 8601 or ``null``),
    ``cards_reclaimed`` and ``card_hours_freed`` (a decimal string to 3 places, as pages show
    card-hours: ``"0.167"``; what-ifs stored before kept a number to 2 places, which the page
    and CSV still read)."""

    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    return {
        "start": report.start.isoformat(),
        "end": report.end.isoformat(),
        "step_minutes": report.step_minutes,
        "policy": params_json(report.policy),
        "findings": report.findings,
        "reclaimed": report.reclaimed,
        "cards_reclaimed": report.cards_reclaimed,
        "card_hours_freed": str(report.card_hours_freed),
        "rows": [
            {
                "allocation": row.allocation.pk,
                "team": row.team,
                "card_count": row.card_count,
                "first_idle": iso(row.first_idle),
                "would_reclaim_at": iso(row.would_reclaim_at),
                "cards_reclaimed": row.cards_reclaimed,
                "card_hours_freed": str(row.card_hours_freed),
                "findings": row.findings,
                "note": row.note,
            }
            for row in report.rows
        ],
    }


def reclamation_whatif_queue(
    *, pool: Pool, actor: Any, overrides: dict | None = None, days: int = 7
) -> ReclamationWhatIf:
    """Store a what-if of ``pool``'s policy with ``overrides`` (pending) and queue its task when
    the transaction commits (:func:`reclamation_whatif_run`): the web request never reads
    Prometheus. Raises :class:`InvalidInput` with ``errors`` ``{field: message}`` for ``days``
    outside 1-30, a field that is not a threshold (:data:`OVERRIDABLE`) or values the policy's
    own validators refuse; nothing is written then."""
    overrides = dict(overrides or {})
    errors: dict[str, str] = {}
    if refusal := days_refusal(days, most=MAX_DAYS):
        errors["days"] = refusal
    errors.update({name: "Not a threshold." for name in set(overrides) - set(OVERRIDABLE)})
    if not errors:
        try:
            _policy(pool, overrides).full_clean(exclude=["pool"])
        except ValidationError as exc:
            errors.update({k: "; ".join(v) for k, v in exc.message_dict.items()})
    if errors:
        raise InvalidInput("The what-if cannot run with these values.", errors=errors)
    return queued_run_create(
        ReclamationWhatIf,
        task_name=RECLAMATION_WHATIF,
        actor=actor,
        pool=pool,
        params={"days": days, "overrides": params_json(overrides)},
    )


def reclamation_whatifs_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Beat's housekeeping of queued what-ifs (:func:`~pools.jobs.runs.queued_runs_sweep`):
    lost ones queued again, those finished more than :data:`KEEP_DAYS` days ago deleted.
    Returns ``{"requeued", "deleted"}``."""
    return queued_runs_sweep(
        ReclamationWhatIf, task_name=RECLAMATION_WHATIF, keep_days=KEEP_DAYS, now=now
    )


def reclamation_whatif_run(*, whatif_id: int, metrics: Any = None) -> ReclamationWhatIf:
    """Run a queued what-if (:func:`~pools.jobs.runs.queued_run_execute`): done with
    :func:`report_json` as ``result``, or failed with ``error_code`` ``unavailable`` (no
    Prometheus configured), ``prometheus_unavailable`` (it could not be read) or ``internal``.
    :class:`NotFound` when the row is gone (its pool was deleted)."""

    def compute(whatif: ReclamationWhatIf, progress: Callable[[int], None]) -> dict[str, Any]:
        overrides = {
            name: ReclamationPolicy._meta.get_field(name).to_python(value)
            for name, value in (whatif.params.get("overrides") or {}).items()
        }
        report = reclamation_what_if(
            pool=whatif.pool, policy_overrides=overrides, days=whatif.params["days"],
            metrics=metrics, on_progress=progress,
        )  # fmt: skip
        if report.error is not None:
            raise RunFailed(report.error, code=report.error_code)
        return report_json(report)

    return queued_run_execute(ReclamationWhatIf, run_id=whatif_id, compute=compute)
