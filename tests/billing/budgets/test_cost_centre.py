"""A budget per cost centre (``Team.cost_centre``) instead of per team: every team of the
centre summed, in consumption, enforcement, the list and the banner.

Clock 2026-03-10 12:00 UTC. Cost centre ``CC-42``: teams ``nlp`` (30 A100 card-hours used in
March) and ``vision`` (20); team ``bio`` (``CC-9``) used 50, which the centre does not count.
Monthly centre budget of 60 card-hours: 30 + 20 = 50 used, 10 left, 83.3 % (50 / 60, one
decimal).
A request of ``vision`` for 8 A100 from 13:00 to 15:00 adds 8 × 2 = 16 card-hours:
50 + 16 = 66 > 60, refused; 8 × 1 h = 8: 58 ≤ 60, within.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from factories import MembershipFactory, TeamFactory
from kit import used_on_2_march

from billing.budgets.models import Budget
from billing.budgets.selectors import budget_statuses
from billing.budgets.services import budget_create
from pools.capacity.models import CapacityRequest
from pools.capacity.request_fields import RequestFields
from pools.capacity.services.requests import capacity_request_create
from pools.common.errors import BudgetExceeded, InvalidInput

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rates", "fixed_now")]
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)


@pytest.fixture
def fixed_now(monkeypatch, settings):
    settings.BILLING_TIME_ZONE = "UTC"
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


def used(team, model, hours):
    used_on_2_march(team, model, hours, NOW)


@pytest.fixture
def centre(team, a100):
    team.cost_centre = "CC-42"
    team.save()
    vision = TeamFactory(slug="vision", name="Vision", cost_centre="CC-42")
    bio = TeamFactory(slug="bio", name="Bio", cost_centre="CC-9")
    used(team, a100, 30)
    used(vision, a100, 20)
    used(bio, a100, 50)
    budget = Budget.objects.create(cost_centre="CC-42", period="month", starts_on=date(2026, 1, 1),
                                   card_hours_limit=Decimal(60), enforcement="refuse")  # fmt: skip
    return budget, vision, bio


def test_consumption_sums_the_centre_s_teams(centre):
    budget = centre[0]
    status = budget_statuses([budget])[budget.pk]
    assert status.card_hours.used == Decimal(50)
    assert status.card_hours.remaining == Decimal(10)
    assert status.percent == Decimal("83.3")


def test_a_member_team_is_refused_beyond_it(centre, train_pool, a100, django_user_model):
    _, vision, _ = centre
    carol = django_user_model.objects.create_user("carol")
    MembershipFactory(team=vision, user=carol)

    def ask(hours):
        return capacity_request_create(actor=carol, fields=RequestFields(
            team=vision, workload_kind="training", card_count=8, pool=train_pool,
            gpu_model=a100, starts_at=NOW.replace(hour=13), ends_at=NOW.replace(hour=13 + hours),
            justification="centre",
        ))  # fmt: skip

    with pytest.raises(BudgetExceeded) as caught:
        ask(2)
    assert caught.value.data["used"] == "50" and caught.value.data["requested"] == "16"
    assert "budget of cost centre CC-42" in caught.value.data["errors"]["card_count"]
    assert not CapacityRequest.objects.exists()
    assert ask(1).card_count == 8


def test_a_team_outside_the_centre_is_not_bound_by_it(centre, train_pool, a100, django_user_model):
    _, _, bio = centre
    dan = django_user_model.objects.create_user("dan")
    MembershipFactory(team=bio, user=dan)
    request = capacity_request_create(actor=dan, fields=RequestFields(
        team=bio, workload_kind="training", card_count=8, pool=train_pool,
        gpu_model=a100, starts_at=NOW.replace(hour=13), ends_at=NOW.replace(hour=23),
        justification="not in CC-42",
    ))  # fmt: skip
    # 8 cards x 10 h = 80 card-hours, past the centre's 60: stored, since bio is not in CC-42
    stored = CapacityRequest.objects.get(team=bio)
    assert (stored.pk, stored.card_count, stored.ends_at - stored.starts_at) == (
        request.pk, 8, timedelta(hours=10),
    )  # fmt: skip


def test_team_or_cost_centre_never_both_nor_unknown(pool_admin, team):
    team.cost_centre = "CC-42"
    team.save()
    base = {"period": "month", "starts_on": date(2026, 1, 1), "card_hours_limit": Decimal(5)}
    with pytest.raises(InvalidInput) as both:
        budget_create(actor=pool_admin, team=team, cost_centre="CC-42", **base)
    assert both.value.data["errors"]["team"] == "A team or a cost centre, not both."
    with pytest.raises(InvalidInput) as unknown:
        budget_create(actor=pool_admin, cost_centre="CC-404", **base)
    assert unknown.value.data["errors"]["cost_centre"] == "No team has cost centre 'CC-404'."
    made = budget_create(actor=pool_admin, cost_centre=" CC-42 ", **base)
    assert (made.team_id, made.cost_centre, str(made)) == (
        None, "CC-42", "cost centre CC-42 month budget (all pools and models)"
    )  # fmt: skip


def test_members_of_the_centre_see_it_others_do_not(centre, team_member, client, django_user_model):
    _, _, bio = centre
    client.force_login(team_member)  # alice of nlp (CC-42)
    page = client.get("/costs/budgets/").content.decode()
    assert "cost centre CC-42" in page and "50.000 / 60.000" in page
    outsider = django_user_model.objects.create_user("erin")
    MembershipFactory(team=bio, user=outsider)
    client.force_login(outsider)
    assert "cost centre CC-42" not in client.get("/costs/budgets/").content.decode()
