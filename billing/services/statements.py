"""Statements: build (rebuildable drafts), finalize (frozen), close a month (the beat task).

Lines are computed from usage records in SQL (``GROUP BY`` GPU model / served model / basis /
unit / rate period); only records that straddle a rate change are prorated in Python, by
seconds. One line per key and rate period (adjacent periods with the same price merge), so a
rate change on the 15th splits a line in two. Money is rounded once per line.

Late usage: a final statement never changes. When a draft is built, every earlier *final*
month of the team whose usage changed after it was finalized is recomputed; the difference
from what was billed for it (its lines plus adjustments already finalized elsewhere) becomes
adjustment lines whose ``period`` is that month.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, Exists, IntegerField, OuterRef, Q, Sum, Value, When
from django.utils import timezone

from billing.choices import ChargeBasis, LineKind, StatementStatus, UsageFlag, UsageUnit
from billing.conf import billing_zone, default_currency
from billing.errors import StatementFinal
from billing.locks import billing_lock, month_close_lock_name
from billing.models import SharedCardUse, Statement, StatementLine, UsageRecord
from billing.pricing import (
    card_hour_amount,
    card_hours_rounded,
    month_of,
    previous_month,
    round_money,
    rounding_note,
    split_at_months,
    token_amount,
)
from billing.selectors import shared_card_splits
from billing.services.rates import RatePeriod, price_for, rate_kind, rate_periods
from pools.audit.models import AuditEvent
from pools.audit.services import audit_event_build, audit_event_record
from pools.capacity.arithmetic import clip
from pools.inventory.models import GpuModel
from pools.tenancy.models import Team
from pools.tenancy.selectors import team_manager_emails, teams_with_manager_email

_BASIS_ORDER = {ChargeBasis.RESERVED: 0, ChargeBasis.BURST: 1, ChargeBasis.USED: 2,
                ChargeBasis.TOKENS: 3, ChargeBasis.REPLAYED: 4, ChargeBasis.SHARED: 5}  # fmt: skip
CARD_HOURS = "card-hours"
_UNIT_ORDER = {CARD_HOURS: 0, UsageUnit.INPUT_TOKENS: 1, UsageUnit.CACHED_INPUT_TOKENS: 2,
               UsageUnit.OUTPUT_TOKENS: 3}  # fmt: skip


@dataclass(frozen=True)
class LineData:
    kind: str
    period: date
    gpu_model_id: int | None
    served_model: str
    basis: str
    unit: str
    raw_quantity: Decimal  # card-seconds or tokens, unrounded
    quantity: Decimal  # card-hours (6 places) or tokens
    unit_price: Decimal
    amount: Decimal
    rate_from: date
    rate_to: date
    rate_card_id: int | None
    # shared-card lines only (basis ``shared``): the card, its share and what it is read from
    gpu_id: int | None = None
    card_share: Decimal | None = None
    share_basis: str = ""

    @property
    def key(self) -> tuple:
        return (self.gpu_model_id, self.served_model, self.basis, self.unit, self.unit_price,
                self.rate_from, self.rate_to, self.gpu_id, self.share_basis)  # fmt: skip


def _priced(period: date, key: tuple, raw: Decimal, rate: RatePeriod, price: Decimal,
            currency: str) -> LineData:  # fmt: skip
    gpu_model_id, served, basis, unit = key
    if unit == UsageUnit.CARD_SECONDS:
        quantity, amount, shown = (
            card_hours_rounded(raw),
            card_hour_amount(raw, price, currency),
            CARD_HOURS,
        )
    else:
        quantity, amount, shown = raw, token_amount(raw, price, currency), unit
    return LineData(LineKind.USAGE, period, gpu_model_id, served, basis, shown, raw, quantity,
                    price, amount, rate.rate_from, rate.rate_to, rate.card_id)  # fmt: skip


def _segment_sums_by_team(
    month: date,
    periods: list[RatePeriod],
    team_ids: list[int] | None = None,
    pool_id: int | None = None,
) -> tuple[dict[int, dict[tuple, list[Decimal]]], set[int]]:
    """Raw quantity per team, (gpu model, served model, basis, unit) and rate period index,
    and the teams with any usage record in the month (charged or not).

    One ``GROUP BY`` over the month's records (of ``team_ids``, or of every team; of the
    allocations in ``pool_id`` only, when given); records that straddle a rate change are
    prorated in Python, in ``(period_start, id)`` order.
    """
    by_team: dict[int, dict[tuple, list[Decimal]]] = defaultdict(
        lambda: defaultdict(lambda: [Decimal(0)] * len(periods))
    )
    month_records = UsageRecord.objects.filter(month=month)
    if team_ids is not None:
        month_records = month_records.filter(team_id__in=team_ids)
    if pool_id is not None:
        month_records = month_records.filter(allocation__pool_id=pool_id)
    charged = Q(quantity__gt=0) & ~Q(basis=ChargeBasis.INCLUDED)
    cuts = [p.start for p in periods[1:]]
    straddles = Q()
    for cut in cuts:
        straddles |= Q(period_start__lt=cut, period_end__gt=cut)
    segment = (
        Case(
            *[When(period_start__lt=c, then=Value(i)) for i, c in enumerate(cuts)],
            default=Value(len(cuts)),
            output_field=IntegerField(),
        )  # fmt: skip
        if cuts
        else Value(0, output_field=IntegerField())
    )
    rows = (
        month_records.annotate(segment=segment)
        .values_list("team_id", "gpu_model_id", "served_model", "basis", "unit", "segment")
        .annotate(total=Sum("quantity", filter=charged & ~straddles if cuts else charged))
        .order_by()
    )
    seen: set[int] = set()
    for team_id, gpu_model_id, served, basis, unit, index, total in rows:
        seen.add(team_id)
        if total is not None:
            by_team[team_id][(gpu_model_id, served, basis, unit)][index] += Decimal(total)
    records = month_records.filter(charged)
    if cuts:
        straddling = records.filter(straddles).order_by("period_start", "id")
        for record in straddling.only(
            "team_id", "gpu_model_id", "served_model", "basis", "unit", "quantity",
            "period_start", "period_end",
        ):  # fmt: skip
            key = (record.gpu_model_id, record.served_model, record.basis, record.unit)
            sums = by_team[record.team_id]
            length = Decimal(int((record.period_end - record.period_start).total_seconds()))
            for index, period in enumerate(periods):
                span = clip(record.period_start, record.period_end, period.start, period.end)
                if span is not None:
                    share = Decimal(int((span[1] - span[0]).total_seconds())) / length
                    sums[key][index] += record.quantity * share
    return by_team, seen


def _segment_sums(
    team_id: int, month: date, periods: list[RatePeriod]
) -> dict[tuple, list[Decimal]]:  # noqa: E501
    """Raw quantity per (gpu model, served model, basis, unit) and rate period index."""
    return _segment_sums_by_team(month, periods, [team_id])[0].get(team_id, {})


def _month_currency(periods: list[RatePeriod]) -> str:
    return next((p.currency for p in periods if p.currency), None) or default_currency()


def _lines_from_sums(
    month: date, periods: list[RatePeriod], currency: str, sums: dict[tuple, list[Decimal]]
) -> tuple[list[LineData], list[dict]]:
    """Price one team's segment sums: one line per key and rate period (adjacent periods
    with the same price merge), rounded once; unpriced usage becomes a warning."""
    lines: list[LineData] = []
    warnings: list[dict[str, Any]] = []
    for key, per_period in sums.items():
        gpu_model_id, served, basis, unit = key
        kind = rate_kind(basis, unit)
        current: LineData | None = None
        for period, raw in zip(periods, per_period, strict=True):
            if not raw:
                continue
            if unit == UsageUnit.UNMETERED_REQUESTS:
                # Counted and shown, never priced as 0 tokens: the gateway sent no usage.
                warnings.append({"code": "unmetered_requests", "served_model": served,
                                 "requests": str(raw), "from": period.rate_from.isoformat(),
                                 "to": period.rate_to.isoformat()})  # fmt: skip
                continue
            price = price_for(period, kind, gpu_model_id, served) if kind else None
            if basis == ChargeBasis.REPLAYED and not period.replayed_tokens_charged:
                price = Decimal(0)  # shown for showback; this card does not charge replays
            if price is None:
                warnings.append({"code": "unpriced", "gpu_model_id": gpu_model_id,
                                 "served_model": served, "basis": basis, "unit": unit,
                                 "quantity": str(raw), "from": period.rate_from.isoformat(),
                                 "to": period.rate_to.isoformat()})  # fmt: skip
                continue
            if (
                current is not None
                and current.unit_price == price
                and current.rate_to == period.rate_from
            ):  # noqa: E501
                raw_total = current.raw_quantity + raw
                merged = _priced(month, key, raw_total, period, price, currency)
                current = replace(
                    merged, rate_from=current.rate_from, rate_card_id=current.rate_card_id
                )  # noqa: E501
                lines[-1] = current
                continue
            current = _priced(month, key, raw, period, price, currency)
            lines.append(current)
    return lines, warnings


def ambiguous_time_notes(month: date, team_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Per team, one statement warning per usage record of ``month`` metered from a wall-clock
    time that happened twice (flag ``ambiguous_time``): both readings, the billed first one
    and the other, as ISO 8601 times and card-hours (6 places), with the line's GPU model and
    basis so a page can put it on that line. One query for all ``team_ids``."""
    notes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    records = UsageRecord.objects.filter(
        month=month, team_id__in=team_ids, flag=UsageFlag.AMBIGUOUS_TIME
    ).order_by("period_start", "id")
    for r in records:
        other = r.other_reading_quantity
        notes[r.team_id].append({
            "code": "ambiguous_time", "gpu_model_id": r.gpu_model_id, "basis": r.basis,
            "source_id": r.source_id, "job_id": r.source_id.split(":")[1],
            "billed_start": r.period_start.isoformat(), "billed_end": r.period_end.isoformat(),
            "billed_card_hours": str(card_hours_rounded(r.quantity)),
            "other_start": r.other_reading_start.isoformat(),
            "other_end": r.other_reading_end.isoformat(),
            "other_card_hours": None if other is None else str(card_hours_rounded(other)),
        })  # fmt: skip
    return notes


