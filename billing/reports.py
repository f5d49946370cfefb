"""Statement reports: CSV (one row per line, stable columns), PDF (WeasyPrint) with SVG bars.

The PDF renders the same data as the page; its charts are simple bar charts drawn here as SVG
from the numbers (Chart.js needs a browser, WeasyPrint has none).
"""

from __future__ import annotations

import io
from datetime import UTC
from decimal import Decimal

from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe

from billing.choices import LineKind
from billing.dashboards.serving import team_showback
from billing.models import Statement
from billing.pricing import (
    format_money,
    price_unit,
    priced_quantity,
    quantity_places,
    round_money,
    unit_price_places,
)
from billing.selectors import cost_by_gpu_model, lines_by_statement, month_trend, statement_lines
from pools.web.csv_cells import SafeCsvWriter
from pools.web.csv_numbers import card_hours_csv, plain_number

CSV_COLUMNS = (
    "statement_id", "team", "cost_centre", "month", "status", "line", "kind", "period",
    "gpu_model", "served_model", "basis", "quantity", "unit", "priced_quantity", "price_unit",
    "unit_price", "amount", "currency", "rate_from", "rate_to", "notes", "card", "card_share",
    "share_basis", "pool",
)  # fmt: skip
"""One row per statement line. ``priced_quantity`` is ``quantity`` in ``price_unit`` (card-hours,
or millions of tokens), so ``priced_quantity × unit_price`` rounded half-up to the currency's
minor unit is ``amount``; ``unit_price`` is per ``price_unit``, in ``currency``. Numbers are plain
decimals as the page shows them (:func:`pools.web.csv_numbers.plain_number`): ``quantity``
card-hours to 3 places or whole tokens, ``priced_quantity`` card-hours to 3 places or millions of
tokens exactly (``534.907485``), ``unit_price`` to the currency's minor unit or finer, ``amount`` to
the minor unit (``3456.00``). ``notes`` says, for a usage line holding jobs metered from a
wall-clock time that happened twice without an elapsed time (flag ``ambiguous_time``), both
readings of each such job — what the page and the PDF show beside the line; empty otherwise.
A shared-card line (basis ``shared``, :mod:`billing.shared_cards`) names its ``card``
(``<node>:<index>``), the team's ``card_share`` of the card's card-seconds in the rate period
(a fraction, 6 places) and its ``share_basis`` (``time-slicing``, ``mps``, ``mig``,
``dcgm-util``); its ``amount`` is the share's cents of the card's amount by largest remainder,
so it may differ from ``priced_quantity × unit_price`` by less than one minor unit (the card's
tenants and idle remainder add up to the card exactly). The three are empty on other lines."""


def ambiguous_time_of(line, statement) -> list[dict]:
    """The statement's ``ambiguous_time`` warnings (:func:`billing.services.statements.
    ambiguous_time_notes`) that belong to ``line``: a usage line of the statement's own month
    with the same GPU model and basis. The one rule the page, the PDF and the CSV use."""
    if statement is None or line.kind != LineKind.USAGE or line.period != statement.month:
        return []
    return [
        w
        for w in statement.warnings or []
        if w.get("code") == "ambiguous_time"
        and (w["gpu_model_id"], w["basis"]) == (line.gpu_model_id, line.basis)
    ]


def ambiguous_time_text(notes: list[dict]) -> str:
    """``notes`` in words for a CSV cell: "ambiguous time: job 42: 2.000000 card-hours billed
    at the first reading (<start> → <end>), 1.000000 at the other (<start> → <end>)"; "" for
    none."""
    return "; ".join(
        f"ambiguous time: job {w['job_id']}: {w['billed_card_hours']} card-hours billed at the "
        f"first reading ({w['billed_start']} → {w['billed_end']}), "
        f"{w['other_card_hours'] or 'unknown'} at the other "
        f"({w['other_start']} → {w['other_end']})"
        for w in notes
    )


def statement_csv_rows(statements, lines_of: dict | None = None) -> list[list[str]]:
    """The CSV's rows (header first) for ``statements`` (a queryset or list, in its order): two
    queries whatever their number (the statements, then every line of them in one query).
    ``lines_of`` (:func:`lines_key` -> the statement's lines) stands in for the second query:
    an unsaved statement (``statement_preview``, id ``None``) has its lines only in memory."""
    rows = [list(CSV_COLUMNS)]
    statements = list(statements)
    if lines_of is None:
        lines_of = lines_by_statement([s.pk for s in statements])
    for s in statements:
        for line in lines_of.get(lines_key(s), ()):
            places = quantity_places(line.unit)
            priced = priced_quantity(line.quantity, line.unit)
            rows.append([
                s.pk, s.team.slug, s.cost_centre, f"{s.month:%Y-%m}", s.status, line.position,
                line.kind, f"{line.period:%Y-%m}", line.gpu_model.slug if line.gpu_model else "",
                line.served_model, line.basis, plain_number(line.quantity, places), line.unit,
                plain_number(priced, places) if places else plain_number(priced.normalize()),
                price_unit(line.unit),
                plain_number(line.unit_price, unit_price_places(line.unit_price, s.currency)),
                plain_number(round_money(line.amount, s.currency)), s.currency,
                line.rate_from.isoformat(), line.rate_to.isoformat(),
                ambiguous_time_text(ambiguous_time_of(line, s)),
                str(line.gpu) if line.gpu_id else "",
                plain_number(line.card_share, 6) if line.card_share is not None else "",
                line.share_basis,
                line.pool.slug if line.pool_id else "",
            ])  # fmt: skip
    return rows


