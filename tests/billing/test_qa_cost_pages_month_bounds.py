"""QA (h-qa): cost pages for the first and last months a date can hold (issue #27 item 6,
"cost pages for months in years 1 and 9999", still open).

/costs/<team>/0001-01/, /costs/<team>/9999-12/ and /costs/finance/0001-01/ answer 500
(OverflowError: date value out of range, measured on the demo with DEBUG off) for a team member
and a pool admin. A month the portal cannot show is bad input: 404 (or 400), never 500.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("month", ["0001-01", "9999-12"])
def test_a_team_month_at_the_ends_of_the_calendar_is_not_a_server_error(team_member, client, month):
    client.raise_request_exception = False
    client.force_login(team_member)

    response = client.get(f"/costs/nlp/{month}/")

    assert response.status_code == 404  # out of the 2000–2100 range: no such month (#27 item 6)


@pytest.mark.parametrize("month", ["0001-01", "9999-12"])
def test_a_finance_month_at_the_ends_of_the_calendar_is_not_a_server_error(
    pool_admin, client, month
):
    client.raise_request_exception = False
    client.force_login(pool_admin)

    response = client.get(f"/costs/finance/{month}/")

    assert response.status_code == 404  # out of the 2000–2100 range: no such month (#27 item 6)
