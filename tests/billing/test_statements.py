"""Statements: pricing lines, rate change mid-month, rebuilds, finalize, adjustments, close."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.core import mail
from django.db import transaction
from kit import Accounting, job, utc

from billing.choices import LineKind, RateKind, StatementStatus
from billing.errors import StatementFinal
from billing.models import Statement, StatementLine
from billing.services.rates import rate_card_create
from billing.services.statements import statement_build, statement_finalize, statements_close_month
from billing.services.tokens import usage_tokens_ingest
from billing.services.usage_import import usage_import_slurm
from pools.audit.models import AuditEvent
from pools.tenancy.models import Team

pytestmark = pytest.mark.django_db
OCT = date(2026, 10, 1)
OCT_START = utc(2026, 10, 1)
WINDOW = {"start": utc(2026, 10, 1), "end": utc(2026, 12, 1), "now": utc(2026, 12, 2)}


def lines(statement):
    return [
        (x.kind, x.label, x.basis, x.quantity, x.unit, x.unit_price, x.amount, x.period)
        for x in statement.lines.order_by("position")
    ]


def test_c26_three_l40s_jobs_one_line_rounded_once(team, rates, infer_pool, tricky_inputs):
    from factories import PoolFactory, node_with_gpus

    pool = PoolFactory(slug="l", slurm_partition="l")
    node_with_gpus(2, gpu_model="l40s", hostname="l-01", pool=pool)
    jobs = Accounting([
        job(1, utc(2026, 10, 2), utc(2026, 10, 2, 0, 5), {"l40s": 1}, partition="l"),  # 300 s
        job(2, utc(2026, 10, 3), utc(2026, 10, 3, 0, 59, 59), {"l40s": 1}, partition="l"),  # 3599
        job(3, utc(2026, 10, 4), utc(2026, 10, 4, 1, 1), {"l40s": 1}, partition="l"),  # 3660
    ])  # fmt: skip
    usage_import_slurm(scheduler=jobs, **WINDOW)
    statement = statement_build(team=team, month=OCT)
    # 7559 s = 2.099722 card-h × 8.00 = 16.797778 → 16.80 (per-second, rounded once)
    assert lines(statement) == [("usage", "L40S", "used", Decimal("2.099722"), "card-hours",
                                 Decimal("8"), Decimal("16.80"), OCT)]  # fmt: skip
    assert statement.total_amount == Decimal("16.80")
    assert "once" in statement.rounding


def test_rate_change_on_the_15th_splits_the_line(team, rates, train_pool, a100):
    rate_card_create(name="autumn", currency="EUR", effective_from=date(2026, 10, 15),
                     gpu_prices={(a100.pk, RateKind.GPU_USED): Decimal("4.00")})  # fmt: skip
    jobs = Accounting([
        # 1 card 14 Oct 23:00 → 15 Oct 01:00: 1 h at 3.00 + 1 h at 4.00 (prorated by seconds)
        job(1, utc(2026, 10, 14, 23), utc(2026, 10, 15, 1), {"a100": 1}),
        # 2 cards 10 Oct 10:00 → 12:00: 4 card-h at 3.00 = 12.00
        job(2, utc(2026, 10, 10, 10), utc(2026, 10, 10, 12), {"a100": 2}),
        # 1 card 20 Oct 00:00 → 03:00: 3 card-h at 4.00 = 12.00
        job(3, utc(2026, 10, 20), utc(2026, 10, 20, 3), {"a100": 1}),
    ])  # fmt: skip
    usage_import_slurm(scheduler=jobs, **WINDOW)
    statement = statement_build(team=team, month=OCT)
    got = [(x.quantity, x.unit_price, x.amount, x.rate_from, x.rate_to)
           for x in statement.lines.order_by("position")]  # fmt: skip
    assert got == [
        (Decimal(5), Decimal(3), Decimal("15.00"), date(2026, 10, 1), date(2026, 10, 15)),
        (Decimal(4), Decimal(4), Decimal("16.00"), date(2026, 10, 15), date(2026, 11, 1)),
    ]
    assert statement.total_amount == Decimal("31.00")


def test_draft_rebuilds_identically(team, rates, train_pool):
    usage_import_slurm(scheduler=Accounting([job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1, 7),
                                                 {"a100": 3})]), **WINDOW)  # fmt: skip
    first = lines(statement_build(team=team, month=OCT))
    second = lines(statement_build(team=team, month=OCT))
    # 3 × 67 min = 201 min = 3.35 card-h × 3.00 = 10.05
    assert first == second == [("usage", "A100 SXM4 80GB", "used", Decimal("3.35"),
                                "card-hours", Decimal(3), Decimal("10.05"), OCT)]  # fmt: skip


def test_c29_tokens_priced_without_double_counting_cache(team, rates):
    result = usage_tokens_ingest(records=[{
        "idempotency_key": "req-1", "team": "nlp", "served_model": "qwen",
        "prompt_tokens": 12_000_000, "completion_tokens": 800_000, "cached_tokens": 10_000_000,
        "timestamp": "2026-10-05T10:00:00+00:00",
    }])  # fmt: skip
    assert (result.accepted, result.rejected) == (1, [])
    statement = statement_build(team=team, month=OCT)
    # C29 × 100: 2,000,000 × 2.00/1e6 = 4.00; 10,000,000 × 0.50/1e6 = 5.00; 800,000 × 8/1e6 = 6.40
    assert [(x.unit, x.quantity, x.amount) for x in statement.lines.order_by("position")] == [
        ("input-tokens", 2_000_000, Decimal("4.00")),
        ("cached-input-tokens", 10_000_000, Decimal("5.00")),
        ("output-tokens", 800_000, Decimal("6.40")),
    ]
    assert statement.total_amount == Decimal("15.40")  # not 35.40


def test_finalized_statement_never_changes_and_late_usage_is_an_adjustment(
    team, team_manager, rates, train_pool, django_capture_on_commit_callbacks
):
    usage_import_slurm(scheduler=Accounting([job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1),
                                                 {"a100": 1})]), **WINDOW)  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        final = statement_finalize(team=team, month=OCT, now=utc(2026, 11, 1, 2))
    frozen = lines(final)
    assert final.total_amount == Decimal("3.00")
    with pytest.raises(StatementFinal):
        statement_build(team=team, month=OCT)
    # late: a 2-card, 2 h October job arrives after the close → 4 card-h × 3.00 = 12.00
    usage_import_slurm(scheduler=Accounting([job(2, utc(2026, 10, 30), utc(2026, 10, 30, 2),
                                                 {"a100": 2})]),
                       start=OCT_START, end=utc(2026, 12, 1), now=utc(2026, 11, 3))  # fmt: skip
    assert lines(Statement.objects.get(pk=final.pk)) == frozen
    november = statement_build(team=team, month=date(2026, 11, 1))
    assert lines(november) == [("adjustment", "A100 SXM4 80GB", "used", Decimal(4), "card-hours",
                                Decimal(3), Decimal("12.00"), OCT)]  # fmt: skip
    assert (november.usage_amount, november.adjustment_amount) == (0, Decimal("12.00"))
    # once November is final, December does not bill the same late usage again
    with django_capture_on_commit_callbacks(execute=True):
        statement_finalize(team=team, month=date(2026, 11, 1), now=utc(2026, 12, 1, 2))
    december = statement_build(team=team, month=date(2026, 12, 1))
    assert lines(december) == []
    assert len(mail.outbox) == 2
    assert mail.outbox[0].to == [team_manager.email]
    assert mail.outbox[0].attachments[0][2] == "application/pdf"
    assert mail.outbox[0].attachments[0][1][:4] == b"%PDF"


def test_close_month_is_idempotent(team, rates, train_pool):
    usage_import_slurm(scheduler=Accounting([job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1),
                                                 {"a100": 1})]), **WINDOW)  # fmt: skip
    first = statements_close_month(now=utc(2026, 11, 1, 0, 30))
    lines_before = list(StatementLine.objects.values())
    second = statements_close_month(now=utc(2026, 11, 1, 1, 30))
    assert [s.pk for s in first] == [s.pk for s in second]
    assert [s.status for s in second] == [StatementStatus.FINAL]
    assert list(StatementLine.objects.values()) == lines_before
    assert first[0].month == OCT


def test_included_usage_is_not_charged_twice(team, rates, train_pool, a100):
    from factories import AllocationFactory

    from billing.services.usage_import import usage_import_reservations
    from pools.common.choices import AllocationStatus

    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                      starts_at=utc(2026, 10, 1), ends_at=utc(2026, 10, 2),
                      status=AllocationStatus.ENDED)  # fmt: skip
    usage_import_reservations(**WINDOW)
    usage_import_slurm(scheduler=Accounting([job(1, utc(2026, 10, 1, 3), utc(2026, 10, 1, 5),
                                                 {"a100": 2})]), **WINDOW)  # fmt: skip
    statement = statement_build(team=team, month=OCT)
    # 2 cards × 24 h reserved at 2.00 = 96.00; the job inside it is included
    assert [(x.basis, x.quantity, x.amount) for x in statement.lines.all()] == [
        ("reserved", Decimal(48), Decimal("96.00"))]  # fmt: skip
    assert LineKind.USAGE == statement.lines.get().kind


def test_unpriced_usage_is_a_warning_not_a_zero_line(team, train_pool):
    usage_import_slurm(scheduler=Accounting([job(1, utc(2026, 10, 2), utc(2026, 10, 2, 1),
                                                 {"a100": 1})]), **WINDOW)  # fmt: skip
    statement = statement_build(team=team, month=OCT)
    assert statement.lines.count() == 0
    assert [w["code"] for w in statement.warnings] == ["unpriced"]


class _Rollback(Exception):
    pass


def test_bulk_close_gives_the_same_lines_as_building_each_team(
    team, team_manager, rates, train_pool, a100, django_capture_on_commit_callbacks
):
    """statements_close_month aggregates all teams at once; its lines equal statement_build's
    per team: two teams, a rate change on the 15th (a job straddling it), a job across the
    month boundary, tokens, an existing draft, and late usage of a final month."""
    from factories import TeamFactory

    TeamFactory(slug="cv", name="Vision")
    TeamFactory(slug="idle", name="Idle")  # no usage: gets no statement
    rate_card_create(name="autumn", currency="EUR", effective_from=date(2026, 10, 15),
                     gpu_prices={(a100.pk, RateKind.GPU_USED): Decimal("4.00"),
                                 (a100.pk, RateKind.GPU_RESERVED): Decimal("2.50")},
                     token_prices={("qwen", RateKind.TOKEN_INPUT): Decimal("2.00"),
                                   ("qwen", RateKind.TOKEN_OUTPUT): Decimal("9.00")})  # fmt: skip
    september = Accounting([job(1, utc(2026, 9, 10), utc(2026, 9, 10, 1), {"a100": 1})])
    usage_import_slurm(scheduler=september, start=utc(2026, 9, 1), end=utc(2026, 10, 1),
                       now=utc(2026, 10, 1, 1))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        statement_finalize(team=team, month=date(2026, 9, 1), now=utc(2026, 10, 1, 2))
    jobs = Accounting([
        # late September usage (after the September close) → an adjustment on October
        job(2, utc(2026, 9, 30, 22), utc(2026, 9, 30, 23, 17, 13), {"a100": 3}),
        job(3, utc(2026, 10, 14, 23, 0, 7), utc(2026, 10, 15, 1, 3), {"a100": 2}),
        job(4, utc(2026, 10, 3), utc(2026, 10, 3, 0, 7, 11), {"a100": 1}),
        job(5, utc(2026, 10, 31, 23, 30), utc(2026, 11, 1, 1, 30), {"a100": 2}),
        job(6, utc(2026, 10, 14, 22), utc(2026, 10, 15, 0, 0, 1), {"a100": 1}, account="cv"),
        job(7, utc(2026, 10, 20), utc(2026, 10, 20, 2, 0, 59), {"a100": 5}, account="cv"),
        job(8, utc(2026, 10, 31, 22), utc(2026, 11, 2), {"a100": 1}, account="cv"),
    ])  # fmt: skip
    usage_import_slurm(scheduler=jobs, start=utc(2026, 9, 1), end=utc(2026, 12, 1),
                       now=utc(2026, 12, 2))  # fmt: skip
    usage_tokens_ingest(records=[
        {"idempotency_key": f"t{i}", "team": slug, "served_model": "qwen",
         "prompt_tokens": 1_234_567 + i, "completion_tokens": 76_543 * i, "cached_tokens": 1_111,
         "timestamp": f"2026-10-{day:02d}T10:00:00+00:00"}
        for i, (slug, day) in enumerate([("nlp", 5), ("nlp", 20), ("cv", 14), ("cv", 15)])
    ])  # fmt: skip
    statement_build(team=team, month=OCT)  # an existing draft is rebuilt by the close
    expected = {}
    try:
        with transaction.atomic():
            for slug in ("cv", "nlp"):
                statement = statement_build(team=Team.objects.get(slug=slug), month=OCT)
                expected[slug] = (lines(statement), statement.total_amount, statement.warnings,
                                  [(x.rate_from, x.rate_to, x.rate_card_id)
                                   for x in statement.lines.order_by("position")])  # fmt: skip
            raise _Rollback
    except _Rollback:
        pass
    assert {x[0] for x in expected["nlp"][0]} == {"usage", "adjustment"}
    assert len({x[2] for x in expected["cv"][3]}) == 2  # the rate change splits cv's lines
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        closed = statements_close_month(month=OCT, now=utc(2026, 11, 1, 3))
    got = {
        s.team.slug: (lines(s), s.total_amount, s.warnings,
                      [(x.rate_from, x.rate_to, x.rate_card_id)
                       for x in s.lines.order_by("position")])
        for s in (Statement.objects.get(pk=c.pk) for c in closed)
    }  # fmt: skip
    assert got == expected
    assert [(s.team.slug, s.status) for s in closed] == [("cv", "final"), ("nlp", "final")]
    assert [m.to for m in mail.outbox] == [[team_manager.email]]
    assert (
        AuditEvent.objects.filter(
            action="statement.finalized", object_id__in=[str(s.pk) for s in closed]
        ).count()
        == 2
    )