def lines_key(statement) -> int | tuple[str, int]:
    """A statement's key in :func:`statement_csv_rows`'s ``lines_of``: its id, or for an
    unsaved preview of the month in progress (id ``None``; the finance month holds one per
    team) ``("so-far", team id)``."""
    return statement.pk if statement.pk is not None else ("so-far", statement.team_id)


def statements_csv(statements, lines_of: dict | None = None) -> str:
    out = io.StringIO()
    SafeCsvWriter(out).writerows(statement_csv_rows(statements, lines_of))
    return out.getvalue()


def svg_bars(items: list[tuple[str, Decimal]], *, currency: str, width: int = 640,
             bar: int = 16, colour: str = "#1f6feb") -> str:  # fmt: skip
    """A horizontal bar chart of amounts as inline SVG: one labelled bar per item, scaled to
    the max, each value in the page's money format (:func:`billing.pricing.format_money`)."""
    if not items:
        return ""
    top = max((float(v) for _, v in items), default=0) or 1.0
    label_w, value_w = 150, 110
    span = width - label_w - value_w
    height = len(items) * (bar + 6) + 4
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="10">']  # fmt: skip
    for i, (label, value) in enumerate(items):
        y = 2 + i * (bar + 6)
        w = max(0.0, float(value) / top * span)
        parts.append(
            f'<text x="{label_w - 6}" y="{y + bar - 4}" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar}" fill="{colour}"/>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + bar - 4}">'
            f"{escape(format_money(value, currency))}</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - labels escaped above


SHOWBACK_COLUMNS = (
    "statement", "team", "month", "allocation", "pool", "gpu_model", "cards", "held_card_hours",
    "busy_share", "gpu_coverage", "input_tokens", "output_tokens", "input_tokens_per_card_hour",
    "output_tokens_per_card_hour", "cost", "cost_per_million_output", "currency",
)  # fmt: skip
"""The statement's serving showback (issue #30): one row per allocation with serving rollups in
the month. Not a charge: ``cost`` is what holding its cards cost (``held_card_hours`` x the rate
card's reserved price, tokens or not), ``cost_per_million_output`` the cost of the card-hours
that served tokens per million output tokens; empty cells are unknown (no price, no token
counters, no GPU series), never 0."""


def showback_csv(statement: Statement) -> str:
    out = io.StringIO()
    writer = SafeCsvWriter(out)
    writer.writerow(SHOWBACK_COLUMNS)
    for row in team_showback(team_id=statement.team_id, month=statement.month):
        a, e = row["allocation"], row["efficiency"]
        u = e.usage
        writer.writerow(
            [v for v in (
                statement.pk, a.team.slug, f"{statement.month:%Y-%m}", a.pk, a.pool.slug,
                a.gpu_model.slug, a.card_count, u.held_card_hours, u.busy_share, u.gpu_coverage,
                u.input_tokens, u.output_tokens, u.input_tokens_per_card_hour,
                u.output_tokens_per_card_hour, e.cost, e.cost_per_million_output, e.currency,
            )]
        )  # fmt: skip
    return out.getvalue()


def statement_pdf(statement: Statement) -> bytes:
    from weasyprint import HTML

    lines = list(statement_lines(statement=statement))
    trend = month_trend(team=statement.team, month=statement.month)
    context = {
        "statement": statement,
        "lines": lines,
        "trend_svg": svg_bars(
            [(f"{t['month']:%Y-%m}", t["total"]) for t in trend], currency=statement.currency
        ),
        "showback": team_showback(team_id=statement.team_id, month=statement.month),
        "model_svg": svg_bars(
            [(r["label"], r["amount"]) for r in cost_by_gpu_model(lines)],
            currency=statement.currency,
            colour="#8250df",
        ),
    }
    html = render_to_string("billing/statement_pdf.html", context)
    return HTML(string=html).write_pdf()


IDLE_COLUMNS = (
    "month", "pool", "capacity_cost", "allocated_cost", "used_outside_cost", "idle_cost",
    "utilisation_pct", "currency", "hours_counted_to",
)  # fmt: skip
"""The finance month's idle cost per pool (:func:`billing.selectors.pool_idle_costs`) as CSV:
the page's table, amounts as plain decimals to the currency's minor unit (``1234.50``, never
``1.2345E+3`` nor a thousands space), utilisation in per cent to one decimal, empty when no
capacity is priced (unknown, never 0). Burst pools (rented, paid per use) have no idle cost and
no row. ``hours_counted_to`` is the instant (ISO 8601, UTC) capacity's hours end: the month's end,
or for the current month the moment of the export (hours still to come are not idle)."""


def idle_costs_csv(month, idle) -> str:
    """The rows of :data:`IDLE_COLUMNS` for ``idle`` (the page's rows, in its order)."""
    out = io.StringIO()
    writer = SafeCsvWriter(out)
    writer.writerow(IDLE_COLUMNS)
    for row in idle:
        writer.writerow([
            f"{month:%Y-%m}", row.pool.slug,
            *(plain_number(round_money(amount, row.currency)) for amount in (
                row.capacity_cost, row.allocated_cost, row.used_outside_cost, row.idle_cost,
            )),
            plain_number(row.utilisation, 1) if row.utilisation is not None else None,
            row.currency,
            row.counted_to.astimezone(UTC).isoformat(timespec="seconds")
            if row.counted_to else None,
        ])  # fmt: skip
    return out.getvalue()


TOP_ALLOCATION_COLUMNS = (
    "month", "allocation", "team", "pool", "gpu_model", "cards", "mig_profile",
    "reserved_card_hours", "cost", "currency",
)  # fmt: skip
"""The month's dearest reserved allocations (:func:`billing.selectors.top_allocations`, the
page's table) as CSV: card-hours to the 3 places the page shows them with, the cost to the
currency's minor unit, plain decimals; ``mig_profile`` empty for whole cards (``cards`` then
counts cards, else slices)."""


def top_allocations_csv(month, rows) -> str:
    """The rows of :data:`TOP_ALLOCATION_COLUMNS` for ``rows`` (the page's rows, in its order)."""
    out = io.StringIO()
    writer = SafeCsvWriter(out)
    writer.writerow(TOP_ALLOCATION_COLUMNS)
    for row in rows:
        allocation = row["allocation"]
        writer.writerow([
            f"{month:%Y-%m}", allocation.pk, allocation.team.slug, allocation.pool.slug,
            allocation.gpu_model.slug, allocation.card_count, allocation.mig_profile,
            card_hours_csv(row["card_hours"]), plain_number(row["amount"]), row["currency"],
        ])  # fmt: skip
    return out.getvalue()


SHARED_CARD_COLUMNS = (
    "month", "card", "gpu_model", "rate_from", "rate_to", "tenant", "card_hours", "card_share",
    "amount", "currency", "problem",
)  # fmt: skip
"""The finance month's shared cards (:func:`billing.selectors.shared_card_idle`) as CSV: per card
and rate period one row per tenant (``tenant`` the team's slug) and one for the idle remainder
(``tenant`` empty), so a card's rows' ``amount`` add up to the card's amount exactly.
``card_hours`` are to the 3 places the page shows them with (each rounded half-up on its own,
so their sum may miss the period's hours in the last place); ``card_share`` is a fraction of
the card to 6 places. A card that could not be split has one row with its ``problem``
(``unpriced``, ``over_shared``) and no numbers."""


def shared_cards_csv(month, rows, currency: str) -> str:
    """The rows of :data:`SHARED_CARD_COLUMNS` for ``rows`` (the page's, in its order)."""
    out = io.StringIO()
    writer = SafeCsvWriter(out)
    writer.writerow(SHARED_CARD_COLUMNS)
    for row in rows:
        card = row.card
        model = card.gpu.gpu_model.slug if card.gpu.gpu_model else ""
        period = card.period
        head = [f"{month:%Y-%m}", str(card.gpu), model, period.rate_from.isoformat(),
                period.rate_to.isoformat()]  # fmt: skip
        if card.split is None:
            writer.writerow([*head, "", None, None, None, currency, card.problem])
            continue
        for team, hours, share, amount in row.tenants:
            writer.writerow([*head, team.slug, card_hours_csv(hours), plain_number(share, 6),
                             plain_number(amount), currency, ""])  # fmt: skip
        idle_share = plain_number(card.split.idle_share.numerator / Decimal(
            card.split.idle_share.denominator), 6)  # fmt: skip
        writer.writerow([*head, "", card_hours_csv(row.idle_card_hours), idle_share,
                         plain_number(row.idle_amount), currency, ""])  # fmt: skip
    return out.getvalue()