def shared_card_lines(
    month: date,
    team_ids: list[int] | None = None,
    pool_id: int | None = None,
    periods: list[RatePeriod] | None = None,
) -> tuple[dict[int, list[LineData]], dict[int, list[dict]]]:
    """Per team, one line per shared card, share basis and rate period: the team's card-hours
    of the card and its cents of the card's amount (:func:`billing.selectors.shared_card_splits`:
    the tenants and the idle remainder add up to the card's amount exactly); and per team the
    warnings of its cards that could not be billed (``shared_card_unpriced``,
    ``shared_card_over_shared``). Of ``team_ids`` only, of cards in ``pool_id``, when given."""
    lines: dict[int, list[LineData]] = defaultdict(list)
    warnings: dict[int, list[dict]] = defaultdict(list)
    cards, _ = shared_card_splits(month=month, team_ids=team_ids, pool_id=pool_id,
                                  periods=periods)  # fmt: skip
    for card in cards:
        period = card.period
        if card.split is None:
            for tenant in card.tenants:
                warnings[tenant].append({
                    "code": f"shared_card_{card.problem}", "gpu_id": card.gpu.pk,
                    "gpu_model_id": card.gpu.gpu_model_id, "detail": card.detail,
                    "from": period.rate_from.isoformat(), "to": period.rate_to.isoformat(),
                })  # fmt: skip
            continue
        for part in card.split.parts:
            raw = Decimal(part.card_seconds.numerator) / Decimal(part.card_seconds.denominator)
            share = Decimal(part.share.numerator) / Decimal(part.share.denominator)
            lines[part.tenant].append(
                LineData(
                    LineKind.USAGE,
                    month,
                    card.gpu.gpu_model_id,
                    "",
                    ChargeBasis.SHARED,
                    CARD_HOURS,
                    raw,
                    card_hours_rounded(raw),
                    card.price,
                    part.amount,
                    period.rate_from,
                    period.rate_to,
                    period.card_id,
                    card.gpu.pk,
                    share.quantize(Decimal("0.000001"), ROUND_HALF_UP),
                    part.basis,
                )  # fmt: skip
            )
    if team_ids is not None:
        wanted = set(team_ids)
        return (
            {t: x for t, x in lines.items() if t in wanted},
            {t: x for t, x in warnings.items() if t in wanted},
        )
    return dict(lines), dict(warnings)


