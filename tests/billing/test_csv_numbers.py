"""Plain decimals in every CSV (issue 37): never ``2.88E+3``; amounts to the currency's minor unit
beside the currency column; card-hours as the page shows them."""

from __future__ import annotations

import csv
import io
from datetime import date
from decimal import Decimal

import pytest
from kit import Accounting, job, utc

from billing.services.statements import statement_build
from billing.services.usage_import import usage_import_slurm
from pools.web.csv_numbers import plain_number

OCT = date(2026, 10, 1)


@pytest.mark.parametrize(
    ("value", "places", "cell"),
    [
        (Decimal("2.88E+3"), None, "2880"),  # what Decimal.normalize() makes of 2880
        (Decimal("2880"), 3, "2880.000"),
        (Decimal("3.500000"), None, "3.500000"),
        (Decimal("8640.0000"), 2, "8640.00"),
        (Decimal("0.125"), 2, "0.13"),  # half-up, as money is rounded
        (Decimal("-0.125"), 2, "-0.13"),
        (1e-05, None, "0.00001"),  # str(1e-05) is "1e-05"
        (1.5e16, None, "15000000000000000"),  # str() is "1.5e+16"
        (0.1, None, "0.1"),  # the float's shortest repr, not 0.1000000000000000055511151231257827
        (7, None, 7),
        ("A100", None, "A100"),
        (None, None, None),
    ],
)
def test_plain_number(value, places, cell):
    assert plain_number(value, places) == cell


@pytest.fixture
def four_cards_for_30_days(team, rates, train_pool):
    four_a100 = job(1, utc(2026, 10, 1), utc(2026, 10, 31), {"a100": 4})
    usage_import_slurm(
        scheduler=Accounting([four_a100]),
        start=utc(2026, 10, 1),
        end=utc(2026, 11, 1),
        now=utc(2026, 11, 2),
    )
    return statement_build(team=team, month=OCT)


@pytest.mark.django_db
def test_the_statement_csv_has_plain_numbers_as_the_page_shows_them(
    four_cards_for_30_days, team_member, client
):
    """4 A100 cards used for 30 days (2026-10-01 00:00 → 10-31 00:00 UTC, a job outside any
    reservation, so a *used* line): 4 × 720 h = 2880 card-hours at 3.00 EUR = 8640.00 EUR.
    The old CSV wrote quantity ``2880.000000``, priced_quantity ``2.88E+3``, unit_price
    ``3.0000`` and amount ``8640.0000``."""
    client.force_login(team_member)

    page = client.get("/costs/nlp/2026-10/").content.decode()
    (row,) = csv.DictReader(
        io.StringIO(client.get("/costs/nlp/2026-10/?export=csv").content.decode())
    )

    assert "2\u202f880.000" in page  # the page's card-hours: 3 places
    assert (row["quantity"], row["unit"], row["priced_quantity"], row["price_unit"]) == (
        "2880.000", "card-hours", "2880.000", "card-hour")  # fmt: skip
    assert (row["unit_price"], row["amount"], row["currency"]) == ("3.00", "8640.00", "EUR")


@pytest.mark.django_db
def test_the_finance_month_csv_has_plain_numbers(four_cards_for_30_days, admin_page):
    """Same usage, finance's CSV of every statement: the same cells."""

    text = admin_page.get("/costs/finance/2026-10/?export=csv").content.decode()

    (row,) = csv.DictReader(io.StringIO(text))
    assert (row["quantity"], row["priced_quantity"], row["amount"]) == (
        "2880.000", "2880.000", "8640.00")  # fmt: skip
    assert "E+" not in text


@pytest.mark.django_db
def test_the_team_dashboards_spend_csv_has_amounts_to_the_minor_unit(
    team, team_member, rates, train_pool, client, mid_month
):
    """Last month's statement of 4 A100 cards used for one day (the 2nd, 00:00 → the 3rd 00:00
    UTC): 96 card-hours × 3.00 EUR = 288.00 EUR, stored as ``288.0000``; the spend CSV says
    ``288.00`` beside ``EUR``. This month has no statement and no usage: its cost so far under
    the rate card in force, 0.00 EUR, as the page's Spend card says, marked ``so_far``. At
    mid-November 2026 (:data:`MID_MONTH`): last month is October, this month November."""
    last = date(2026, 10, 1)
    day = job(1, utc(last.year, last.month, 2), utc(last.year, last.month, 3), {"a100": 4})
    usage_import_slurm(
        scheduler=Accounting([day]),
        start=utc(last.year, last.month, 1),
        end=utc(last.year, last.month, 4),
        now=utc(last.year, last.month, 5),
    )
    statement_build(team=team, month=last)
    client.force_login(team_member)

    text = b"".join(client.get("/teams/nlp/dashboard/?export=spend").streaming_content).decode()

    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["month"], r["amount"], r["currency"], r["so_far"]) for r in rows] == [
        (f"{last:%Y-%m}", "288.00", "EUR", "False"),
        ("2026-11", "0.00", "EUR", "True"),
    ]
