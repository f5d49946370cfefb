"""Budgets API: scoped reads with the period's consumption, pool-admin writes, 4xx bodies."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from billing.budgets.models import Budget
from pools.audit.models import AuditEvent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates")]
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
BODY = {"team": "nlp", "period": "month", "starts_on": "2026-01-01",
        "card_hours_limit": "100", "money_limit": "300.00", "currency": "EUR",
        "rollover": "carry", "rollover_cap_percent": "25",
        "enforcement": "needs_admin"}  # fmt: skip


LIMIT_CASES = [
    # 14 whole digits where the column holds 13 (16 digits, 3 decimals) ...
    ("card_hours_limit", "99999999999999", "A limit of at most 9999999999999.999 card-hours."),
    ("card_hours_limit", "99999999999999.5555",
     "A limit of at most 9999999999999.999 card-hours, with at most 3 decimals."),
    ("card_hours_limit", "100.1234", "At most 3 decimals (e.g. 1500.125 card-hours)."),
    # ... and 13 where it holds 12 (16 digits, 4 decimals)
    ("money_limit", "9999999999999",
     "A limit of at most 999999999999.9999 in the budget's currency."),
    ("money_limit", "9999999999999.55555",
     "A limit of at most 999999999999.9999 in the budget's currency, with at most 4 decimals."),
    ("money_limit", "300.12345", "At most 4 decimals (e.g. 2500.1250)."),
]  # fmt: skip


@pytest.fixture(autouse=True)
def fixed_now(monkeypatch, settings):
    settings.BILLING_TIME_ZONE = "UTC"
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


def test_admin_creates_and_member_reads_consumption(team, team_member, pool_admin, a100, api_as):
    """30 A100 card-h on use in March (30 × 3.00 = 90.00 EUR) of 100 card-h / 300 EUR:
    30.0 % and 30.0 %; no February use, so carry hands over all 100 unused, capped at 25 %
    = 25: limit 125 card-h, 24.0 %; money 300 + 75 = 375, 24.0 %."""
    from factories import UsageRecordFactory

    start = datetime(2026, 3, 2, tzinfo=UTC)
    UsageRecordFactory(team=team, gpu_model=a100, quantity=Decimal(30 * 3600), basis="used",
                       source="slurm-accounting", period_start=start,
                       period_end=start.replace(day=3), month=date(2026, 3, 1))  # fmt: skip
    created = api_as(pool_admin).post("/api/v1/budgets/", BODY, format="json")
    assert created.status_code == 201, created.content
    assert AuditEvent.objects.filter(action="budget.created").count() == 1
    listed = api_as(team_member).get("/api/v1/budgets/?team=nlp")
    assert listed.status_code == 200
    [row] = listed.json()["results"]
    status = row["status"]
    assert status["period"] == "2026-03-01"
    assert status["card_hours"]["limit"] == "125.000"  # card-hours to 3 places, as pages
    assert status["card_hours"]["used"] == "30.000"
    assert row["card_hours_limit"] == status["card_hours"]["base_limit"] == "100.000"
    assert status["card_hours"]["percent"] == "24.0"
    assert status["money"]["limit"] == "375.0000"  # money to the 4 places a limit is stored
    assert status["money"]["base_limit"] == "300.0000"
    assert status["money"]["used"] == "90.0000"
    assert status["alert"] is None


def test_member_may_not_write(team, team_member, api_as):
    answer = api_as(team_member).post("/api/v1/budgets/", BODY, format="json")
    assert answer.status_code == 403 and answer.json()["code"] == "permission_denied"
    assert not Budget.objects.exists()


def test_other_teams_budgets_are_invisible(team, other_member, pool_admin, api_as):
    api_as(pool_admin).post("/api/v1/budgets/", BODY, format="json")
    assert api_as(other_member).get("/api/v1/budgets/").json()["count"] == 0
    pk = Budget.objects.get().pk
    assert api_as(other_member).get(f"/api/v1/budgets/{pk}/").status_code == 404


def test_bad_input_is_400_and_changes_nothing(team, pool_admin, api_as):
    answer = api_as(pool_admin).post("/api/v1/budgets/", {**BODY, "currency": "USD"}, format="json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_input"
    assert "currency" in answer.json()["errors"]
    bad = api_as(pool_admin).post("/api/v1/budgets/", {**BODY, "period": "week"}, format="json")
    assert bad.status_code == 400 and "period" in bad.json()["errors"]
    assert not Budget.objects.exists()


def test_duplicate_scope_is_409(team, pool_admin, api_as):
    assert api_as(pool_admin).post("/api/v1/budgets/", BODY, format="json").status_code == 201
    again = api_as(pool_admin).post("/api/v1/budgets/", BODY, format="json")
    assert again.status_code == 409 and again.json()["code"] == "conflict"


def test_update_and_delete(team, pool_admin, api_as):
    pk = api_as(pool_admin).post("/api/v1/budgets/", BODY, format="json").json()["id"]
    changed = api_as(pool_admin).patch(
        f"/api/v1/budgets/{pk}/", {"enforcement": "refuse"}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["enforcement"] == "refuse"
    assert api_as(pool_admin).delete(f"/api/v1/budgets/{pk}/").status_code == 204
    assert not Budget.objects.exists()


@pytest.mark.parametrize("given", ["eur", " Eur ", "EUR"])
def test_currency_in_any_case_or_spaced_is_the_iso_code(team, pool_admin, api_as, given):
    """As on the budget page (the service upper-cases and strips): the API's field check ran
    first and refused 'eur' as 'An ISO 4217 code: three capital letters.'"""
    created = api_as(pool_admin).post(
        "/api/v1/budgets/", {**BODY, "currency": given}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["currency"] == "EUR"
    assert Budget.objects.get().currency == "EUR"


@pytest.mark.parametrize("given", ["eu", "euro", "€", "e1r"])
def test_a_currency_that_is_no_code_stays_a_field_error(team, pool_admin, api_as, given):
    answer = api_as(pool_admin).post("/api/v1/budgets/", {**BODY, "currency": given}, format="json")
    assert answer.status_code == 400
    assert "currency" in answer.json()["errors"]
    assert not Budget.objects.exists()


@pytest.mark.parametrize(
    ("cap", "said"),
    [
        ("100000", "A cap of at most 9999.99 % of the limit."),
        ("99999.555", "A cap of at most 9999.99 % of the limit, with at most 2 decimals."),
        ("12.345", "At most 2 decimals (e.g. 12.25 %)."),
    ],
)
def test_a_rollover_cap_the_column_cannot_hold_is_said_in_per_cent(
    team, pool_admin, api_as, cap, said
):
    """As the budget form: not "no more than 4 digits before the decimal point"."""
    answer = api_as(pool_admin).post(
        "/api/v1/budgets/", {**BODY, "rollover_cap_percent": cap}, format="json"
    )
    assert answer.status_code == 400
    assert answer.json()["errors"] == {"rollover_cap_percent": [said]}
    assert not Budget.objects.exists()


@pytest.mark.parametrize(("field", "limit", "said"), LIMIT_CASES)
def test_a_limit_the_column_cannot_hold_is_said_in_the_users_terms(
    team, pool_admin, api_as, field, limit, said
):
    """As the budget form: not "no more than 13 digits before the decimal point"."""
    answer = api_as(pool_admin).post("/api/v1/budgets/", {**BODY, field: limit}, format="json")
    assert answer.status_code == 400
    assert answer.json()["errors"] == {field: [said]}
    assert not Budget.objects.exists()


def test_card_hours_read_to_three_places_half_up_and_money_to_four():
    """Card-hours as pages show them: used 959.7185 -> 959.719 (half-up; half-even would give
    959.718), limit 1128 -> 1128.000, remaining 1128 - 959.7185 = 168.2815 -> 168.282,
    percent 959.7185 / 1128 = 85.08 % -> 85.1. Money keeps its 4 stored places: 300 ->
    300.0000, used 12.5 -> 12.5000."""
    from billing.budgets.api import CardHoursDimensionSerializer, MoneyDimensionSerializer
    from billing.budgets.selectors import Dimension

    hours = Dimension(unit="card-hours", base_limit=Decimal(1128), rollover=Decimal(0),
                      used=Decimal("959.7185"))  # fmt: skip
    data = CardHoursDimensionSerializer(hours).data
    assert (data["base_limit"], data["rollover"], data["limit"]) == (
        "1128.000", "0.000", "1128.000")  # fmt: skip
    assert (data["used"], data["remaining"], data["percent"]) == ("959.719", "168.282", "85.1")
    money = Dimension(unit="EUR", base_limit=Decimal(300), rollover=Decimal(0),
                      used=Decimal("12.5"))  # fmt: skip
    data = MoneyDimensionSerializer(money).data
    assert (data["limit"], data["used"], data["remaining"]) == ("300.0000", "12.5000", "287.5000")