def statement_lines_compute(*, team_id: int, month: date) -> tuple[list[LineData], list[dict], str]:
    """The usage lines of a team's month (its shared-card lines among them), its warnings
    (unpriced usage, usage metered from an ambiguous time, shared cards not billed) and
    currency."""
    periods = rate_periods(month=month, zone=billing_zone())
    currency = _month_currency(periods)
    lines, warnings = _lines_from_sums(
        month, periods, currency, _segment_sums(team_id, month, periods)
    )
    warnings += ambiguous_time_notes(month, [team_id]).get(team_id, [])
    shared, shared_warnings = shared_card_lines(month, [team_id], periods=periods)
    lines += shared.get(team_id, [])
    warnings += shared_warnings.get(team_id, [])
    return lines, warnings, currency


def usage_lines_by_team(
    *, month: date, team_ids: list[int] | None = None, pool_id: int | None = None
) -> tuple[dict[int, list[LineData]], str]:
    """The usage lines each team's statement for ``month`` would charge (team id -> lines,
    teams without charged usage absent) and the month's currency: the lines of
    :func:`statement_lines_compute`, for many teams in one ``GROUP BY``.

    ``pool_id`` keeps the usage of allocations in that pool (reserved and burst card-hours,
    and used card-hours metered against one) and the shared cards in it; usage tied to no
    allocation has no pool.
    """
    periods = rate_periods(month=month, zone=billing_zone())
    currency = _month_currency(periods)
    sums, _ = _segment_sums_by_team(month, periods, team_ids, pool_id)
    lines = {
        team_id: _lines_from_sums(month, periods, currency, team_sums)[0]
        for team_id, team_sums in sums.items()
    }
    shared, _ = shared_card_lines(month, team_ids, pool_id, periods)
    for team_id, team_lines in shared.items():
        lines.setdefault(team_id, []).extend(team_lines)
    return lines, currency


