"""Statements: build (rebuildable drafts), finalize (frozen), close a month (the beat task).

A statement's lines are what :mod:`billing.charges` (the one pricing path) prices: one line per
key and rate period (adjacent periods with the same price merge), so a rate change on the 15th
splits a line in two; money rounded once per line. This module writes them.

Late usage: a final statement never changes. When a draft is built, every earlier *final*
month of the team whose usage changed after it was finalized is recomputed; the difference
from what was billed for it (its lines plus adjustments already finalized elsewhere) becomes
adjustment lines whose ``period`` is that month.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from billing.charges import (
    CARD_HOURS,
    LineData,
    ambiguous_time_notes,
    lines_from_sums,
    segment_sums_by_team,
    shared_card_lines,
    statement_lines_compute,
)
from billing.choices import (
    STATEMENT_IN_PROGRESS,
    ChargeBasis,
    LineKind,
    StatementStatus,
    UsageUnit,
)
from billing.conf import billing_zone, default_currency
from billing.errors import StatementFinal
from billing.generation import statements_changed
from billing.locks import billing_lock, month_close_lock_name
from billing.models import SharedCardUse, Statement, StatementLine, UsageRecord
from billing.pricing import month_of, previous_month, round_money, rounding_note, split_at_months
from billing.rate_periods import RatePeriod, month_currency, rate_periods
from pools.audit.models import AuditEvent
from pools.audit.services import audit_event_build, audit_event_record
from pools.inventory.models import Gpu, GpuModel, Pool
from pools.tenancy.models import Team
from pools.tenancy.selectors import team_manager_emails, teams_with_manager_email

_BASIS_ORDER = {ChargeBasis.RESERVED: 0, ChargeBasis.BURST: 1, ChargeBasis.BURST_POOL: 2,
                ChargeBasis.USED: 3, ChargeBasis.TOKENS: 4, ChargeBasis.REPLAYED: 5,
                ChargeBasis.SHARED: 6, ChargeBasis.STORAGE: 7, ChargeBasis.EGRESS: 8}  # fmt: skip
_UNIT_ORDER = {CARD_HOURS: 0, UsageUnit.INPUT_TOKENS: 1, UsageUnit.CACHED_INPUT_TOKENS: 2,
               UsageUnit.OUTPUT_TOKENS: 3}  # fmt: skip


def _sort_key(names: dict[int, str]):
    def key(line: LineData) -> tuple:
        return (
            line.kind != LineKind.USAGE,
            line.period,
            _BASIS_ORDER.get(line.basis, 9),
            names.get(line.gpu_model_id, "") if line.gpu_model_id else line.served_model,
            line.served_model,
            _UNIT_ORDER.get(line.unit, 9),
            line.pool_id or 0,
            line.rate_from,
            line.gpu_id or 0,
            line.share_basis,
        )

    return key


def late_shared_months(team_ids: list[int] | None, month: date) -> dict[int, set[date]]:
    """Per team, the final months before ``month`` that a shared-card use of the team written
    after the month was finalized falls in (a late import of a shared card: the month's
    shares are recomputed as adjustments, as late usage records are). Two queries."""
    finals = Statement.objects.filter(status=StatementStatus.FINAL, month__lt=month)
    if team_ids is not None:
        finals = finals.filter(team_id__in=team_ids)
    final_at: dict[int, dict[date, datetime]] = defaultdict(dict)
    for team_id, final_month, finalized_at in finals.values_list(
        "team_id", "month", "finalized_at"
    ):
        final_at[team_id][final_month] = finalized_at
    if not final_at:
        return {}
    earliest = min(t for months in final_at.values() for t in months.values())
    zone = billing_zone()
    late: dict[int, set[date]] = defaultdict(set)
    uses = SharedCardUse.objects.filter(team_id__in=list(final_at), created_at__gt=earliest)
    for team_id, start, end, created in uses.values_list(
        "team_id", "period_start", "period_end", "created_at"
    ):
        for use_month, _, _ in split_at_months(start, end, zone):
            finalized = final_at[team_id].get(use_month)
            if finalized is not None and created > finalized:
                late[team_id].add(use_month)
    return late


def _billed_sums(team_id: int, old: Statement) -> tuple[dict[tuple, list[Decimal]], dict]:
    """What was billed for ``old``'s month: its usage lines and the team's final adjustments
    for that month, summed per line key as ``[quantity, amount]``, with each key's rate card."""
    billed_lines = StatementLine.objects.filter(
        Q(statement=old, kind=LineKind.USAGE)
        | Q(
            statement__team_id=team_id,
            statement__status=StatementStatus.FINAL,
            kind=LineKind.ADJUSTMENT,
            period=old.month,
        )  # fmt: skip
    )
    billed: dict[tuple, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    meta: dict[tuple, Any] = {}
    for line in billed_lines:
        key = (line.gpu_model_id, line.served_model, line.basis, line.unit, line.unit_price,
               line.rate_from, line.rate_to, line.gpu_id, line.share_basis,
               line.pool_id)  # fmt: skip
        billed[key][0] += line.quantity
        billed[key][1] += line.amount
        meta[key] = line.rate_card_id
    return billed, meta


def _adjustment_lines(
    period: date,
    recomputed: list[LineData],
    billed: dict[tuple, list[Decimal]],
    meta: dict,
    currency: str,
) -> list[LineData]:
    """One adjustment line per key whose recomputed quantity or amount differs from what was
    billed for ``period`` (pure): the differences, the amount rounded to the currency."""
    result: list[LineData] = []
    now_lines = {line.key: line for line in recomputed}
    for key in sorted(set(now_lines) | set(billed), key=str):
        new = now_lines.get(key)
        was = billed.get(key, [Decimal(0), Decimal(0)])
        quantity = (new.quantity if new else 0) - was[0]
        amount = (new.amount if new else 0) - was[1]
        if not quantity and not amount:
            continue
        (gpu_model_id, served, basis, unit, price, rate_from, rate_to, gpu_id, share_basis,
         pool_id) = key  # fmt: skip
        result.append(
            LineData(
                LineKind.ADJUSTMENT,
                period,
                gpu_model_id,
                served,
                basis,
                unit,
                Decimal(0),
                quantity,
                price,
                round_money(amount, currency),
                rate_from,
                rate_to,
                new.rate_card_id if new else meta.get(key),
                gpu_id,
                new.card_share if new else None,
                share_basis,
                pool_id,
            )  # fmt: skip
        )
    return result


def _adjustments(team_id: int, month: date, currency: str) -> list[LineData]:
    """Differences between recomputed and billed amounts of earlier final months whose usage
    (usage records, the team's shared-card uses) changed after they were finalized."""
    late = UsageRecord.objects.filter(
        team_id=team_id, month=OuterRef("month"), updated_at__gt=OuterRef("finalized_at")
    )
    shared_months = late_shared_months([team_id], month).get(team_id, set())
    closed = Statement.objects.filter(
        team_id=team_id, status=StatementStatus.FINAL, month__lt=month
    ).filter(Exists(late) | Q(month__in=shared_months))
    result: list[LineData] = []
    for old in closed.order_by("month"):
        recomputed, _, _ = statement_lines_compute(team_id=team_id, month=old.month)
        billed, meta = _billed_sums(team_id, old)
        result += _adjustment_lines(old.month, recomputed, billed, meta, currency)
    return result


def _line_objects(statement: Statement, lines: list[LineData]) -> list[StatementLine]:
    return [
        StatementLine(
            statement=statement,
            position=position,
            kind=x.kind,
            period=x.period,
            gpu_model_id=x.gpu_model_id,
            served_model=x.served_model,
            basis=x.basis,
            unit=x.unit,
            quantity=x.quantity,
            unit_price=x.unit_price,
            amount=x.amount,
            rate_from=x.rate_from,
            rate_to=x.rate_to,
            rate_card_id=x.rate_card_id,
            gpu_id=x.gpu_id,
            card_share=x.card_share,
            share_basis=x.share_basis,
            pool_id=x.pool_id,
        )  # fmt: skip
        for position, x in enumerate(lines, start=1)
    ]


def _statement_fill(
    statement: Statement, team: Team, lines: list[LineData], warnings: list[dict],
    currency: str, now: datetime,
) -> None:  # fmt: skip
    usage = sum((x.amount for x in lines if x.kind == LineKind.USAGE), Decimal(0))
    adjustment = sum((x.amount for x in lines if x.kind == LineKind.ADJUSTMENT), Decimal(0))
    statement.currency = currency
    statement.cost_centre = team.cost_centre
    statement.usage_amount, statement.adjustment_amount = usage, adjustment
    statement.total_amount = usage + adjustment
    statement.rounding = rounding_note(currency)
    statement.warnings = warnings
    statement.built_at = now


@transaction.atomic
def statement_build(*, team: Team, month: date, now: datetime | None = None) -> Statement:
    """(Re)build the team's draft for ``month``: same usage in, same lines out.

    Takes the month's close lock (``billing.locks``), as closing the month does: a rebuild and
    a close of the same month at once would both rewrite the draft's lines, and the second
    failed on their unique positions. Raises :class:`StatementFinal` when the month's
    statement is final.
    """
    month = month.replace(day=1)
    now = now or timezone.now()
    billing_lock(month_close_lock_name(month))
    statement, _ = Statement.objects.get_or_create(
        team=team, month=month, defaults={"currency": default_currency(), "built_at": now}
    )
    statement = Statement.objects.select_for_update().get(pk=statement.pk)
    if statement.is_final:
        raise StatementFinal(
            f"The {month:%Y-%m} statement of {team} is final.", statement=statement.pk,
            month=f"{month:%Y-%m}",
        )  # fmt: skip
    lines, warnings, currency = _draft_lines(team, month)
    StatementLine.objects.filter(statement=statement).delete()
    StatementLine.objects.bulk_create(_line_objects(statement, lines))
    _statement_fill(statement, team, lines, warnings, currency, now)
    statement.save()
    statements_changed()  # the lines' delete and bulk_create send no signal
    return statement


def _draft_lines(team: Team, month: date) -> tuple[list[LineData], list[dict], str]:
    """A draft's lines in their order (usage, then adjustments for late usage of months already
    final), its warnings and currency."""
    lines, warnings, currency = statement_lines_compute(team_id=team.pk, month=month)
    lines += _adjustments(team.pk, month, currency)
    names = dict(
        GpuModel.objects.filter(pk__in={x.gpu_model_id for x in lines}).values_list("pk", "name")
    )
    lines.sort(key=_sort_key(names))
    return lines, warnings, currency


def statement_preview(
    *, team: Team, month: date, now: datetime | None = None
) -> tuple[Statement, list[StatementLine]]:
    """What the team's statement for ``month`` would hold now, built as :func:`statement_build`
    builds a draft but written nowhere: an unsaved :class:`Statement` (status
    ``STATEMENT_IN_PROGRESS``: not drafted yet; its usage,
    adjustment and total amounts in its currency) and its unsaved lines by position, each with
    its GPU model, pool and shared card set (a query per kind, none per line).

    For the month in progress, which has no statement until :func:`statements_close_month`
    drafts it on the 1st; its total is the team dashboard's *cost so far*."""
    month = month.replace(day=1)
    now = now or timezone.now()
    statement = Statement(team=team, month=month, status=STATEMENT_IN_PROGRESS)
    lines, warnings, currency = _draft_lines(team, month)
    _statement_fill(statement, team, lines, warnings, currency, now)
    objects = _line_objects(statement, lines)
    _lines_attach(objects)
    return statement, objects


def statements_preview_month(
    *, month: date, now: datetime | None = None
) -> list[tuple[Statement, list[StatementLine]]]:
    """Every team's :func:`statement_preview` for ``month`` at once, by team name: the teams
    and lines the month's close would draft now (:func:`statements_close_month`'s own reads
    and lines, :func:`_month_sums` and :func:`_month_lines`), each an unsaved statement with
    status ``STATEMENT_IN_PROGRESS`` and its unsaved lines; written nowhere. For the finance
    page of the month in progress, which has no statement until the close; each total is that
    team's statement preview's. A fixed number of queries per team with late adjustments,
    otherwise the same few however many teams."""
    month = month.replace(day=1)
    now = now or timezone.now()
    got = _month_sums(month)
    teams = list(Team.objects.filter(pk__in=got.team_ids).order_by("name", "pk"))
    built = _month_lines(month, teams, got)
    previews, every_line = [], []
    for team in teams:
        statement = Statement(team=team, month=month, status=STATEMENT_IN_PROGRESS)
        _statement_fill(statement, team, *built[team.pk], got.currency, now)
        objects = _line_objects(statement, built[team.pk][0])
        previews.append((statement, objects))
        every_line += objects
    _lines_attach(every_line)
    return previews


def _lines_attach(objects: list[StatementLine]) -> None:
    """Set each unsaved line's GPU model, pool and shared card (with its node): one query per
    kind, none per line."""
    models = GpuModel.objects.in_bulk({x.gpu_model_id for x in objects} - {None})
    pools = Pool.objects.in_bulk({x.pool_id for x in objects} - {None})
    cards = Gpu.objects.select_related("node").in_bulk({x.gpu_id for x in objects} - {None})
    for line in objects:
        line.gpu_model = models.get(line.gpu_model_id)
        line.pool = pools.get(line.pool_id)
        line.gpu = cards.get(line.gpu_id)


def statement_finalize(
    *, team: Team, month: date, actor: Any = None, now: datetime | None = None
) -> Statement:
    """Build the draft one last time and freeze it; managers get the PDF once committed.

    Raises :class:`StatementFinal` when it already is final.
    """
    now = now or timezone.now()
    with transaction.atomic():
        billing_lock(month_close_lock_name(month.replace(day=1)))
        statement = statement_build(team=team, month=month, now=now)
        statement.status = StatementStatus.FINAL
        statement.finalized_at = now
        statement.save(update_fields=["status", "finalized_at"])
        audit_event_record(actor=actor, action="statement.finalized", obj=statement,
                           after={"total": str(statement.total_amount),
                                  "currency": statement.currency})  # fmt: skip
        statement_id = statement.pk
        transaction.on_commit(lambda: statement_email_managers(statement_id=statement_id))
    return statement


def statement_email_managers(*, statement_id: int) -> int:
    """Email the statement's PDF to the team's managers; returns how many were sent to."""
    from django.core.mail import EmailMessage

    from billing.reports import statement_pdf

    statement = Statement.objects.select_related("team").get(pk=statement_id)
    emails = team_manager_emails(team_id=statement.team_id)
    if not emails:
        return 0
    message = EmailMessage(
        subject=f"GPU statement {statement.month:%Y-%m} for {statement.team.name}: "
        f"{statement.total_amount:.2f} {statement.currency}",
        body=(
            f"The {statement.month:%B %Y} statement of {statement.team.name} "
            f"(cost centre {statement.cost_centre or '—'}) is final: "
            f"{statement.total_amount} {statement.currency}.\n{statement.rounding}\n"
        ),
        to=emails,
    )
    message.attach(
        f"statement-{statement.team.slug}-{statement.month:%Y-%m}.pdf",
        statement_pdf(statement),
        "application/pdf",
    )
    message.send()
    return len(emails)


_LINE_COLUMNS = [
    "statement", "position", "kind", "period", "gpu_model", "served_model", "basis", "unit",
    "quantity", "unit_price", "amount", "rate_from", "rate_to", "rate_card", "gpu", "card_share",
    "share_basis", "pool",
]  # fmt: skip


def _lines_insert(statements: list[tuple[Statement, list[LineData]]]) -> None:
    """Write many statements' lines at once: ``COPY`` on PostgreSQL, else ``bulk_create``.

    Decimals go through the fields' own preparation, so the stored values are the same as
    ``bulk_create`` would store."""
    if connection.vendor != "postgresql":
        StatementLine.objects.bulk_create(
            [line for statement, lines in statements for line in _line_objects(statement, lines)],
            batch_size=5000,
        )
        return
    fields = [StatementLine._meta.get_field(name) for name in _LINE_COLUMNS]
    quantity, unit_price, amount = fields[8:11]
    card_share = fields[15]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(StatementLine._meta.db_table)
    with connection.cursor() as cursor, cursor.cursor.copy(
        f"COPY {table} ({columns}) FROM STDIN"
    ) as copy:  # fmt: skip
        for statement, lines in statements:
            for position, x in enumerate(lines, start=1):
                copy.write_row((
                    statement.pk, position, x.kind, x.period, x.gpu_model_id, x.served_model,
                    x.basis, x.unit, quantity.get_db_prep_save(x.quantity, connection),
                    unit_price.get_db_prep_save(x.unit_price, connection),
                    amount.get_db_prep_save(x.amount, connection), x.rate_from, x.rate_to,
                    x.rate_card_id, x.gpu_id,
                    card_share.get_db_prep_save(x.card_share, connection), x.share_basis, x.pool_id,
                ))  # fmt: skip


_STATEMENT_FIELDS = [
    "status", "currency", "cost_centre", "usage_amount", "adjustment_amount", "total_amount",
    "rounding", "warnings", "built_at", "finalized_at",
]  # fmt: skip


@dataclass(frozen=True)
class _MonthSums:
    """What a month's close prices, read before its lock: the rate periods and the month's
    currency, the usage sums per team (:func:`billing.charges.segment_sums_by_team`), the
    shared-card lines and warnings per team, the teams with late usage or late shared-card use
    in earlier final months, and every team that gets a statement."""

    periods: list[RatePeriod]
    currency: str
    sums: dict[int, dict]
    shared: dict[int, list[LineData]]
    shared_warnings: dict[int, list[dict]]
    late_team_ids: set[int]
    team_ids: set[int]


def _late_team_ids(month: date) -> set[int]:
    """Teams with a final statement before ``month`` whose usage records, or shared-card uses,
    were written after it was finalized: they get adjustments on ``month``'s statement."""
    late = UsageRecord.objects.filter(
        team_id=OuterRef("team_id"),
        month=OuterRef("month"),
        updated_at__gt=OuterRef("finalized_at"),
    )
    late_team_ids = set(
        Statement.objects.filter(status=StatementStatus.FINAL, month__lt=month)
        .filter(Exists(late))
        .values_list("team_id", flat=True)
    )
    return late_team_ids | set(late_shared_months(None, month))


def _month_sums(month: date) -> _MonthSums:
    """Step 1 of :func:`statements_close_month`: the reads (one ``GROUP BY`` for the usage)."""
    periods = rate_periods(month=month, zone=billing_zone())
    sums, team_ids = segment_sums_by_team(month, periods)
    shared, shared_warnings = shared_card_lines(month, periods=periods)
    late_team_ids = _late_team_ids(month)
    team_ids |= set(shared) | set(shared_warnings) | late_team_ids
    team_ids |= set(Statement.objects.filter(month=month).values_list("team_id", flat=True))
    return _MonthSums(
        periods=periods,
        currency=month_currency(periods),
        sums=sums,
        shared=shared,
        shared_warnings=shared_warnings,
        late_team_ids=late_team_ids,
        team_ids=team_ids,
    )


def _month_lines(
    month: date, todo: list[Team], got: _MonthSums
) -> dict[int, tuple[list[LineData], list[dict]]]:
    """Step 2: each team's lines and warnings, in a statement's order (as
    :func:`statement_build`: usage priced per rate period, the ambiguous wall-clock notes,
    shared cards, adjustments for late usage)."""
    names = dict(GpuModel.objects.values_list("pk", "name"))
    ambiguous = ambiguous_time_notes(month, [team.pk for team in todo])
    built: dict[int, tuple[list[LineData], list[dict]]] = {}
    for team in todo:
        lines, warnings = lines_from_sums(
            month, got.periods, got.currency, got.sums.get(team.pk, {})
        )
        warnings += ambiguous.get(team.pk, [])
        lines += got.shared.get(team.pk, [])
        warnings += got.shared_warnings.get(team.pk, [])
        if team.pk in got.late_team_ids:
            lines += _adjustments(team.pk, month, got.currency)
        lines.sort(key=_sort_key(names))
        built[team.pk] = (lines, warnings)
    return built


def _month_statements_write(
    month: date,
    todo: list[Team],
    existing: dict[int, Statement],
    built: dict[int, tuple[list[LineData], list[dict]]],
    *,
    currency: str,
    now: datetime,
) -> dict[int, Statement]:
    """Step 3: the statements final (new ones ``bulk_create``, open ones ``bulk_update`` with
    their old lines deleted), their lines inserted, one audit event each; by team id."""
    new, old = [], []
    for team in todo:
        statement = existing.get(team.pk) or Statement(team=team, month=month)
        statement.team = team
        _statement_fill(statement, team, *built[team.pk], currency, now)
        statement.status = StatementStatus.FINAL
        statement.finalized_at = now
        (old if statement.pk else new).append(statement)
    Statement.objects.bulk_create(new)
    if old:
        Statement.objects.bulk_update(old, _STATEMENT_FIELDS)
        StatementLine.objects.filter(statement__in=old).delete()
    finalized = {s.team_id: s for s in new + old}
    _lines_insert([(finalized[team.pk], built[team.pk][0]) for team in todo])
    statements_changed()  # bulk writes and COPY: no signal
    AuditEvent.objects.bulk_create(
        [
            audit_event_build(
                actor=None,
                action="statement.finalized",
                obj=s,
                after={"total": str(s.total_amount), "currency": s.currency},
            )
            for s in (finalized[team.pk] for team in todo)
        ]  # fmt: skip
    )
    return finalized


def _email_managers_on_commit(todo: list[Team], finalized: dict[int, Statement]) -> None:
    """Step 4: each finalized statement's PDF to its team's managers once the close commits."""
    with_managers = teams_with_manager_email(team_ids=finalized)
    for team in todo:
        if team.pk in with_managers:
            statement_id = finalized[team.pk].pk
            transaction.on_commit(
                lambda statement_id=statement_id: statement_email_managers(
                    statement_id=statement_id
                )
            )


def statements_close_month(
    *, month: date | None = None, now: datetime | None = None
) -> list[Statement]:
    """Build and finalize every team's statement for ``month`` (default: the previous month in
    the billing time zone). Teams with usage in the month or late usage for earlier final
    months get one. Safe to run again: final statements are skipped.

    Same lines as :func:`statement_build` + :func:`statement_finalize` per team, in bulk: one
    ``GROUP BY`` over the month's usage for all teams (split at rate periods), lines priced
    per group in Python; statements and audit events written with ``bulk_create``, lines with
    ``COPY`` on PostgreSQL (``bulk_create`` elsewhere), all in one transaction; managers get
    their PDFs once it commits. Steps: :func:`_month_sums`, :func:`_month_lines`,
    :func:`_month_statements_write`, :func:`_email_managers_on_commit`.
    """
    now = now or timezone.now()
    month = (month or previous_month(month_of(now, billing_zone()))).replace(day=1)
    got = _month_sums(month)
    with transaction.atomic():
        # A second close of the month waits here, then finds the first one's statements final
        # and leaves them (not a unique-constraint error).
        billing_lock(month_close_lock_name(month))
        teams = list(Team.objects.filter(pk__in=got.team_ids).order_by("slug"))
        existing = {
            s.team_id: s
            for s in Statement.objects.select_for_update().filter(
                month=month, team_id__in=got.team_ids
            )
        }
        todo = [t for t in teams if not (t.pk in existing and existing[t.pk].is_final)]
        built = _month_lines(month, todo, got)
        finalized = _month_statements_write(
            month, todo, existing, built, currency=got.currency, now=now
        )
        _email_managers_on_commit(todo, finalized)
    return [finalized.get(t.pk) or existing[t.pk] for t in teams]
