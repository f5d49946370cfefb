"""The approval queue and the API judge a submitted request against the budgets in force now,
not only as they stood at submission (pools/capacity/budget_gate.py ``budget_verdicts``).

Clock fixed at 2026-03-10 12:00 UTC (billing zone UTC). Team ``nlp`` used 30 A100 card-hours
in March. Its request, submitted before any budget existed: 8 A100 in ``train`` from 13:00 to
23:00 that day = 8 × 10 = 80 card-hours. A 100 card-hour monthly budget created afterwards:
30 + 80 = 110 > 100, beyond it; a 120 card-hour one: within.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape
from factories import CapacityRequestFactory, TeamFactory
from kit import used_on_2_march

from billing.budgets.models import Budget

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates", "fixed_now")]
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
REASON = (
    "Beyond the month budget of NLP (all pools and models, 2026-03): 30.00 card-hours used "
    "+ 80.00 requested > 100.00 card-hours: a pool admin decides."
)


@pytest.fixture
def fixed_now(monkeypatch, settings):
    settings.BILLING_TIME_ZONE = "UTC"
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


def _used(team, model, hours):
    used_on_2_march(team, model, hours, NOW)


def _budget(team, hours):
    return Budget.objects.create(
        team=team, period="month", starts_on=date(2026, 1, 1),
        card_hours_limit=Decimal(hours), enforcement="needs_admin",
    )  # fmt: skip


def _submitted(team, pool, model, **extra):
    return CapacityRequestFactory(
        team=team, pool=pool, gpu_model=model, workload_kind="training", card_count=8,
        starts_at=NOW.replace(hour=13), ends_at=NOW.replace(hour=23),
        submitted_at=datetime(2026, 3, 9, 9, 30, tzinfo=UTC), **extra,
    )  # fmt: skip


def test_a_budget_created_after_submission_flags_the_request(
    admin_page, admin_api, team, train_pool, a100
):
    _used(team, a100, 30)
    request = _submitted(team, train_pool, a100)  # stored verdict: "" (no budget then)

    page = admin_page.get("/requests/queue/").content.decode()
    assert "over budget" not in page

    _budget(team, 100)
    page = admin_page.get("/requests/queue/").content.decode()
    assert "over budget: you decide" in page
    assert f"#{request.pk} over budget now:</strong> {escape(REASON)}" in page
    assert "(Was within budget when submitted, 2026-03-09 09:30.)" in page
    request.refresh_from_db()
    assert request.budget_verdict == ""  # what submission was told stays as it was

    one = admin_api.get(f"/api/v1/requests/{request.pk}/").json()
    listed = next(r for r in admin_api.get("/api/v1/requests/").json()["results"]
                  if r["id"] == request.pk)  # fmt: skip
    for answer in (one, listed):
        assert answer["budget_verdict"] == ""
        assert answer["budget_verdict_now"] == "needs_admin"
        assert answer["budget_reason_now"] == REASON


def test_within_the_budget_now_shows_no_flag(admin_page, admin_api, team, train_pool, a100):
    _used(team, a100, 30)
    request = _submitted(team, train_pool, a100)
    _budget(team, 120)  # 30 + 80 = 110 <= 120
    page = admin_page.get("/requests/queue/").content.decode()
    assert "over budget" not in page and "queue-budget" not in page
    answer = admin_api.get(f"/api/v1/requests/{request.pk}/").json()
    assert answer["budget_verdict_now"] == "" and answer["budget_reason_now"] == ""


def test_over_at_submission_but_within_now_says_both(admin_page, team, train_pool, a100):
    _used(team, a100, 30)
    request = _submitted(team, train_pool, a100, budget_verdict="needs_admin",
                         budget_reason="an older budget")  # fmt: skip
    page = admin_page.get("/requests/queue/").content.decode()
    assert "over budget:" not in page
    assert (f"#{request.pk} within budget now;</strong> over budget at submission "
            "(2026-03-09 09:30): an older budget") in page  # fmt: skip


def test_the_queue_and_the_api_list_judge_budgets_in_constant_queries(
    admin_page, admin_api, train_pool, a100
):
    """One team with its own budget per request: 2 rows and 8 rows cost the same queries."""

    def add(n):
        for _ in range(n):
            team = TeamFactory()
            _used(team, a100, 30)
            _budget(team, 100)
            _submitted(team, train_pool, a100)

    def count(url):
        with CaptureQueriesContext(connection) as ctx:
            response = admin_page.get(url) if "api" not in url else admin_api.get(url)
        assert response.status_code == 200
        return response, len(ctx.captured_queries)

    add(2)
    count("/requests/queue/")  # warm what is kept per inventory generation
    page, few = count("/requests/queue/")
    assert page.content.decode().count("over budget: you decide") == 2
    _, api_few = count("/api/v1/requests/")
    add(6)
    count("/requests/queue/")  # the new teams' consumption, kept once read
    page, many = count("/requests/queue/")
    assert page.content.decode().count("over budget: you decide") == 8
    answer, api_many = count("/api/v1/requests/")
    assert [r["budget_verdict_now"] for r in answer.json()["results"]] == ["needs_admin"] * 8
    assert many == few
    assert api_many == api_few


def _check(team, pool, model):
    """The budgets' verdict now on the request ``_submitted`` asks for."""
    from billing.budgets.enforcement import budget_check

    return budget_check(team=team, pool=pool, gpu_model=model, cards=8,
                        starts_at=NOW.replace(hour=13), ends_at=NOW.replace(hour=23))  # fmt: skip


def test_the_reason_groups_thousands_as_the_page_does_and_data_stays_plain(
    admin_page, admin_api, team, train_pool, a100
):
    """1,250 A100 card-hours used, a 1,300 card-hour budget: 1,250 + 80 = 1,330 > 1,300. The
    reason groups thousands with a narrow no-break space (U+202F) as the page's numbers do, on
    the queue and in the API's reason alike (one string, for people); the figures for machines
    are the verdict's ``data``, plain ("1250")."""
    _used(team, a100, 1250)
    request = _submitted(team, train_pool, a100)
    _budget(team, 1300)
    reason = (
        "Beyond the month budget of NLP (all pools and models, 2026-03): 1\u202f250.00 "
        "card-hours used + 80.00 requested > 1\u202f300.00 card-hours: a pool admin decides."
    )

    page = admin_page.get("/requests/queue/").content.decode()
    answer = admin_api.get(f"/api/v1/requests/{request.pk}/").json()
    verdict = _check(team, train_pool, a100)

    assert f"#{request.pk} over budget now:</strong> {escape(reason)}" in page
    assert "1250.00" not in page
    assert answer["budget_reason_now"] == reason
    assert (verdict.reason, verdict.data["used"], verdict.data["limit"]) == (reason, "1250", "1300")


def test_a_money_reason_is_in_the_pages_money_format(team, train_pool, a100):
    """1,250 A100 card-hours used at 3.00 EUR (on use) = 3,750.00 EUR; the request 8 × 10 = 80
    reserved card-hours at 2.00 = 160.00 EUR; 3,750.00 + 160.00 = 3,910.00 > 3,800.00 EUR."""
    _used(team, a100, 1250)
    Budget.objects.create(team=team, period="month", starts_on=date(2026, 1, 1),
                          money_limit=Decimal(3800), currency="EUR",
                          enforcement="warn")  # fmt: skip

    verdict = _check(team, train_pool, a100)

    assert ": 3\u202f750.00 EUR used + 160.00 requested > 3\u202f800.00 EUR: a warning." in (
        verdict.reason
    )
    assert (verdict.data["used"], verdict.data["requested"]) == ("3750", "160")