def _sort_key(names: dict[int, str]):
    def key(line: LineData) -> tuple:
        return (
            line.kind != LineKind.USAGE,
            line.period,
            _BASIS_ORDER.get(line.basis, 9),
            names.get(line.gpu_model_id, "") if line.gpu_model_id else line.served_model,
            line.served_model,
            _UNIT_ORDER.get(line.unit, 9),
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
                   line.rate_from, line.rate_to, line.gpu_id, line.share_basis)  # fmt: skip
            billed[key][0] += line.quantity
            billed[key][1] += line.amount
            meta[key] = line.rate_card_id
        now_lines = {line.key: line for line in recomputed}
        for key in sorted(set(now_lines) | set(billed), key=str):
            new = now_lines.get(key)
            quantity = (new.quantity if new else 0) - billed[key][0]
            amount = (new.amount if new else 0) - billed[key][1]
            if not quantity and not amount:
                continue
            gpu_model_id, served, basis, unit, price, rate_from, rate_to, gpu_id, share_basis = key
            result.append(
                LineData(
                    LineKind.ADJUSTMENT,
                    old.month,
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
                )  # fmt: skip
            )
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
    lines, warnings, currency = statement_lines_compute(team_id=team.pk, month=month)
    lines += _adjustments(team.pk, month, currency)
    names = dict(
        GpuModel.objects.filter(pk__in={x.gpu_model_id for x in lines}).values_list("pk", "name")
    )  # noqa: E501
    lines.sort(key=_sort_key(names))
    StatementLine.objects.filter(statement=statement).delete()
    StatementLine.objects.bulk_create(_line_objects(statement, lines))
    _statement_fill(statement, team, lines, warnings, currency, now)
    statement.save()
    return statement


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
    "share_basis",
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
                    card_share.get_db_prep_save(x.card_share, connection), x.share_basis,
                ))  # fmt: skip


