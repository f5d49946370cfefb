"""The budget pages' form: pool admins create, edit and delete (the delete button asks
first); managers only see; the service's field errors appear next to the fields and nothing
is written. Rate card in EUR (tests/billing/conftest.py ``rates``)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from billing.budgets.models import Budget
from pools.audit.models import AuditEvent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates")]

VALID = {
    "team": "", "pool": "", "gpu_model": "", "period": "month", "starts_on": "2026-01-01",
    "card_hours_limit": "2000", "money_limit": "", "currency": "", "rollover": "none",
    "rollover_cap_percent": "", "enforcement": "needs_admin",
}  # fmt: skip


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


def form(team, **changes):
    return {**VALID, "team": team.pk, **changes}


def actions():
    events = AuditEvent.objects.filter(object_type="billing.budget").order_by("id")
    return list(events.values_list("action", flat=True))


def test_a_pool_admin_creates_edits_and_deletes(client, pool_admin, team):
    client.force_login(pool_admin)
    assert client.get("/costs/budgets/new/").status_code == 200

    done = client.post("/costs/budgets/new/", form(team))
    budget = Budget.objects.get()
    assert done.status_code == 302 and done["Location"] == f"/costs/budgets/?budget={budget.pk}"
    assert (budget.team, budget.period, budget.card_hours_limit) == (team, "month", Decimal(2000))
    assert budget.enforcement == "needs_admin" and budget.starts_on == date(2026, 1, 1)

    page = client.get(f"/costs/budgets/{budget.pk}/edit/").content.decode()
    assert 'value="2000.000"' in page and "data-confirm=" in page
    client.post(f"/costs/budgets/{budget.pk}/edit/", form(team, card_hours_limit="1500"))
    budget.refresh_from_db()
    assert budget.card_hours_limit == Decimal(1500)

    assert client.post(f"/costs/budgets/{budget.pk}/delete/").status_code == 302
    assert not Budget.objects.exists()
    assert actions() == ["budget.created", "budget.updated", "budget.deleted"]


def test_field_errors_write_nothing(client, pool_admin, team):
    client.force_login(pool_admin)
    page = client.post(
        "/costs/budgets/new/",
        form(team, money_limit="500", currency="USD", starts_on="2026-01-15"),
    )
    assert page.status_code == 200
    errors = page.context["form"].errors
    assert errors["currency"] == [
        "The rate card charges in EUR; a budget in USD could not be compared with what it charges."
    ]
    assert errors["starts_on"] == ["The first day of a month: 2026-01-01?"]
    assert not Budget.objects.exists() and actions() == []


def test_a_second_budget_for_the_same_scope_is_a_form_error(client, pool_admin, team):
    client.force_login(pool_admin)
    client.post("/costs/budgets/new/", form(team))
    page = client.post("/costs/budgets/new/", form(team, card_hours_limit="10"))
    assert page.status_code == 200
    assert page.context["form"].non_field_errors() == [
        "NLP already has a month budget for all pools and models."
    ]
    assert Budget.objects.count() == 1


def test_managers_see_but_do_not_edit(client, pool_admin, team, team_manager):
    budget = Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                                   card_hours_limit=Decimal(100))  # fmt: skip
    client.force_login(team_manager)
    listing = client.get("/costs/budgets/").content.decode()
    assert "NLP" in listing and "New budget" not in listing and "/edit/" not in listing
    assert client.get("/costs/budgets/new/").status_code == 403
    assert client.post("/costs/budgets/new/", form(team)).status_code == 403
    assert client.get(f"/costs/budgets/{budget.pk}/edit/").status_code == 403
    assert client.post(f"/costs/budgets/{budget.pk}/delete/").status_code == 403
    assert Budget.objects.count() == 1 and actions() == []


@pytest.mark.parametrize(
    ("cap", "said"),
    [
        ("100000", "A cap of at most 9999.99 % of the limit."),
        ("99999.555", "A cap of at most 9999.99 % of the limit, with at most 2 decimals."),
        ("12.345", "At most 2 decimals (e.g. 12.25 %)."),
    ],
)
def test_a_rollover_cap_the_column_cannot_hold_is_said_in_per_cent(
    client, pool_admin, team, cap, said
):
    """Found by a newcomer: 100000 % answered "Ensure that there are no more than 4 digits
    before the decimal point." The column holds 6 digits, 2 of them decimals: 9999.99 % at
    most."""
    client.force_login(pool_admin)
    page = client.post(
        "/costs/budgets/new/", form(team, rollover="carry", rollover_cap_percent=cap)
    )
    assert page.status_code == 200
    assert page.context["form"].errors["rollover_cap_percent"] == [said]
    assert not Budget.objects.exists() and actions() == []


def test_the_largest_rollover_cap_is_kept(client, pool_admin, team):
    client.force_login(pool_admin)
    done = client.post(
        "/costs/budgets/new/", form(team, rollover="carry", rollover_cap_percent="9999.99")
    )
    assert done.status_code == 302
    assert Budget.objects.get().rollover_cap_percent == Decimal("9999.99")


@pytest.mark.parametrize(("field", "limit", "said"), LIMIT_CASES)
def test_a_limit_the_column_cannot_hold_is_said_in_the_users_terms(
    client, pool_admin, team, field, limit, said
):
    """Not "Ensure that there are no more than 13 digits before the decimal point."."""
    client.force_login(pool_admin)
    page = client.post("/costs/budgets/new/", form(team, **{field: limit}, currency="EUR"))
    assert page.status_code == 200
    assert page.context["form"].errors[field] == [said]
    assert not Budget.objects.exists() and actions() == []


def test_the_largest_limits_are_kept(client, pool_admin, team):
    client.force_login(pool_admin)
    done = client.post(
        "/costs/budgets/new/",
        form(team, card_hours_limit="9999999999999.999", money_limit="999999999999.9999",
             currency="EUR"),
    )  # fmt: skip
    assert done.status_code == 302
    budget = Budget.objects.get()
    assert budget.card_hours_limit == Decimal("9999999999999.999")
    assert budget.money_limit == Decimal("999999999999.9999")


def test_the_edit_page_gives_the_date_input_its_start_in_iso_form(client, pool_admin, team):
    """Found by hand (newcomer probe of /costs/budgets/<id>/edit/ in Chromium): the start went
    out in the site's en-gb form, ``value="01/01/2026"``, which an ``<input type="date">`` does
    not read (the HTML standard's value is ``yyyy-mm-dd``): the field showed empty, and *Save*
    was refused until the date was typed again."""
    client.force_login(pool_admin)
    client.post("/costs/budgets/new/", form(team))
    budget = Budget.objects.get()

    page = client.get(f"/costs/budgets/{budget.pk}/edit/").content.decode()

    assert '<input type="date" name="starts_on" value="2026-01-01"' in page
