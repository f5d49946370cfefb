"""Budget writes: pool admins only, audited, refused whole with field errors."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from billing.budgets.models import Budget
from billing.budgets.services import budget_create, budget_delete, budget_update
from pools.audit.models import AuditEvent
from pools.common.errors import Conflict, InvalidInput, PermissionDenied

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates")]


def values(team, **changes):
    return {"team": team, "period": "quarter", "starts_on": date(2026, 1, 1),
            "card_hours_limit": Decimal(2000), "money_limit": Decimal("4000.00"),
            "currency": "EUR", "rollover": "carry", "rollover_cap_percent": Decimal(10),
            "enforcement": "needs_admin", **changes}  # fmt: skip


def test_create_update_delete_audited(team, pool_admin, a100):
    budget = budget_create(actor=pool_admin, **values(team, gpu_model=a100))
    assert budget.scope_label == a100.name
    budget_update(budget=budget, actor=pool_admin, card_hours_limit=Decimal(2500))
    budget.refresh_from_db()
    assert budget.card_hours_limit == Decimal(2500)
    budget_delete(budget=budget, actor=pool_admin)
    assert not Budget.objects.exists()
    events = list(AuditEvent.objects.filter(object_type="billing.budget").order_by("id"))
    assert [e.action for e in events] == ["budget.created", "budget.updated", "budget.deleted"]
    assert events[1].before["card_hours_limit"] == "2000.000"
    assert events[1].after["card_hours_limit"] == "2500.000"


def test_currency_other_than_the_rate_card_refused(team, pool_admin):
    """The test rate card charges EUR: a USD budget is a field error and nothing is written."""
    with pytest.raises(InvalidInput) as caught:
        budget_create(actor=pool_admin, **values(team, currency="USD"))
    assert "EUR" in caught.value.data["errors"]["currency"]
    assert not Budget.objects.exists() and not AuditEvent.objects.exists()


def test_currency_in_lower_case_or_with_spaces_is_the_iso_code(team, pool_admin):
    """ISO 4217 codes are upper case: " eur " is the rate card's EUR, on create and update."""
    budget = budget_create(actor=pool_admin, **values(team, currency=" eur "))
    assert Budget.objects.get().currency == "EUR"
    budget_update(budget=budget, actor=pool_admin, currency="Eur", money_limit=Decimal(5000))
    assert Budget.objects.values_list("currency", "money_limit").get() == ("EUR", Decimal(5000))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"starts_on": date(2026, 2, 1)}, "starts_on"),  # a quarter starts Jan/Apr/Jul/Oct
        ({"card_hours_limit": None, "money_limit": None, "currency": ""}, "card_hours_limit"),
        ({"card_hours_limit": Decimal(0)}, "card_hours_limit"),
        ({"money_limit": Decimal(-1)}, "money_limit"),
        ({"money_limit": None}, "currency"),  # a currency without a money limit
        ({"rollover": "none"}, "rollover_cap_percent"),  # a cap only when carrying
        ({"enforcement": "block"}, "enforcement"),
        ({"period": "week"}, "period"),
        # outside 2000-01-01..2100-12-31: a 9999-10 quarter has no next period (was a 500 on
        # the budgets page and API after it was saved), 1999 is a typo
        ({"starts_on": date(9999, 10, 1)}, "starts_on"),
        ({"starts_on": date(1999, 10, 1)}, "starts_on"),
    ],
)
def test_bad_fields_refused(team, pool_admin, changes, field):
    with pytest.raises(InvalidInput) as caught:
        budget_create(actor=pool_admin, **values(team, **changes))
    assert field in caught.value.data["errors"]
    assert not Budget.objects.exists()


def test_members_may_not_write(team, team_manager):
    with pytest.raises(PermissionDenied):
        budget_create(actor=team_manager, **values(team))
    assert not Budget.objects.exists()


def test_one_budget_per_scope_and_period(team, pool_admin):
    budget_create(actor=pool_admin, **values(team))
    with pytest.raises(Conflict):
        budget_create(actor=pool_admin, **values(team))
    assert Budget.objects.count() == 1
    assert AuditEvent.objects.filter(action="budget.created").count() == 1


def test_a_second_budget_for_a_scope_is_refused_before_any_insert(team, pool_admin):
    """SQLite (the demo) cannot make ``budget_unique_scope`` (NULLS NOT DISTINCT: pool and
    GPU model are empty here): the service refuses the duplicate itself, before writing, so
    the rule does not depend on the constraint."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    budget_create(actor=pool_admin, **values(team))
    with CaptureQueriesContext(connection) as queries, pytest.raises(Conflict) as caught:
        budget_create(actor=pool_admin, **values(team))
    assert not [q for q in queries if q["sql"].lstrip().upper().startswith("INSERT")]
    assert "already has a quarter budget" in caught.value.message