_STATEMENT_FIELDS = [
    "status", "currency", "cost_centre", "usage_amount", "adjustment_amount", "total_amount",
    "rounding", "warnings", "built_at", "finalized_at",
]  # fmt: skip


def statements_close_month(
    *, month: date | None = None, now: datetime | None = None
) -> list[Statement]:  # noqa: E501
    """Build and finalize every team's statement for ``month`` (default: the previous month in
    the billing time zone). Teams with usage in the month or late usage for earlier final
    months get one. Safe to run again: final statements are skipped.

    Same lines as :func:`statement_build` + :func:`statement_finalize` per team, in bulk: one
    ``GROUP BY`` over the month's usage for all teams (split at rate periods), lines priced
    per group in Python; statements and audit events written with ``bulk_create``, lines with
    ``COPY`` on PostgreSQL (``bulk_create`` elsewhere), all in one transaction; managers get
    their PDFs once it commits.
    """
    now = now or timezone.now()
    month = (month or previous_month(month_of(now, billing_zone()))).replace(day=1)
    periods = rate_periods(month=month, zone=billing_zone())
    currency = _month_currency(periods)
    sums, team_ids = _segment_sums_by_team(month, periods)
    shared, shared_warnings = shared_card_lines(month, periods=periods)
    team_ids |= set(shared) | set(shared_warnings)
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
    late_team_ids |= set(late_shared_months(None, month))
    team_ids |= late_team_ids
    team_ids |= set(Statement.objects.filter(month=month).values_list("team_id", flat=True))
    with transaction.atomic():
        # A second close of the month waits here, then finds the first one's statements final
        # and leaves them (not a unique-constraint error).
        billing_lock(month_close_lock_name(month))
        teams = list(Team.objects.filter(pk__in=team_ids).order_by("slug"))
        existing = {
            s.team_id: s
            for s in Statement.objects.select_for_update().filter(month=month, team_id__in=team_ids)
        }
        todo = [t for t in teams if not (t.pk in existing and existing[t.pk].is_final)]
        names = dict(GpuModel.objects.values_list("pk", "name"))
        built: dict[int, tuple[list[LineData], list[dict]]] = {}
        ambiguous = ambiguous_time_notes(month, [team.pk for team in todo])
        for team in todo:
            lines, warnings = _lines_from_sums(month, periods, currency, sums.get(team.pk, {}))
            warnings += ambiguous.get(team.pk, [])
            lines += shared.get(team.pk, [])
            warnings += shared_warnings.get(team.pk, [])
            if team.pk in late_team_ids:
                lines += _adjustments(team.pk, month, currency)
            lines.sort(key=_sort_key(names))
            built[team.pk] = (lines, warnings)
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
        with_managers = teams_with_manager_email(team_ids=finalized)
        for team in todo:
            if team.pk in with_managers:
                statement_id = finalized[team.pk].pk
                transaction.on_commit(
                    lambda statement_id=statement_id: statement_email_managers(
                        statement_id=statement_id
                    )
                )
    return [finalized.get(t.pk) or existing[t.pk] for t in teams]
