"""Budgets enforced at submission, approval and extension (pools/capacity/budget_gate.py).

Clock fixed at 2026-03-10 12:00 UTC (billing zone UTC). Team ``nlp`` used 30 A100 card-hours
on use in March (30 × 3.00 = 90.00 EUR). The request: 8 A100 in pool ``train`` from 13:00 to
23:00 the same day = 8 × 10 = 80 card-hours, 80 × 2.00 (reserved) = 160.00 EUR. Against a
100 card-hour monthly budget: 30 + 80 = 110 > 100, beyond it; against 120: within.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.test import override_settings

from billing.budgets.models import Budget
from pools.capacity.models import CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.allocations import allocation_extend
from pools.capacity.services.requests import capacity_request_approve, capacity_request_create
from pools.common.choices import RequestStatus
from pools.common.errors import BudgetExceeded

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates", "fixed_now")]
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)


@pytest.fixture
def fixed_now(monkeypatch, settings):
    settings.BILLING_TIME_ZONE = "UTC"
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


@pytest.fixture
def used_30(team, a100):
    from factories import UsageRecordFactory

    start = datetime(2026, 3, 2, tzinfo=UTC)
    return UsageRecordFactory(team=team, gpu_model=a100, quantity=Decimal(30 * 3600),
                              basis="used", source="slurm-accounting", period_start=start,
                              period_end=start.replace(day=3), month=date(2026, 3, 1),
                              created_at=NOW, updated_at=NOW)  # fmt: skip


def budget(team, enforcement, hours=100, **extra):
    return Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                                 card_hours_limit=Decimal(hours), enforcement=enforcement,
                                 **extra)  # fmt: skip


def ask(actor, team, pool, model, **extra):
    return capacity_request_create(actor=actor, fields=RequestFields(
        team=team, workload_kind="training", card_count=8, pool=pool,
        gpu_model=model, starts_at=NOW.replace(hour=13), ends_at=NOW.replace(hour=23),
        justification="pretraining", **extra,
    ))  # fmt: skip


def test_refuse_at_submission_writes_nothing(team, team_member, train_pool, a100, used_30):
    budget(team, "refuse")
    with pytest.raises(BudgetExceeded) as caught:
        ask(team_member, team, train_pool, a100)
    error = caught.value
    assert error.code == "budget_exceeded" and error.status == 409
    assert error.data["used"] == "30" and error.data["requested"] == "80"
    assert error.data["limit"] == "100" and error.data["dimension"] == "card_hours"
    assert "30.00 card-hours used + 80.00 requested > 100.00" in error.data["errors"]["card_count"]
    assert not CapacityRequest.objects.exists()


def test_refuse_answers_409_in_the_api(team, team_member, train_pool, a100, used_30, api_as):
    budget(team, "refuse")
    answer = api_as(team_member).post(
        "/api/v1/requests/",
        {"team": "nlp", "workload_kind": "training", "card_count": 8, "pool": "train",
         "gpu_model": a100.slug, "starts_at": NOW.replace(hour=13).isoformat(),
         "ends_at": NOW.replace(hour=23).isoformat(), "justification": "pretraining"},
        format="json",
    )  # fmt: skip
    assert answer.status_code == 409, answer.content
    body = answer.json()
    assert body["code"] == "budget_exceeded"
    assert body["errors"]["card_count"]
    assert not CapacityRequest.objects.exists()


def test_within_budget_passes_silently(team, team_member, train_pool, a100, used_30):
    budget(team, "refuse", hours=120)  # 30 + 80 = 110 <= 120
    request = ask(team_member, team, train_pool, a100)
    assert request.status == RequestStatus.SUBMITTED
    assert request.budget_verdict == "" and request.budget_reason == ""


@pytest.mark.parametrize(
    ("limits", "refused"),
    [
        ({"card_hours_limit": Decimal(110)}, None),  # 30 + 80 = 110, not beyond 110
        ({"card_hours_limit": Decimal("109.999")}, "card_hours"),  # 110 > 109.999
        ({"money_limit": Decimal("250.00"), "currency": "EUR"}, None),  # 90 + 160 = 250.00
        ({"money_limit": Decimal("249.99"), "currency": "EUR"}, "money"),  # a cent over
    ],
)
def test_a_request_reaching_the_limit_exactly_passes_and_one_unit_over_is_refused(
    team, team_member, train_pool, a100, used_30, limits, refused
):
    """The boundary: 30 card-hours used (90.00 EUR at 3.00 on use) + 8 A100 x 10 h = 80
    card-hours requested (160.00 EUR at the 2.00 reserved price) reach 110 card-hours and
    250.00 EUR. A limit of exactly that is not passed; a thousandth of a card-hour or a cent
    less is, and a refusing budget refuses it (and writes nothing)."""
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          enforcement="refuse", **limits)  # fmt: skip
    if refused is None:
        request = ask(team_member, team, train_pool, a100)
        assert (request.status, request.budget_verdict) == (RequestStatus.SUBMITTED, "")
        return
    with pytest.raises(BudgetExceeded) as caught:
        ask(team_member, team, train_pool, a100)
    assert caught.value.data["dimension"] == refused
    assert not CapacityRequest.objects.exists()


def test_a_budget_used_up_exactly_is_exhausted_and_refuses_any_more(
    team, team_member, train_pool, a100, used_30
):
    """30 card-hours used of a 30 card-hour budget: 100.0 %, exhausted (the 100 % alert), so
    any request beyond it is refused: 30 + 80 > 30."""
    from billing.budgets.selectors import budget_statuses

    limit = budget(team, "refuse", hours=30)
    status = budget_statuses([limit])[limit.pk]
    assert (status.card_hours.used, status.percent, status.exhausted, status.alert) == (
        Decimal(30), Decimal("100.0"), True, 100,
    )  # fmt: skip
    assert status.card_hours.remaining == 0
    with pytest.raises(BudgetExceeded):
        ask(team_member, team, train_pool, a100)


def test_money_limit_counts_the_reserved_price(team, team_member, train_pool, a100, used_30):
    """Money: 90.00 used + 160.00 requested = 250.00 > 200.00 EUR (card-hours unlimited)."""
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          money_limit=Decimal(200), currency="EUR", enforcement="warn")  # fmt: skip
    request = ask(team_member, team, train_pool, a100)
    assert request.budget_verdict == "warn"
    assert "90.00 EUR used + 160.00 requested > 200.00 EUR" in request.budget_reason


def test_warn_keeps_auto_approval_and_shows_why(team, team_member, train_pool, a100, used_30):
    train_pool.auto_approve_max_cards, train_pool.auto_approve_max_days = 8, 1
    train_pool.save()
    budget(team, "warn")
    request = ask(team_member, team, train_pool, a100)
    assert request.status == RequestStatus.APPROVED
    assert request.budget_verdict == "warn"
    assert "Beyond the month budget of NLP" in request.budget_reason


def test_needs_admin_stops_auto_approval(
    team, team_member, pool_admin, train_pool, a100, used_30, admin_page
):
    train_pool.auto_approve_max_cards, train_pool.auto_approve_max_days = 8, 1
    train_pool.save()
    budget(team, "needs_admin")
    request = ask(team_member, team, train_pool, a100)
    assert request.status == RequestStatus.SUBMITTED
    assert request.budget_verdict == "needs_admin"
    page = admin_page.get("/requests/queue/")
    assert "over budget: you decide" in page.content.decode()
    # a pool admin may still approve beyond the budget
    allocation = capacity_request_approve(request=request, actor=pool_admin)
    assert allocation.card_count == 8


def test_refuse_at_approval_when_usage_grew(team, team_member, pool_admin, train_pool, a100):
    """Submitted within the budget (0 + 80 <= 100); 30 card-h metered since: refused at
    approval, the request stays submitted and no allocation is made."""
    from factories import UsageRecordFactory

    budget(team, "refuse")
    request = ask(team_member, team, train_pool, a100)
    assert request.budget_verdict == ""
    start = datetime(2026, 3, 2, tzinfo=UTC)
    UsageRecordFactory(team=team, gpu_model=a100, quantity=Decimal(30 * 3600), basis="used",
                       source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=3), month=date(2026, 3, 1))  # fmt: skip
    with pytest.raises(BudgetExceeded):
        capacity_request_approve(request=request, actor=pool_admin)
    request.refresh_from_db()
    assert request.status == RequestStatus.SUBMITTED and not hasattr(request, "allocation")


def test_extension_refused(team, team_member, train_pool, a100, used_30):
    """An allocation of 2 A100 from 10:00 to 13:00; extending it to 23:00 asks 2 × 10 = 20
    card-h: 30 + 20 = 50 > 40 → refused, no extension request written."""
    from factories import AllocationFactory

    allocation = AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=2,
                                   starts_at=NOW.replace(hour=10), ends_at=NOW.replace(hour=13),
                                   status="active")  # fmt: skip
    budget(team, "refuse", hours=40)
    before = CapacityRequest.objects.count()
    with pytest.raises(BudgetExceeded):
        allocation_extend(allocation=allocation, actor=team_member,
                          ends_at=NOW.replace(hour=23), justification="more")  # fmt: skip
    assert CapacityRequest.objects.count() == before


@override_settings(BUDGET_CHECK="")
def test_no_budget_check_configured(team, team_member, train_pool, a100, used_30):
    budget(team, "refuse")
    assert ask(team_member, team, train_pool, a100).status == RequestStatus.SUBMITTED


def test_scoped_budgets_apply_only_to_their_pool_and_model(
    team, team_member, train_pool, infer_pool, a100, l40s, used_30
):
    """Refusing budgets of 1 card-h for the ``infer`` pool and for L40S cards leave an A100
    request in ``train`` alone; one for A100 refuses it (30 + 80 > 1)."""
    budget(team, "refuse", hours=1, pool=infer_pool)
    budget(team, "refuse", hours=1, gpu_model=l40s)
    assert ask(team_member, team, train_pool, a100).status == RequestStatus.SUBMITTED
    budget(team, "refuse", hours=1, gpu_model=a100)
    with pytest.raises(BudgetExceeded):
        ask(team_member, team, train_pool, a100)


def test_refuse_on_the_request_page_is_a_card_count_field_error(
    team, team_member, train_pool, a100, used_30, client
):
    budget(team, "refuse")
    client.force_login(team_member)
    answer = client.post(
        "/requests/new/",
        {"team": team.slug, "kind": "cards", "workload_kind": "training", "pool": "train",
         "gpu_model": a100.slug, "card_count": 8,
         "starts_at": "2026-03-10T13:00", "ends_at": "2026-03-10T23:00",
         "justification": "pretraining", "submit_request": "1"},
    )  # fmt: skip
    assert answer.status_code == 200
    errors = answer.context["form"].errors
    assert "30.00 card-hours used + 80.00 requested > 100.00" in errors["card_count"][0]
    assert not CapacityRequest.objects.exists()


def test_approved_allocations_not_yet_accrued_count(team, team_member, train_pool, a100, used_30):
    """Two requests that each fit alone must not both pass together.

    Budget 120 card-h; used 30. An approved reserved allocation of 4 A100 from 10:00 to 20:00,
    which no reservation import has accrued yet, commits all of it, 4 × 10 = 40 card-h (the
    hours since 10:00 are in no statement yet): 30 + 40 + 80 = 150 > 120 → refused. Money (no
    limit here) not counted.
    Without the allocation: 30 + 80 = 110 <= 120 passes (test_within_budget_passes_silently).
    """
    from factories import AllocationFactory

    AllocationFactory(team=team, pool=train_pool, gpu_model=a100, card_count=4,
                      starts_at=NOW.replace(hour=10), ends_at=NOW.replace(hour=20),
                      status="active", pricing_method="reserved")  # fmt: skip
    budget(team, "refuse", hours=120)
    with pytest.raises(BudgetExceeded) as caught:
        ask(team_member, team, train_pool, a100)
    data = caught.value.data
    assert (data["used"], data["committed"], data["requested"]) == ("30", "40", "80")
    assert (
        "30.00 card-hours used + 40.00 committed to approved allocations + 80.00"
        in (data["errors"]["card_count"])
    )


def test_committed_money_and_scope(team, team_member, train_pool, infer_pool, a100, used_30):
    """A money budget of pool ``train``, 240.00 EUR. Used: 0.00 (the 30 card-h on use belong
    to no allocation, so to no pool). The request 160.00 (80 × 2.00 reserved) passes alone.
    An approved reserved allocation of 2 A100 from 12:00 to 22:00 commits 2 × 10 × 2.00 =
    40.00: 200.00 still passes; a second one of 4 A100 from 14:00 to 20:00 commits 4 × 6 ×
    2.00 = 48.00 more: 248.00 > 240.00 → warned. One in another pool, or priced on use, or
    released, does not count for a budget of ``train``."""
    from factories import AllocationFactory

    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1), pool=train_pool,
                          money_limit=Decimal(240), currency="EUR", enforcement="warn")  # fmt: skip

    def hold(cards, start, end, **extra):
        fields = {"pool": train_pool, "status": "approved", "pricing_method": "reserved"}
        fields.update(extra)
        AllocationFactory(team=team, gpu_model=a100, card_count=cards, starts_at=NOW.replace(
            hour=start), ends_at=NOW.replace(hour=end), **fields)  # fmt: skip

    hold(2, 12, 22)
    hold(8, 12, 22, pool=infer_pool)
    hold(8, 12, 22, pricing_method="used")
    hold(8, 12, 22, status="released")
    assert ask(team_member, team, train_pool, a100).budget_verdict == ""
    hold(4, 14, 20)
    request = ask(team_member, team, train_pool, a100)
    assert request.budget_verdict == "warn"
    expected = "0.00 EUR used + 88.00 committed to approved allocations + 160.00 requested > 240"
    assert expected in request.budget_reason
